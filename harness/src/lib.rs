//! The harness's shared library: what chronik-bench, chronik-ingestor and
//! chronik-consumer must agree on, defined once.
//!
//! Layout:
//! - `envelope` — the verification envelope every produced message carries
//!   as the Kafka header `chronik-env`: producer id, sequence number,
//!   intended send (or HTTP accept) time in µs, CRC-32C of the value.

pub mod envelope;

pub use envelope::{now_us, Envelope, EnvelopeError, ENVELOPE_HEADER, ENVELOPE_LEN};
