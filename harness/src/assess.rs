//! Assessment: the counts a tally and the producers' ledgers define — the
//! one place each count is defined, for the consumer's report and the
//! bench's result alike.
//!
//! Owns: [`Totals`] (the report's `counts`), [`LedgerTotals`] and
//! [`assess`]. Counts are recomputed from the tally's sets, which is what
//! makes merging exact:
//! - distinct records = Σ partitions |consumed offsets|;
//! - redeliveries = records consumed − distinct records (a record consumed by
//!   two consumers after a rebalance is one redelivery, not a duplicate);
//! - verified = distinct records − foreign records;
//! - duplicates = verified − Σ producers |sequences seen|;
//! - gaps = sequences missing between a producer's lowest and highest seen;
//!   unexplained gaps = those no ledger marks failed;
//! - lost, failed not consumed, delivered despite failure, unknown not
//!   consumed, consumed not in ledger: summed from `reconcile`.
//!
//! Must not: read or write files, or decide a verdict (whether a count
//! fails a run, and whether coverage makes loss conclusive, is the caller's).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::intervals::IntervalSet;
use crate::ledger::Ledger;
use crate::reconcile::{combine, reconcile, ProducerReconciliation};
use crate::tally::Tally;
use crate::verify::Counts;

/// The counts of a tally (and its ledgers): the record counts a verifier
/// keeps as it runs, recomputed from the sets, then what needs every
/// producer's whole sequence space.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    #[serde(flatten)]
    pub records: Counts,
    pub producers: u64,
    pub distinct_sequences: u64,
    /// Sequences missing between a producer's lowest and highest seen.
    pub gaps: u64,
    /// Gaps not explained by a ledger's failed productions.
    pub unexplained_gaps: u64,
    /// Acknowledged (per the ledgers) but never consumed.
    pub lost: u64,
    pub failed_not_consumed: u64,
    pub delivered_despite_failure: u64,
    pub unknown_not_consumed: u64,
}

/// The ledgers' side, summed over producers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LedgerTotals {
    /// Producer ids some ledger describes.
    pub ledger_producers: u64,
    pub acknowledged: u64,
    pub lost: u64,
    pub failed_not_consumed: u64,
    pub delivered_despite_failure: u64,
    pub unknown_not_consumed: u64,
    pub consumed_not_in_ledger: u64,
    /// Producer ids consumed that no ledger describes.
    pub producers_without_ledger: Vec<u64>,
}

/// One producer id: its gaps and, with a ledger, its reconciliation.
#[derive(Debug, Clone)]
pub struct ProducerAssessment {
    pub producer_id: u64,
    pub gaps: IntervalSet,
    pub ledger: Option<ProducerReconciliation>,
}

#[derive(Debug, Clone)]
pub struct Assessment {
    pub totals: Totals,
    /// Every producer id consumed or in a ledger, in id order.
    pub producers: Vec<ProducerAssessment>,
    pub ledgers: LedgerTotals,
}

/// The counts of `tally` against `ledgers` (any number per producer id;
/// those of one id are combined).
pub fn assess(tally: &Tally, ledgers: &[&Ledger]) -> Assessment {
    let mut records = Counts {
        consumed: tally.consumed,
        ..Counts::default()
    };
    let mut distinct = 0u64;
    for p in tally.partitions.values() {
        distinct += p.consumed.len();
        records.foreign += p.foreign.len();
        records.corrupt += p.corrupt.len();
        records.reordered += p.reordered.len();
    }
    records.redeliveries = records.consumed.saturating_sub(distinct);
    records.verified = distinct.saturating_sub(records.foreign);
    records.envelope_errors = tally.envelope_errors.min(records.foreign);
    records.other_run = tally.other_run.min(records.foreign);
    let mut totals = Totals {
        records,
        ..Totals::default()
    };

    let mut by_producer: BTreeMap<u64, Vec<&Ledger>> = BTreeMap::new();
    for l in ledgers {
        if let Some(id) = l.id() {
            by_producer.entry(id).or_default().push(l);
        }
    }
    let mut sums = LedgerTotals {
        ledger_producers: by_producer.len() as u64,
        ..LedgerTotals::default()
    };
    let ids: BTreeSet<u64> = tally
        .producers
        .keys()
        .chain(by_producer.keys())
        .copied()
        .collect();
    let empty = IntervalSet::new();
    let mut producers = Vec::with_capacity(ids.len());
    for id in ids {
        let seen = tally.producers.get(&id).unwrap_or(&empty);
        let gaps = seen.gaps();
        totals.distinct_sequences += seen.len();
        totals.gaps += gaps.len();
        let ledger = by_producer.get(&id).map(|list| {
            let combined = combine(list);
            totals.unexplained_gaps += gaps.difference(&combined.failed).len();
            reconcile(&combined, seen)
        });
        match &ledger {
            Some(r) => {
                sums.acknowledged += r.acknowledged;
                sums.lost += r.lost.len();
                sums.failed_not_consumed += r.failed_not_consumed.len();
                sums.delivered_despite_failure += r.delivered_despite_failure;
                sums.unknown_not_consumed += r.unknown_not_consumed.len();
                sums.consumed_not_in_ledger += r.consumed_not_in_ledger;
            }
            None => {
                totals.unexplained_gaps += gaps.len();
                sums.producers_without_ledger.push(id);
            }
        }
        producers.push(ProducerAssessment {
            producer_id: id,
            gaps,
            ledger,
        });
    }
    totals.producers = tally.producers.len() as u64;
    totals.records.duplicates = (totals.records.verified).saturating_sub(totals.distinct_sequences);
    totals.lost = sums.lost;
    totals.failed_not_consumed = sums.failed_not_consumed;
    totals.delivered_despite_failure = sums.delivered_despite_failure;
    totals.unknown_not_consumed = sums.unknown_not_consumed;
    Assessment {
        totals,
        producers,
        ledgers: sums,
    }
}

#[cfg(test)]
#[path = "assess_tests.rs"]
mod tests;
