//! Verification of consumed messages against their envelopes and the
//! producers' ledgers.
//!
//! Owns: [`SeqSet`] (a growable bitset of sequence numbers), [`Verifier`]
//! (what a consumer saw: duplicates, out-of-order, corrupt values, foreign
//! records) and [`reconcile`] (lost and gaps, from the producers' ledgers).
//! Must not: talk to Kafka or read clocks; it is fed envelopes.
//!
//! Definitions (per producer id, i.e. per producer task):
//! - duplicate: a `(producer_id, sequence)` consumed again, in any partition;
//! - out of order: within one partition, a sequence below one already
//!   consumed from that producer there (and not a duplicate);
//! - corrupt: the value's CRC-32C differs from the envelope's;
//! - lost: the producer got a successful acknowledgement for the sequence,
//!   yet it was never consumed before the drain timeout;
//! - gap: a sequence the producer assigned but got no delivery report for
//!   (neither acknowledged nor failed) and that was never consumed: a message
//!   never sent (the `--inject-skip-sequence` hook) or one still
//!   unacknowledged when the drain timed out. Not a broker loss: nothing was
//!   acknowledged;
//! - a failed delivery that is consumed anyway is counted as
//!   `delivered_despite_error` (at-least-once ambiguity, not an error).

use std::collections::HashMap;

use chronik_harness::Envelope;
use serde::Serialize;

/// A set of sequence numbers, dense from 0.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeqSet {
    words: Vec<u64>,
    len: u64,
}

impl SeqSet {
    pub fn new() -> SeqSet {
        SeqSet::default()
    }

    /// Adds `seq`; true if it was not there yet.
    #[inline]
    pub fn insert(&mut self, seq: u64) -> bool {
        let word = (seq / 64) as usize;
        if word >= self.words.len() {
            let grow = (word + 1).max(self.words.len() * 2);
            self.words.resize(grow, 0);
        }
        let bit = 1u64 << (seq % 64);
        let fresh = self.words[word] & bit == 0;
        self.words[word] |= bit;
        self.len += u64::from(fresh);
        fresh
    }

    #[inline]
    pub fn contains(&self, seq: u64) -> bool {
        self.words
            .get((seq / 64) as usize)
            .is_some_and(|w| w & (1u64 << (seq % 64)) != 0)
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Members in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let bit = u64::from(w.trailing_zeros());
                w &= w - 1;
                Some(i as u64 * 64 + bit)
            })
        })
    }
}

/// What one producer task knows about its own messages.
#[derive(Debug, Clone, Default)]
pub struct ProducerLedger {
    pub producer_id: u64,
    /// Sequences 0 .. next_sequence were assigned.
    pub next_sequence: u64,
    pub acked: SeqSet,
    pub failed: SeqSet,
}

/// Counts a consumer's verifier keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifyCounts {
    /// Records of this run (valid envelope, accepted producer id).
    pub verified: u64,
    pub duplicates: u64,
    pub out_of_order: u64,
    pub corrupt: u64,
    /// Records without a (decodable) `chronik-env` header.
    pub no_envelope: u64,
    /// Records from producer ids this run does not own.
    pub foreign: u64,
}

impl VerifyCounts {
    pub fn add(&mut self, o: &VerifyCounts) {
        self.verified += o.verified;
        self.duplicates += o.duplicates;
        self.out_of_order += o.out_of_order;
        self.corrupt += o.corrupt;
        self.no_envelope += o.no_envelope;
        self.foreign += o.foreign;
    }
}

/// How one consumed record was judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// First sighting, in order (corrupt or not).
    Fresh,
    OutOfOrder,
    Duplicate,
    Foreign,
}

#[derive(Debug)]
struct Track {
    producer_id: u64,
    seen: SeqSet,
    /// Highest sequence consumed per partition (index = partition id).
    last_by_partition: Vec<Option<u64>>,
    min: u64,
    max: u64,
}

/// What one consumer has seen.
#[derive(Debug)]
pub struct Verifier {
    /// `Some(prefix)`: only producer ids whose upper 32 bits equal it belong
    /// to this run; `None`: every producer id is verified (consume mode).
    accept_prefix: Option<u32>,
    index: HashMap<u64, usize>,
    tracks: Vec<Track>,
    cached: Option<(u64, usize)>,
    pub counts: VerifyCounts,
}

impl Verifier {
    pub fn new(accept_prefix: Option<u32>) -> Verifier {
        Verifier {
            accept_prefix,
            index: HashMap::new(),
            tracks: Vec::new(),
            cached: None,
            counts: VerifyCounts::default(),
        }
    }

    pub fn no_envelope(&mut self) {
        self.counts.no_envelope += 1;
    }

