//! The leader-epoch cache: which leader epoch wrote which offsets.
//!
//! Owns: Kafka's `LeaderEpochFileCache` held in memory — the ordered
//! `(epoch, start_offset)` entries, the OffsetForLeaderEpoch lookup, the two
//! truncations, and the text of the `leader-epoch-checkpoint` file. Must not:
//! read or write files — the owner writes `encode_checkpoint` to disk
//! (atomically, fsynced) whenever a mutating method returns `true`, and feeds
//! the file's text to `decode_checkpoint` at open.
//!
//! Invariants (hold after every public method):
//! - entries are sorted, and both `epoch` and `start_offset` are strictly
//!   increasing from one entry to the next;
//! - every epoch and start offset is >= 0.
//!
//! `assign` keeps them the way Kafka does: a new entry removes every entry
//! whose epoch or start offset is not smaller than its own.

use std::fmt::Write as _;

use crate::error::{Error, Result};

/// The file Kafka keeps beside each partition's segments.
pub const CHECKPOINT_FILE_NAME: &str = "leader-epoch-checkpoint";
const CHECKPOINT_VERSION: &str = "0";

/// One leader epoch and the first offset written in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

/// An OffsetForLeaderEpoch answer: `leader_epoch` is the largest known
/// epoch <= the requested one, `end_offset` the first offset *not* written
/// in it (exclusive). Kafka's UNDEFINED_EPOCH / UNDEFINED_EPOCH_OFFSET
/// answer is `None` wherever this type appears in an `Option`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEndOffset {
    pub leader_epoch: i32,
    pub end_offset: i64,
}

