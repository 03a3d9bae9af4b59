//! A partition's side of log compaction.
//!
//! Owns: what this partition offers the cleaner (`clean_view`: its closed
//! segments below Kafka's first uncleanable offset, snapshotted under the
//! lock), swapping a cleaned segment in for the segments it was cleaned
//! from (only if they are still there unchanged; the in-memory list under
//! the partition lock, the files under the `files` lock after it, as
//! retention deletes them), the cleaner checkpoint (`cleaner-offset-checkpoint`
//! in the partition directory: the offset below which the log is clean),
//! and the flag that keeps two cleaner threads off one partition. Must not:
//! read or write segment data under the partition lock.

use std::path::Path;
use std::sync::atomic::Ordering;

use tracing::warn;

use super::PartitionLog;
use crate::cleaner::schedule::{cleanable, first_uncleanable_offset, SegmentFacts};
use crate::cleaner::{swap, CleanView, SourceSegment};
use crate::durable_file::write_atomically;
use crate::error::Result;
use crate::segment::LogSegment;

const CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";

/// The cleaner checkpoint stored in `dir` (0 when none or unreadable: the
/// whole log counts as dirty).
pub(super) fn load_clean_checkpoint(dir: &Path) -> i64 {
    let path = dir.join(CHECKPOINT_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => text.trim().parse().unwrap_or_else(|_| {
            warn!(path = %path.display(), "unreadable cleaner checkpoint; the log counts as dirty");
            0
        }),
        Err(_) => 0,
    }
}

impl PartitionLog {
    /// The offset below which the log was cleaned.
    pub fn clean_checkpoint(&self) -> i64 {
        self.clean_checkpoint.load(Ordering::Acquire)
    }

    /// Stores the cleaner checkpoint durably.
    pub(crate) fn set_clean_checkpoint(&self, offset: i64) -> Result<()> {
        write_atomically(
            &self.dir.join(CHECKPOINT_FILE),
            format!("{offset}\n").as_bytes(),
        )?;
        self.clean_checkpoint.store(offset, Ordering::Release);
        Ok(())
    }

    pub(crate) fn is_being_cleaned(&self) -> bool {
        self.cleaning.load(Ordering::Acquire)
    }

    /// Claims the partition for one cleaner thread; false if another has it.
    pub(crate) fn begin_cleaning(&self) -> bool {
        self.cleaning
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    pub(crate) fn end_cleaning(&self) {
        self.cleaning.store(false, Ordering::Release);
    }

    /// What the cleaner may clean now, or None (not compacted, closed, or
    /// no closed segment). The first uncleanable offset is the smallest of
    /// the active segment's base, the first unstable offset, the recovery
    /// point (only fsynced data is rewritten) and the first segment with
    /// records younger than min.compaction.lag.ms.
    pub(crate) fn clean_view(&self, now_ms: i64) -> Result<Option<CleanView>> {
        if !self.config().compact {
            return Ok(None);
        }
        let state = self.lock();
        if state.closed.is_some() || state.segments.len() < 2 {
            return Ok(None);
        }
        let closed = &state.segments[..state.segments.len() - 1];
        let facts = closed
            .iter()
            .map(|s| {
                Ok(SegmentFacts {
                    base_offset: s.base_offset(),
                    next_offset: s.next_offset(),
                    size: s.size(),
                    largest_timestamp_ms: s.largest_timestamp_ms()?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let limit = state
            .active()
            .base_offset()
            .min(state.producers.first_unstable_offset().unwrap_or(i64::MAX))
            .min(self.recovery_point());
        let end =
            first_uncleanable_offset(&facts, limit, self.config().min_compaction_lag_ms, now_ms);
        let split = cleanable(&facts, self.clean_checkpoint(), end);
        let segments: Vec<SourceSegment> = closed
            .iter()
            .zip(facts)
            .take_while(|(s, _)| s.next_offset() <= end)
            .map(|(s, facts)| SourceSegment {
                facts,
                slice: s.slice(0, s.size()),
            })
            .collect();
        let start = state.log_start_offset();
        Ok(Some(CleanView {
            segments,
            cleanable: split,
            aborted: state.producers.aborted_transactions(start, end),
            producer_last_offsets: state.producers.last_batch_offsets(),
        }))
    }

    /// Puts `cleaned` in place of `sources` if they are still the same
    /// closed segments (else false: retention or a truncation changed the
    /// log meanwhile, and nothing changes), then swaps the files (see
    /// `cleaner::swap`). The aborted transactions whose ABORT markers it
    /// dropped (`removed_aborts`: producer id, marker offset) leave the
    /// producer state in the same step, so no read_committed fetch is told
    /// of a transaction whose marker it can no longer read. Readers holding
    /// the old segments' files keep reading them, as after a retention
    /// deletion.
    pub(crate) fn replace_cleaned(
        &self,
        sources: &[SourceSegment],
        cleaned: LogSegment,
        removed_aborts: &[(i64, i64)],
    ) -> Result<bool> {
        let indexes = cleaned.index_file_contents();
        let base = cleaned.base_offset();
        let replaced: Vec<i64> = sources.iter().map(|s| s.facts.base_offset).collect();
        let _files = {
            let mut state = self.lock();
            if state.closed.is_some() {
                return Ok(false);
            }
            let Some(at) = state.segments.iter().position(|s| s.base_offset() == base) else {
                return Ok(false);
            };
            let range = at..at + sources.len();
            let unchanged = range.end < state.segments.len()
                && state.segments[range.clone()]
                    .iter()
                    .zip(sources)
                    .all(|(s, src)| {
                        (s.base_offset(), s.next_offset(), s.size())
                            == (src.facts.base_offset, src.facts.next_offset, src.facts.size)
                    })
                && cleaned.next_offset() == sources[sources.len() - 1].facts.next_offset;
            if !unchanged {
                return Ok(false);
            }
            let new_size = cleaned.size();
            let old: Vec<LogSegment> = state.segments.splice(range, [cleaned]).collect();
            state.producers.forget_aborted(removed_aborts);
            self.size_bytes
                .fetch_sub(old.iter().map(LogSegment::size).sum(), Ordering::Relaxed);
            self.size_bytes.fetch_add(new_size, Ordering::Relaxed);
            self.files()
        };
        swap::commit(&self.dir, base, &replaced, indexes).map_err(|e| {
            warn!(topic = self.topic, partition = self.partition, error = %e,
                "cleaned segment in use but its swap on disk failed; the next open completes or discards it");
            e
        })?;
        Ok(true)
    }
}
