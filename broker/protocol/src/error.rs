//! Errors of the protocol crate: framing, header and record-batch problems.
//! Each variant carries the values involved so a log line explains itself.

use thiserror::Error;

/// A RecordBatch could not be accepted as it is.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BatchError {
    #[error("batch at byte {position} is truncated: needs {needed} bytes, {available} present")]
    Truncated {
        position: usize,
        needed: usize,
        available: usize,
    },
    #[error("batch at byte {position} has magic {magic}; only v2 record batches are supported")]
    UnsupportedMagic { position: usize, magic: i8 },
    #[error("batch at byte {position} has an invalid length field {batch_length}")]
    InvalidLength { position: usize, batch_length: i32 },
    #[error("batch at byte {position} fails its CRC-32C check: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        position: usize,
        stored: u32,
        computed: u32,
    },
}