/// Kafka's leader-epoch cache. Not thread-safe: the owner keeps it beside
/// the partition log under the same lock.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaderEpochCache {
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// Replays `entries` through `assign`, as Kafka does when it loads a
    /// checkpoint (so a non-monotonic file is repaired, not trusted).
    pub fn from_entries(entries: impl IntoIterator<Item = EpochEntry>) -> Result<Self> {
        let mut cache = Self::new();
        for e in entries {
            cache.assign(e.epoch, e.start_offset)?;
        }
        Ok(cache)
    }

    /// Parses checkpoint text (see `decode_checkpoint`) into a cache.
    pub fn from_checkpoint(text: &str) -> Result<Self> {
        Self::from_entries(decode_checkpoint(text)?)
    }

    /// The checkpoint text for the current entries.
    pub fn to_checkpoint(&self) -> String {
        encode_checkpoint(&self.entries)
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn latest_entry(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    /// Records that `epoch` starts at `start_offset`. Called by the leader
    /// when it takes office (start = its log end offset) and by every
    /// replica for each appended batch (its partition leader epoch and base
    /// offset). Returns whether the cache changed (the owner then rewrites
    /// the checkpoint).
    ///
    /// As in Kafka: nothing changes if the latest entry has this epoch and
    /// starts at or before `start_offset`; otherwise every entry whose epoch
    /// or start offset is >= the new one's is removed first.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> Result<bool> {
        if epoch < 0 || start_offset < 0 {
            return Err(Error::InvalidEpochEntry {
                epoch,
                start_offset,
            });
        }
        if let Some(last) = self.latest_entry() {
            if last.epoch == epoch && last.start_offset <= start_offset {
                return Ok(false);
            }
        }
        while let Some(last) = self.entries.last() {
            if last.epoch >= epoch || last.start_offset >= start_offset {
                self.entries.pop();
            } else {
                break;
            }
        }
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        Ok(true)
    }

    /// Kafka's `endOffsetFor`, the answer to OffsetForLeaderEpoch.
    ///
    /// - undefined (`None`) if `requested_epoch` is negative, the cache is
    ///   empty, or the requested epoch is newer than every entry;
    /// - the latest epoch → `(latest, log_end_offset)`;
    /// - otherwise the largest epoch <= the requested one, ending where the
    ///   next higher entry starts;
    /// - an epoch older than the first entry → `(requested, first start)`:
    ///   the data before it is gone, and the follower must not keep more
    ///   than the leader's oldest data (Kafka since KIP-279; before that,
    ///   Kafka 1.x answered UNDEFINED here).
    pub fn end_offset_for(
        &self,
        requested_epoch: i32,
        log_end_offset: i64,
    ) -> Option<EpochEndOffset> {
        if requested_epoch < 0 {
            return None;
        }
        let latest = self.latest_entry()?;
        if latest.epoch == requested_epoch {
            return Some(EpochEndOffset {
                leader_epoch: requested_epoch,
                end_offset: log_end_offset,
            });
        }
        // First entry with a larger epoch; none means the request is newer
        // than anything we know.
        let higher = self.entries.partition_point(|e| e.epoch <= requested_epoch);
        let next = self.entries.get(higher)?;
        let leader_epoch = match higher.checked_sub(1) {
            Some(floor) => self.entries[floor].epoch,
            None => requested_epoch,
        };
        Some(EpochEndOffset {
            leader_epoch,
            end_offset: next.start_offset,
        })
    }

    /// The epoch that wrote `offset` (Kafka's `epochForOffset`): the epoch
    /// of the last entry starting at or before it.
    pub fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        let idx = self.entries.partition_point(|e| e.start_offset <= offset);
        idx.checked_sub(1).map(|i| self.entries[i].epoch)
    }

    /// The log was truncated so that `end_offset` is its new log end
    /// offset: entries starting at or after it are removed. Returns whether
    /// the cache changed.
    pub fn truncate_from_end(&mut self, end_offset: i64) -> bool {
        let before = self.entries.len();
        if end_offset >= 0 {
            while self
                .entries
                .last()
                .is_some_and(|e| e.start_offset >= end_offset)
            {
                self.entries.pop();
            }
        }
        self.entries.len() != before
    }

    /// The log start moved to `start_offset` (retention, DeleteRecords):
    /// entries starting at or before it are removed, and the last of them
    /// is kept with its start moved up to `start_offset`, so the epoch that
    /// wrote the new first offset is still known. Returns whether the cache
    /// changed.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> bool {
        let removed = self
            .entries
            .partition_point(|e| e.start_offset <= start_offset);
        let Some(last_removed) = removed.checked_sub(1) else {
            return false;
        };
        let epoch = self.entries[last_removed].epoch;
        let unchanged = removed == 1 && self.entries[0].start_offset == start_offset;
        self.entries.drain(..removed);
        self.entries.insert(
            0,
            EpochEntry {
                epoch,
                start_offset,
            },
        );
        !unchanged
    }
}

/// Kafka's leader-epoch-checkpoint text: a version line `0`, an entry-count
/// line, then one `epoch start_offset` line per entry, each line ending in
/// `\n`.
pub fn encode_checkpoint(entries: &[EpochEntry]) -> String {
    let mut text = format!("{CHECKPOINT_VERSION}\n{}\n", entries.len());
    for e in entries {
        // Writing into a String cannot fail.
        let _ = writeln!(text, "{} {}", e.epoch, e.start_offset);
    }
    text
}

/// Parses checkpoint text as Kafka's `CheckpointFile` reader does: the
/// version must be 0, every entry line must hold exactly two integers
/// separated by whitespace, and the number of lines must match the count.
/// It does not check ordering; `LeaderEpochCache::from_entries` repairs that.
pub fn decode_checkpoint(text: &str) -> Result<Vec<EpochEntry>> {
    let malformed = |line: usize, reason: String| Error::MalformedCheckpoint { line, reason };
    let mut lines = text.lines();
    match lines.next() {
        Some(v) if v.trim() == CHECKPOINT_VERSION => {}
        other => {
            return Err(malformed(
                1,
                format!("expected version {CHECKPOINT_VERSION}, found {other:?}"),
            ))
        }
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| malformed(2, "expected an entry count".into()))?;
    let mut entries = Vec::with_capacity(count.min(1024));
    for (i, line) in lines.enumerate() {
        let line_no = i + 3;
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [epoch, offset] = fields[..] else {
            return Err(malformed(
                line_no,
                format!("expected `epoch start_offset`, found {line:?}"),
            ));
        };
        let (Ok(epoch), Ok(start_offset)) = (epoch.parse::<i32>(), offset.parse::<i64>()) else {
            return Err(malformed(
                line_no,
                format!("epoch and offset must be integers: {line:?}"),
            ));
        };
        entries.push(EpochEntry {
            epoch,
            start_offset,
        });
    }
    if entries.len() != count {
        return Err(malformed(
            2,
            format!("count says {count} entries, file has {}", entries.len()),
        ));
    }
    Ok(entries)
}

