//! The harness's shared library: what chronik-bench, chronik-ingestor and
//! chronik-consumer must agree on, defined once.
//!
//! Layout:
//! - `envelope` — the verification envelope every produced message carries
//!   as the Kafka header `chronik-env`: producer id, sequence number,
//!   intended send (or HTTP accept) time in µs, CRC-32C of the value.
//! - `histogram` — latency histograms in µs: one shape, merging (never
//!   averaging), percentile summaries, `.hlog` interval logs.
//! - `intervals` — sets of sequence numbers / offsets as sorted inclusive
//!   ranges, with the set algebra verification needs.
//! - `ledger` — the ledger JSON: what one producer says happened to its
//!   sequences (written by the ingestor and envelope-producer, read by the
//!   verifying consumer).
//! - `procfs` — CPU ticks and RSS of a process or thread from /proc.
//! - `results` — the `meta` block of every result file (tool, git commit,
//!   host, broker identity, settings) and atomic JSON writes.
//! - `error` — `HarnessError` for the file helpers.

pub mod envelope;
pub mod error;
pub mod histogram;
pub mod intervals;
pub mod ledger;
pub mod procfs;
pub mod results;

pub use envelope::{now_us, Envelope, EnvelopeError, ENVELOPE_HEADER, ENVELOPE_LEN};
pub use error::HarnessError;
