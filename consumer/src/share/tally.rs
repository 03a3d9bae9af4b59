//! The share-mode (at-least-once) facts of one member, or of several merged:
//! which offsets were ACCEPTED (confirmed by the broker), which were being
//! accepted when the report was written (outcome unknown to it), whose
//! acknowledgement failed, and how many deliveries came with each delivery
//! count. Merging is set union plus sums, so a merge of every member's
//! report says whether each record was accepted exactly once.
//!
//! Owns: [`ShareTally`] and its per-partition [`AcceptSets`], recording a
//! delivery and an acknowledgement's outcome, `absorb`, and the share
//! counts ([`ShareCounts`], via [`ShareTally::counts`]) — the one
//! definition of records accepted, accepted twice, outcome unknown, not
//! accepted, redeliveries and the delivery-count histogram.
//! Must not: verify envelopes, decide loss (the verifier's tally and the
//! ledgers do: `chronik_harness::{verify, assess}`), read or write files.
//!
//! Why "accepted exactly once" is decidable: a member acknowledges a record
//! only after a report (checkpoint) naming it as `unconfirmed` is on disk,
//! and moves it to `accepted` when the broker confirms. A member killed
//! with SIGKILL therefore leaves a report covering every record it may have
//! accepted; records it held but never acknowledged are redelivered by the
//! broker to another member (delivery count + 1) once their lock expires.

use std::collections::BTreeMap;

use chronik_harness::histogram::{merge_into, new_latency_histogram, record_us, LatencyHistogram};
use chronik_harness::intervals::IntervalSet;
use serde::{Deserialize, Serialize};

/// One partition's acceptance facts, as offset sets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AcceptSets {
    /// ACCEPT confirmed by the broker (acknowledge error code 0).
    pub accepted: IntervalSet,
    /// ACCEPT decided (and possibly sent) but not confirmed when the report
    /// was written: a checkpoint's in-flight acknowledgements, or a final
    /// one that could not be sent.
    pub unconfirmed: IntervalSet,
    /// ACCEPT refused by the broker (e.g. INVALID_RECORD_STATE after the
    /// record's lock expired): the broker delivers the record again.
    pub ack_failed: IntervalSet,
    /// Offsets acknowledged as GAP (no record there: control records,
    /// compacted or aborted offsets).
    #[serde(default)]
    pub gaps: IntervalSet,
}

/// A member as a merged report lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberSummary {
    pub client_id: String,
    pub member_id: String,
    /// "signal", "idle", or "checkpoint": the report is the member's last
    /// checkpoint, i.e. the member died (SIGKILL) before its final report.
    pub stop_reason: String,
    /// Wall-clock µs the report was written.
    pub written_at_us: i64,
    pub deliveries: u64,
    pub accepted: u64,
    pub unconfirmed: u64,
    /// Report checkpoints this member wrote, and the seconds they took.
    #[serde(default)]
    pub checkpoints: u64,
    #[serde(default)]
    pub checkpoint_secs: f64,
}

impl MemberSummary {
    /// Whether the report is a checkpoint left by a member that died.
    pub fn died(&self) -> bool {
        self.stop_reason == "checkpoint"
    }
}

/// The share facts of one member or a merge of several.
#[derive(Debug, Clone)]
pub struct ShareTally {
    pub partitions: BTreeMap<(String, i32), AcceptSets>,
    /// Deliveries seen, by the broker's delivery count.
    pub by_delivery_count: BTreeMap<u16, u64>,
    /// Broker confirmations of ACCEPT, summed over members: above the
    /// number of distinct accepted offsets, some record was accepted twice.
    pub confirmations: u64,
    /// End-to-end latency of first deliveries (delivery count 1) only.
    pub first_delivery_latency: LatencyHistogram,
    pub members: Vec<MemberSummary>,
}

impl Default for ShareTally {
    fn default() -> Self {
        ShareTally {
            partitions: BTreeMap::new(),
            by_delivery_count: BTreeMap::new(),
            confirmations: 0,
            first_delivery_latency: new_latency_histogram(),
            members: Vec::new(),
        }
    }
}

/// The share counts of a tally (`tally` is the verifier's, for the offsets
/// consumed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShareCounts {
    /// Distinct offsets whose ACCEPT the broker confirmed.
    pub records_accepted: u64,
    /// Confirmations beyond one per offset: a record accepted twice.
    pub accepted_twice: u64,
    /// Offsets a dead member was accepting when its last checkpoint was
    /// written, accepted by nobody else: the broker took the ACCEPT (or
    /// would have redelivered them). Not a fault.
    pub accept_outcome_unknown: u64,
    /// Offsets consumed by some member but neither accepted nor being
    /// accepted by any: left in the queue.
    pub not_accepted: u64,
    /// ACCEPTs the broker refused (lock expired), later accepted or not.
    pub ack_failed: u64,
    /// Offsets acknowledged as GAP.
    pub gaps_acknowledged: u64,
    /// Deliveries seen in the reports.
    pub deliveries: u64,
    /// Deliveries with a delivery count above 1: the broker gave the record
    /// out again after a lock expired or its holder left or died.
    pub redeliveries: u64,
    pub max_delivery_count: u16,
    /// Redeliveries whose earlier delivery is in some report (the tally's
    /// re-reads); the rest went to a member after its last checkpoint.
    pub redeliveries_seen_before: u64,
    /// Members whose report is a checkpoint (killed before their end).
    pub members_died: u64,
}

