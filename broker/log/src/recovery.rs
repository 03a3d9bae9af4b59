//! Loading one partition's segments at open, repairing a crashed tail.
//!
//! Owns: the choice of what to trust (Kafka's rule: after a clean shutdown
//! everything, checking only the last segment's tail; otherwise everything
//! before the segment holding the recovery point), finishing or discarding
//! a log cleaner swap a crash interrupted (`cleaner::swap`), and the repair
//! of the rest: CRC-checked rescans, index rebuilds, truncation at the first
//! invalid batch and deletion of every later segment, then fsync of what
//! survived so it counts as durable. Must not: run after open, or trust an
//! index file that fails validation.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use tracing::{info, warn};

use crate::config::LogConfig;
use crate::durable_file::sync_dir;
use crate::error::{Error, Result};
use crate::read::{first_batch_max_timestamp, SegmentSlice};
use crate::scan::scan_batches;
use crate::segment::{
    remove_if_exists, segment_path, wall_clock_ms, LogSegment, SyncTarget, INDEX_EXT, LOG_EXT,
    TIME_INDEX_EXT,
};

/// What the manager knows about a partition from its last run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RecoveryHint {
    /// The previous run ended with a clean shutdown.
    pub clean_shutdown: bool,
    /// From the recovery-point checkpoint: offsets below were fsynced.
    pub recovery_point: Option<i64>,
}

/// The loaded segments (never empty, sorted by base offset) and the bytes
/// recovery cut off.
#[derive(Debug)]
pub(crate) struct Recovered {
    pub segments: Vec<LogSegment>,
    pub truncated_bytes: u64,
}

struct Recovery<'a> {
    dir: &'a Path,
    topic: &'a str,
    partition: i32,
    index_interval_bytes: u32,
    segments: Vec<LogSegment>,
    to_sync: Vec<SyncTarget>,
    truncated_bytes: u64,
    dir_changed: bool,
}

/// Loads the partition in `dir`, creating it with an empty segment at
/// offset 0 if it has none.
pub(crate) fn recover_partition(
    dir: &Path,
    (topic, partition): (&str, i32),
    config: &LogConfig,
    hint: RecoveryHint,
) -> Result<Recovered> {
    fs::create_dir_all(dir).map_err(Error::io(dir))?;
    let now = wall_clock_ms();
    crate::cleaner::swap::recover(dir)?;
    let bases = list_segments(dir)?;
    if bases.is_empty() {
        let segment = LogSegment::create(dir, 0, now)?;
        sync_dir(dir)?;
        return Ok(Recovered {
            segments: vec![segment],
            truncated_bytes: 0,
        });
    }
    let segments = bases
        .iter()
        .map(|&b| LogSegment::open(dir, b, now))
        .collect::<Result<Vec<_>>>()?;
    let last = segments.len() - 1;
    let first_to_scan = match hint {
        RecoveryHint {
            clean_shutdown: true,
            recovery_point: Some(_),
        } => last,
        RecoveryHint {
            recovery_point: Some(rp),
            ..
        } => segments
            .partition_point(|s| s.base_offset() <= rp)
            .saturating_sub(1),
        RecoveryHint {
            recovery_point: None,
            ..
        } => 0,
    };
    let mut r = Recovery {
        dir,
        topic,
        partition,
        index_interval_bytes: config.index_interval_bytes,
        segments,
        to_sync: Vec::new(),
        truncated_bytes: 0,
        dir_changed: false,
    };
    r.load_trusted(first_to_scan)?;
    r.recover_from(first_to_scan, hint.clean_shutdown)?;
    for target in &r.to_sync {
        target.sync()?;
    }
    if r.dir_changed || !r.to_sync.is_empty() {
        sync_dir(dir)?;
    }
    let end = r.segments.last().map_or(0, LogSegment::next_offset);
    if let Some(rp) = hint.recovery_point.filter(|&rp| rp > end) {
        warn!(
            topic,
            partition,
            recovery_point = rp,
            log_end_offset = end,
            "log ends before its recovery point"
        );
    }
    Ok(Recovered {
        segments: r.segments,
        truncated_bytes: r.truncated_bytes,
    })
}