    /// Judges one record: its partition, envelope and whether the value
    /// matched the envelope's checksum.
    pub fn observe(&mut self, partition: i32, env: &Envelope, value_matches: bool) -> Verdict {
        if let Some(prefix) = self.accept_prefix {
            if (env.producer_id >> 32) as u32 != prefix {
                self.counts.foreign += 1;
                return Verdict::Foreign;
            }
        }
        let i = self.track_index(env.producer_id);
        let track = &mut self.tracks[i];
        self.counts.verified += 1;
        if !value_matches {
            self.counts.corrupt += 1;
        }
        let seq = env.sequence;
        if !track.seen.insert(seq) {
            self.counts.duplicates += 1;
            return Verdict::Duplicate;
        }
        track.min = track.min.min(seq);
        track.max = track.max.max(seq);
        let p = usize::try_from(partition).unwrap_or(0);
        if p >= track.last_by_partition.len() {
            track.last_by_partition.resize(p + 1, None);
        }
        let last = &mut track.last_by_partition[p];
        match *last {
            Some(l) if seq < l => {
                self.counts.out_of_order += 1;
                Verdict::OutOfOrder
            }
            _ => {
                *last = Some(seq);
                Verdict::Fresh
            }
        }
    }

    fn track_index(&mut self, producer_id: u64) -> usize {
        if let Some((id, i)) = self.cached {
            if id == producer_id {
                return i;
            }
        }
        let i = *self.index.entry(producer_id).or_insert_with(|| {
            self.tracks.push(Track {
                producer_id,
                seen: SeqSet::new(),
                last_by_partition: Vec::new(),
                min: u64::MAX,
                max: 0,
            });
            self.tracks.len() - 1
        });
        self.cached = Some((producer_id, i));
        i
    }

    /// The sequences consumed from `producer_id`.
    pub fn seen(&self, producer_id: u64) -> Option<&SeqSet> {
        self.index.get(&producer_id).map(|&i| &self.tracks[i].seen)
    }

    /// Folds another consumer's observations into this one (consume mode
    /// runs one verifier per consumer thread). A sequence both saw counts as
    /// a duplicate; order stays per partition, and partitions are never
    /// shared between consumers.
    pub fn absorb(&mut self, other: Verifier) {
        self.counts.add(&other.counts);
        for theirs in other.tracks {
            let i = self.track_index(theirs.producer_id);
            let mine = &mut self.tracks[i];
            for seq in theirs.seen.iter() {
                if !mine.seen.insert(seq) {
                    self.counts.duplicates += 1;
                }
            }
            if !theirs.seen.is_empty() {
                mine.min = mine.min.min(theirs.min);
                mine.max = mine.max.max(theirs.max);
            }
        }
    }

    /// Distinct records of this run consumed.
    pub fn distinct(&self) -> u64 {
        self.tracks.iter().map(|t| t.seen.len()).sum()
    }

    /// Without a ledger (consume mode): sequences missing between the lowest
    /// and highest seen per producer.
    pub fn missing_in_observed_range(&self) -> u64 {
        self.tracks
            .iter()
            .filter(|t| !t.seen.is_empty())
            .map(|t| t.max - t.min + 1 - t.seen.len())
            .sum()
    }

    pub fn producers(&self) -> impl Iterator<Item = u64> + '_ {
        self.tracks.iter().map(|t| t.producer_id)
    }
}

/// Ledger against consumer: the loss accounting of a round-trip run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reconciliation {
    pub acknowledged: u64,
    pub lost: u64,
    pub gaps: u64,
    pub delivered_despite_error: u64,
    /// Run records consumed from a producer id no ledger knows (should be 0).
    pub unknown_producer: u64,
}

