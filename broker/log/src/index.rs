//! The sparse offset index and the time index of one segment.
//!
//! Owns: index entries, their binary-search lookups and their on-disk
//! encoding (Kafka's: offset entries are relative offset u32 BE + file
//! position u32 BE; time entries are timestamp i64 BE + relative offset u32 BE)
//! plus the validation applied before trusting an index file. Must not: do
//! I/O — the segment reads and writes the files.

pub(crate) const OFFSET_ENTRY_SIZE: usize = 8;
pub(crate) const TIME_ENTRY_SIZE: usize = 12;

/// The batch whose base offset is `base_offset + relative_offset` starts at
/// byte `position` of the segment file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OffsetEntry {
    pub relative_offset: u32,
    pub position: u32,
}

/// Sparse offset -> file position map. Invariant: entries strictly increase
/// in both relative offset and position.
#[derive(Debug, Default, Clone)]
pub(crate) struct OffsetIndex {
    entries: Vec<OffsetEntry>,
}

impl OffsetIndex {
    pub(crate) fn last(&self) -> Option<OffsetEntry> {
        self.entries.last().copied()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Appends `entry` if it keeps the invariant; returns whether it did.
    pub(crate) fn push(&mut self, entry: OffsetEntry) -> bool {
        let grows = self.last().is_none_or(|l| {
            entry.relative_offset > l.relative_offset && entry.position > l.position
        });
        if grows {
            self.entries.push(entry);
        }
        grows
    }

    /// The indexed batch start positions, in file order.
    pub(crate) fn positions(&self) -> impl DoubleEndedIterator<Item = u64> + '_ {
        self.entries.iter().map(|e| u64::from(e.position))
    }

    /// Drops the entries of batches starting at or after byte `position`.
    pub(crate) fn truncate_from_position(&mut self, position: u64) {
        let keep = self
            .entries
            .partition_point(|e| u64::from(e.position) < position);
        self.entries.truncate(keep);
    }

    /// The entry with the largest relative offset <= `relative_offset`.
    pub(crate) fn lookup(&self, relative_offset: u32) -> Option<OffsetEntry> {
        let after = self
            .entries
            .partition_point(|e| e.relative_offset <= relative_offset);
        after.checked_sub(1).map(|i| self.entries[i])
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.entries.len() * OFFSET_ENTRY_SIZE);
        for e in &self.entries {
            out.extend_from_slice(&e.relative_offset.to_be_bytes());
            out.extend_from_slice(&e.position.to_be_bytes());
        }
        out
    }

    /// Decodes an index file, rejecting it (with the reason) unless every
    /// entry is well formed, ordered, at most `max_relative_offset` and
    /// inside a log file of `log_size` bytes.
    pub(crate) fn decode(
        bytes: &[u8],
        max_relative_offset: u64,
        log_size: u64,
    ) -> Result<Self, String> {
        let chunks = bytes.chunks_exact(OFFSET_ENTRY_SIZE);
        if !chunks.remainder().is_empty() {
            return Err(format!(
                "{} bytes is not a whole number of entries",
                bytes.len()
            ));
        }
        let mut index = OffsetIndex::default();
        for chunk in chunks {
            let entry = OffsetEntry {
                relative_offset: u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]),
                position: u32::from_be_bytes([chunk[4], chunk[5], chunk[6], chunk[7]]),
            };
            if u64::from(entry.relative_offset) > max_relative_offset
                || u64::from(entry.position) >= log_size
            {
                return Err(format!("entry {entry:?} points outside the segment"));
            }
            if !index.push(entry) {
                return Err(format!(
                    "entry {entry:?} does not follow {:?}",
                    index.last()
                ));
            }
        }
        Ok(index)
    }
}

/// The batch ending at `base_offset + relative_offset` is the first one in
/// the segment whose max timestamp reached `timestamp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TimeEntry {
    pub timestamp: i64,
    pub relative_offset: u32,
}

/// Invariant: timestamps strictly increase, relative offsets never decrease.
#[derive(Debug, Default, Clone)]
pub(crate) struct TimeIndex {
    entries: Vec<TimeEntry>,
}

impl TimeIndex {
    pub(crate) fn last(&self) -> Option<TimeEntry> {
        self.entries.last().copied()
    }

    /// Appends `entry` if its timestamp is newer than the last entry's.
    pub(crate) fn push(&mut self, entry: TimeEntry) -> bool {
        let grows = self.last().is_none_or(|l| {
            entry.timestamp > l.timestamp && entry.relative_offset >= l.relative_offset
        });
        if grows {
            self.entries.push(entry);
        }
        grows
    }

    /// Drops the entries pointing at relative offsets >= `relative_offset`.
    pub(crate) fn truncate_from_offset(&mut self, relative_offset: u64) {
        let keep = self
            .entries
            .partition_point(|e| u64::from(e.relative_offset) < relative_offset);
        self.entries.truncate(keep);
    }

