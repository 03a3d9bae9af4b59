//! The verifier: what one consumer has seen, record by record — the one
//! definition of each per-record verdict, for chronik-consumer and
//! chronik-bench alike.
//!
//! Owns: per-partition state (offsets consumed, offsets of foreign, corrupt
//! and reordered records, each producer's previous sequence there), per
//! producer the set of sequences seen, the running counts, the end-to-end
//! latency histogram and a few examples of each problem. Must not: talk to
//! Kafka, read clocks or allocate per record (the owner passes the consume
//! time; in-order offsets and sequences append in O(1)).
//!
//! Verdicts, in the order they are decided for one record:
//! 1. redelivery — its (topic, partition, offset) was consumed before by this
//!    verifier (after a rebalance or a restart from a committed offset). Not
//!    verified again, so it can never be a false duplicate.
//! 2. foreign — no `chronik-env` header, or one that does not decode
//!    (`envelope_errors` counts the latter), or — for a verifier made
//!    [`Verifier::for_run`] — an envelope of another run's producer
//!    (`other_run` counts those). Not an error.
//! 3. verified — everything else, then independently:
//!    - corrupt: the value's CRC-32C differs from the envelope's;
//!    - duplicate: (producer id, sequence) was already seen at another offset
//!      (any partition);
//!    - reordered: not a duplicate, and the sequence is below the previous
//!      sequence of the same producer in the same partition.
//!
//! Gaps and loss are not decided here: they need the whole sequence space
//! (and, for several consumers, every one's tally) — see `tally` and
//! `reconcile`.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use serde::{Deserialize, Serialize};

use crate::envelope::{Envelope, EnvelopeError};
use crate::histogram::{merge_into, new_latency_histogram, record_us, LatencyHistogram};
use crate::intervals::IntervalSet;

/// Examples of each problem kept for the report (the counts are exact).
pub const MAX_EXAMPLES: usize = 100;

/// One consumed record as the verifier needs it.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    pub offset: i64,
    /// Value of the `chronik-env` header, if the record has one.
    pub envelope: Option<&'a [u8]>,
    /// The record value (empty for a null value).
    pub value: &'a [u8],
    /// Wall-clock µs when the record was consumed.
    pub consumed_at_us: i64,
}

/// What the verifier decided about one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Redelivery,
    Foreign,
    BadEnvelope,
    /// A valid envelope of a producer outside the run (see [`Verifier::for_run`]).
    OtherRun,
    Verified {
        duplicate: bool,
        reordered: bool,
        corrupt: bool,
    },
}

impl Verdict {
    pub const OK: Verdict = Verdict::Verified {
        duplicate: false,
        reordered: false,
        corrupt: false,
    };
}

/// Running counts. `consumed = redeliveries + foreign + verified`;
/// `envelope_errors` and `other_run` ⊆ foreign; duplicates, reordered and
/// corrupt ⊆ verified.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    pub consumed: u64,
    pub verified: u64,
    pub duplicates: u64,
    pub reordered: u64,
    pub corrupt: u64,
    pub redeliveries: u64,
    pub foreign: u64,
    pub envelope_errors: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub other_run: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A problem found on one record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Example {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub producer_id: u64,
    pub sequence: u64,
    /// For a reordered record: the producer's previous sequence in the partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_sequence: Option<u64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Examples {
    pub duplicates: Vec<Example>,
    pub reordered: Vec<Example>,
    pub corrupt: Vec<Example>,
}

/// State of one partition this replica has been assigned or has read.
#[derive(Debug, Clone)]
pub struct PartitionState {
    pub topic: String,
    pub partition: i32,
    /// Every offset consumed (first deliveries only).
    pub consumed: IntervalSet,
    pub foreign: IntervalSet,
    pub corrupt: IntervalSet,
    pub reordered: IntervalSet,
    /// Low and high watermark last reported by the client, if any.
    pub log_start_offset: Option<i64>,
    pub high_watermark: Option<i64>,
    /// Producer id -> index into `order`.
    order_index: HashMap<u64, usize, IdHash>,
    order: Vec<ProducerOrder>,
    /// Index into `order` of the producer of the previous record.
    last_order: Option<usize>,
}

/// One producer's previous sequence in one partition.
#[derive(Debug, Clone, Copy)]
struct ProducerOrder {
    producer_id: u64,
    producer: usize,
    previous: u64,
}

impl PartitionState {
    fn new(topic: &str, partition: i32) -> PartitionState {
        PartitionState {
            topic: topic.to_string(),
            partition,
            consumed: IntervalSet::new(),
            foreign: IntervalSet::new(),
            corrupt: IntervalSet::new(),
            reordered: IntervalSet::new(),
            log_start_offset: None,
            high_watermark: None,
            order_index: HashMap::default(),
            order: Vec::new(),
            last_order: None,
        }
    }

    /// The next offset to consume after the highest one consumed.
    pub fn position(&self) -> Option<i64> {
        self.consumed.last().map(|o| o as i64 + 1)
    }
}

