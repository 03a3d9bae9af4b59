//! What the raft port speaks beneath the cluster-secret handshake: Kafka's
//! security protocol of the controller listener, PLAINTEXT or SSL
//! (`--controller-listener-security-protocol`).
//!
//! ```text
//! SSL        server → client  TLS_BANNER (32 B, in cleartext, where a cleartext server sends its nonce)
//!            client → server  TLS handshake: both present their key store's certificate, and each
//!                             verifies the other's against its trust store (client auth required)
//!            then `auth`'s handshake, then frames, all inside TLS
//! PLAINTEXT  `auth`'s handshake on the bare stream, then frames
//! ```
//!
//! The banner makes a mismatch loud on both ends instead of a stalled
//! handshake: a cleartext client reads it as the server's nonce and sends
//! its hello, which a TLS server refuses ("requires TLS", code
//! `TlsRequired`, which the client logs); a TLS client that reads anything
//! else has met a cleartext server's nonce, sends a hello opening with the
//! banner, which the cleartext server refuses (`auth`: "opened with TLS"),
//! and logs that the peer speaks cleartext. A TLS client never falls back
//! to cleartext, so nothing on the path can downgrade a connection.
//!
//! Owns: `ControllerSecurity` (the TLS acceptor of the raft port, with
//! client certificates required whatever `--ssl-client-auth` says for the
//! Kafka listeners), the banner, and turning a TCP stream into the stream
//! the handshake and frames use. Must not: authenticate the node id (`auth`
//! does, inside), or log (its callers know the peer).

use std::sync::Arc;

use chronik_tls::{ClientAuth, TlsAcceptor, TlsSettings};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::peer_auth::{
    read_step, write_step, HandshakeError, RefusalReason, Step, HANDSHAKE_TIMEOUT, HELLO_LEN,
    NONCE_LEN,
};

/// What a TLS raft port sends first, where a cleartext one sends its
/// nonce. A random nonce equals it with probability 2^-256.
const TLS_BANNER: [u8; NONCE_LEN] = *b"chronik-raft: TLS follows\0\0\0\0\0\0\0";
/// The first byte of a TLS record carrying a handshake (a ClientHello).
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// Kafka's security protocol of the controller listener, as the raft port
/// speaks it.
#[derive(Clone, Debug, Default)]
pub enum ControllerSecurity {
    /// Cleartext: the cluster-secret handshake authenticates, nothing
    /// encrypts.
    #[default]
    Plaintext,
    /// Mutual TLS with the node's key store and trust store.
    Ssl(Arc<TlsAcceptor>),
}

impl ControllerSecurity {
    /// Loads the key store and trust store of `settings` for the raft
    /// port: client certificates required (whatever `--ssl-client-auth`
    /// says for the Kafka listeners), handshakes bounded by
    /// `HANDSHAKE_TIMEOUT`, the files reloaded when they change. Must run
    /// inside the runtime.
    pub fn ssl(settings: &TlsSettings) -> anyhow::Result<ControllerSecurity> {
        if settings.truststore.is_none() {
            anyhow::bail!(
                "TLS on the raft port needs --ssl-truststore-location: each node verifies its peers' certificates against it"
            );
        }
        let acceptor = TlsAcceptor::load(TlsSettings {
            client_auth: ClientAuth::Required,
            handshake_timeout: HANDSHAKE_TIMEOUT,
            ..settings.clone()
        })?;
        acceptor.spawn_reloader();
        Ok(ControllerSecurity::Ssl(acceptor))
    }

    /// Kafka's name of the protocol.
    pub fn name(&self) -> &'static str {
        match self {
            ControllerSecurity::Plaintext => "PLAINTEXT",
            ControllerSecurity::Ssl(_) => "SSL",
        }
    }
}

