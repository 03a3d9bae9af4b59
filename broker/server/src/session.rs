//! Who sent a request: the client's address and the principal its
//! connection authenticated as.
//!
//! Owns: `Session` and the anonymous principal. Must not: authenticate
//! (the listener's security protocol does, before any request runs) or
//! decide access (`authorization`).

use std::net::SocketAddr;

/// Kafka's principal of a connection that did not authenticate.
pub const ANONYMOUS: &str = "User:ANONYMOUS";

#[derive(Debug, Clone)]
pub struct Session {
    /// The client's address (replica fetches are checked against it).
    pub peer: SocketAddr,
    /// `User:<name>`, as ACLs name principals.
    pub principal: String,
}

impl Session {
    /// A connection on a PLAINTEXT listener.
    pub fn anonymous(peer: SocketAddr) -> Session {
        Session {
            peer,
            principal: ANONYMOUS.to_string(),
        }
    }

    /// The client's IP address as ACL hosts name it.
    pub fn host(&self) -> String {
        self.peer.ip().to_string()
    }
}
