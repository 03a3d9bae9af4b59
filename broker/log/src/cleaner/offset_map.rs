//! The cleaner's key → latest offset map (Kafka's SkimpyOffsetMap).
//!
//! Owns: reducing keys to 16-byte digests and remembering the latest offset
//! seen per digest, within a fixed number of entries derived from
//! `log.cleaner.dedupe.buffer.size` (24 bytes an entry, filled to Kafka's
//! 0.9 load factor). Two keys with one digest would share an entry (a
//! 2^-128 chance per pair, as Kafka accepts with MD5). Must not: read
//! files or decide what a record's fate is.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

/// Bytes one entry stands for: a 16-byte digest and an 8-byte offset.
pub(crate) const ENTRY_BYTES: usize = 24;

/// Kafka's `log.cleaner.io.buffer.load.factor` default.
const LOAD_FACTOR: f64 = 0.9;

pub(crate) type Digest = [u8; 16];

/// Keys' latest offsets, at most `capacity` of them.
#[derive(Debug)]
pub(crate) struct OffsetMap {
    entries: HashMap<Digest, i64>,
    capacity: usize,
}

impl OffsetMap {
    /// A map holding what `buffer_bytes` of Kafka's dedupe buffer would
    /// (at least one entry).
    pub(crate) fn with_buffer(buffer_bytes: usize) -> Self {
        let slots = buffer_bytes / ENTRY_BYTES;
        let capacity = ((slots as f64 * LOAD_FACTOR) as usize).max(1);
        Self {
            entries: HashMap::new(),
            capacity,
        }
    }

    /// The 16-byte digest standing for `key`: two independent 64-bit
    /// SipHashes of it.
    pub(crate) fn digest(key: &[u8]) -> Digest {
        let mut out = [0u8; 16];
        for (half, chunk) in out.chunks_exact_mut(8).enumerate() {
            let mut hasher = DefaultHasher::new();
            (half as u8).hash(&mut hasher);
            key.hash(&mut hasher);
            chunk.copy_from_slice(&hasher.finish().to_be_bytes());
        }
        out
    }

    /// Whether a new key could not be added.
    pub(crate) fn is_full(&self) -> bool {
        self.entries.len() >= self.capacity
    }

    /// Records `offset` as `key`'s latest (offsets are put in log order).
    /// False, and nothing recorded, when the key is new and the map full.
    pub(crate) fn put(&mut self, key: &[u8], offset: i64) -> bool {
        let digest = Self::digest(key);
        if let Some(latest) = self.entries.get_mut(&digest) {
            *latest = (*latest).max(offset);
            return true;
        }
        if self.is_full() {
            return false;
        }
        self.entries.insert(digest, offset);
        true
    }

    /// `key`'s latest offset, if it was put.
    pub(crate) fn get(&self, key: &[u8]) -> Option<i64> {
        self.entries.get(&Self::digest(key)).copied()
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Empties the map for the next log, keeping its allocation.
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_latest_offset_per_key_within_its_capacity() {
        let mut map = OffsetMap::with_buffer(3 * ENTRY_BYTES + ENTRY_BYTES / 2);
        assert_eq!(map.capacity, 2, "3 slots at a 0.9 load factor");
        assert!(map.put(b"a", 1));
        assert!(map.put(b"b", 2));
        assert!(map.put(b"a", 5));
        assert!(map.is_full());
        assert!(!map.put(b"c", 6), "a new key does not fit");
        assert!(map.put(b"b", 7), "a known key still updates");
        assert_eq!(
            (map.get(b"a"), map.get(b"b"), map.get(b"c")),
            (Some(5), Some(7), None)
        );
        assert_eq!(map.len(), 2);
        map.clear();
        assert_eq!(map.get(b"a"), None);
        assert_ne!(OffsetMap::digest(b"a"), OffsetMap::digest(b"b"));
        assert_eq!(OffsetMap::digest(b"key"), OffsetMap::digest(b"key"));
    }
}
