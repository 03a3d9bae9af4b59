//! Retention and periodic checkpoints: the `log-retention` thread.
//!
//! Owns: the decision which closed segments retention.bytes / retention.ms
//! delete (pure, Kafka's rules: each a prefix of the oldest segments; the
//! active segment is never deleted) and the thread that applies it every
//! retention check interval and rewrites the recovery-point checkpoint when
//! it changed (at most every `CHECKPOINT_INTERVAL`). Must not: delete files
//! itself (the partition does, outside its lock) or fsync segment data.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tracing::warn;

use crate::registry::Registry;
use crate::segment::wall_clock_ms;

/// How often, at most, the recovery-point checkpoint file is rewritten.
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(5);

/// What retention needs to know about one closed segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegmentView {
    pub size: u64,
    /// Max batch timestamp, or the file mtime when no batch had one.
    pub largest_timestamp_ms: i64,
}

/// How many of the oldest closed segments to delete. `closed` excludes the
/// active segment; `total_size` includes it. Size retention first: drop
/// segments while what remains would still be >= retention.bytes. Then time
/// retention: drop segments whose largest timestamp is more than
/// retention.ms old. Negative limits mean unlimited.
pub(crate) fn segments_to_delete(
    closed: &[SegmentView],
    total_size: u64,
    retention_bytes: i64,
    retention_ms: i64,
    now_ms: i64,
) -> usize {
    let mut count = 0;
    if let Ok(limit) = u64::try_from(retention_bytes) {
        let mut remaining = total_size;
        while let Some(s) = closed.get(count) {
            if remaining.saturating_sub(s.size) < limit {
                break;
            }
            remaining -= s.size.min(remaining);
            count += 1;
        }
    }
    if retention_ms >= 0 {
        while let Some(s) = closed.get(count) {
            if now_ms.saturating_sub(s.largest_timestamp_ms) <= retention_ms {
                break;
            }
            count += 1;
        }
    }
    count
}

/// Applies retention and producer-id expiry (`producer_ttl`) to every
/// partition now.
pub(crate) fn enforce_all(registry: &Registry, producer_ttl: Duration) {
    let now = wall_clock_ms();
    for partition in registry.partitions() {
        if let Err(e) = partition.enforce_retention(now) {
            warn!(topic = partition.topic(), partition = partition.partition(), error = %e, "retention failed");
        }
        partition.expire_producers(producer_ttl);
    }
}

/// A stop flag a sleeping thread can be woken by.
#[derive(Debug, Default)]
pub(crate) struct StopSignal {
    stopped: Mutex<bool>,
    wake: Condvar,
}

impl StopSignal {
    pub(crate) fn stop(&self) {
        *self.stopped.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.wake.notify_all();
    }

    /// Whether `stop` was called (without waiting).
    pub(crate) fn is_stopped(&self) -> bool {
        *self.stopped.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sleeps up to `timeout`; true once stopped.
    pub(crate) fn wait(&self, timeout: Duration) -> bool {
        let stopped = self.stopped.lock().unwrap_or_else(PoisonError::into_inner);
        let (stopped, _) = self
            .wake
            .wait_timeout_while(stopped, timeout, |s| !*s)
            .unwrap_or_else(PoisonError::into_inner);
        *stopped
    }
}

/// The `log-retention` thread body.
pub(crate) fn run_maintenance(
    registry: Arc<Registry>,
    stop: Arc<StopSignal>,
    retention_interval: Duration,
    producer_ttl: Duration,
) {
    let tick = retention_interval
        .min(CHECKPOINT_INTERVAL)
        .max(Duration::from_millis(10));
    let mut next_retention = Instant::now() + retention_interval;
    while !stop.wait(tick) {
        if Instant::now() >= next_retention {
            enforce_all(&registry, producer_ttl);
            next_retention = Instant::now() + retention_interval;
        }
        if let Err(e) = registry.write_checkpoint_if_changed() {
            warn!(error = %e, "cannot write the recovery-point checkpoint");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn views(sizes_and_ts: &[(u64, i64)]) -> Vec<SegmentView> {
        sizes_and_ts
            .iter()
            .map(|&(size, largest_timestamp_ms)| SegmentView {
                size,
                largest_timestamp_ms,
            })
            .collect()
    }

    #[test]
    fn size_retention_keeps_at_least_the_limit() {
        // Three closed segments of 100 bytes plus a 50-byte active one.
        let closed = views(&[(100, 0), (100, 0), (100, 0)]);
        let table = [(-1, 0), (350, 0), (250, 1), (150, 2), (50, 3), (0, 3)];
        for (limit, expected) in table {
            assert_eq!(
                segments_to_delete(&closed, 350, limit, -1, 0),
                expected,
                "retention.bytes {limit}"
            );
        }
    }

    #[test]
    fn time_retention_deletes_an_expired_prefix_only() {
        let closed = views(&[(10, 1_000), (10, 5_000), (10, 2_000), (10, 9_000)]);
        assert_eq!(segments_to_delete(&closed, 50, -1, 3_000, 10_000), 3);
        assert_eq!(
            segments_to_delete(&closed, 50, -1, 6_000, 10_000),
            1,
            "stops at the first young segment"
        );
        assert_eq!(segments_to_delete(&closed, 50, -1, -1, 10_000), 0);
        assert_eq!(
            segments_to_delete(&closed, 50, -1, 9_000, 10_000),
            0,
            "exactly at the limit is kept"
        );
    }

    #[test]
    fn size_then_time() {
        let closed = views(&[(10, 9_000), (10, 1_000), (10, 9_500)]);
        assert_eq!(segments_to_delete(&closed, 40, 25, 5_000, 10_000), 2);
    }

    #[test]
    fn stop_signal_wakes_a_waiter() {
        let stop = Arc::new(StopSignal::default());
        assert!(!stop.wait(Duration::from_millis(1)));
        let waiter = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || stop.wait(Duration::from_secs(60)))
        };
        stop.stop();
        assert!(waiter.join().expect("waiter thread"));
    }
}
