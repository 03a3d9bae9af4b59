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

/// A compressed records section could not be inflated within its bound.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CompressionError {
    #[error("records inflate to more than {limit} bytes")]
    TooLarge { limit: usize },
    #[error("{codec} data is invalid: {reason}")]
    Invalid { codec: &'static str, reason: String },
    #[error("unknown compression codec {0}")]
    UnknownCodec(i16),
}

/// A produced batch fails the checks Kafka's log validator makes.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InvalidBatch {
    #[error("inconsistent batch offset range: last offset delta {last_offset_delta} with {records_count} records")]
    InconsistentOffsetRange {
        last_offset_delta: i32,
        records_count: i32,
    },
    #[error("clients may not write control batches")]
    ControlBatchFromClient,
    #[error("batch records are truncated")]
    Truncated,
    #[error("record {index} is malformed: {reason}")]
    BadRecord { index: i32, reason: &'static str },
    #[error("bytes follow the batch's {count} records")]
    TrailingBytes { count: i32 },
    /// Kafka's message for a keyless record sent to a compacted topic.
    #[error("Compacted topic cannot accept message without key (record {index})")]
    MissingKey { index: i32 },
    #[error(transparent)]
    Compression(#[from] CompressionError),
}
