//! The ledger: which of this ingestor's sequence numbers were acknowledged by
//! Kafka and which failed, kept as interval sets so its size follows the
//! number of gaps, not the number of messages.
//!
//! A sequence number is allocated only when librdkafka accepted the message
//! into its queue, so every number below `next_sequence` is exactly one of
//! acknowledged, failed or in flight. A verifying consumer reconciles against
//! it: an acknowledged sequence missing from the topic is a loss; a failed one
//! may or may not be there (a timed-out produce can still have been written).
//! Must not: know about HTTP or rdkafka types.

use std::collections::BTreeMap;

use serde::Serialize;

/// A set of `u64` kept as disjoint, non-adjacent inclusive ranges.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct IntervalSet {
    /// start -> end (inclusive); ranges never overlap or touch.
    ranges: BTreeMap<u64, u64>,
    len: u64,
}

impl IntervalSet {
    pub fn new() -> IntervalSet {
        IntervalSet::default()
    }

    /// Adds `x`; returns false if it was already present.
    pub fn insert(&mut self, x: u64) -> bool {
        // The range starting at or before x, if any.
        let below = self.ranges.range(..=x).next_back().map(|(&s, &e)| (s, e));
        if let Some((_, end)) = below {
            if end >= x {
                return false;
            }
        }
        let joins_below = matches!(below, Some((_, end)) if end.checked_add(1) == Some(x));
        let above = x
            .checked_add(1)
            .and_then(|next| self.ranges.get(&next).map(|&e| (next, e)));
        match (joins_below, above) {
            (true, Some((above_start, above_end))) => {
                self.ranges.remove(&above_start);
                if let Some((start, _)) = below {
                    self.ranges.insert(start, above_end);
                }
            }
            (true, None) => {
                if let Some((start, _)) = below {
                    self.ranges.insert(start, x);
                }
            }
            (false, Some((above_start, above_end))) => {
                self.ranges.remove(&above_start);
                self.ranges.insert(x, above_end);
            }
            (false, None) => {
                self.ranges.insert(x, x);
            }
        }
        self.len += 1;
        true
    }

    pub fn contains(&self, x: u64) -> bool {
        self.ranges
            .range(..=x)
            .next_back()
            .is_some_and(|(_, &end)| end >= x)
    }

    /// Number of values in the set.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The ranges as `[first, last]` pairs (inclusive), ascending.
    pub fn ranges(&self) -> Vec<[u64; 2]> {
        self.ranges.iter().map(|(&s, &e)| [s, e]).collect()
    }
}

/// Outcomes of every sequence number handed to Kafka.
#[derive(Debug, Default)]
pub struct Ledger {
    pub acknowledged: IntervalSet,
    pub failed: IntervalSet,
}

/// What `GET /ledger` returns.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct LedgerSnapshot {
    pub ingestor_id: String,
    /// The envelope's `producer_id` of every message this process produced.
    pub producer_id: u64,
    /// The same id as 16 hex digits (JSON numbers lose precision above 2^53 in some parsers).
    pub producer_id_hex: String,
    /// Sequence numbers `0..next_sequence` have been handed to Kafka.
    pub next_sequence: u64,
    /// Inclusive `[first, last]` ranges delivered with an acknowledgement.
    pub acknowledged: Vec<[u64; 2]>,
    /// Inclusive ranges whose delivery failed (reported as failed to the client).
    pub failed: Vec<[u64; 2]>,
    pub acknowledged_count: u64,
    pub failed_count: u64,
    /// Handed to Kafka, outcome not known yet.
    pub in_flight: u64,
}

impl Ledger {
    /// A snapshot; `next_sequence` must be read after taking the ledger's lock
    /// so that every recorded sequence is below it.
    pub fn snapshot(
        &self,
        ingestor_id: &str,
        producer_id: u64,
        next_sequence: u64,
    ) -> LedgerSnapshot {
        let done = self.acknowledged.len() + self.failed.len();
        LedgerSnapshot {
            ingestor_id: ingestor_id.to_owned(),
            producer_id,
            producer_id_hex: format!("{producer_id:016x}"),
            next_sequence,
            acknowledged: self.acknowledged.ranges(),
            failed: self.failed.ranges(),
            acknowledged_count: self.acknowledged.len(),
            failed_count: self.failed.len(),
            in_flight: next_sequence.saturating_sub(done),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_in_any_order() {
        // (inserts, expected ranges)
        let table: &[(&[u64], &[[u64; 2]])] = &[
            (&[], &[]),
            (&[0, 1, 2], &[[0, 2]]),
            (&[2, 1, 0], &[[0, 2]]),
            (&[0, 2], &[[0, 0], [2, 2]]),
            (&[0, 2, 1], &[[0, 2]]),
            (&[5, 9, 7, 6, 8], &[[5, 9]]),
            (&[10, 3, 11, 4, 20], &[[3, 4], [10, 11], [20, 20]]),
            (
                &[u64::MAX, u64::MAX - 1, 0],
                &[[0, 0], [u64::MAX - 1, u64::MAX]],
            ),
        ];
        for (inserts, expected) in table {
            let mut set = IntervalSet::new();
            for &x in *inserts {
                assert!(set.insert(x), "{inserts:?}: {x} inserted once");
            }
            assert_eq!(set.ranges(), expected.to_vec(), "inserts {inserts:?}");
            assert_eq!(set.len(), inserts.len() as u64);
            for &x in *inserts {
                assert!(set.contains(x));
            }
        }
    }

    #[test]
    fn duplicates_are_reported_and_not_counted() {
        let mut set = IntervalSet::new();
        assert!(set.insert(4));
        assert!(set.insert(5));
        assert!(!set.insert(4));
        assert!(!set.insert(5));
        assert_eq!(set.len(), 2);
        assert!(!set.contains(3) && !set.contains(6));
    }

    #[test]
    fn snapshot_counts_in_flight() {
        let mut ledger = Ledger::default();
        for s in [0, 1, 2, 4] {
            ledger.acknowledged.insert(s);
        }
        ledger.failed.insert(3);
        let snap = ledger.snapshot("host-a", 0xabc, 7);
        assert_eq!(snap.acknowledged, vec![[0, 2], [4, 4]]);
        assert_eq!(snap.failed, vec![[3, 3]]);
        assert_eq!(
            (snap.acknowledged_count, snap.failed_count, snap.in_flight),
            (4, 1, 2)
        );
        assert_eq!(snap.producer_id_hex, "0000000000000abc");
    }
}