impl ShareTally {
    /// Records one delivery of (topic, partition) with `delivery_count`;
    /// `first_latency_us` is its end-to-end latency when it is a first
    /// delivery with a valid envelope.
    pub fn note_delivery(&mut self, delivery_count: u16, first_latency_us: Option<u64>) {
        *self.by_delivery_count.entry(delivery_count).or_default() += 1;
        if let Some(us) = first_latency_us {
            record_us(&mut self.first_delivery_latency, us);
        }
    }

    fn sets(&mut self, topic: &str, partition: i32) -> &mut AcceptSets {
        self.partitions
            .entry((topic.to_string(), partition))
            .or_default()
    }

    /// The member decided to ACCEPT `offset` (before any report names it).
    pub fn accepting(&mut self, topic: &str, partition: i32, offset: u64) {
        self.sets(topic, partition).unconfirmed.insert(offset);
    }

    /// The member acknowledged `offset` as GAP.
    pub fn gap(&mut self, topic: &str, partition: i32, offset: u64) {
        self.sets(topic, partition).gaps.insert(offset);
    }

    /// The broker answered the ACCEPT of `offsets`: confirmed or refused.
    pub fn confirmed(&mut self, topic: &str, partition: i32, offsets: &IntervalSet, ok: bool) {
        let sets = self.sets(topic, partition);
        sets.unconfirmed = sets.unconfirmed.difference(offsets);
        if ok {
            sets.accepted = sets.accepted.union(offsets);
            // every confirmation counts: one of an offset already accepted
            // makes `confirmations` exceed the distinct accepted offsets
            self.confirmations += offsets.len();
        } else {
            sets.ack_failed = sets.ack_failed.union(offsets);
        }
    }

    /// Adds another member's (or merge's) facts.
    pub fn absorb(&mut self, other: ShareTally) {
        for (key, p) in other.partitions {
            let mine = self.partitions.entry(key).or_default();
            mine.accepted = mine.accepted.union(&p.accepted);
            mine.unconfirmed = mine.unconfirmed.union(&p.unconfirmed);
            mine.ack_failed = mine.ack_failed.union(&p.ack_failed);
            mine.gaps = mine.gaps.union(&p.gaps);
        }
        for (count, n) in other.by_delivery_count {
            *self.by_delivery_count.entry(count).or_default() += n;
        }
        self.confirmations += other.confirmations;
        merge_into(
            &mut self.first_delivery_latency,
            &other.first_delivery_latency,
        );
        self.members.extend(other.members);
    }

    /// The share counts, against the verifier's tally of the same reports.
    pub fn counts(&self, tally: &chronik_harness::tally::Tally) -> ShareCounts {
        let mut c = ShareCounts::default();
        let empty = IntervalSet::new();
        for (key, sets) in &self.partitions {
            c.records_accepted += sets.accepted.len();
            c.accept_outcome_unknown += sets.unconfirmed.difference(&sets.accepted).len();
            c.ack_failed += sets.ack_failed.len();
            c.gaps_acknowledged += sets.gaps.len();
            let consumed = tally.partitions.get(key).map_or(&empty, |p| &p.consumed);
            c.not_accepted += consumed
                .difference(&sets.accepted)
                .difference(&sets.unconfirmed)
                .len();
        }
        // partitions consumed without any acceptance facts
        for (key, p) in &tally.partitions {
            if !self.partitions.contains_key(key) {
                c.not_accepted += p.consumed.len();
            }
        }
        c.accepted_twice = self.confirmations.saturating_sub(c.records_accepted);
        for (&count, &n) in &self.by_delivery_count {
            c.deliveries += n;
            if count > 1 {
                c.redeliveries += n;
            }
            if n > 0 {
                c.max_delivery_count = c.max_delivery_count.max(count);
            }
        }
        let distinct: u64 = tally.partitions.values().map(|p| p.consumed.len()).sum();
        c.redeliveries_seen_before = tally.consumed.saturating_sub(distinct);
        c.members_died = self.members.iter().filter(|m| m.died()).count() as u64;
        c
    }
}

#[cfg(test)]
#[path = "tally_tests.rs"]
mod tests;
