//! A partition brought back when its offline data directory is reopened
//! (`LogManager::reopen_dir`), without a restart.
//!
//! Owns: clearing a partition's offline state and making memory match the
//! disk again: a partition that was taken offline (its fsync or a
//! truncation failed, so memory and disk may differ) is reloaded from disk
//! with the same recovery as at start-up; then every partition is cut back
//! to the durable offset it had when the directory failed — what was
//! written above it may never reach the disk (after a failed fsync, Linux
//! may have dropped the dirty pages or marked them clean), and was never
//! acknowledged. The broker fetches it again from the leaders as a
//! follower. Must not: run while this broker leads the partition (a cut
//! below its high watermark would lose acknowledged records): the caller
//! reopens only once the controller has moved its leaderships away.

use std::sync::atomic::Ordering;

use tracing::info;

use super::{clean, delete_records, Closed, PartitionLog, State};
use crate::error::Result;
use crate::producer_recovery::load_producer_state;
use crate::recovery::{recover_partition, RecoveryHint};
use crate::segment::LogSegment;

impl PartitionLog {
    /// Reopens the partition (see the module header); returns whether it
    /// cut anything. A deleted or shut-down partition is left alone.
    pub(crate) fn reopen_at_durable(&self) -> Result<bool> {
        let durable = self.durable_offset();
        let mut state = self.lock();
        if state.closed == Some(Closed::Offline) {
            self.reload(&mut state)?;
            state.closed = None;
            self.offline.store(false, Ordering::Release);
        }
        if self.check_closed(&state).is_err() {
            return Ok(false);
        }
        if durable >= state.active().next_offset() {
            return Ok(false);
        }
        info!(
            topic = self.topic,
            partition = self.partition,
            durable_offset = durable,
            log_end_offset = state.active().next_offset(),
            "reopening: cutting the log back to its durable offset"
        );
        self.truncate_locked(state, durable)?;
        Ok(true)
    }

    /// Replaces the in-memory log with what recovery finds on disk.
    fn reload(&self, state: &mut State) -> Result<()> {
        let id = (self.topic.as_str(), self.partition);
        let hint = RecoveryHint {
            clean_shutdown: false,
            recovery_point: Some(self.recovery_point()),
        };
        let recovered = recover_partition(&self.dir, id, &self.config(), hint)?;
        self.ctx
            .counters
            .recovery_truncated(recovered.truncated_bytes);
        let producers = load_producer_state(&self.dir, id, &recovered.segments)?;
        let deleted_before = delete_records::read_log_start_file(&self.dir)?;
        state.segments = recovered.segments;
        state.producers = producers;
        state.deleted_before = deleted_before;
        state.unsynced.clear();
        state.dir_unsynced = false;
        // Flush work taken before the reload no longer counts.
        state.truncations += 1;
        let end = state.active().next_offset();
        self.log_start_offset
            .store(state.log_start_offset(), Ordering::Release);
        self.log_end_offset.store(end, Ordering::Release);
        self.durable_offset.fetch_min(end, Ordering::AcqRel);
        self.recovery_point.fetch_min(end, Ordering::AcqRel);
        self.size_bytes.store(
            state.segments.iter().map(LogSegment::size).sum(),
            Ordering::Relaxed,
        );
        self.clean_checkpoint
            .store(clean::load_clean_checkpoint(&self.dir), Ordering::Release);
        self.publish_unsynced(state);
        self.publish_transactions(state);
        info!(
            topic = self.topic,
            partition = self.partition,
            log_end_offset = end,
            truncated_bytes = recovered.truncated_bytes,
            "reloaded from disk"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use chronik_protocol::record_batch::{build_test_batch, parse_batches};

    use crate::error::Error;
    use crate::flusher::FlushPolicy;
    use crate::manager::{LogManager, LogManagerConfig, ReopenedDir};

    #[test]
    fn a_reopened_directory_cuts_each_log_back_to_its_durable_offset_and_takes_writes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = LogManagerConfig::new(dir.path());
        config.flush_policy = FlushPolicy::GroupCommit {
            max_wait: Duration::from_millis(1),
        };
        let manager = LogManager::open(config, Arc::new(|_| {})).expect("open");
        let topic = manager
            .create_topic("t", 1, Default::default())
            .expect("create");
        let log = topic.partition(0).expect("partition 0");
        let append = |n: i32| {
            let mut batch = build_test_batch(n, 0, b"x");
            let headers = parse_batches(&batch).expect("valid");
            log.append(&mut batch, &headers)
        };
        append(1).expect("append while online");
        append(2).expect("append while online");
        let deadline = Instant::now() + Duration::from_secs(10);
        while log.durable_offset() < 3 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(log.durable_offset(), 3);

        // An fsync fails: the partition and the directory go offline, and
        // nothing more becomes durable.
        let eio = Error::Io {
            path: dir.path().join("t-0"),
            source: std::io::Error::from_raw_os_error(5),
        };
        log.mark_offline(&eio);
        assert!(matches!(append(1), Err(Error::LogDirOffline { .. })));
        assert!(matches!(
            log.truncate_to(1),
            Err(Error::LogDirOffline { .. })
        ));
        // As if the failed fsync had covered the second batch: only the
        // first is known to be on disk.
        log.durable_offset
            .store(1, std::sync::atomic::Ordering::Release);

        let reopened = manager.reopen_dir().expect("reopen");
        assert_eq!(
            reopened,
            ReopenedDir {
                partitions: 1,
                truncated: 1
            }
        );
        assert!(!manager.dir_health().is_offline() && !log.is_offline());
        assert_eq!(log.log_end_offset(), 1, "cut back to the durable offset");
        assert_eq!(append(1).expect("writes again").base_offset, 1);
        assert_eq!(
            manager.reopen_dir().expect("online: no-op"),
            ReopenedDir::default()
        );
        manager.shutdown();
    }
}
