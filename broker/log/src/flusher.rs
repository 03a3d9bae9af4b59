//! Group commit: the `log-flusher` thread and the dirty-partition queue.
//!
//! Owns: `FlushPolicy`, the shared queue appends mark their partition dirty
//! in, the round timing (fire `max_wait` after the oldest unflushed append,
//! as soon as `GROUP_COMMIT_BYTES` are pending, or once appends pause for
//! the quiet period), and the fsyncs of one
//! partition's files outside its lock. Durable offsets only advance after
//! every file holding the data was synced; a failed fsync takes the partition
//! offline and leaves the durable offset where it was.
//! Must not: hold the partition lock while syncing (reads would stall
//! behind the disk) or call `on_flush` for rounds that made nothing durable.
//!
//! After a failed fsync Linux may drop the dirty pages, so a later
//! successful retry would not prove the earlier data reached the disk: the
//! partition is taken offline instead (appends refused, durable offset
//! frozen) until a restart re-validates its tail, as Kafka takes the log dir
//! offline.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tracing::{error, warn};

use crate::error::{Error, Result};
use crate::partition::{PartitionLog, SyncWork};
use crate::stats::{Counters, FlushObserver};

/// A round starts early once this many appended bytes wait for fsync, so
/// heavy load does not wait out `max_wait`.
pub const GROUP_COMMIT_BYTES: u64 = 4 << 20;

/// Longest pause in the append stream before a round starts early.
/// Producers that reached their in-flight limit stop sending until acked, so
/// once appends pause, waiting longer only adds latency and caps
/// throughput at (in-flight requests × batch size) per `max_wait`.
const MAX_QUIET: Duration = Duration::from_millis(1);

/// The quiet period for a group-commit `max_wait`: a tenth of it, at most
/// `MAX_QUIET`.
fn quiet_period(max_wait: Duration) -> Duration {
    (max_wait / 10).min(MAX_QUIET)
}

/// Pause after a round with a failed fsync, so a broken disk is not spun on.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// When appended data is fsynced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushPolicy {
    /// Never fsync on the hot path: data is "durable" once in the page cache
    /// (Kafka's default). Rolled segments are still synced in the background.
    Never,
    /// Batch appends from all partitions into one fsync round at most
    /// `max_wait` after the oldest unflushed append.
    GroupCommit { max_wait: Duration },
}

impl FlushPolicy {
    /// The named profiles: none, low (2 ms), medium (10 ms), high (50 ms),
    /// ultra (100 ms).
    pub fn from_profile(name: &str) -> Option<FlushPolicy> {
        let ms = match name.to_ascii_lowercase().as_str() {
            "none" => return Some(FlushPolicy::Never),
            "low" => 2,
            "medium" => 10,
            "high" => 50,
            "ultra" => 100,
            _ => return None,
        };
        Some(FlushPolicy::GroupCommit {
            max_wait: Duration::from_millis(ms),
        })
    }
}

impl FromStr for FlushPolicy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        FlushPolicy::from_profile(s).ok_or_else(|| Error::InvalidConfig {
            name: "flush.profile".into(),
            value: s.into(),
            reason: "expected none, low, medium, high or ultra".into(),
        })
    }
}

impl fmt::Display for FlushPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlushPolicy::Never => f.write_str("none"),
            FlushPolicy::GroupCommit { max_wait } => write!(f, "group-commit({max_wait:?})"),
        }
    }
}

/// Partitions waiting for fsync plus what the round timing needs.
#[derive(Default)]
struct Pending {
    dirty: Vec<Arc<PartitionLog>>,
    oldest: Option<Instant>,
    newest: Option<Instant>,
    bytes: u64,
    batches: u64,
    stopping: bool,
}

/// One round's work, taken from the queue in one go.
struct Round {
    partitions: Vec<Arc<PartitionLog>>,
    bytes: u64,
    batches: u64,
}

/// The dirty set shared by every partition (producers) and the flusher
/// (consumer). Lock order: a partition's lock may be held while marking it
/// dirty; the queue lock is never held while taking a partition lock.
pub(crate) struct FlushQueue {
    policy: FlushPolicy,
    pending: Mutex<Pending>,
    wake: Condvar,
}