    /// The entry with the largest timestamp <= `timestamp`.
    pub(crate) fn lookup(&self, timestamp: i64) -> Option<TimeEntry> {
        let after = self.entries.partition_point(|e| e.timestamp <= timestamp);
        after.checked_sub(1).map(|i| self.entries[i])
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.entries.len() * TIME_ENTRY_SIZE);
        for e in &self.entries {
            out.extend_from_slice(&e.timestamp.to_be_bytes());
            out.extend_from_slice(&e.relative_offset.to_be_bytes());
        }
        out
    }

    /// Decodes a time index file; same contract as `OffsetIndex::decode`.
    pub(crate) fn decode(bytes: &[u8], max_relative_offset: u64) -> Result<Self, String> {
        let chunks = bytes.chunks_exact(TIME_ENTRY_SIZE);
        if !chunks.remainder().is_empty() {
            return Err(format!(
                "{} bytes is not a whole number of entries",
                bytes.len()
            ));
        }
        let mut index = TimeIndex::default();
        for chunk in chunks {
            let mut ts = [0u8; 8];
            ts.copy_from_slice(&chunk[..8]);
            let entry = TimeEntry {
                timestamp: i64::from_be_bytes(ts),
                relative_offset: u32::from_be_bytes([chunk[8], chunk[9], chunk[10], chunk[11]]),
            };
            if u64::from(entry.relative_offset) > max_relative_offset || entry.timestamp < 0 {
                return Err(format!("entry {entry:?} is out of range"));
            }
            if !index.push(entry) {
                return Err(format!(
                    "entry {entry:?} does not follow {:?}",
                    index.last()
                ));
            }
        }
        Ok(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(pairs: &[(u32, u32)]) -> OffsetIndex {
        let mut index = OffsetIndex::default();
        for &(relative_offset, position) in pairs {
            assert!(index.push(OffsetEntry {
                relative_offset,
                position
            }));
        }
        index
    }

    #[test]
    fn offset_lookup_finds_the_largest_entry_not_after_the_target() {
        let index = offsets(&[(0, 0), (10, 4100), (25, 8300)]);
        let table = [
            (0, Some(0)),
            (9, Some(0)),
            (10, Some(4100)),
            (24, Some(4100)),
            (25, Some(8300)),
            (99, Some(8300)),
        ];
        for (target, expected) in table {
            assert_eq!(
                index.lookup(target).map(|e| e.position),
                expected,
                "target {target}"
            );
        }
        assert_eq!(offsets(&[(5, 100)]).lookup(4), None);
        assert_eq!(OffsetIndex::default().lookup(0), None);
    }

    #[test]
    fn offset_index_rejects_non_increasing_entries() {
        let mut index = offsets(&[(3, 100)]);
        assert!(!index.push(OffsetEntry {
            relative_offset: 3,
            position: 200
        }));
        assert!(!index.push(OffsetEntry {
            relative_offset: 4,
            position: 100
        }));
        assert_eq!(index.len(), 1);
    }

    #[test]
    fn offset_index_round_trips_and_validates() {
        let index = offsets(&[(1, 10), (7, 5000)]);
        let bytes = index.encode();
        assert_eq!(bytes.len(), 2 * OFFSET_ENTRY_SIZE);
        let back = OffsetIndex::decode(&bytes, 7, 6000).expect("valid");
        assert_eq!(back.last(), index.last());
        assert!(
            OffsetIndex::decode(&bytes[..11], 7, 6000).is_err(),
            "partial entry"
        );
        assert!(
            OffsetIndex::decode(&bytes, 6, 6000).is_err(),
            "offset past the segment end"
        );
        assert!(
            OffsetIndex::decode(&bytes, 7, 5000).is_err(),
            "position past the log end"
        );
        assert!(
            OffsetIndex::decode(&[0u8; 16], 7, 6000).is_err(),
            "zero-filled tail"
        );
    }

    #[test]
    fn truncation_keeps_the_entries_before_the_cut() {
        let mut index = offsets(&[(0, 0), (10, 4100), (25, 8300)]);
        index.truncate_from_position(8300);
        assert_eq!(index.last().map(|e| e.position), Some(4100));
        index.truncate_from_position(0);
        assert_eq!(index.len(), 0);

        let mut times = TimeIndex::default();
        for (timestamp, relative_offset) in [(100, 1), (200, 5), (300, 9)] {
            assert!(times.push(TimeEntry {
                timestamp,
                relative_offset
            }));
        }
        times.truncate_from_offset(9);
        assert_eq!(times.last().map(|e| e.timestamp), Some(200));
        times.truncate_from_offset(1);
        assert_eq!(times.last(), None);
    }

    #[test]
    fn time_lookup_and_round_trip() {
        let mut index = TimeIndex::default();
        assert!(index.push(TimeEntry {
            timestamp: 100,
            relative_offset: 0
        }));
        assert!(index.push(TimeEntry {
            timestamp: 200,
            relative_offset: 5
        }));
        assert!(
            !index.push(TimeEntry {
                timestamp: 200,
                relative_offset: 9
            }),
            "timestamp must grow"
        );
        assert_eq!(index.lookup(99), None);
        assert_eq!(index.lookup(150).map(|e| e.relative_offset), Some(0));
        assert_eq!(index.lookup(200).map(|e| e.relative_offset), Some(5));
        let back = TimeIndex::decode(&index.encode(), 5).expect("valid");
        assert_eq!(back.last(), index.last());
        assert!(TimeIndex::decode(&index.encode(), 4).is_err());
    }
}
