//! Who sent a request and how, as the ACL checks and the handlers see it:
//! the peer, the listener, the authenticated principal, and the two ACL
//! strings formatted once per connection, and the connection's quota turn.
//! Must not: decide access (`authorizer` does) or quotas (`quotas`).

use std::sync::Arc;

use crate::security::KafkaPrincipal;

/// Who sent a request and how: what handlers may need of the connection.
#[derive(Debug, Clone)]
pub struct RequestContext {
    /// The client's address (replica fetches are checked against it).
    pub peer: std::net::SocketAddr,
    /// The listener the connection came in on: Metadata and
    /// FindCoordinator answer with the brokers' endpoints of this listener.
    pub listener: Arc<str>,
    /// The authenticated principal (`User:ANONYMOUS` without
    /// authentication), for authorization.
    pub principal: KafkaPrincipal,
    /// `principal` and the peer's IP as ACLs name them, formatted once
    /// per connection (and per authentication), not per ACL check.
    pub acl_principal: String,
    pub acl_host: String,
    /// The connection's quota turn: a client with a quota has its requests
    /// on this connection handled one at a time, each after the previous
    /// one's throttle (the instant held here) has passed — Kafka's
    /// one-request-per-connection, so pipelining cannot outrun the mute.
    pub quota_turn: Arc<tokio::sync::Mutex<Option<tokio::time::Instant>>>,
    /// This connection's number, unique in the process (share sessions
    /// are closed with the connection that used them, as in Kafka).
    pub connection_id: u64,
}

/// A new connection's number.
pub fn next_connection_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl RequestContext {
    pub fn new(
        peer: std::net::SocketAddr,
        listener: Arc<str>,
        principal: KafkaPrincipal,
        connection_id: u64,
    ) -> RequestContext {
        RequestContext {
            peer,
            listener,
            acl_principal: principal.to_string(),
            acl_host: peer.ip().to_string(),
            principal,
            quota_turn: Arc::default(),
            connection_id,
        }
    }
}