impl FlushQueue {
    pub(crate) fn new(policy: FlushPolicy) -> Self {
        Self {
            policy,
            pending: Mutex::new(Pending::default()),
            wake: Condvar::new(),
        }
    }

    pub(crate) fn policy(&self) -> &FlushPolicy {
        &self.policy
    }

    /// Poisoning is ignored: the critical sections only move plain values
    /// and never panic halfway through an update.
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `partition` for the next round (once, however often it is
    /// marked) and wakes the flusher when the round timing changes. Ignored
    /// once stopping: shutdown flushes every partition itself.
    pub(crate) fn mark_dirty(&self, partition: Arc<PartitionLog>, bytes: u64, batches: u64) {
        let mut p = self.lock();
        if p.stopping {
            return;
        }
        let was_idle = p.dirty.is_empty();
        if !partition.queued.swap(true, Ordering::AcqRel) {
            p.dirty.push(partition);
        }
        let now = Instant::now();
        p.oldest.get_or_insert(now);
        p.newest = Some(now);
        let before = p.bytes;
        p.bytes += bytes;
        p.batches += batches;
        if was_idle || (before < GROUP_COMMIT_BYTES && p.bytes >= GROUP_COMMIT_BYTES) {
            self.wake.notify_one();
        }
    }

    /// Stops the flusher after its current round. Queued partitions are
    /// released (they hold this queue: keeping them would leak both).
    pub(crate) fn stop(&self) {
        let released = {
            let mut p = self.lock();
            p.stopping = true;
            std::mem::take(&mut p.dirty)
        };
        self.wake.notify_all();
        drop(released);
    }

    /// Blocks until a round is due; None once stopping.
    fn next_round(&self) -> Option<Round> {
        let max_wait = match self.policy {
            FlushPolicy::GroupCommit { max_wait } => max_wait,
            FlushPolicy::Never => Duration::ZERO,
        };
        let mut p = self.lock();
        loop {
            if p.stopping {
                return None;
            }
            if p.dirty.is_empty() {
                p = self.wake.wait(p).unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            let now = Instant::now();
            let due_by_age = p.oldest.unwrap_or(now) + max_wait;
            let due_by_quiet = p.newest.unwrap_or(now) + quiet_period(max_wait);
            let due = due_by_age.min(due_by_quiet);
            if now >= due || p.bytes >= GROUP_COMMIT_BYTES {
                let partitions = std::mem::take(&mut p.dirty);
                for partition in &partitions {
                    partition.queued.store(false, Ordering::Release);
                }
                let round = Round {
                    partitions,
                    bytes: p.bytes,
                    batches: p.batches,
                };
                p.oldest = None;
                p.newest = None;
                p.bytes = 0;
                p.batches = 0;
                return Some(round);
            }
            p = self
                .wake
                .wait_timeout(p, due - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// Everything the flusher thread needs.
/// Called on the flusher thread after a round, with the partitions whose
/// durable offset advanced (or that went offline) in it.
pub type OnFlush = Arc<dyn Fn(&[Arc<PartitionLog>]) + Send + Sync>;

pub(crate) struct Flusher {
    pub queue: Arc<FlushQueue>,
    pub counters: Arc<Counters>,
    pub observer: Option<Arc<dyn FlushObserver>>,
    pub on_flush: OnFlush,
}

impl Flusher {
    /// The `log-flusher` thread body: one round at a time until stopped.
    pub(crate) fn run(self) {
        let include_active = matches!(self.queue.policy, FlushPolicy::GroupCommit { .. });
        while let Some(round) = self.queue.next_round() {
            let started = Instant::now();
            let mut progressed: Vec<Arc<PartitionLog>> = Vec::new();
            let mut failed = false;
            for partition in &round.partitions {
                match sync_partition(
                    partition,
                    include_active,
                    &self.counters,
                    self.observer.as_deref(),
                ) {
                    Ok(true) => progressed.push(Arc::clone(partition)),
                    Ok(false) => {}
                    Err(e) if e.is_resource_exhaustion() => {
                        // No fsync was attempted (no file descriptor to
                        // open the directory with): nothing is known to be
                        // lost, so the partition stays online and the work,
                        // already returned to it, is retried next round.
                        warn!(topic = partition.topic(), partition = partition.partition(), error = %e,
                            "cannot start fsync (out of file descriptors); retrying");
                        self.queue.mark_dirty(Arc::clone(partition), 0, 0);
                        failed = true;
                    }
                    Err(e) => {
                        error!(topic = partition.topic(), partition = partition.partition(), error = %e,
                            "fsync failed: partition and log directory taken offline (its durable offset will not advance until the directory is reopened)");
                        partition.mark_offline(&e);
                        progressed.push(Arc::clone(partition));
                        failed = true;
                    }
                }
            }
            if include_active {
                self.counters.group_commit(round.batches);
                if let Some(o) = &self.observer {
                    o.group_commit_done(
                        round.partitions.len(),
                        round.bytes,
                        started.elapsed().as_secs_f64(),
                    );
                }
            }
            // Waiters also need waking when a partition went offline, so they
            // can answer with an error instead of waiting out their timeout.
            if !progressed.is_empty() {
                (self.on_flush)(&progressed);
            }
            if failed {
                std::thread::sleep(RETRY_PAUSE);
            }
        }
    }
}

/// Syncs what `partition` has written since its last flush — its rolled
/// segments and, with `include_active`, the active segment — then advances
/// its recovery point (and durable offset). Returns whether the durable
/// offset moved. On failure the work goes back to the partition.
pub(crate) fn sync_partition(
    partition: &PartitionLog,
    include_active: bool,
    counters: &Counters,
    observer: Option<&dyn FlushObserver>,
) -> Result<bool> {
    let work = partition.take_sync_work(include_active);
    match sync_files(&work, counters, observer) {
        Ok(()) => Ok(partition.complete_sync(&work)),
        Err(e) => {
            partition.return_sync_work(work);
            Err(e)
        }
    }
}

fn sync_files(
    work: &SyncWork,
    counters: &Counters,
    observer: Option<&dyn FlushObserver>,
) -> Result<()> {
    let timed = |sync: &dyn Fn() -> Result<()>| {
        let started = Instant::now();
        sync()?;
        let took = started.elapsed();
        counters.fsync(took);
        if let Some(o) = observer {
            o.fsync_done(took.as_secs_f64());
        }
        Ok::<(), Error>(())
    };
    for target in work.files() {
        timed(&|| target.sync())?;
    }
    if let Some(dir) = &work.dir {
        timed(&|| crate::durable_file::sync_dir(dir))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offline_partition_refuses_appends_and_keeps_its_durable_offset() {
        use crate::manager::{LogManager, LogManagerConfig};
        use chronik_protocol::record_batch::{build_test_batch, parse_batches};

        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = LogManagerConfig::new(dir.path());
        config.flush_policy = FlushPolicy::GroupCommit {
            max_wait: Duration::from_secs(60),
        };
        let manager = LogManager::open(config, Arc::new(|_| {})).expect("open");
        let topic = manager
            .create_topic("t", 1, Default::default())
            .expect("create");
        let log = topic.partition(0).expect("partition 0");
        let mut batch = build_test_batch(2, 0, b"x");
        let headers = parse_batches(&batch).expect("valid");
        log.append(&mut batch, &headers)
            .expect("append while online");
        let deadline = Instant::now() + Duration::from_secs(10);
        while log.durable_offset() < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let durable = log.durable_offset();
        assert_eq!(durable, 2, "the first batch became durable while online");

        log.mark_offline(&Error::Io {
            path: dir.path().join("t-0"),
            source: std::io::Error::from_raw_os_error(5),
        });
        assert!(log.is_offline());
        assert!(manager.dir_health().is_offline(), "the directory too");
        let mut batch = build_test_batch(1, 0, b"y");
        let headers = parse_batches(&batch).expect("valid");
        assert!(matches!(
            log.append(&mut batch, &headers),
            Err(Error::LogDirOffline { .. })
        ));
        assert_eq!(
            log.durable_offset(),
            durable,
            "nothing becomes durable after the failure"
        );
        manager.shutdown();
    }

    #[test]
    fn quiet_period_is_a_tenth_of_max_wait_capped_at_one_millisecond() {
        assert_eq!(
            quiet_period(Duration::from_millis(2)),
            Duration::from_micros(200)
        );
        assert_eq!(
            quiet_period(Duration::from_millis(10)),
            Duration::from_millis(1)
        );
        assert_eq!(
            quiet_period(Duration::from_millis(100)),
            Duration::from_millis(1)
        );
    }
}
