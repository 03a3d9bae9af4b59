//! One log segment: the `<base offset>.log` file and its two indexes.
//!
//! Owns: the segment's files and naming, appending whole batches verbatim
//! (with base offsets assigned in place, or as a leader assigned them),
//! cutting it back to a batch boundary (truncation), maintaining the sparse
//! offset index and the time index in memory, and writing/loading the index
//! files.
//! Index files are written whole when the segment is sealed (rolled) or at
//! clean shutdown, never on the append path: the active segment's index is
//! always rebuilt by recovery after a crash, so writing it per append would
//! buy nothing.
//! Must not: lock, fsync (the flusher, and truncation, sync the
//! `SyncTarget`s it hands out), or decide when to roll or truncate.
//!
//! Thread-safety: `LogSegment` is plain data owned by its partition's mutex.
//! The `.log` file handle is shared (`Arc<File>`) so readers and the flusher
//! use it outside that mutex; positional I/O keeps them independent.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use chronik_protocol::record_batch::{set_base_offset, BatchHeader};
use tracing::{error, warn};

use crate::config::LogConfig;
use crate::error::{Error, Result};
use crate::index::{OffsetEntry, OffsetIndex, TimeEntry, TimeIndex};
use crate::read::{self, SegmentSlice};

pub(crate) const LOG_EXT: &str = "log";
pub(crate) const INDEX_EXT: &str = "index";
pub(crate) const TIME_INDEX_EXT: &str = "timeindex";

/// Largest segment file this layout can index (positions are u32; Kafka
/// keeps segment.bytes an int).
const MAX_SEGMENT_BYTES: u64 = i32::MAX as u64;

/// `<dir>/<20-digit base offset>.<ext>`, Kafka's naming.
pub(crate) fn segment_path(dir: &Path, base_offset: i64, ext: &str) -> PathBuf {
    dir.join(format!("{base_offset:020}.{ext}"))
}

/// Facts about one stored batch that the indexes need. `position` is the
/// batch's byte offset inside the segment file.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    pub position: u64,
    pub size: u64,
}

/// A file to fsync and the path to blame if that fails.
#[derive(Debug, Clone)]
pub(crate) struct SyncTarget {
    pub file: Arc<File>,
    pub path: PathBuf,
}

impl SyncTarget {
    pub(crate) fn sync(&self) -> Result<()> {
        self.file.sync_data().map_err(Error::io(&self.path))
    }
}

/// Milliseconds since the Unix epoch by the wall clock (Kafka's time base).
pub(crate) fn wall_clock_ms() -> i64 {
    epoch_ms(std::time::SystemTime::now())
}

fn epoch_ms(t: std::time::SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A file's modification time in ms since the Unix epoch.
pub(crate) fn file_modified_ms(file: &File, path: &Path) -> Result<i64> {
    file.metadata()
        .and_then(|m| m.modified())
        .map(epoch_ms)
        .map_err(Error::io(path))
}

/// Removes `path`; a file that is already gone is not an error.
pub(crate) fn remove_if_exists(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(Error::io(path)(e)),
        _ => Ok(()),
    }
}

/// Invariants: `size` is the length of the valid prefix of the `.log` file
/// (whole batches only); `next_offset` is one past the last batch's last
/// offset (`base_offset` when empty), or later when a truncation into a gap
/// compaction left (or the cleaner) ended the segment after its last batch;
/// batch offsets increase, with gaps where compaction removed records;
/// index entries point at batch starts inside `size`.
#[derive(Debug)]
pub(crate) struct LogSegment {
    base_offset: i64,
    log_path: PathBuf,
    log: Arc<File>,
    size: u64,
    next_offset: i64,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    bytes_since_last_index_entry: u64,
    /// Largest batch max timestamp seen, -1 when none had a timestamp.
    max_timestamp: i64,
    /// Last offset of the first batch that reached `max_timestamp`.
    offset_of_max_timestamp: i64,
    /// The first batch's max timestamp (-1 if it had none): segment.ms
    /// counts from it, as in Kafka.
    rolling_base_ms: Option<i64>,
    created_ms: i64,
}

