//! When and what to clean (pure): Kafka's LogCleanerManager rules.
//!
//! Owns: the first uncleanable offset (never the active segment, never past
//! an open transaction or undurable data, never records younger than
//! min.compaction.lag.ms), the clean/dirty split at the cleaner checkpoint,
//! the dirty ratio test against min.cleanable.dirty.ratio with the
//! max.compaction.lag.ms override, and the grouping of segments into
//! cleaned segments no larger than segment.bytes. Must not: touch files or
//! partitions.

use std::ops::Range;

use crate::config::LogConfig;

/// What scheduling needs to know about one closed segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegmentFacts {
    pub base_offset: i64,
    pub next_offset: i64,
    pub size: u64,
    /// Largest batch timestamp (or file mtime without any).
    pub largest_timestamp_ms: i64,
}

/// The dirty part of a log: `[first_dirty, end)` in offsets, and the byte
/// sizes of the clean and dirty segments.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Cleanable {
    pub first_dirty: i64,
    pub end: i64,
    pub clean_bytes: u64,
    pub dirty_bytes: u64,
}

impl Cleanable {
    /// Dirty bytes over all cleanable bytes (0 when there are none).
    pub(crate) fn dirty_ratio(&self) -> f64 {
        let total = self.clean_bytes + self.dirty_bytes;
        if total == 0 {
            0.0
        } else {
            self.dirty_bytes as f64 / total as f64
        }
    }
}

/// Kafka's first uncleanable offset, segment-aligned: the base of the first
/// closed segment that reaches past `limit` (the smallest of the active
/// segment's base, the first unstable offset and the recovery point) or
/// holds a record younger than `min_compaction_lag_ms`.
pub(crate) fn first_uncleanable_offset(
    closed: &[SegmentFacts],
    limit: i64,
    min_compaction_lag_ms: i64,
    now_ms: i64,
) -> i64 {
    closed
        .iter()
        .find(|s| {
            s.next_offset > limit
                || now_ms.saturating_sub(s.largest_timestamp_ms) < min_compaction_lag_ms
        })
        .map_or_else(
            || closed.last().map_or(limit, |s| s.next_offset.min(limit)),
            |s| s.base_offset,
        )
}

/// Splits the closed segments below `end` at the cleaner `checkpoint`:
/// segments wholly below it are clean, the rest (from the one holding it)
/// dirty. A checkpoint outside the log (truncated, or retention moved the
/// start past it) counts from the log start.
pub(crate) fn cleanable(closed: &[SegmentFacts], checkpoint: i64, end: i64) -> Cleanable {
    let start = closed.first().map_or(end, |s| s.base_offset);
    let first_dirty = if (start..=end).contains(&checkpoint) {
        checkpoint
    } else {
        start
    };
    let (mut clean_bytes, mut dirty_bytes) = (0, 0);
    for s in closed.iter().take_while(|s| s.next_offset <= end) {
        if s.next_offset <= first_dirty {
            clean_bytes += s.size;
        } else {
            dirty_bytes += s.size;
        }
    }
    Cleanable {
        first_dirty,
        end,
        clean_bytes,
        dirty_bytes,
    }
}

/// Whether the log must be cleaned now: it has dirty bytes and either its
/// dirty ratio reached min.cleanable.dirty.ratio or its oldest dirty record
/// waited longer than max.compaction.lag.ms.
pub(crate) fn is_due(
    c: &Cleanable,
    first_dirty_timestamp_ms: Option<i64>,
    config: &LogConfig,
    now_ms: i64,
) -> bool {
    if c.dirty_bytes == 0 {
        return false;
    }
    let overdue = first_dirty_timestamp_ms
        .is_some_and(|ts| ts >= 0 && now_ms.saturating_sub(ts) > config.max_compaction_lag_ms);
    overdue || c.dirty_ratio() >= config.min_cleanable_dirty_ratio
}

/// Consecutive runs of `segments` that are cleaned into one segment each:
/// at most `max_bytes` together (one segment alone may exceed it) and an
/// offset range a segment can index.
pub(crate) fn groups(segments: &[SegmentFacts], max_bytes: u64) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < segments.len() {
        let (base, mut bytes, mut end) = (segments[start].base_offset, 0u64, start);
        while let Some(s) = segments.get(end) {
            let fits_bytes = bytes + s.size <= max_bytes;
            let fits_offsets = s.next_offset - 1 - base <= i64::from(u32::MAX);
            if end > start && !(fits_bytes && fits_offsets) {
                break;
            }
            bytes += s.size;
            end += 1;
        }
        out.push(start..end);
        start = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(base: i64, next: i64, size: u64, ts: i64) -> SegmentFacts {
        SegmentFacts {
            base_offset: base,
            next_offset: next,
            size,
            largest_timestamp_ms: ts,
        }
    }

    #[test]
    fn first_uncleanable_offset_stops_at_limits_and_young_segments() {
        let closed = [
            seg(0, 10, 100, 1_000),
            seg(10, 20, 100, 2_000),
            seg(20, 30, 100, 9_000),
        ];
        assert_eq!(first_uncleanable_offset(&closed, 30, 0, 10_000), 30);
        assert_eq!(
            first_uncleanable_offset(&closed, 25, 0, 10_000),
            20,
            "limit inside a segment"
        );
        assert_eq!(
            first_uncleanable_offset(&closed, 30, 5_000, 10_000),
            20,
            "min.compaction.lag.ms keeps the young segment dirty"
        );
        assert_eq!(first_uncleanable_offset(&closed, 30, 9_500, 10_000), 0);
        assert_eq!(first_uncleanable_offset(&[], 7, 0, 10_000), 7);
    }

    #[test]
    fn the_checkpoint_splits_clean_from_dirty() {
        let closed = [seg(0, 10, 100, 0), seg(10, 20, 50, 0), seg(20, 30, 50, 0)];
        let c = cleanable(&closed, 10, 30);
        assert_eq!(
            (c.first_dirty, c.clean_bytes, c.dirty_bytes),
            (10, 100, 100)
        );
        assert_eq!(c.dirty_ratio(), 0.5);
        let c = cleanable(&closed, 15, 20);
        assert_eq!(
            (c.clean_bytes, c.dirty_bytes),
            (100, 50),
            "mid-segment checkpoint"
        );
        let c = cleanable(&closed, 99, 30);
        assert_eq!(
            (c.first_dirty, c.dirty_bytes),
            (0, 200),
            "checkpoint past the log"
        );

        let config = LogConfig {
            min_cleanable_dirty_ratio: 0.6,
            max_compaction_lag_ms: 1_000,
            ..LogConfig::default()
        };
        let half = cleanable(&closed, 10, 30);
        assert!(!is_due(&half, Some(9_500), &config, 10_000));
        assert!(is_due(&half, Some(8_000), &config, 10_000), "overdue");
        assert!(
            !is_due(&cleanable(&closed, 30, 30), Some(0), &config, 10_000),
            "nothing dirty"
        );
    }

    #[test]
    fn groups_stay_under_the_segment_size() {
        let segs = [
            seg(0, 10, 60, 0),
            seg(10, 20, 30, 0),
            seg(20, 30, 20, 0),
            seg(30, 40, 200, 0),
        ];
        assert_eq!(groups(&segs, 100), vec![0..2, 2..3, 3..4]);
        assert_eq!(groups(&segs, 1_000), vec![0..4]);
        assert!(groups(&[], 100).is_empty());
    }
}
