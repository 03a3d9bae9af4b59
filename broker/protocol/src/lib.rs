//! Chronik's Kafka protocol layer: no I/O, no tokio.
//!
//! Layout:
//! - `record_batch` — RecordBatch v2 header view, CRC-32C check, in-place base offset.
//! - `error`        — the crate's error types.

pub mod error;
pub mod record_batch;

pub use error::BatchError;
pub use record_batch::{BatchHeader, BatchScanner};