impl LogSegment {
    /// Creates an empty segment; fails if its `.log` file already exists.
    pub(crate) fn create(dir: &Path, base_offset: i64, now_ms: i64) -> Result<Self> {
        let log_path = segment_path(dir, base_offset, LOG_EXT);
        let log = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&log_path)
            .map_err(Error::io(&log_path))?;
        for ext in [INDEX_EXT, TIME_INDEX_EXT] {
            remove_if_exists(&segment_path(dir, base_offset, ext))?;
        }
        Ok(Self::with_file(base_offset, log_path, log, 0, now_ms))
    }

    /// Creates the log cleaner's replacement for the segment at
    /// `base_offset`: an empty file at `cleaned_path` (replacing a leftover)
    /// that the cleaner's swap later renames to the segment's `.log` path,
    /// which is the path this segment reports from the start. Its index
    /// files are written only by that swap.
    pub(crate) fn create_cleaned(
        dir: &Path,
        base_offset: i64,
        cleaned_path: &Path,
        now_ms: i64,
    ) -> Result<Self> {
        let log = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(cleaned_path)
            .map_err(Error::io(cleaned_path))?;
        let log_path = segment_path(dir, base_offset, LOG_EXT);
        Ok(Self::with_file(base_offset, log_path, log, 0, now_ms))
    }

    /// Opens an existing segment with empty indexes; recovery then loads or
    /// rebuilds them and sets `next_offset`.
    pub(crate) fn open(dir: &Path, base_offset: i64, now_ms: i64) -> Result<Self> {
        let log_path = segment_path(dir, base_offset, LOG_EXT);
        let log = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&log_path)
            .map_err(Error::io(&log_path))?;
        let size = log.metadata().map_err(Error::io(&log_path))?.len();
        Ok(Self::with_file(base_offset, log_path, log, size, now_ms))
    }

    fn with_file(base_offset: i64, log_path: PathBuf, log: File, size: u64, now_ms: i64) -> Self {
        Self {
            base_offset,
            log_path,
            log: Arc::new(log),
            size,
            next_offset: base_offset,
            offset_index: OffsetIndex::default(),
            time_index: TimeIndex::default(),
            bytes_since_last_index_entry: 0,
            max_timestamp: -1,
            offset_of_max_timestamp: base_offset,
            rolling_base_ms: None,
            created_ms: now_ms,
        }
    }

    pub(crate) fn base_offset(&self) -> i64 {
        self.base_offset
    }
    pub(crate) fn size(&self) -> u64 {
        self.size
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.size == 0
    }
    pub(crate) fn next_offset(&self) -> i64 {
        self.next_offset
    }
    pub(crate) fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }
    pub(crate) fn offset_of_max_timestamp(&self) -> i64 {
        self.offset_of_max_timestamp
    }
    pub(crate) fn log_path(&self) -> &Path {
        &self.log_path
    }
    pub(crate) fn log_file(&self) -> &Arc<File> {
        &self.log
    }
    pub(crate) fn log_sync_target(&self) -> SyncTarget {
        SyncTarget {
            file: Arc::clone(&self.log),
            path: self.log_path.clone(),
        }
    }

    fn dir(&self) -> &Path {
        self.log_path.parent().unwrap_or(Path::new("."))
    }

    fn relative(&self, offset: i64) -> Option<u32> {
        u32::try_from(offset - self.base_offset).ok()
    }

    /// Whether an append must go to a new segment: never for an empty one;
    /// otherwise when its `bytes` would pass segment.bytes, its `offsets`
    /// would no longer fit relative offsets, or segment.ms has passed. Time
    /// is Kafka's: the incoming batches' `max_timestamp` minus the first
    /// batch's timestamp, or wall-clock age when batches carry no timestamps.
    pub(crate) fn should_roll(
        &self,
        bytes: u64,
        offsets: i64,
        max_timestamp: i64,
        now_ms: i64,
        config: &LogConfig,
    ) -> bool {
        if self.is_empty() {
            return false;
        }
        let limit = config.segment_bytes.min(MAX_SEGMENT_BYTES);
        let waited = match self.rolling_base_ms {
            Some(first) if first >= 0 => max_timestamp.saturating_sub(first),
            _ => now_ms.saturating_sub(self.created_ms),
        };
        self.size + bytes > limit
            || waited > config.segment_ms
            || self.next_offset + offsets - 1 - self.base_offset > i64::from(u32::MAX)
    }

    /// For the retention thread, which has no incoming timestamp: non-empty
    /// and created (or loaded) more than segment.ms ago by the wall clock.
    pub(crate) fn is_expired_for_roll(&self, now_ms: i64, config: &LogConfig) -> bool {
        !self.is_empty() && now_ms.saturating_sub(self.created_ms) > config.segment_ms
    }

    /// Assigns consecutive offsets from `next_offset` to the batches in
    /// `records` (in place), writes the bytes at the end of the file and
    /// indexes them. On a write error the file is cut back to its old size so
    /// no torn batch is left for later appends to follow.
    pub(crate) fn append(
        &mut self,
        records: &mut [u8],
        batches: &[BatchHeader],
        index_interval_bytes: u32,
    ) -> Result<()> {
        let mut next = self.next_offset;
        for h in batches {
            set_base_offset(records, h.position, next);
            next += h.offset_count();
        }
        let first = self.next_offset;
        self.write_batches(records, batches, index_interval_bytes, Some(first))
    }

    /// Writes batches whose offsets were already assigned (a leader's, or
    /// the cleaner's) verbatim at the end of the file and indexes them. Each
    /// batch's base offset is at or past `next_offset` and past its
    /// predecessor's last offset (the caller checked); gaps are allowed, as
    /// compaction leaves them. Same error handling as `append`.
    pub(crate) fn append_assigned(
        &mut self,
        records: &[u8],
        batches: &[BatchHeader],
        index_interval_bytes: u32,
    ) -> Result<()> {
        self.write_batches(records, batches, index_interval_bytes, None)
    }

    /// Writes `records` at the end of the file and tracks `batches`: their
    /// offsets run consecutively from `consecutive_from` when given, else
    /// they are the headers' own.
    fn write_batches(
        &mut self,
        records: &[u8],
        batches: &[BatchHeader],
        index_interval_bytes: u32,
        consecutive_from: Option<i64>,
    ) -> Result<()> {
        let start = self.size;
        if let Err(e) = self.log.write_all_at(records, start) {
            if let Err(t) = self.log.set_len(start) {
                error!(path = %self.log_path.display(), error = %t, "cannot cut a failed append off the segment");
            }
            return Err(Error::io(&self.log_path)(e));
        }
        let mut next = consecutive_from;
        for h in batches {
            let base_offset = next.unwrap_or(h.base_offset);
            let info = BatchInfo {
                base_offset,
                last_offset: base_offset + h.offset_count() - 1,
                max_timestamp: h.max_timestamp,
                position: start + h.position as u64,
                size: h.size as u64,
            };
            self.track_batch(&info, index_interval_bytes);
            next = next.map(|_| info.last_offset + 1);
        }
        self.size = start + records.len() as u64;
        Ok(())
    }

    /// Accounts for one batch already in the file at `info.position`
    /// (Kafka's LogSegment.append bookkeeping): timestamps first, then an
    /// index entry once more than `index_interval_bytes` were written since
    /// the last one.
    pub(crate) fn track_batch(&mut self, info: &BatchInfo, index_interval_bytes: u32) {
        if self.rolling_base_ms.is_none() {
            self.rolling_base_ms = Some(info.max_timestamp);
        }
        if info.max_timestamp > self.max_timestamp {
            self.max_timestamp = info.max_timestamp;
            self.offset_of_max_timestamp = info.last_offset;
        }
        if self.bytes_since_last_index_entry > u64::from(index_interval_bytes) {
            if let (Some(relative_offset), Ok(position)) = (
                self.relative(info.base_offset),
                u32::try_from(info.position),
            ) {
                self.offset_index.push(OffsetEntry {
                    relative_offset,
                    position,
                });
                self.append_time_entry();
            }
            self.bytes_since_last_index_entry = 0;
        }
        self.bytes_since_last_index_entry += info.size;
        self.next_offset = info.last_offset + 1;
        self.size = self.size.max(info.position + info.size);
    }

    /// Records the max timestamp so far in the time index if it grew.
    fn append_time_entry(&mut self) {
        if self.max_timestamp < 0 {
            return;
        }
        if let Some(relative_offset) = self.relative(self.offset_of_max_timestamp) {
            self.time_index.push(TimeEntry {
                timestamp: self.max_timestamp,
                relative_offset,
            });
        }
    }

    /// Final bookkeeping when the segment stops being active (or at clean
    /// shutdown): the time index gets the segment's max timestamp so it can
    /// be read back without scanning.
    pub(crate) fn seal(&mut self) {
        self.append_time_entry();
    }

    /// Writes both index files whole and returns their handles for fsync.
    pub(crate) fn write_index_files(&self) -> Result<Vec<SyncTarget>> {
        write_files(self.index_file_contents())
    }

    /// Both index files' paths and contents, for `write_files` (now, or
    /// later: the cleaner's swap writes them once the segment is in place).
    pub(crate) fn index_file_contents(&self) -> Vec<(PathBuf, Vec<u8>)> {
        vec![
            (
                segment_path(self.dir(), self.base_offset, INDEX_EXT),
                self.offset_index.encode(),
            ),
            (
                segment_path(self.dir(), self.base_offset, TIME_INDEX_EXT),
                self.time_index.encode(),
            ),
        ]
    }

    /// The `.log` file's modification time in ms since the epoch.
    pub(crate) fn modified_ms(&self) -> Result<i64> {
        file_modified_ms(&self.log, &self.log_path)
    }

    /// Sets the `.log` file's modification time (the cleaner dates a
    /// cleaned segment by its sources).
    pub(crate) fn set_modified_ms(&self, ms: i64) -> Result<()> {
        let at = UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0));
        self.log.set_modified(at).map_err(Error::io(&self.log_path))
    }

    /// Loads both index files if they exist and are consistent with a
    /// segment whose offsets end at most `max_relative_offset` past its base.
    /// Returns false (indexes left empty) when they cannot be trusted.
    pub(crate) fn load_index_files(&mut self, max_relative_offset: u64) -> Result<bool> {
        let index_path = segment_path(self.dir(), self.base_offset, INDEX_EXT);
        let time_path = segment_path(self.dir(), self.base_offset, TIME_INDEX_EXT);
        let (Some(index_bytes), Some(time_bytes)) =
            (read_optional(&index_path)?, read_optional(&time_path)?)
        else {
            return Ok(false);
        };
        let decoded = OffsetIndex::decode(&index_bytes, max_relative_offset, self.size)
            .and_then(|o| TimeIndex::decode(&time_bytes, max_relative_offset).map(|t| (o, t)));
        match decoded {
            Ok((offset_index, time_index)) => {
                if let Some(last) = time_index.last() {
                    self.max_timestamp = last.timestamp;
                    self.offset_of_max_timestamp =
                        self.base_offset + i64::from(last.relative_offset);
                }
                self.offset_index = offset_index;
                self.time_index = time_index;
                Ok(true)
            }
            Err(reason) => {
                warn!(path = %index_path.display(), %reason, "index files rejected; rebuilding from the log");
                Ok(false)
            }
        }
    }

    /// Forgets all batches: empty indexes, `next_offset` back to the base.
    /// The file itself is untouched; recovery re-tracks what it scans.
    pub(crate) fn reset(&mut self) {
        self.offset_index = OffsetIndex::default();
        self.time_index = TimeIndex::default();
        self.bytes_since_last_index_entry = 0;
        self.max_timestamp = -1;
        self.offset_of_max_timestamp = self.base_offset;
        self.next_offset = self.base_offset;
        self.rolling_base_ms = None;
        self.size = 0;
    }

    /// Sets the end offset of a segment whose batches were not walked (a
    /// trusted segment followed by another one), and its file size.
    pub(crate) fn set_loaded_extent(&mut self, size: u64, next_offset: i64) {
        self.size = size;
        self.next_offset = next_offset;
    }

    pub(crate) fn set_rolling_base_ms(&mut self, ms: i64) {
        self.rolling_base_ms = Some(ms);
    }

    /// The indexed batch start at or before `offset`, with that batch's base
    /// offset; `(0, base_offset)` when no entry precedes it.
    pub(crate) fn index_lookup(&self, offset: i64) -> (u64, i64) {
        let relative =
            u32::try_from(offset.saturating_sub(self.base_offset).max(0)).unwrap_or(u32::MAX);
        self.offset_index
            .lookup(relative)
            .map_or((0, self.base_offset), |e| {
                (
                    u64::from(e.position),
                    self.base_offset + i64::from(e.relative_offset),
                )
            })
    }

    /// Where a scan for the first batch with max timestamp >= `timestamp`
    /// may start: batches before the time-index entry's batch are older.
    pub(crate) fn timestamp_scan_start(&self, timestamp: i64) -> u64 {
        self.time_index.lookup(timestamp).map_or(0, |e| {
            self.index_lookup(self.base_offset + i64::from(e.relative_offset))
                .0
        })
    }

    /// Kafka's `largestTimestamp`: the max batch timestamp, or the file's
    /// modification time when no batch carried a timestamp.
    pub(crate) fn largest_timestamp_ms(&self) -> Result<i64> {
        if self.max_timestamp >= 0 {
            return Ok(self.max_timestamp);
        }
        self.modified_ms()
    }

    /// The batch holding `offset` (the first whose last offset is >= it), as
    /// `(its position, its base offset)`; `(size, next_offset)` when the
    /// segment ends before `offset`.
    pub(crate) fn locate(&self, offset: i64) -> Result<(u64, i64)> {
        let slice = self.slice(self.index_lookup(offset).0, self.size);
        Ok(read::locate(&slice, offset)?.unwrap_or((self.size, self.next_offset)))
    }

    /// Bytes `start..end` of the `.log` file, for header walks.
    pub(crate) fn slice(&self, start: u64, end: u64) -> SegmentSlice {
        SegmentSlice {
            file: Arc::clone(&self.log),
            path: self.log_path.clone(),
            start,
            end,
        }
    }

    /// Positions where a header walk may start, newest first: the indexed
    /// batch starts, then 0.
    pub(crate) fn walk_starts_newest_first(&self) -> impl Iterator<Item = u64> + '_ {
        self.offset_index
            .positions()
            .rev()
            .filter(|&p| p > 0)
            .chain(std::iter::once(0))
    }

    /// Removes every batch from the one at byte `position` on and ends the
    /// segment at `next_offset`: that batch's base offset, or an offset in
    /// the gap before it (`locate` found both). The file is cut
    /// (not fsynced) and the indexes and timestamps are trimmed to what is
    /// left, re-reading only the headers after the last index entry kept.
    /// If those cannot be read nothing changes; if the cut fails the file may
    /// be cut while the segment still describes the old batches.
    pub(crate) fn truncate_to(
        &mut self,
        position: u64,
        next_offset: i64,
        index_interval_bytes: u32,
    ) -> Result<()> {
        let kept = {
            let mut index = self.offset_index.clone();
            index.truncate_from_position(position);
            index.last()
        };
        let (restart, restart_offset) = kept.map_or((0, self.base_offset), |e| {
            (
                u64::from(e.position),
                self.base_offset + i64::from(e.relative_offset),
            )
        });
        let mut tail = Vec::new();
        let mut at = restart;
        read::walk_headers(&self.slice(restart, position), |h| {
            tail.push(BatchInfo {
                base_offset: h.base_offset,
                last_offset: h.last_offset,
                max_timestamp: h.max_timestamp,
                position: at,
                size: h.size,
            });
            at += h.size;
        })?;
        let walked_to = tail.last().map_or(restart_offset, |b| b.last_offset + 1);
        let cut_base = match position < self.size {
            true => read::first_batch(&self.slice(position, self.size))?.base_offset,
            false => self.next_offset,
        };
        // Compaction may leave a gap on either side of `next_offset`.
        if walked_to > next_offset || cut_base < next_offset {
            return Err(Error::Corrupt {
                path: self.log_path.clone(),
                position,
                reason: format!(
                    "offset {next_offset} is not between the batches before byte {position} \
                     (ending at {walked_to}) and the one there (at {cut_base})"
                ),
            });
        }
        let rolling_base_ms = match self.rolling_base_ms {
            _ if position == 0 => None,
            Some(ms) => Some(ms),
            None if restart == 0 => None, // re-tracked below
            None => Some(read::first_batch_max_timestamp(&self.slice(0, position))?),
        };
        self.truncate_file(position)?;
        self.offset_index.truncate_from_position(position);
        let relative_end = u64::try_from(next_offset - self.base_offset).unwrap_or(0);
        self.time_index.truncate_from_offset(relative_end);
        (self.max_timestamp, self.offset_of_max_timestamp) =
            self.time_index.last().map_or((-1, self.base_offset), |e| {
                (e.timestamp, self.base_offset + i64::from(e.relative_offset))
            });
        self.rolling_base_ms = rolling_base_ms;
        self.bytes_since_last_index_entry = 0;
        self.next_offset = restart_offset;
        self.size = restart;
        for info in &tail {
            self.track_batch(info, index_interval_bytes);
        }
        self.size = position;
        self.next_offset = next_offset;
        Ok(())
    }

    /// Deletes the segment's index files (stale once it was truncated).
    pub(crate) fn remove_index_files(&self) -> Result<()> {
        for ext in [INDEX_EXT, TIME_INDEX_EXT] {
            remove_if_exists(&segment_path(self.dir(), self.base_offset, ext))?;
        }
        Ok(())
    }

    /// Cuts the file at `position` (the end of the last valid batch).
    pub(crate) fn truncate_file(&mut self, position: u64) -> Result<()> {
        self.log
            .set_len(position)
            .map_err(Error::io(&self.log_path))?;
        self.size = position;
        Ok(())
    }

    /// Deletes the segment's three files. Open handles (readers, the
    /// flusher) keep working on the unlinked inode.
    pub(crate) fn delete_files(dir: &Path, base_offset: i64) -> Result<()> {
        for ext in [LOG_EXT, INDEX_EXT, TIME_INDEX_EXT] {
            remove_if_exists(&segment_path(dir, base_offset, ext))?;
        }
        Ok(())
    }
}

