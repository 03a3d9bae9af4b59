//! `chronik-sasl`: the client side of Kafka's SASL for every Chronik
//! component that logs in to a broker — the broker's own inter-broker
//! connections and the ingestor's Kafka client — and the SCRAM primitives
//! the broker's server side runs on, so both ends share one HMAC, hash and
//! Hi().
//!
//! Layout:
//! - `mechanism` — `SaslMechanism`: the mechanisms a client can log in with
//!   (Kafka's `sasl.mechanism` names: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).
//! - `scram`     — `ScramMechanism` (names, Kafka's admin type codes, HMAC,
//!   hash, Hi()), Kafka's iteration bounds, constant-time comparison.
//! - `client`    — `SaslLogin` / `SaslClient`: the client's messages
//!   (RFC 4616 PLAIN, RFC 5802 SCRAM) and checking the server's.
//!
//! Owns: the mechanisms' messages and cryptography, and the random source
//! nonces and salts come from (`fill_random`). Must not: know about Kafka
//! frames or sockets (SaslHandshake / SaslAuthenticate are the caller's),
//! hold server-side state (credential stores, exchanges: the broker's
//! `security::sasl`), or show a password (Debug redacts it).

pub mod client;
pub mod mechanism;
pub mod scram;

pub use client::{SaslClient, SaslLogin, ScramClient};
pub use mechanism::{SaslMechanism, UnsupportedMechanism};
pub use scram::{constant_time_eq, ScramMechanism, MAX_ITERATIONS, MIN_ITERATIONS};

/// Fills `buf` from the system's secure random source (ring's, the one
/// rustls uses). Nonces and salts come from here.
pub fn fill_random(buf: &mut [u8]) {
    use ring::rand::SecureRandom;
    if ring::rand::SystemRandom::new().fill(buf).is_err() {
        // getrandom failing is not recoverable: a predictable nonce would
        // make SCRAM replayable.
        panic!("the system random source failed");
    }
}
