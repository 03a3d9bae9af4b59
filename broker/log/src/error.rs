//! The log crate's one error type.
//!
//! Owns: every failure the storage layer reports, each variant carrying the
//! values involved so a log line explains itself. Must not: know Kafka error
//! codes — handlers map these variants to codes.

use std::io;
use std::path::{Path, PathBuf};

use thiserror::Error;

pub type Result<T> = std::result::Result<T, Error>;

#[derive(Debug, Error)]
pub enum Error {
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("topic {0} already exists")]
    TopicAlreadyExists(String),
    /// `create_topic_with_id` was given an id that is all zeros or already
    /// belongs to another topic.
    #[error("invalid topic id {topic_id} for topic {name}: {reason}")]
    InvalidTopicId {
        name: String,
        topic_id: String,
        reason: String,
    },
    #[error("unknown topic {0}")]
    UnknownTopic(String),
    #[error("invalid topic name {name:?}: {reason}")]
    InvalidTopicName { name: String, reason: String },
    #[error("invalid partition count {0}: must be between 1 and 2147483647")]
    InvalidPartitions(i64),
    #[error("invalid value {value:?} for config {name}: {reason}")]
    InvalidConfig {
        name: String,
        value: String,
        reason: String,
    },
    #[error("offset {offset} is out of range: log start offset {log_start_offset}, log end offset {log_end_offset}")]
    OffsetOutOfRange {
        offset: i64,
        log_start_offset: i64,
        log_end_offset: i64,
    },
    #[error("record batch of {size} bytes exceeds max.message.bytes {max}")]
    RecordTooLarge { size: usize, max: u32 },
    /// The caller handed `append` records that do not match their headers,
    /// or a batch no client may send (an idempotent batch without a
    /// sequence): Kafka's INVALID_RECORD.
    #[error("invalid records passed to append: {0}")]
    InvalidRecords(String),
    /// An idempotent batch whose sequence does not follow the producer's
    /// last one in this partition (nothing of the request was written).
    #[error("out of order sequence for producer {producer_id}: expected {expected}, got {got}")]
    OutOfOrderSequence {
        producer_id: i64,
        expected: i32,
        got: i32,
    },
    /// A batch from an older epoch than the producer's latest here: a
    /// fenced (zombie) producer instance.
    #[error(
        "producer {producer_id} sent epoch {epoch}, older than its current epoch {current_epoch}"
    )]
    InvalidProducerEpoch {
        producer_id: i64,
        epoch: i16,
        current_epoch: i16,
    },
    /// A batch that does not fit the producer's transaction state (Kafka's
    /// InvalidTxnStateException).
    #[error("producer {producer_id}: {reason}")]
    InvalidTxnState { producer_id: i64, reason: String },
    /// `append_as_follower` was given batches that do not continue the log
    /// exactly: the first must start at the log end offset and each later
    /// one right after its predecessor (nothing was written).
    #[error("replicated batches must continue the log: expected a batch at offset {expected}, got one at {got}")]
    NonContiguousAppend { expected: i64, got: i64 },
    #[error("corrupt log data in {path} at byte {position}: {reason}")]
    Corrupt {
        path: PathBuf,
        position: u64,
        reason: String,
    },
    #[error("the log manager is shutting down")]
    ShuttingDown,
    /// The data directory went offline (a write or fsync failed there):
    /// Kafka's KAFKA_STORAGE_ERROR until it is reopened.
    #[error("log directory {dir} is offline ({reason})")]
    LogDirOffline { dir: PathBuf, reason: String },
    #[error("partition {topic}-{partition} is offline until its log directory is reopened: an fsync failed, so data written since the last successful one may not be on disk")]
    StorageOffline { topic: String, partition: i32 },
}

/// Linux's "too many open files" for the process (EMFILE) and the system
/// (ENFILE).
const EMFILE: i32 = 24;
const ENFILE: i32 = 23;

impl Error {
    /// The process or system ran out of file descriptors. fsync(2) never
    /// fails this way, so such an error means a sync was not attempted (the
    /// file or directory could not be opened), not that written data may be
    /// lost: it must not take a partition offline.
    pub fn is_resource_exhaustion(&self) -> bool {
        matches!(self, Error::Io { source, .. } if matches!(source.raw_os_error(), Some(EMFILE | ENFILE)))
    }

    /// `map_err` adapter attaching the path an I/O error happened on.
    pub(crate) fn io(path: &Path) -> impl FnOnce(io::Error) -> Error + '_ {
        move |source| Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
