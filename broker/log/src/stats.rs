//! What the storage layer reports about itself for metrics.
//!
//! Owns: the shared counters (atomics, bumped by appends, the flusher,
//! retention, the log cleaner and recovery), their `LogStats` snapshot, and the
//! `FlushObserver` hook through which the server feeds per-fsync and
//! per-round figures into histograms. Must not: depend on a metrics library.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Receives flusher events as they happen, on the `log-flusher` thread.
/// Implementations must be cheap and must not block.
pub trait FlushObserver: Send + Sync {
    /// One fsync (file data or directory) finished after `seconds`.
    fn fsync_done(&self, seconds: f64) {
        let _ = seconds;
    }
    /// One group-commit round finished: it synced `partitions` partitions
    /// covering `bytes` appended bytes in `seconds`.
    fn group_commit_done(&self, partitions: usize, bytes: u64, seconds: f64) {
        let _ = (partitions, bytes, seconds);
    }
}

/// A point-in-time copy of the counters; all totals since open.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogStats {
    pub fsync_total: u64,
    pub fsync_seconds_sum: f64,
    pub group_commit_rounds_total: u64,
    /// Record batches whose fsync completed in a group-commit round.
    pub group_commit_batches_total: u64,
    pub appended_bytes_total: u64,
    pub appended_batches_total: u64,
    pub segments_rolled_total: u64,
    pub segments_deleted_total: u64,
    /// Bytes cut off torn or corrupt segment tails by recovery at open.
    pub recovery_truncated_bytes_total: u64,
    /// Bytes of segments the log cleaner rewrote.
    pub cleaner_cleaned_bytes_total: u64,
    /// Bytes the log cleaner removed (read minus written).
    pub cleaner_reclaimed_bytes_total: u64,
    /// Cleanings completed.
    pub cleaner_runs_total: u64,
    /// Wall-clock ms when the last cleaning completed (0: none yet).
    pub cleaner_last_run_ms: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    fsync_total: AtomicU64,
    fsync_nanos: AtomicU64,
    group_commit_rounds: AtomicU64,
    group_commit_batches: AtomicU64,
    appended_bytes: AtomicU64,
    appended_batches: AtomicU64,
    segments_rolled: AtomicU64,
    segments_deleted: AtomicU64,
    recovery_truncated_bytes: AtomicU64,
    cleaner_cleaned_bytes: AtomicU64,
    cleaner_reclaimed_bytes: AtomicU64,
    cleaner_runs: AtomicU64,
    cleaner_last_run_ms: AtomicU64,
}

impl Counters {
    pub(crate) fn fsync(&self, took: Duration) {
        self.fsync_total.fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.fsync_nanos.fetch_add(nanos, Ordering::Relaxed);
    }
    pub(crate) fn group_commit(&self, batches: u64) {
        self.group_commit_rounds.fetch_add(1, Ordering::Relaxed);
        self.group_commit_batches
            .fetch_add(batches, Ordering::Relaxed);
    }
    pub(crate) fn appended(&self, bytes: u64, batches: u64) {
        self.appended_bytes.fetch_add(bytes, Ordering::Relaxed);
        self.appended_batches.fetch_add(batches, Ordering::Relaxed);
    }
    pub(crate) fn segment_rolled(&self) {
        self.segments_rolled.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn segments_deleted(&self, n: u64) {
        self.segments_deleted.fetch_add(n, Ordering::Relaxed);
    }
    pub(crate) fn recovery_truncated(&self, bytes: u64) {
        self.recovery_truncated_bytes
            .fetch_add(bytes, Ordering::Relaxed);
    }

    /// One cleaning rewrote `bytes` and removed `reclaimed` of them, ending
    /// at wall-clock `now_ms`.
    pub(crate) fn cleaned(&self, bytes: u64, reclaimed: u64, now_ms: i64) {
        self.cleaner_cleaned_bytes
            .fetch_add(bytes, Ordering::Relaxed);
        self.cleaner_reclaimed_bytes
            .fetch_add(reclaimed, Ordering::Relaxed);
        self.cleaner_runs.fetch_add(1, Ordering::Relaxed);
        self.cleaner_last_run_ms
            .store(u64::try_from(now_ms).unwrap_or(0), Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> LogStats {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        LogStats {
            fsync_total: get(&self.fsync_total),
            fsync_seconds_sum: Duration::from_nanos(get(&self.fsync_nanos)).as_secs_f64(),
            group_commit_rounds_total: get(&self.group_commit_rounds),
            group_commit_batches_total: get(&self.group_commit_batches),
            appended_bytes_total: get(&self.appended_bytes),
            appended_batches_total: get(&self.appended_batches),
            segments_rolled_total: get(&self.segments_rolled),
            segments_deleted_total: get(&self.segments_deleted),
            recovery_truncated_bytes_total: get(&self.recovery_truncated_bytes),
            cleaner_cleaned_bytes_total: get(&self.cleaner_cleaned_bytes),
            cleaner_reclaimed_bytes_total: get(&self.cleaner_reclaimed_bytes),
            cleaner_runs_total: get(&self.cleaner_runs),
            cleaner_last_run_ms: get(&self.cleaner_last_run_ms),
        }
    }
}
