//! A partition's side of flushing and closing.
//!
//! Owns: the hand-over of files written since the last flush to the
//! flusher (taken under the partition lock, synced outside it), giving them
//! back when an fsync fails, advancing the recovery point and durable
//! offset afterwards (unless a truncation happened since the work was
//! taken), closing the partition for shutdown or deletion, and the producer
//! snapshot written after the final flush of a shutdown.
//! Must not: fsync while holding the partition lock.

use std::path::PathBuf;
use std::sync::atomic::Ordering;

use super::{Closed, PartitionLog};
use crate::error::Result;
use crate::producer_recovery::write_snapshot;
use crate::segment::SyncTarget;

/// A rolled segment's files, not yet fsynced.
#[derive(Debug)]
pub(crate) struct SealedSegment {
    pub(super) base_offset: i64,
    pub(super) files: Vec<SyncTarget>,
}

/// What one flush of a partition must fsync, taken under its lock.
#[derive(Debug)]
pub(crate) struct SyncWork {
    /// Every offset below this is on disk once the files are synced.
    target_offset: i64,
    advance_durable: bool,
    active: Option<SyncTarget>,
    sealed: Vec<SealedSegment>,
    /// The partition directory, when segment files were created in it.
    pub dir: Option<PathBuf>,
    /// `State::truncations` when taken.
    truncations: u64,
}

impl SyncWork {
    pub(crate) fn files(&self) -> impl Iterator<Item = &SyncTarget> {
        self.sealed
            .iter()
            .flat_map(|s| s.files.iter())
            .chain(self.active.iter())
    }
}

impl PartitionLog {
    /// The flusher's share of the state: files written since the last flush.
    /// A deleted partition has nothing left worth syncing.
    pub(crate) fn take_sync_work(&self, include_active: bool) -> SyncWork {
        let mut state = self.lock();
        if state.closed == Some(Closed::Deleted) {
            state.unsynced.clear();
            self.publish_unsynced(&state);
            let nothing = SyncWork {
                target_offset: i64::MIN,
                advance_durable: false,
                active: None,
                sealed: Vec::new(),
                dir: None,
                truncations: state.truncations,
            };
            return nothing;
        }
        let target_offset = if include_active {
            state.active().next_offset()
        } else {
            state.active().base_offset()
        };
        let work = SyncWork {
            target_offset,
            advance_durable: include_active,
            active: include_active.then(|| state.active().log_sync_target()),
            sealed: std::mem::take(&mut state.unsynced),
            dir: std::mem::take(&mut state.dir_unsynced).then(|| self.dir.clone()),
            truncations: state.truncations,
        };
        // Until `complete_sync`, `recovery_point` (at most the oldest taken
        // segment's base) keeps the checkpoint below them.
        self.publish_unsynced(&state);
        work
    }

    /// A failed flush's work goes back, ahead of anything rolled since.
    /// After a truncation only the segments still sealed in the log go back.
    pub(crate) fn return_sync_work(&self, work: SyncWork) {
        let mut state = self.lock();
        let mut sealed = work.sealed;
        if work.truncations != state.truncations {
            let live = &state.segments[..state.segments.len() - 1];
            sealed.retain(|s| {
                live.binary_search_by_key(&s.base_offset, |l| l.base_offset())
                    .is_ok()
            });
        }
        let newer = std::mem::replace(&mut state.unsynced, sealed);
        state.unsynced.extend(newer);
        state.dir_unsynced |= work.dir.is_some();
        self.publish_unsynced(&state);
    }

    /// Records a successful flush; returns whether the durable offset moved.
    /// Work taken before a truncation proves nothing about the log after it
    /// (the truncation asked for another round).
    pub(crate) fn complete_sync(&self, work: &SyncWork) -> bool {
        let state = self.lock();
        if state.truncations != work.truncations {
            return false;
        }
        self.recovery_point
            .fetch_max(work.target_offset, Ordering::AcqRel);
        work.advance_durable
            && self
                .durable_offset
                .fetch_max(work.target_offset, Ordering::AcqRel)
                < work.target_offset
    }

    /// Offset below which everything is on disk, for the checkpoint file.
    /// Lock-free, so a truncation can rewrite the checkpoint under its lock.
    pub(crate) fn recovery_point(&self) -> i64 {
        let floor = self.unsynced_floor.load(Ordering::Acquire);
        self.recovery_point.load(Ordering::Acquire).min(floor)
    }

    /// Stops appends for shutdown, seals the active segment and writes its
    /// index files; returns them for the caller to fsync with the rest.
    pub(crate) fn close_for_shutdown(&self) -> Result<Vec<SyncTarget>> {
        let mut state = self.lock();
        state.closed.get_or_insert(Closed::ShuttingDown);
        let active = state.active_mut();
        active.seal();
        active.write_index_files()
    }

    /// Saves the producer state as of the log end, so the next open need not
    /// replay every segment. Only for a partition closed for shutdown (no
    /// appends can follow) whose log was fsynced after closing: the snapshot
    /// must never be ahead of the data on disk.
    pub(crate) fn write_producer_snapshot(&self) -> Result<()> {
        let (offset, snapshot) = {
            let state = self.lock();
            if state.closed != Some(Closed::ShuttingDown) {
                return Ok(());
            }
            (
                state.active().next_offset(),
                state.producers.encode_snapshot(),
            )
        };
        write_snapshot(&self.dir, offset, &snapshot)
    }

    /// Fails later appends and reads with UnknownTopic.
    pub(crate) fn mark_deleted(&self) {
        self.lock().closed = Some(Closed::Deleted);
    }
}