/// One producer id's sequences, over every partition.
#[derive(Debug, Clone)]
pub struct ProducerState {
    pub producer_id: u64,
    pub seen: IntervalSet,
}

/// A hasher for u64 ids: one multiply, high and low bits mixed. Producer ids
/// are not attacker-controlled in a test harness.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(self.0 ^ u64::from(b));
        }
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        let x = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = x ^ (x >> 32);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type IdHash = BuildHasherDefault<IdHasher>;

#[derive(Debug)]
struct TopicSlots {
    name: String,
    /// partition number -> index into `Verifier::partitions`.
    slots: Vec<Option<usize>>,
}

/// The verification state of one consumer. Single-threaded: the poll loop
/// owns it; others see published snapshots.
#[derive(Debug)]
pub struct Verifier {
    /// `Some(prefix)`: only producer ids whose upper 32 bits equal it are
    /// this run's; `None`: every envelope is verified.
    run_prefix: Option<u32>,
    topics: Vec<TopicSlots>,
    partitions: Vec<PartitionState>,
    producers: Vec<ProducerState>,
    producer_index: HashMap<u64, usize, IdHash>,
    counts: Counts,
    /// Latency since the last `take_latency_interval`.
    latency_interval: LatencyHistogram,
    /// Latency of every earlier interval.
    latency_total: LatencyHistogram,
    examples: Examples,
}

impl Default for Verifier {
    fn default() -> Self {
        Verifier::new()
    }
}

impl Verifier {
    /// A verifier of every envelope it is fed.
    pub fn new() -> Verifier {
        Verifier {
            run_prefix: None,
            topics: Vec::new(),
            partitions: Vec::new(),
            producers: Vec::new(),
            producer_index: HashMap::default(),
            counts: Counts::default(),
            latency_interval: new_latency_histogram(),
            latency_total: new_latency_histogram(),
            examples: Examples::default(),
        }
    }

    /// A verifier of one run's records: envelopes whose producer id does not
    /// start with `prefix` (its upper 32 bits) are foreign.
    pub fn for_run(prefix: u32) -> Verifier {
        Verifier {
            run_prefix: Some(prefix),
            ..Verifier::new()
        }
    }

    /// The slot of (topic, partition), creating its state on first use.
    #[inline]
    pub fn partition_slot(&mut self, topic: &str, partition: i32) -> usize {
        let index = usize::try_from(partition).unwrap_or(usize::MAX);
        if let Some(t) = self.topics.iter().find(|t| t.name == topic) {
            if let Some(Some(slot)) = t.slots.get(index) {
                return *slot;
            }
        }
        self.new_partition_slot(topic, partition)
    }

    #[cold]
    fn new_partition_slot(&mut self, topic: &str, partition: i32) -> usize {
        let slot = self.partitions.len();
        self.partitions.push(PartitionState::new(topic, partition));
        let t = match self.topics.iter().position(|t| t.name == topic) {
            Some(i) => &mut self.topics[i],
            None => {
                self.topics.push(TopicSlots {
                    name: topic.to_string(),
                    slots: Vec::new(),
                });
                let last = self.topics.len() - 1;
                &mut self.topics[last]
            }
        };
        // Negative partitions never come from a broker; they get a slot but
        // no fast-path index.
        if let Ok(index) = usize::try_from(partition) {
            if t.slots.len() <= index {
                t.slots.resize(index + 1, None);
            }
            t.slots[index] = Some(slot);
        }
        slot
    }

    /// Records the client's latest low/high watermarks of a partition.
    pub fn note_watermarks(&mut self, slot: usize, low: i64, high: i64) {
        let p = &mut self.partitions[slot];
        if low >= 0 {
            p.log_start_offset = Some(p.log_start_offset.map_or(low, |l| l.min(low)));
        }
        if high >= 0 {
            p.high_watermark = Some(p.high_watermark.map_or(high, |h| h.max(high)));
        }
    }

    /// Verifies one record of the partition in `slot` and records its
    /// end-to-end latency (consume time − envelope send time) if verified.
    #[inline]
    pub fn observe(&mut self, slot: usize, record: &Observed<'_>) -> Verdict {
        let header = record.envelope.map(Envelope::decode);
        let send_time_us = match &header {
            Some(Ok(e)) => e.send_time_us,
            _ => 0,
        };
        let verdict = self.judge(slot, record.offset, header, record.value);
        if let Verdict::Verified { .. } = verdict {
            let latency = record.consumed_at_us.saturating_sub(send_time_us);
            record_us(
                &mut self.latency_interval,
                u64::try_from(latency).unwrap_or(0),
            );
        }
        verdict
    }

