//! Reconciliation: one producer's ledger against the sequences consumed —
//! the one definition of lost, failed-not-consumed, delivered despite
//! failure and unknown-not-consumed.
//!
//! Owns: [`reconcile`] (one producer id: its combined ledger against the
//! sequences seen) and [`combine`] (several ledgers of one producer id).
//! Must not: load ledgers (callers pass them in), add up producers (that is
//! `assess`) or decide a verdict.

use serde::Serialize;

use crate::intervals::IntervalSet;
use crate::ledger::Ledger;

/// One producer's ledger against what was consumed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProducerReconciliation {
    pub acknowledged: u64,
    /// Acknowledged but never consumed: real loss.
    pub lost: IntervalSet,
    /// Production failed and the message is not in the topic: expected gaps.
    pub failed_not_consumed: IntervalSet,
    /// Production reported failure yet the message arrived (at-least-once ambiguity).
    pub delivered_despite_failure: u64,
    /// Below `next_sequence`, neither acknowledged nor failed, not consumed
    /// (in flight when the ledger was read, or never sent). Not a loss:
    /// nothing was acknowledged.
    pub unknown_not_consumed: IntervalSet,
    /// Consumed but in neither list (in flight when the ledger was read).
    pub consumed_not_in_ledger: u64,
}

/// Reconciles `ledger` (the union of every ledger of one producer id) with
/// the sequences `seen` of that producer.
pub fn reconcile(ledger: &Ledger, seen: &IntervalSet) -> ProducerReconciliation {
    let outcome_known = ledger.acknowledged.union(&ledger.failed);
    let unknown = match ledger.next_sequence {
        Some(next) if next > 0 => IntervalSet::from_ranges([[0, next - 1]])
            .difference(&outcome_known)
            .difference(seen),
        _ => IntervalSet::new(),
    };
    ProducerReconciliation {
        acknowledged: ledger.acknowledged.len(),
        lost: ledger.acknowledged.difference(seen),
        failed_not_consumed: ledger.failed.difference(seen),
        delivered_despite_failure: ledger.failed.intersection(seen).len(),
        unknown_not_consumed: unknown,
        consumed_not_in_ledger: seen.difference(&outcome_known).len(),
    }
}

/// Combines the ledgers of one producer id (several snapshots, or several
/// sources): acknowledged and failed are unioned; a sequence both
/// acknowledged and failed counts as acknowledged.
pub fn combine(ledgers: &[&Ledger]) -> Ledger {
    let mut acknowledged = IntervalSet::new();
    let mut failed = IntervalSet::new();
    for l in ledgers {
        acknowledged = acknowledged.union(&l.acknowledged);
        failed = failed.union(&l.failed);
    }
    Ledger {
        ingestor_id: ledgers.iter().find_map(|l| l.ingestor_id.clone()),
        producer_id: ledgers.iter().find_map(|l| l.id()),
        producer_id_hex: None,
        next_sequence: ledgers.iter().filter_map(|l| l.next_sequence).max(),
        failed: failed.difference(&acknowledged),
        acknowledged,
    }
}

#[cfg(test)]
#[allow(clippy::type_complexity)] // test tables
mod tests {
    use super::*;

    fn set(r: &[[u64; 2]]) -> IntervalSet {
        IntervalSet::from_ranges(r.iter().copied())
    }

    #[test]
    fn reconciliation_table() {
        // (acknowledged, failed, next_sequence, seen, lost, failed_not_consumed, despite, unknown, not_in_ledger)
        type R = &'static [[u64; 2]];
        let table: &[(R, R, Option<u64>, R, R, R, u64, R, u64)] = &[
            (&[[0, 9]], &[], Some(10), &[[0, 9]], &[], &[], 0, &[], 0),
            (
                &[[0, 10]],
                &[],
                None,
                &[[0, 9]],
                &[[10, 10]],
                &[],
                0,
                &[],
                0,
            ),
            (
                &[[0, 4], [6, 9]],
                &[[5, 5]],
                Some(10),
                &[[0, 4], [6, 9]],
                &[],
                &[[5, 5]],
                0,
                &[],
                0,
            ),
            (
                &[[0, 4]],
                &[[5, 5]],
                Some(10),
                &[[0, 5], [8, 8]],
                &[],
                &[],
                1,
                &[[6, 7], [9, 9]],
                1,
            ),
            (&[[0, 3]], &[], Some(4), &[], &[[0, 3]], &[], 0, &[], 0),
        ];
        for (i, &(ack, failed, next, seen, lost, fnc, despite, unknown, not_in)) in
            table.iter().enumerate()
        {
            let ledger = Ledger {
                producer_id: Some(1),
                producer_id_hex: None,
                acknowledged: set(ack),
                failed: set(failed),
                next_sequence: next,
                ingestor_id: None,
            };
            let r = reconcile(&ledger, &set(seen));
            assert_eq!(r.lost.ranges(), lost, "row {i}");
            assert_eq!(r.failed_not_consumed.ranges(), fnc, "row {i}");
            assert_eq!(r.delivered_despite_failure, despite, "row {i}");
            assert_eq!(r.unknown_not_consumed.ranges(), unknown, "row {i}");
            assert_eq!(r.consumed_not_in_ledger, not_in, "row {i}");
        }
    }

    #[test]
    fn combining_snapshots_prefers_acknowledged() {
        let a = Ledger {
            producer_id: Some(1),
            acknowledged: set(&[[0, 4]]),
            failed: set(&[[5, 6]]),
            next_sequence: Some(7),
            ..Ledger::default()
        };
        let b = Ledger {
            producer_id: Some(1),
            acknowledged: set(&[[5, 5], [7, 9]]),
            next_sequence: Some(10),
            ..Ledger::default()
        };
        let c = combine(&[&a, &b]);
        assert_eq!(c.acknowledged.ranges(), &[[0, 5], [7, 9]]);
        assert_eq!(c.failed.ranges(), &[[6, 6]]);
        assert_eq!(c.next_sequence, Some(10));
    }
}
