//! A follower cutting its log back: Kafka's `truncateTo` and
//! `truncateFullyAndStartAt`.
//!
//! Owns: removing every batch from an offset on (later segments deleted, the
//! containing one cut, its indexes trimmed, and made active again), starting
//! the log afresh at any offset, and what must follow a cut: the log start,
//! end, durable and recovery offsets, the flusher's pending work, and the
//! producer state. Must not: leave files that recovery could misread after a
//! crash, or let flush work taken before a cut advance offsets after it.
//!
//! Crash safety: before any file changes, the recovery point is lowered to
//! the cut (to the log start for a fresh start) and the checkpoint is
//! rewritten, so recovery re-scans everything from the segment holding the
//! cut (CRC and offset contiguity) instead of trusting it. Files then change
//! so that a crash at any step leaves segments of which recovery keeps a
//! valid prefix (never an empty directory): later segments are deleted
//! newest first and the directory fsynced before the containing segment is
//! cut and fsynced. When the call returns, the cut is on disk.
//!
//! Locking: the whole truncation runs under the partition lock, fsyncs and
//! the checkpoint write included, so no append lands between the cut and its
//! durability; reads wait meanwhile, or (holding file handles from before)
//! fail or return what was cut. Truncations are rare: a follower whose log
//! diverged from its leader's. A failure after the first file change takes
//! the partition (and its directory) offline, as a failed fsync does: memory
//! and disk may differ until recovery settles them (`partition/reopen`).

use std::sync::atomic::Ordering;
use std::sync::MutexGuard;

use tracing::{error, info};

use super::{Closed, PartitionLog, State};
use crate::durable_file::sync_dir;
use crate::error::{Error, Result};
use crate::producer_recovery::rewind_producer_state;
use crate::segment::{wall_clock_ms, LogSegment};

impl PartitionLog {
    /// Removes every batch whose base offset is >= `offset`; a batch
    /// holding `offset` is removed whole (Kafka cuts at batch boundaries),
    /// so the log then ends at that batch's base offset (at `offset` when
    /// it falls in a gap compaction left). No-op when `offset`
    /// is at or past the log end. Below the log start the log is started
    /// afresh at `offset` (`truncate_fully_and_start_at`). The containing
    /// segment becomes the active one; the durable offset and recovery point
    /// drop to the new end if they were past it; the producer state is what
    /// the remaining batches leave. Durable (files and directory fsynced)
    /// when it returns.
    ///
    /// Errors: a negative `offset` is `OffsetOutOfRange`; a closed or
    /// offline partition answers as `append` does. An error before any file
    /// changed (e.g. writing the checkpoint) leaves the log as it was; one
    /// after takes the partition offline.
    pub fn truncate_to(&self, offset: i64) -> Result<()> {
        let state = self.lock();
        self.check_open(&state)?;
        self.truncate_locked(state, offset).inspect_err(|e| {
            self.ctx.dir.record("truncation", e);
        })
    }

    /// `truncate_to` under the caller's lock (also `reopen_at_durable`).
    pub(super) fn truncate_locked(
        &self,
        mut state: MutexGuard<'_, State>,
        offset: i64,
    ) -> Result<()> {
        let (start, end) = (state.log_start_offset(), state.active().next_offset());
        if offset < 0 {
            return Err(Error::OffsetOutOfRange {
                offset,
                log_start_offset: start,
                log_end_offset: end,
            });
        }
        if offset >= end {
            return Ok(());
        }
        if offset < start {
            return self.start_afresh(state, offset);
        }
        // At least the first segment starts at or before `offset`.
        let i = state
            .segments
            .partition_point(|s| s.base_offset() <= offset)
            .saturating_sub(1);
        let (position, base) = state.segments[i].locate(offset)?;
        // Inside a gap compaction left, the log ends at `offset` itself.
        let new_end = base.min(offset);
        self.prepare_cut(&mut state, new_end)?;
        let files = self.files();
        let deleted = state.segments.len() - 1 - i;
        let result = self.cut(&mut state, i, position, new_end);
        drop(files);
        self.settle(state, result, false)?;
        info!(
            topic = self.topic,
            partition = self.partition,
            offset,
            old_log_end_offset = end,
            log_end_offset = new_end,
            segments_deleted = deleted,
            "truncated log"
        );
        Ok(())
    }

    /// Deletes every segment and starts an empty log at `offset`, which
    /// becomes both the log start and end offset (Kafka's
    /// truncateFullyAndStartAt: for a follower whose log ends before the
    /// leader's log start, or a truncation below its own log start). The
    /// producer state is cleared. Durable when it returns; errors as for
    /// `truncate_to`.
    pub fn truncate_fully_and_start_at(&self, offset: i64) -> Result<()> {
        let state = self.lock();
        self.check_open(&state)?;
        if offset < 0 {
            return Err(Error::OffsetOutOfRange {
                offset,
                log_start_offset: state.log_start_offset(),
                log_end_offset: state.active().next_offset(),
            });
        }
        self.start_afresh(state, offset)
    }

    fn start_afresh(&self, mut state: MutexGuard<'_, State>, offset: i64) -> Result<()> {
        let (start, end) = (state.log_start_offset(), state.active().next_offset());
        self.prepare_cut(&mut state, offset.min(start))?;
        let files = self.files();
        let result = self.replace_all(&mut state, offset);
        drop(files);
        self.settle(state, result, true)?;
        info!(
            topic = self.topic,
            partition = self.partition,
            old_log_start_offset = start,
            old_log_end_offset = end,
            log_start_offset = offset,
            "truncated log fully"
        );
        Ok(())
    }