/// A raft connection's byte stream, cleartext or TLS.
pub trait RaftStream: AsyncRead + AsyncWrite + Unpin + Send + Sync {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync> RaftStream for T {}

/// Whether a client's hello is a TLS client's: the banner echoed (ours,
/// having met a cleartext server) or a TLS record (any other TLS client).
pub(crate) fn is_tls_hello(hello: &[u8; HELLO_LEN]) -> bool {
    hello.starts_with(&TLS_BANNER) || hello[..2] == [TLS_HANDSHAKE_RECORD, 0x03]
}

/// The server side: the banner and the TLS handshake on an SSL port,
/// nothing on a PLAINTEXT one. A cleartext client on an SSL port is read
/// as far as its hello and told TLS is required.
pub(crate) async fn accept(
    security: &ControllerSecurity,
    mut stream: TcpStream,
) -> Result<Box<dyn RaftStream>, HandshakeError> {
    let ControllerSecurity::Ssl(tls) = security else {
        return Ok(Box::new(stream));
    };
    let deadline = tokio::time::Instant::now() + HANDSHAKE_TIMEOUT;
    write_step(&mut stream, &TLS_BANNER, Step::ServerNonce, deadline).await?;
    let mut first = [0u8; 1];
    match tokio::time::timeout_at(deadline, stream.peek(&mut first)).await {
        Err(_) => {
            return Err(HandshakeError::TimedOut {
                step: Step::ClientHello,
            })
        }
        Ok(Ok(0)) => {
            return Err(HandshakeError::Closed {
                step: Step::ClientHello,
                received: 0,
            })
        }
        Ok(Ok(_)) => {}
        Ok(Err(error)) => {
            return Err(HandshakeError::Io {
                step: Step::ClientHello,
                error,
            })
        }
    }
    if first[0] != TLS_HANDSHAKE_RECORD {
        let mut hello = [0u8; HELLO_LEN];
        read_step(&mut stream, &mut hello, Step::ClientHello, deadline).await?;
        let refusal = RefusalReason::TlsRequired.encode();
        // Best effort: the connection closes either way.
        let _ = write_step(&mut stream, &refusal, Step::ServerAnswer, deadline).await;
        let node_id = i32::from_be_bytes([hello[0], hello[1], hello[2], hello[3]]);
        return Err(HandshakeError::CleartextPeer { node_id });
    }
    match tls.accept(stream).await {
        Ok(stream) => Ok(Box::new(stream)),
        Err(e) => Err(tls_error(&e)),
    }
}

/// The client side: on SSL, the server's banner and then the TLS
/// handshake with `addr`'s host (its certificate must name it). A server
/// that sends a nonce instead speaks cleartext: it is sent a hello that
/// says TLS, so it logs the mismatch too, and the connection fails.
pub(crate) async fn connect(
    security: &ControllerSecurity,
    mut stream: TcpStream,
    addr: &str,
) -> Result<Box<dyn RaftStream>, HandshakeError> {
    let ControllerSecurity::Ssl(tls) = security else {
        return Ok(Box::new(stream));
    };
    let deadline = tokio::time::Instant::now() + HANDSHAKE_TIMEOUT;
    let mut banner = [0u8; NONCE_LEN];
    read_step(&mut stream, &mut banner, Step::ServerNonce, deadline).await?;
    if banner != TLS_BANNER {
        let mut hello = [0u8; HELLO_LEN];
        hello[..NONCE_LEN].copy_from_slice(&TLS_BANNER);
        if write_step(&mut stream, &hello, Step::ClientHello, deadline)
            .await
            .is_ok()
        {
            // Wait for its refusal, so the server has read the hello
            // (and logs why) before this side closes.
            let mut answer = [0u8; NONCE_LEN];
            let _ = read_step(&mut stream, &mut answer, Step::ServerAnswer, deadline).await;
        }
        return Err(HandshakeError::PeerCleartext);
    }
    match tls.connect(stream, host_of(addr)).await {
        Ok(stream) => Ok(Box::new(stream)),
        Err(e) => Err(tls_error(&e)),
    }
}

/// The host of `host:port` (brackets of an IPv6 literal removed): what
/// the server's certificate must name.
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// A failed TLS handshake, refused (a certificate, a protocol, an alert:
/// rustls's errors are invalid data) or broken off (closed, timed out).
fn tls_error(error: &anyhow::Error) -> HandshakeError {
    let refused = error
        .chain()
        .filter_map(|cause| cause.downcast_ref::<std::io::Error>())
        .any(|e| e.kind() == std::io::ErrorKind::InvalidData);
    HandshakeError::Tls {
        reason: format!("{error:#}"),
        refused,
    }
}

#[cfg(test)]
#[path = "transport_tests.rs"]
mod tests;
