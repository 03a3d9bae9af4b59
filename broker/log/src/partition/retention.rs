//! A partition's side of retention.
//!
//! Owns: expiring idle producer ids (producer.id.expiration.ms), rolling an active segment that is due (segment.ms, or wholly past
//! retention.ms) and removing the segments `retention::segments_to_delete`
//! picks or that lie wholly below DeleteRecords' log start offset, moving
//! the log start offset. Must not: delete files while holding
//! the partition lock (it holds the `files` lock instead, taken before the
//! partition lock is released, so a truncation cannot create a segment file
//! that a pending deletion would then remove), or ever remove the active
//! segment.

use std::sync::atomic::Ordering;

use tracing::{info, warn};

use super::PartitionLog;
use crate::error::Result;
use crate::retention::{segments_to_delete, SegmentView};
use crate::segment::LogSegment;

impl PartitionLog {
    /// Drops producer state unused for longer than `ttl`
    /// (producer.id.expiration.ms). Returns how many ids were dropped.
    pub(crate) fn expire_producers(&self, ttl: std::time::Duration) -> usize {
        let expired = self.lock().producers.expire(std::time::Instant::now(), ttl);
        if expired > 0 {
            info!(
                topic = self.topic(),
                partition = self.partition(),
                expired,
                "expired idle producer ids"
            );
        }
        expired
    }

    /// Rolls an active segment that is too old (segment.ms) or wholly past
    /// retention.ms, then deletes the oldest segments breaching
    /// retention.bytes or retention.ms. Returns how many were deleted.
    pub(crate) fn enforce_retention(&self, now_ms: i64) -> Result<usize> {
        let config = self.config();
        let (removed, rolled, _files) = {
            let mut state = self.lock();
            if state.closed.is_some() {
                return Ok(0);
            }
            let active = state.active();
            let expired = config.retention_ms >= 0
                && !active.is_empty()
                && now_ms.saturating_sub(active.largest_timestamp_ms()?) > config.retention_ms;
            let rolled = expired || active.is_expired_for_roll(now_ms, &config);
            if rolled {
                self.roll(&mut state, now_ms)?;
            }
            let closed_segments = &state.segments[..state.segments.len() - 1];
            let views = closed_segments
                .iter()
                .map(|s| {
                    Ok(SegmentView {
                        size: s.size(),
                        largest_timestamp_ms: s.largest_timestamp_ms()?,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            // A compact-only topic (cleanup.policy=compact) is never
            // deleted by retention.
            let count = if config.delete_retention {
                segments_to_delete(
                    &views,
                    self.size_bytes(),
                    config.retention_bytes,
                    config.retention_ms,
                    now_ms,
                )
            } else {
                0
            };
            // And whatever DeleteRecords put below the log start offset.
            let below_start = closed_segments
                .iter()
                .take_while(|s| s.next_offset() <= state.deleted_before)
                .count();
            let count = count.max(below_start);
            let removed: Vec<LogSegment> = state.segments.drain(..count).collect();
            self.log_start_offset
                .store(state.log_start_offset(), Ordering::Release);
            let start = state.log_start_offset();
            state.producers.prune_aborted(start);
            self.size_bytes.fetch_sub(
                removed.iter().map(LogSegment::size).sum(),
                Ordering::Relaxed,
            );
            (removed, rolled, self.files())
        };
        if rolled {
            self.mark_dirty(0, 0);
        }
        for segment in &removed {
            if let Err(e) = LogSegment::delete_files(&self.dir, segment.base_offset()) {
                warn!(topic = self.topic, partition = self.partition, error = %e, "cannot delete segment files");
            }
        }
        if !removed.is_empty() {
            self.ctx.counters.segments_deleted(removed.len() as u64);
            info!(
                topic = self.topic,
                partition = self.partition,
                segments = removed.len(),
                log_start_offset = self.log_start_offset(),
                "deleted segments past retention"
            );
        }
        Ok(removed.len())
    }
}
