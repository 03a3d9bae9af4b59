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

/// A frame's size prefix cannot be accepted; the connection must close.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameError {
    #[error("frame size {0} is negative")]
    NegativeSize(i32),
    #[error("frame size {size} is below the minimum request size {min}")]
    TooSmall { size: usize, min: usize },
    #[error("frame size {size} exceeds the maximum request size {max}")]
    TooLarge { size: usize, max: usize },
}

/// A request frame could not be turned into a typed request.
#[derive(Debug, Error)]
pub enum RequestError {
    #[error("unknown API key {api_key} (correlation id {correlation_id})")]
    UnknownApiKey { api_key: i16, correlation_id: i32 },
    #[error("{api} version {version} is not supported (supported {min}..={max})")]
    UnsupportedVersion {
        api: &'static str,
        version: i16,
        min: i16,
        max: i16,
        correlation_id: i32,
    },
    #[error("malformed {api} v{version} request: {reason}")]
    Malformed {
        api: &'static str,
        version: i16,
        reason: String,
    },
}

/// A response could not be encoded (a bug, or a value the version cannot carry).
#[derive(Debug, Error)]
#[error("cannot encode {api} v{version} response: {reason}")]
pub struct EncodeError {
    pub api: &'static str,
    pub version: i16,
    pub reason: String,
}
