//! The tally: what one or more verifiers saw, as sets that merge exactly.
//!
//! Owns: [`Tally`] (per-partition offset sets, per-producer sequence sets,
//! the latency histogram, examples) built from a [`Verifier`] or read back
//! from a report, and [`Tally::absorb`], which merges by set union — so a
//! record two consumers both read is one record, not a duplicate.
//! Must not: derive counts or decide anything (that is
//! `reconcile::assess`, the one definition of every count) or know a file
//! format beyond the serde shape of [`PartitionTally`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::histogram::{merge_into, new_latency_histogram, LatencyHistogram};
use crate::intervals::IntervalSet;
use crate::verify::{Examples, Verifier, MAX_EXAMPLES};

/// What one partition's records were, as sets of offsets.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PartitionTally {
    pub consumed: IntervalSet,
    #[serde(default)]
    pub foreign: IntervalSet,
    #[serde(default)]
    pub corrupt: IntervalSet,
    #[serde(default)]
    pub reordered: IntervalSet,
    pub log_start_offset: Option<i64>,
    pub high_watermark: Option<i64>,
}

/// Everything the counts are computed from; merging is set union.
#[derive(Debug, Clone)]
pub struct Tally {
    /// Records polled, redeliveries included.
    pub consumed: u64,
    /// Foreign records whose header did not decode.
    pub envelope_errors: u64,
    /// Foreign records of another run's producers.
    pub other_run: u64,
    pub partitions: BTreeMap<(String, i32), PartitionTally>,
    pub producers: BTreeMap<u64, IntervalSet>,
    pub latency: LatencyHistogram,
    pub examples: Examples,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            consumed: 0,
            envelope_errors: 0,
            other_run: 0,
            partitions: BTreeMap::new(),
            producers: BTreeMap::new(),
            latency: new_latency_histogram(),
            examples: Examples::default(),
        }
    }
}

impl Tally {
    pub fn from_verifier(v: &Verifier) -> Tally {
        let partitions = v
            .partitions()
            .iter()
            .map(|p| {
                let tally = PartitionTally {
                    consumed: p.consumed.clone(),
                    foreign: p.foreign.clone(),
                    corrupt: p.corrupt.clone(),
                    reordered: p.reordered.clone(),
                    log_start_offset: p.log_start_offset,
                    high_watermark: p.high_watermark,
                };
                ((p.topic.clone(), p.partition), tally)
            })
            .collect();
        Tally {
            consumed: v.counts().consumed,
            envelope_errors: v.counts().envelope_errors,
            other_run: v.counts().other_run,
            partitions,
            producers: v
                .producers()
                .iter()
                .map(|p| (p.producer_id, p.seen.clone()))
                .collect(),
            latency: v.latency_total(),
            examples: v.examples().clone(),
        }
    }

    /// Adds another verifier's (or merge's) facts.
    pub fn absorb(&mut self, other: Tally) {
        self.consumed += other.consumed;
        self.envelope_errors += other.envelope_errors;
        self.other_run += other.other_run;
        for (key, p) in other.partitions {
            let mine = self.partitions.entry(key).or_default();
            mine.consumed = mine.consumed.union(&p.consumed);
            mine.foreign = mine.foreign.union(&p.foreign);
            mine.corrupt = mine.corrupt.union(&p.corrupt);
            mine.reordered = mine.reordered.union(&p.reordered);
            mine.log_start_offset = min_some(mine.log_start_offset, p.log_start_offset);
            mine.high_watermark = mine.high_watermark.max(p.high_watermark);
        }
        for (id, seen) in other.producers {
            let mine = self.producers.entry(id).or_default();
            *mine = mine.union(&seen);
        }
        merge_into(&mut self.latency, &other.latency);
        for (mine, theirs) in [
            (&mut self.examples.duplicates, other.examples.duplicates),
            (&mut self.examples.reordered, other.examples.reordered),
            (&mut self.examples.corrupt, other.examples.corrupt),
        ] {
            for e in theirs {
                if mine.len() < MAX_EXAMPLES && !mine.contains(&e) {
                    mine.push(e);
                }
            }
        }
    }
}

fn min_some(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