pub fn reconcile(ledgers: &[ProducerLedger], verifier: &Verifier) -> Reconciliation {
    let mut r = Reconciliation::default();
    let empty = SeqSet::new();
    for ledger in ledgers {
        let seen = verifier.seen(ledger.producer_id).unwrap_or(&empty);
        r.acknowledged += ledger.acked.len();
        r.lost += ledger.acked.iter().filter(|&s| !seen.contains(s)).count() as u64;
        r.delivered_despite_error +=
            ledger.failed.iter().filter(|&s| seen.contains(s)).count() as u64;
        r.gaps += (0..ledger.next_sequence)
            .filter(|&s| {
                !ledger.acked.contains(s) && !ledger.failed.contains(s) && !seen.contains(s)
            })
            .count() as u64;
    }
    r.unknown_producer = verifier
        .producers()
        .filter(|id| !ledgers.iter().any(|l| l.producer_id == *id))
        .filter_map(|id| verifier.seen(id).map(SeqSet::len))
        .sum();
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: u32 = 0xabcd_0123;

    fn pid(task: u64) -> u64 {
        (u64::from(RUN) << 32) | task
    }

    fn env(task: u64, seq: u64) -> Envelope {
        Envelope {
            producer_id: pid(task),
            sequence: seq,
            send_time_us: 0,
            value_crc32c: 0,
        }
    }

    fn ledger(
        task: u64,
        next: u64,
        acked: impl IntoIterator<Item = u64>,
        failed: &[u64],
    ) -> ProducerLedger {
        let mut l = ProducerLedger {
            producer_id: pid(task),
            next_sequence: next,
            ..Default::default()
        };
        for s in acked {
            l.acked.insert(s);
        }
        for &s in failed {
            l.failed.insert(s);
        }
        l
    }

    #[test]
    fn seqset_counts_and_iterates() {
        let mut s = SeqSet::new();
        assert!(s.insert(5));
        assert!(!s.insert(5));
        assert!(s.insert(64));
        assert!(s.insert(1_000_000));
        assert_eq!(s.len(), 3);
        assert!(s.contains(64) && !s.contains(63) && !s.contains(5_000_000));
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![5, 64, 1_000_000]);
    }

    /// Table: consumed (task, partition, seq, crc ok) -> verdicts and counts.
    #[test]
    fn verdicts_table() {
        let steps: &[(u64, i32, u64, bool, Verdict)] = &[
            (0, 0, 0, true, Verdict::Fresh),
            (0, 0, 1, true, Verdict::Fresh),
            (0, 0, 1, true, Verdict::Duplicate), // same record again
            (0, 0, 3, true, Verdict::Fresh),     // 2 missing: not an order error
            (0, 0, 2, true, Verdict::OutOfOrder), // late in the same partition
            (0, 1, 4, true, Verdict::Fresh),     // other partition: own order
            (0, 1, 0, true, Verdict::Duplicate), // seq 0 already seen in p0
            (1, 0, 0, false, Verdict::Fresh),    // corrupt but first sighting
            (1, 0, 1, true, Verdict::Fresh),
        ];
        let mut v = Verifier::new(Some(RUN));
        for (i, &(task, p, seq, ok, want)) in steps.iter().enumerate() {
            assert_eq!(v.observe(p, &env(task, seq), ok), want, "step {i}");
        }
        let foreign = Envelope {
            producer_id: 7,
            sequence: 0,
            send_time_us: 0,
            value_crc32c: 0,
        };
        assert_eq!(v.observe(0, &foreign, true), Verdict::Foreign);
        v.no_envelope();
        assert_eq!(
            v.counts,
            VerifyCounts {
                verified: 9,
                duplicates: 2,
                out_of_order: 1,
                corrupt: 1,
                no_envelope: 1,
                foreign: 1
            }
        );
        assert_eq!(v.distinct(), 7);
    }

    #[test]
    fn consume_mode_accepts_every_producer_and_reports_holes() {
        let mut v = Verifier::new(None);
        for seq in [10, 11, 14] {
            v.observe(
                0,
                &Envelope {
                    producer_id: 7,
                    sequence: seq,
                    send_time_us: 0,
                    value_crc32c: 0,
                },
                true,
            );
        }
        assert_eq!(v.counts.foreign, 0);
        assert_eq!(v.missing_in_observed_range(), 2);
    }

    #[test]
    fn absorbing_unions_what_consumers_saw() {
        let mut a = Verifier::new(None);
        let mut b = Verifier::new(None);
        let e = |seq| Envelope {
            producer_id: 7,
            sequence: seq,
            send_time_us: 0,
            value_crc32c: 0,
        };
        for seq in [0, 2, 4] {
            a.observe(0, &e(seq), true);
        }
        for seq in [1, 3, 4] {
            b.observe(1, &e(seq), true);
        }
        assert_eq!(b.missing_in_observed_range(), 1);
        a.absorb(b);
        assert_eq!(a.missing_in_observed_range(), 0);
        assert_eq!(a.distinct(), 5);
        assert_eq!(a.counts.duplicates, 1, "seq 4 in two partitions");
        assert_eq!(a.counts.verified, 6);
    }

    #[test]
    fn reconcile_tells_lost_from_gaps() {
        // Task 0 assigned 0..10. 3 acked but never consumed (lost); 5 never
        // reported (skipped: gap); 7 failed and not consumed (a failure, not
        // lost); 8 failed but consumed anyway.
        let acked = [0, 1, 2, 3, 4, 6, 9];
        let l0 = ledger(0, 10, acked, &[7, 8]);
        let l1 = ledger(1, 2, [0, 1], &[]);
        let mut v = Verifier::new(Some(RUN));
        for s in [0, 1, 2, 4, 6, 8, 9] {
            v.observe(0, &env(0, s), true);
        }
        for s in [0, 1] {
            v.observe(0, &env(1, s), true);
        }
        let r = reconcile(&[l0, l1], &v);
        assert_eq!(
            r,
            Reconciliation {
                acknowledged: 9,
                lost: 1,
                gaps: 1,
                delivered_despite_error: 1,
                unknown_producer: 0
            }
        );
    }

    #[test]
    fn reconcile_counts_records_of_unknown_producers() {
        let mut v = Verifier::new(Some(RUN));
        v.observe(0, &env(5, 0), true);
        let r = reconcile(&[ledger(0, 0, [], &[])], &v);
        assert_eq!(r.unknown_producer, 1);
    }
}
