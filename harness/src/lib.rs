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
//!   sequences (written by the ingestor and envelope-producer, kept by
//!   chronik-bench's producers, read by the verifying consumer).
//! - `verify` — the per-record verifier (redeliveries, foreign records,
//!   duplicates, reordering, corruption, end-to-end latency) both verifying
//!   tools run: chronik-consumer and chronik-bench.
//! - `tally` — a verifier's facts as sets, merged exactly across consumers.
//! - `reconcile` — one producer's ledger against the sequences consumed
//!   (lost, failed, delivered despite failure, unknown).
//! - `assess` — every count a tally and its ledgers define, once.
//! - `test_support` — a verifier fed a table of records, for other crates'
//!   tests (always compiled: a feature only for tests would give `cargo test`
//!   other dependency features than the release build, and compile twice).
//! - `procfs` — CPU ticks and RSS of a process or thread from /proc.
//! - `results` — the `meta` block of every result file (tool, git commit,
//!   host, broker identity, settings) and atomic JSON writes.
//! - `error` — `HarnessError` for the file helpers.
//! - `reconnect` — the librdkafka connection settings every harness client
//!   starts from (a broker that moved found in seconds).
//! - `librdkafka_log` — librdkafka's log lines forwarded to tracing, for
//!   every harness client's rdkafka context.
//! - `duration` — how the tools' duration flags are written (seconds or
//!   humantime).

pub mod assess;
pub mod duration;
pub mod envelope;
pub mod error;
pub mod histogram;
pub mod intervals;
pub mod ledger;
pub mod librdkafka_log;
pub mod procfs;
pub mod reconcile;
pub mod reconnect;
pub mod results;
pub mod tally;
pub mod test_support;
pub mod verify;

pub use envelope::{now_us, Envelope, EnvelopeError, ENVELOPE_HEADER, ENVELOPE_LEN};
pub use error::HarnessError;