/// Writes each `(path, contents)` whole (not fsynced) and returns the
/// handles for fsync: how index files are written.
pub(crate) fn write_files(contents: Vec<(PathBuf, Vec<u8>)>) -> Result<Vec<SyncTarget>> {
    let mut targets = Vec::with_capacity(contents.len());
    for (path, bytes) in contents {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(Error::io(&path))?;
        file.write_all_at(&bytes, 0).map_err(Error::io(&path))?;
        targets.push(SyncTarget {
            file: Arc::new(file),
            path,
        });
    }
    Ok(targets)
}

fn read_optional(path: &Path) -> Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(path)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chronik_protocol::record_batch::{build_test_batch, parse_batches};

    #[test]
    fn append_indexes_sparsely_and_index_files_round_trip() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut segment = LogSegment::create(dir.path(), 100, 0).expect("create");
        for i in 0..10 {
            // 161-byte batches of 2 records: once more than 300 bytes passed
            // since the last entry, i.e. at batches 2, 4, 6 and 8.
            let mut b = build_test_batch(2, 1_000 + i, &[0u8; 100]);
            let headers = parse_batches(&b).expect("valid");
            segment.append(&mut b, &headers, 300).expect("append");
        }
        assert_eq!((segment.size(), segment.next_offset()), (1_610, 120));
        assert_eq!(segment.index_lookup(99), (0, 100));
        assert_eq!(segment.index_lookup(107), (322, 104));
        assert_eq!(segment.index_lookup(108), (644, 108));
        assert_eq!(segment.index_lookup(119), (1_288, 116));
        segment.seal();
        segment.write_index_files().expect("write indexes");

        let mut loaded = LogSegment::open(dir.path(), 100, 0).expect("open");
        assert!(loaded.load_index_files(19).expect("load"));
        assert_eq!(loaded.index_lookup(107), (322, 104));
        assert_eq!(
            (loaded.max_timestamp(), loaded.offset_of_max_timestamp()),
            (1_009, 119)
        );
        assert!(
            !loaded.load_index_files(10).expect("load"),
            "entries past the segment end"
        );
    }

    /// A segment of `timestamps.len()` 2-record batches of 161 bytes.
    fn segment_with(dir: &Path, timestamps: &[i64]) -> LogSegment {
        let mut segment = LogSegment::create(dir, 100, 0).expect("create");
        for &ts in timestamps {
            let mut b = build_test_batch(2, ts, &[0u8; 100]);
            let headers = parse_batches(&b).expect("valid");
            segment.append(&mut b, &headers, 300).expect("append");
        }
        segment
    }

    #[test]
    fn truncation_leaves_the_segment_the_remaining_batches_would_build() {
        let timestamps = [
            1_000, 900, 1_500, 1_200, 1_600, 1_100, 2_000, 1_900, 1_950, 2_100,
        ];
        for kept in 0..=timestamps.len() {
            let (cut_dir, want_dir) = (
                tempfile::tempdir().expect("dir"),
                tempfile::tempdir().expect("dir"),
            );
            let mut cut = segment_with(cut_dir.path(), &timestamps);
            let next_offset = 100 + 2 * kept as i64;
            // Any offset inside the batch finds its start.
            let (position, base) = cut.locate(next_offset + 1).expect("locate");
            if kept < timestamps.len() {
                assert_eq!((position, base), (161 * kept as u64, next_offset));
            } else {
                assert_eq!((position, base), (cut.size(), cut.next_offset()));
            }
            cut.truncate_to(position, base, 300).expect("truncate");
            let mut want = segment_with(want_dir.path(), &timestamps[..kept]);
            let file_len = cut.log_file().metadata().expect("stat").len();
            assert_eq!(
                (cut.size(), file_len, cut.next_offset()),
                (want.size(), want.size(), want.next_offset()),
                "{kept} batches kept"
            );
            assert_eq!(
                (
                    cut.max_timestamp(),
                    cut.offset_of_max_timestamp(),
                    cut.rolling_base_ms
                ),
                (
                    want.max_timestamp(),
                    want.offset_of_max_timestamp(),
                    want.rolling_base_ms
                ),
                "{kept} batches kept"
            );
            for offset in 99..125 {
                assert_eq!(
                    cut.index_lookup(offset),
                    want.index_lookup(offset),
                    "offset {offset}"
                );
            }
            cut.seal();
            want.seal();
            assert_eq!(
                cut.offset_index.encode(),
                want.offset_index.encode(),
                "{kept} batches kept"
            );
            assert_eq!(
                cut.time_index.encode(),
                want.time_index.encode(),
                "{kept} batches kept"
            );
            // Appending after the cut continues the offsets.
            let mut b = build_test_batch(3, 5_000, &[1u8; 10]);
            let headers = parse_batches(&b).expect("valid");
            cut.append(&mut b, &headers, 300)
                .expect("append after the cut");
            assert_eq!(cut.next_offset(), next_offset + 3);
        }
    }

    #[test]
    fn truncation_fails_cleanly_off_a_batch_boundary() {
        let dir = tempfile::tempdir().expect("dir");
        let mut segment = segment_with(dir.path(), &[1, 2, 3]);
        let err = segment
            .truncate_to(161, 104, 300)
            .expect_err("offset does not match");
        assert!(matches!(err, Error::Corrupt { .. }), "{err}");
        assert!(
            segment.truncate_to(100, 102, 300).is_err(),
            "inside a batch"
        );
        assert_eq!((segment.size(), segment.next_offset()), (483, 106));
        assert_eq!(segment.log_file().metadata().expect("stat").len(), 483);
    }
}