impl Recovery<'_> {
    /// Segments before `until` were synced before the checkpoint: keep their
    /// index files when valid, else rebuild them (which may still truncate).
    fn load_trusted(&mut self, until: usize) -> Result<()> {
        let mut i = 0;
        while i < until.min(self.segments.len().saturating_sub(1)) {
            let next_base = self.segments[i + 1].base_offset();
            let segment = &mut self.segments[i];
            let size = segment.size();
            let max_relative = u64::try_from(next_base - segment.base_offset() - 1).unwrap_or(0);
            if segment.load_index_files(max_relative)? {
                segment.set_loaded_extent(size, next_base);
            } else if !self.rebuild(i)? || self.segments[i].next_offset() > next_base {
                self.drop_after(i, "offsets do not continue into the next segment")?;
                return Ok(());
            } else {
                self.close_gap(i, next_base);
            }
            i += 1;
        }
        Ok(())
    }

    /// Rescans segments `from..` (after a clean shutdown only the last
    /// segment's tail, when its index is valid).
    fn recover_from(&mut self, from: usize, clean_shutdown: bool) -> Result<()> {
        let mut i = from;
        while i < self.segments.len() {
            let last = i + 1 == self.segments.len();
            if clean_shutdown && last && self.tail_is_valid(i)? {
                return Ok(());
            }
            if i > 0 {
                let base = self.segments[i].base_offset();
                if self.segments[i - 1].next_offset() > base {
                    let reason = format!(
                        "segment {base} starts before the previous one ends ({})",
                        self.segments[i - 1].next_offset()
                    );
                    self.drop_after(i - 1, &reason)?;
                    return Ok(());
                }
                self.close_gap(i - 1, base);
            }
            if !self.rebuild(i)? {
                self.drop_after(i, "an earlier segment was truncated")?;
                return Ok(());
            }
            i += 1;
        }
        Ok(())
    }

    /// Rebuilds segment `i`'s indexes from a full CRC-checked scan and cuts
    /// the file at the first invalid batch. Returns false if it cut.
    fn rebuild(&mut self, i: usize) -> Result<bool> {
        let segment = &mut self.segments[i];
        let (file, path) = (
            Arc::clone(segment.log_file()),
            segment.log_path().to_path_buf(),
        );
        let file_size = file.metadata().map_err(Error::io(&path))?.len();
        let base = segment.base_offset();
        segment.reset();
        let interval = self.index_interval_bytes;
        let outcome = scan_batches(&file, &path, (0, file_size), base, base, |b| {
            segment.track_batch(b, interval)
        })?;
        if let Some(reason) = &outcome.stop_reason {
            let cut = file_size - outcome.valid_end;
            warn!(topic = self.topic, partition = self.partition, segment = %path.display(),
                position = outcome.valid_end, %reason, bytes_truncated = cut, "truncating invalid segment tail");
            segment.truncate_file(outcome.valid_end)?;
            self.truncated_bytes += cut;
        }
        segment.set_loaded_extent(outcome.valid_end, outcome.next_offset);
        self.to_sync.extend(segment.write_index_files()?);
        self.to_sync.push(segment.log_sync_target());
        Ok(outcome.stop_reason.is_none())
    }

    /// After a clean shutdown: the last segment's index is valid and the
    /// batches after its last entry reach exactly the end of the file.
    fn tail_is_valid(&mut self, i: usize) -> Result<bool> {
        let interval = self.index_interval_bytes;
        let segment = &mut self.segments[i];
        let size = segment.size();
        if !segment.load_index_files(u64::from(u32::MAX))? {
            return Ok(false);
        }
        let (start, expected) = segment.index_lookup(i64::MAX);
        let (file, path) = (
            Arc::clone(segment.log_file()),
            segment.log_path().to_path_buf(),
        );
        let base = segment.base_offset();
        let outcome = scan_batches(&file, &path, (start, size), base, expected, |b| {
            segment.track_batch(b, interval)
        })?;
        if let Some(reason) = outcome.stop_reason {
            info!(topic = self.topic, partition = self.partition, segment = %path.display(), %reason,
                "segment tail does not match its index after a clean shutdown; rescanning");
            return Ok(false);
        }
        segment.set_loaded_extent(size, outcome.next_offset);
        if start > 0 {
            let slice = SegmentSlice {
                file,
                path,
                start: 0,
                end: size,
            };
            segment.set_rolling_base_ms(first_batch_max_timestamp(&slice)?);
        }
        Ok(true)
    }

    /// Segment `i` ends where the next one starts, `next_base`: its last
    /// batch may end before (a gap a truncation into compacted offsets
    /// left), and the offsets in between are empty.
    fn close_gap(&mut self, i: usize, next_base: i64) {
        let segment = &mut self.segments[i];
        let size = segment.size();
        segment.set_loaded_extent(size, next_base);
    }

    /// Deletes every segment after `i`: their offsets can no longer follow.
    fn drop_after(&mut self, i: usize, reason: &str) -> Result<()> {
        for segment in self.segments.drain(i + 1..) {
            warn!(topic = self.topic, partition = self.partition, segment = %segment.log_path().display(),
                bytes = segment.size(), reason, "deleting segment after the truncation point");
            self.truncated_bytes += segment.size();
            LogSegment::delete_files(self.dir, segment.base_offset())?;
            self.dir_changed = true;
        }
        Ok(())
    }
}

/// Base offsets of the `.log` files in `dir`, sorted; removes index files
/// whose log is gone (left by an interrupted deletion).
fn list_segments(dir: &Path) -> Result<Vec<i64>> {
    let mut logs = Vec::new();
    let mut indexes = Vec::new();
    for (base, ext) in segment_files(dir)? {
        match ext.as_str() {
            LOG_EXT => logs.push(base),
            INDEX_EXT | TIME_INDEX_EXT => indexes.push((base, ext)),
            _ => {}
        }
    }
    logs.sort_unstable();
    for (base, ext) in indexes {
        if logs.binary_search(&base).is_err() {
            remove_if_exists(&segment_path(dir, base, &ext))?;
        }
    }
    Ok(logs)
}

/// `(base offset, extension)` of every `<20 digits>.<ext>` file in `dir`
/// (the extension is everything after the first dot: `log`, `log.swap`).
pub(crate) fn segment_files(dir: &Path) -> Result<Vec<(i64, String)>> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).map_err(Error::io(dir))? {
        let name = entry.map_err(Error::io(dir))?.file_name();
        let Some((stem, ext)) = name.to_str().and_then(|n| n.split_once('.')) else {
            continue;
        };
        if let Some(base) = parse_base_offset(stem) {
            files.push((base, ext.to_string()));
        }
    }
    Ok(files)
}

/// The offset a `<20 digits>.<ext>` file name starts with.
pub(crate) fn parse_base_offset(stem: &str) -> Option<i64> {
    if stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()) {
        stem.parse().ok()
    } else {
        None
    }
}