#[cfg(test)]
#[rustfmt::skip]
mod tests {
    use super::*;

    fn cache(entries: &[(i32, i64)]) -> LeaderEpochCache {
        LeaderEpochCache::from_entries(entries.iter().map(|&(epoch, start_offset)| EpochEntry {
            epoch,
            start_offset,
        }))
        .expect("valid entries")
    }

    fn pairs(c: &LeaderEpochCache) -> Vec<(i32, i64)> {
        c.entries().iter().map(|e| (e.epoch, e.start_offset)).collect()
    }

    /// (epoch, start offset) pairs, as table cells.
    type Pairs = &'static [(i32, i64)];

    fn answer(leader_epoch: i32, end_offset: i64) -> Option<EpochEndOffset> {
        Some(EpochEndOffset {
            leader_epoch,
            end_offset,
        })
    }

    #[test]
    fn end_offset_for_follows_kafka() {
        let c = cache(&[(5, 11), (6, 12), (7, 13)]);
        // (requested epoch, log end offset, answer, why)
        let table = [
            (7, 20, answer(7, 20), "the latest epoch ends at the log end offset"),
            (6, 20, answer(6, 13), "an older epoch ends where the next begins"),
            (5, 20, answer(5, 12), "the first epoch"),
            (4, 20, answer(4, 11), "older than the first entry: requested epoch, first start (KIP-279)"),
            (8, 20, None, "newer than anything known: UNDEFINED"),
            (-1, 20, None, "UNDEFINED_EPOCH requested: UNDEFINED"),
        ];
        for (requested, leo, expected, why) in table {
            assert_eq!(c.end_offset_for(requested, leo), expected, "{why}");
        }
        // Epoch between entries: the largest smaller epoch, ending where the
        // next higher one starts.
        let gaps = cache(&[(1, 0), (3, 10), (6, 25)]);
        assert_eq!(gaps.end_offset_for(2, 40), answer(1, 10));
        assert_eq!(gaps.end_offset_for(4, 40), answer(3, 25));
        assert_eq!(gaps.end_offset_for(5, 40), answer(3, 25));
        assert_eq!(LeaderEpochCache::new().end_offset_for(0, 0), None, "empty cache: UNDEFINED");
    }

