//! Chronik's partition-log storage: Kafka's LogSegment -> LogSegments ->
//! Log design with blocking `std::fs` I/O on its own threads.
//!
//! Data directory layout (Kafka's):
//!
//! ```text
//! <data_dir>/<topic>-<partition>/00000000000000000000.log        batches, verbatim
//!                               /00000000000000000000.index      relative offset u32 BE, position u32 BE
//!                               /00000000000000000000.timeindex  timestamp i64 BE, relative offset u32 BE
//!                               /00000000000000000020.snapshot   producer state at offset 20 (clean shutdown only)
//!                               /cleaner-offset-checkpoint       offsets below it are compacted
//!                               /<base>.log.cleaned, .log.swap   a cleaning in progress (cleaner::swap)
//! <data_dir>/__topics/<topic>.meta                topic_id=, partitions=, config.<name>= lines
//! <data_dir>/recovery-point-offset-checkpoint     offsets below which data was fsynced
//! <data_dir>/.clean_shutdown                      present only after a clean shutdown
//! ```
//!
//! Layout of the crate:
//! - `manager`      — `LogManager`: open/recover, create/delete topics, threads, shutdown.
//! - `topic`        — `TopicLog` and Kafka's topic-name rules.
//! - `partition`    — `PartitionLog`: segment list, append (also of batches a
//!   leader replicated), read, roll, offsets (with `partition/sync`: flusher
//!   hand-over, `partition/retention`, `partition/truncate`: a follower
//!   cutting its log back).
//! - `segment`      — `LogSegment`: one `.log` file and its indexes.
//! - `index`        — offset and time index entries, lookups, encoding (pure).
//! - `read`         — header walks and whole-batch reads for Fetch/ListOffsets.
//! - `scan`         — CRC-checked segment scans for recovery.
//! - `recovery`     — what to trust at open and how to repair a crashed tail.
//! - `producer_state` — idempotent-producer sequence/epoch checks, and their
//!   rewind after a truncation (pure).
//! - `producer_recovery` — producer state rebuilt at open and after a
//!   truncation, snapshot at shutdown.
//! - `flusher`      — `FlushPolicy`, the dirty queue and the group-commit thread.
//! - `retention`    — retention decisions and the `log-retention` thread.
//! - `cleaner`      — log compaction (cleanup.policy=compact): the
//!   `log-cleaner-N` threads (`mod`), what is due (`schedule`), the
//!   bounded key map (`offset_map`), rewriting segments
//!   (`clean_segment`) and the crash-safe file swap (`swap`).
//! - `registry`     — live topics by name and id; checkpoint writes.
//! - `checkpoint`   — recovery-point checkpoint and clean-shutdown marker files.
//! - `dir_health`   — the data directory online or offline (a write or fsync
//!   failed), shared by its partitions; `LogManager::reopen_dir` brings it back.
//! - `topic_meta`   — topic metadata files.
//! - `durable_file` — atomic, fsynced replacement of small files.
//! - `config`       — `LogConfig` and Kafka topic-config overrides.
//! - `stats`        — counters and the `FlushObserver` hook for metrics.
//! - `error`        — the crate's `Error`.
//!
//! Durability contract: `PartitionLog::append` returns once the bytes are in
//! the page cache; `PartitionLog::durable_offset` says how far they are on
//! disk. Under `FlushPolicy::GroupCommit` the `log-flusher` thread advances
//! it after fdatasync; under `FlushPolicy::Never` it equals the log end.
//! `PartitionLog::truncate_to` (replication) is the one operation that moves
//! the log end, and with it the durable offset, backwards; it returns once
//! the cut is on disk.

mod checkpoint;
mod cleaner;
mod config;
mod dir_health;
mod durable_file;
mod error;
mod flusher;
mod index;
mod manager;
mod partition;
mod producer_recovery;
mod producer_state;
mod read;
mod recovery;
mod registry;
mod retention;
mod scan;
mod segment;
mod stats;
mod topic;
mod topic_meta;

pub use cleaner::CleanerConfig;
pub use config::{ConfigEntry, LogConfig};
pub use dir_health::{is_dir_failure, LogDirHealth};
pub use durable_file::write_atomically;
pub use error::{Error, Result};
pub use flusher::{FlushPolicy, OnFlush, GROUP_COMMIT_BYTES};
pub use manager::{LogManager, LogManagerConfig, ReopenedDir};
pub use partition::{AppendInfo, PartitionLog};
pub use producer_state::AbortedTxn;
pub use retention::CHECKPOINT_INTERVAL;
pub use stats::{FlushObserver, LogStats};
pub use topic::{validate_topic_name, TopicLog, MAX_TOPIC_NAME_LEN};
