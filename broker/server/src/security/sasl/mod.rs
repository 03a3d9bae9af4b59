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
//!
//! The client side (PLAIN, SCRAM) of this broker's own inter-broker
//! connections, and the SCRAM primitives both sides run on, are the
//! `chronik-sasl` crate (shared with the ingestor's Kafka client).
//!
//! Must not: decide what an authenticated principal may do.

pub mod bootstrap;
pub mod jwks;
pub mod login_failures;
pub mod oauthbearer;
pub mod plain;
pub mod responses;
pub mod scram;
pub mod session;

use std::sync::Arc;
use std::time::Duration;

pub use chronik_sasl::fill_random;
use chronik_sasl::SaslMechanism;
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
            "OAUTHBEARER" => Some(Mechanism::OAuthBearer),
            other => other.parse::<SaslMechanism>().ok().map(Mechanism::from),
        }
    }

    pub fn name(self) -> &'static str {
        match self.client() {
            Some(m) => m.name(),
            None => "OAUTHBEARER",
        }
    }

    /// The mechanism a client logs in with (`chronik_sasl`), or None for
    /// OAUTHBEARER (served, never used to log in to another broker).
    pub fn client(self) -> Option<SaslMechanism> {
        match self {
            Mechanism::Plain => Some(SaslMechanism::Plain),
            Mechanism::Scram(m) => Some(SaslMechanism::Scram(m)),
            Mechanism::OAuthBearer => None,
        }
    }
}

impl From<SaslMechanism> for Mechanism {
    fn from(m: SaslMechanism) -> Mechanism {
        match m {
            SaslMechanism::Plain => Mechanism::Plain,
            SaslMechanism::Scram(m) => Mechanism::Scram(m),
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