    /// Verifies one record whose `chronik-env` header the caller decoded
    /// (`None`: no header), without timing it: for a caller that times
    /// records on its own clock and window.
    #[inline]
    pub fn judge(
        &mut self,
        slot: usize,
        offset: i64,
        header: Option<Result<Envelope, EnvelopeError>>,
        value: &[u8],
    ) -> Verdict {
        self.counts.consumed += 1;
        // Offsets are never negative from a broker; a set holds u64s.
        let at = u64::try_from(offset).unwrap_or(0);
        let partition = &mut self.partitions[slot];
        if !partition.consumed.insert(at) {
            self.counts.redeliveries += 1;
            return Verdict::Redelivery;
        }
        let Some(header) = header else {
            self.counts.foreign += 1;
            partition.foreign.insert(at);
            return Verdict::Foreign;
        };
        let Ok(envelope) = header else {
            self.counts.foreign += 1;
            self.counts.envelope_errors += 1;
            partition.foreign.insert(at);
            return Verdict::BadEnvelope;
        };
        if let Some(prefix) = self.run_prefix {
            if (envelope.producer_id >> 32) as u32 != prefix {
                self.counts.foreign += 1;
                self.counts.other_run += 1;
                partition.foreign.insert(at);
                return Verdict::OtherRun;
            }
        }
        self.counts.verified += 1;

        let corrupt = !envelope.matches(value);
        if corrupt {
            self.counts.corrupt += 1;
            partition.corrupt.insert(at);
        }

        let order = Self::order_slot(
            partition,
            &mut self.producers,
            &mut self.producer_index,
            envelope.producer_id,
        );
        let producer = partition.order[order].producer;
        let fresh = self.producers[producer].seen.insert(envelope.sequence);
        let previous = partition.order[order].previous;
        let (mut duplicate, mut reordered) = (false, false);
        if !fresh {
            duplicate = true;
            self.counts.duplicates += 1;
        } else {
            if previous != u64::MAX && envelope.sequence < previous {
                reordered = true;
                self.counts.reordered += 1;
                partition.reordered.insert(at);
            }
            partition.order[order].previous = envelope.sequence;
        }
        if duplicate || reordered || corrupt {
            self.note_examples(
                slot, offset, &envelope, previous, duplicate, reordered, corrupt,
            );
        }
        Verdict::Verified {
            duplicate,
            reordered,
            corrupt,
        }
    }

    /// Index into `partition.order` of `producer_id`, registering the
    /// producer (globally and in this partition) on first sight.
    #[inline]
    fn order_slot(
        partition: &mut PartitionState,
        producers: &mut Vec<ProducerState>,
        producer_index: &mut HashMap<u64, usize, IdHash>,
        producer_id: u64,
    ) -> usize {
        if let Some(i) = partition.last_order {
            if partition.order[i].producer_id == producer_id {
                return i;
            }
        }
        let i = match partition.order_index.get(&producer_id) {
            Some(&i) => i,
            None => {
                let producer = *producer_index.entry(producer_id).or_insert_with(|| {
                    producers.push(ProducerState {
                        producer_id,
                        seen: IntervalSet::new(),
                    });
                    producers.len() - 1
                });
                // u64::MAX marks "no previous sequence yet".
                partition.order.push(ProducerOrder {
                    producer_id,
                    producer,
                    previous: u64::MAX,
                });
                let i = partition.order.len() - 1;
                partition.order_index.insert(producer_id, i);
                i
            }
        };
        partition.last_order = Some(i);
        i
    }

    #[cold]
    #[allow(clippy::too_many_arguments)]
    fn note_examples(
        &mut self,
        slot: usize,
        offset: i64,
        envelope: &Envelope,
        previous: u64,
        duplicate: bool,
        reordered: bool,
        corrupt: bool,
    ) {
        let p = &self.partitions[slot];
        let example = |previous_sequence| Example {
            topic: p.topic.clone(),
            partition: p.partition,
            offset,
            producer_id: envelope.producer_id,
            sequence: envelope.sequence,
            previous_sequence,
        };
        for (hit, list, prev) in [
            (duplicate, &mut self.examples.duplicates, None),
            (reordered, &mut self.examples.reordered, Some(previous)),
            (corrupt, &mut self.examples.corrupt, None),
        ] {
            if hit && list.len() < MAX_EXAMPLES {
                list.push(example(prev));
            }
        }
    }

    pub fn counts(&self) -> Counts {
        self.counts
    }

    pub fn partitions(&self) -> &[PartitionState] {
        &self.partitions
    }

    pub fn producers(&self) -> &[ProducerState] {
        &self.producers
    }

    pub fn examples(&self) -> &Examples {
        &self.examples
    }

    /// The latency recorded since the previous call (it is folded into the
    /// running total and a fresh interval starts).
    pub fn take_latency_interval(&mut self) -> LatencyHistogram {
        let interval = std::mem::replace(&mut self.latency_interval, new_latency_histogram());
        merge_into(&mut self.latency_total, &interval);
        interval
    }

    /// Every latency recorded so far.
    pub fn latency_total(&self) -> LatencyHistogram {
        let mut total = self.latency_total.clone();
        merge_into(&mut total, &self.latency_interval);
        total
    }
}

#[cfg(test)]
#[path = "verify_tests.rs"]
mod tests;
