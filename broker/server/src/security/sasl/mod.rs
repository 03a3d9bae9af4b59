//! SASL on SASL_PLAINTEXT and SASL_SSL listeners: Kafka's
//! `SaslServerAuthenticator` as a per-connection state machine.
//!
//! Layout:
//! - `session`   — the per-connection state (handshake, exchange,
//!   authenticated principal, KIP-368 session expiry) and the gate every
//!   frame passes on a SASL listener.
//! - `plain`     — PLAIN against a JAAS file's `user_<name>` entries.
//! - `scram`     — SCRAM-SHA-256/512 and the `ScramCredentials` store.
//! - `oauthbearer` — OAUTHBEARER: RFC 7628 messages, JWT validation.
//! - `jwks`      — the JWKS file OAUTHBEARER tokens are verified with.
//! - `login_failures` — the per-principal back-off after failed logins.
//! - `bootstrap` — SCRAM users loaded at start (kafka-storage's `--add-scram` syntax).
//! - `client`    — the client side (PLAIN, SCRAM) of this broker's own
//!   inter-broker connections.
//!
//! Must not: decide what an authenticated principal may do.

pub mod bootstrap;
pub mod client;
pub mod jwks;
pub mod login_failures;
pub mod oauthbearer;
pub mod plain;
pub mod responses;
pub mod scram;
pub mod session;

use std::sync::Arc;
use std::time::Duration;

use login_failures::LoginFailures;
use oauthbearer::OAuthBearerValidator;
use plain::PlainUsers;
use scram::{ScramCredentials, ScramMechanism};

/// A SASL mechanism this broker can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mechanism {
    Plain,
    Scram(ScramMechanism),
    OAuthBearer,
}

impl Mechanism {
    pub fn parse(name: &str) -> Option<Mechanism> {
        match name {
            "PLAIN" => Some(Mechanism::Plain),
            "OAUTHBEARER" => Some(Mechanism::OAuthBearer),
            other => ScramMechanism::parse(other).map(Mechanism::Scram),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Scram(m) => m.name(),
            Mechanism::OAuthBearer => "OAUTHBEARER",
        }
    }
}

/// Why a SASL step failed; the handler maps it to Kafka's error code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SaslError {
    /// UNSUPPORTED_SASL_MECHANISM (33).
    #[error("unsupported SASL mechanism {0}")]
    UnsupportedMechanism(String),
    /// ILLEGAL_SASL_STATE (34).
    #[error("{0}")]
    IllegalState(String),
    /// SASL_AUTHENTICATION_FAILED (58), with the message the client sees.
    #[error("{0}")]
    AuthenticationFailed(String),
}

impl SaslError {
    /// Kafka's message for a failed SCRAM login (wrong password, unknown
    /// user or a malformed message alike).
    pub fn failed(mechanism: ScramMechanism) -> SaslError {
        SaslError::AuthenticationFailed(format!(
            "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
            mechanism.name()
        ))
    }
}

/// What every SASL listener shares.
#[derive(Debug)]
pub struct SaslConfig {
    /// Kafka's `sasl.enabled.mechanisms`, in the order given.
    pub enabled: Vec<Mechanism>,
    pub plain_users: PlainUsers,
    pub scram: Arc<ScramCredentials>,
    /// Set when OAUTHBEARER is enabled.
    pub oauthbearer: Option<Arc<OAuthBearerValidator>>,
    /// Kafka's `connections.max.reauth.ms`; zero = sessions never expire.
    pub max_reauth: Duration,
    /// Kafka's `sasl.server.max.receive.size`: largest frame accepted
    /// before a connection has authenticated.
    pub max_receive_size: usize,
    /// Kafka's `connection.failed.authentication.delay.ms`: how long a
    /// refused SASL step waits before it is answered and the connection
    /// closed.
    pub failed_authentication_delay: Duration,
    /// Keys the salt made up for unknown SCRAM users (derived from the
    /// cluster secret: the same on every node and across restarts).
    pub fake_salt_key: [u8; 32],
    /// Failed PLAIN and SCRAM logins per attempted user name, and the
    /// back-off they impose on that name's next attempt.
    pub login_failures: LoginFailures,
}

/// Fills `buf` from the ring provider's system random source.
pub fn fill_random(buf: &mut [u8]) {
    let provider = rustls::crypto::ring::default_provider();
    if provider.secure_random.fill(buf).is_err() {
        // getrandom failing is not recoverable: a predictable nonce would
        // make SCRAM replayable.
        panic!("the system random source failed");
    }
}