    #[test]
    fn assign_keeps_epochs_and_offsets_strictly_increasing() {
        // (entries before, assign, changed, entries after, why)
        type Row = (Pairs, (i32, i64), bool, Pairs, &'static str);
        let table: [Row; 7] = [
            (&[], (0, 0), true, &[(0, 0)], "first entry"),
            (&[(0, 0)], (0, 5), false, &[(0, 0)], "same epoch, later offset: no change"),
            (&[(0, 0)], (1, 5), true, &[(0, 0), (1, 5)], "a new epoch"),
            (&[(0, 0), (1, 5)], (1, 3), true, &[(0, 0), (1, 3)], "same epoch starting earlier replaces it"),
            (&[(0, 0), (1, 5)], (2, 5), true, &[(0, 0), (2, 5)], "an epoch that wrote nothing is replaced"),
            (&[(0, 0), (3, 5)], (2, 8), true, &[(0, 0), (2, 8)], "a lower epoch removes the higher ones (Kafka warns)"),
            (&[(0, 0), (1, 5), (2, 9)], (3, 4), true, &[(0, 0), (3, 4)], "a lower offset removes later entries"),
        ];
        for (before, (epoch, offset), changed, after, why) in table {
            let mut c = cache(before);
            assert_eq!(c.assign(epoch, offset), Ok(changed), "{why}");
            assert_eq!(pairs(&c), after, "{why}");
        }
        let mut c = LeaderEpochCache::new();
        assert_eq!(
            c.assign(-1, 0),
            Err(Error::InvalidEpochEntry {
                epoch: -1,
                start_offset: 0
            })
        );
        assert!(c.assign(0, -1).is_err());
    }

    #[test]
    fn truncations() {
        let base: Pairs = &[(1, 0), (2, 10), (4, 20)];
        // (truncate_from_end offset, changed, after)
        let from_end: [(i64, bool, Pairs); 5] = [
            (25, false, base),
            (20, true, &[(1, 0), (2, 10)]),
            (15, true, &[(1, 0), (2, 10)]),
            (0, true, &[]),
            (-1, false, base),
        ];
        for (offset, changed, after) in from_end {
            let mut c = cache(base);
            assert_eq!(c.truncate_from_end(offset), changed, "truncate_from_end({offset})");
            assert_eq!(pairs(&c), after, "truncate_from_end({offset})");
        }
        // (truncate_from_start offset, changed, after)
        let from_start: [(i64, bool, Pairs); 5] = [
            (0, false, base),
            (5, true, &[(1, 5), (2, 10), (4, 20)]),
            (10, true, &[(2, 10), (4, 20)]),
            (15, true, &[(2, 15), (4, 20)]),
            (30, true, &[(4, 30)]),
        ];
        for (offset, changed, after) in from_start {
            let mut c = cache(base);
            assert_eq!(c.truncate_from_start(offset), changed, "truncate_from_start({offset})");
            assert_eq!(pairs(&c), after, "truncate_from_start({offset})");
        }
    }

    #[test]
    fn epoch_for_offset() {
        let c = cache(&[(1, 5), (2, 10), (4, 20)]);
        let table = [(0, None), (5, Some(1)), (9, Some(1)), (10, Some(2)), (19, Some(2)), (20, Some(4)), (99, Some(4))];
        for (offset, epoch) in table {
            assert_eq!(c.epoch_for_offset(offset), epoch, "offset {offset}");
        }
    }

    #[test]
    fn checkpoint_round_trip_and_format() {
        let c = cache(&[(0, 0), (1, 150), (3, 4000)]);
        let text = c.to_checkpoint();
        assert_eq!(text, "0\n3\n0 0\n1 150\n3 4000\n", "Kafka's byte-for-byte layout");
        assert_eq!(LeaderEpochCache::from_checkpoint(&text), Ok(c));
        assert_eq!(encode_checkpoint(&[]), "0\n0\n");
        assert_eq!(LeaderEpochCache::from_checkpoint("0\n0\n"), Ok(LeaderEpochCache::new()));
        // Kafka splits on any whitespace.
        assert_eq!(decode_checkpoint("0\n1\n2\t 7\n").map(|v| v.len()), Ok(1));
    }

    #[test]
    fn malformed_checkpoints_are_refused_with_the_line() {
        let table = [
            ("", 1),
            ("1\n0\n", 1),
            ("0\n", 2),
            ("0\nx\n", 2),
            ("0\n2\n0 0\n", 2),
            ("0\n1\n0 0\n1 5\n", 2),
            ("0\n1\n0\n", 3),
            ("0\n2\n0 0\n1 x\n", 4),
            ("0\n1\n0 0 0\n", 3),
        ];
        for (text, line) in table {
            match decode_checkpoint(text) {
                Err(Error::MalformedCheckpoint { line: l, .. }) => assert_eq!(l, line, "{text:?}"),
                other => panic!("{text:?} decoded to {other:?}"),
            }
        }
    }

    #[test]
    fn a_non_monotonic_checkpoint_is_repaired_on_load() {
        let loaded = LeaderEpochCache::from_checkpoint("0\n3\n0 0\n2 10\n1 12\n").expect("parses");
        assert_eq!(pairs(&loaded), [(0, 0), (1, 12)]);
    }
}