    /// Lowers the recovery point to `lowest` (the lowest offset whose data
    /// will change) and rewrites the checkpoint before any file changes;
    /// from here on, flush work taken earlier no longer counts.
    fn prepare_cut(&self, state: &mut State, lowest: i64) -> Result<()> {
        self.recovery_point.fetch_min(lowest, Ordering::AcqRel);
        if let Some(registry) = self.ctx.registry.upgrade() {
            registry.write_checkpoint()?;
        }
        state.truncations += 1;
        Ok(())
    }

    /// Cuts the log at byte `position` of segment `i`, where the batch at
    /// `new_end` starts.
    fn cut(&self, state: &mut State, i: usize, position: u64, new_end: i64) -> Result<()> {
        let later: Vec<LogSegment> = state.segments.drain(i + 1..).collect();
        for segment in later.iter().rev() {
            LogSegment::delete_files(&self.dir, segment.base_offset())?;
        }
        let segment = state.active_mut();
        if !later.is_empty() {
            // It was sealed: its index files describe the batches being cut.
            segment.remove_index_files()?;
            sync_dir(&self.dir)?;
        }
        segment.truncate_to(position, new_end, self.config().index_interval_bytes)?;
        segment.log_sync_target().sync()
    }

    /// Replaces every segment with an empty one at `offset`, keeping at
    /// least one segment file on disk at every step.
    fn replace_all(&self, state: &mut State, offset: i64) -> Result<()> {
        match state
            .segments
            .binary_search_by_key(&offset, LogSegment::base_offset)
        {
            Ok(k) => {
                // Empty the segment at `offset`, then drop the others around
                // it: later ones newest first, earlier ones oldest first.
                let later: Vec<LogSegment> = state.segments.drain(k + 1..).collect();
                for segment in later.iter().rev() {
                    LogSegment::delete_files(&self.dir, segment.base_offset())?;
                }
                let earlier: Vec<LogSegment> = state.segments.drain(..k).collect();
                let segment = state.active_mut();
                segment.remove_index_files()?;
                segment.truncate_to(0, offset, self.config().index_interval_bytes)?;
                segment.log_sync_target().sync()?;
                for segment in &earlier {
                    LogSegment::delete_files(&self.dir, segment.base_offset())?;
                }
            }
            Err(_) => {
                let fresh = LogSegment::create(&self.dir, offset, wall_clock_ms())?;
                let old = std::mem::replace(&mut state.segments, vec![fresh]);
                for segment in old.iter().rev() {
                    LogSegment::delete_files(&self.dir, segment.base_offset())?;
                }
            }
        }
        sync_dir(&self.dir)
    }

    /// Brings offsets, flush bookkeeping and producer state in line with
    /// the segments after a cut (`fresh`: the log was started afresh), and
    /// takes the partition offline if the cut failed. Runs whatever `result`
    /// is: memory must describe what is left either way.
    fn settle(
        &self,
        mut state: MutexGuard<'_, State>,
        result: Result<()>,
        fresh: bool,
    ) -> Result<()> {
        let state = &mut *state;
        let (start, end) = (state.log_start_offset(), state.active().next_offset());
        let sealed = &state.segments[..state.segments.len() - 1];
        state.unsynced.retain(|s| {
            sealed
                .binary_search_by_key(&s.base_offset, LogSegment::base_offset)
                .is_ok()
        });
        self.publish_unsynced(state);
        self.log_start_offset.store(start, Ordering::Release);
        self.log_end_offset.store(end, Ordering::Release);
        self.size_bytes.store(
            state.segments.iter().map(LogSegment::size).sum(),
            Ordering::Relaxed,
        );
        self.durable_offset.fetch_min(end, Ordering::AcqRel);
        self.recovery_point.fetch_min(end, Ordering::AcqRel);
        let result = result.and_then(|()| {
            if fresh {
                // Nothing lies below the new, empty and fsynced segment.
                self.durable_offset.store(end, Ordering::Release);
                self.recovery_point.store(end, Ordering::Release);
                state.producers.clear();
                Ok(())
            } else {
                let id = (self.topic.as_str(), self.partition);
                rewind_producer_state(&state.segments, &mut state.producers, id)
            }
        });
        self.publish_transactions(state);
        if let Err(e) = &result {
            error!(topic = self.topic, partition = self.partition, error = %e,
                "truncation failed: partition taken offline until restart");
            state.closed.get_or_insert(Closed::Offline);
            self.offline.store(true, Ordering::Release);
            return result;
        }
        // A flush round brings the durable offset and recovery point back
        // up to what is on disk.
        self.mark_dirty(0, 0);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use chronik_protocol::record_batch::{build_test_batch, parse_batches};

    use crate::manager::{LogManager, LogManagerConfig};

    #[test]
    fn flush_work_taken_before_a_truncation_does_not_advance_offsets_after_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let manager =
            LogManager::open(LogManagerConfig::new(dir.path()), Arc::new(|_| {})).expect("open");
        let topic = manager
            .create_topic("t", 1, Default::default())
            .expect("create");
        let log = topic.partition(0).expect("partition 0");
        for _ in 0..3 {
            let mut batch = build_test_batch(2, 0, b"x");
            let headers = parse_batches(&batch).expect("valid");
            log.append(&mut batch, &headers).expect("append");
        }
        let stale = log.take_sync_work(true); // would make offsets below 6 durable
        log.truncate_to(2).expect("truncate");
        assert!(!log.complete_sync(&stale));
        assert_eq!(log.durable_offset(), 2);
        assert!(log.recovery_point() <= 2);

        let fresh = log.take_sync_work(true);
        log.complete_sync(&fresh);
        assert_eq!((log.durable_offset(), log.recovery_point()), (2, 2));
        manager.shutdown();
    }
}
