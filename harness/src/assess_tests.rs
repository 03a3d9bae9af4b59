//! Tables for `assess`: counts recomputed from sets agree with the
//! verifier's, merges are exact, and the ledgers tell loss from failures
//! and from sequences whose outcome is unknown.

use super::*;
use crate::test_support::{replica, Rec};
use crate::verify::Verifier;

const P: u64 = 11;
const Q: u64 = 12;

fn merged(verifiers: &[&Verifier], ledgers: &[&Ledger]) -> Assessment {
    let mut tally = Tally::default();
    for v in verifiers {
        tally.absorb(Tally::from_verifier(v));
    }
    assess(&tally, ledgers)
}

#[test]
fn one_verifiers_totals_agree_with_its_running_counts() {
    let cases: Vec<(&str, Vec<Rec>)> = vec![
        (
            "clean",
            vec![
                (0, 0, Some((P, 0))),
                (0, 1, Some((P, 1))),
                (1, 0, Some((Q, 0))),
            ],
        ),
        (
            "every problem",
            vec![
                (0, 0, Some((P, 0))),
                (0, 1, Some((P, 2))),
                (0, 2, Some((P, 1))),
                (0, 3, Some((P, 1))),
                (0, 4, None),
                (0, 1, Some((P, 2))),
                (0, 5, Some((P, 5))),
            ],
        ),
    ];
    for (name, records) in cases {
        let v = replica(&records, &[6, 1]);
        let local = v.counts();
        assert_eq!(merged(&[&v], &[]).totals.records, local, "{name}");
    }
}

#[test]
fn gaps_are_holes_between_a_producers_lowest_and_highest_sequence() {
    // Producer P's sequences 0..100 round-robin over partitions 0 and 1:
    // one consumer per partition sees every other sequence.
    let (mut p0, mut p1) = (Vec::new(), Vec::new());
    for s in 0..100u64 {
        let (list, partition) = if s % 2 == 0 {
            (&mut p0, 0)
        } else {
            (&mut p1, 1)
        };
        let offset = list.len() as i64;
        list.push((partition, offset, Some((P, s))));
    }
    let a = replica(&p0, &[50, 50]);
    let b = replica(&p1, &[50, 50]);
    assert_eq!(merged(&[&a], &[]).totals.gaps, 49);
    let t = merged(&[&a, &b], &[]).totals;
    assert_eq!(
        (t.records.verified, t.gaps, t.records.duplicates),
        (100, 0, 0)
    );
    assert_eq!(
        a.counts().verified + b.counts().verified,
        t.records.verified
    );
}

#[test]
fn a_record_read_by_two_consumers_is_a_redelivery_not_a_duplicate() {
    let p0: Vec<Rec> = (0..20).map(|i| (0, i as i64, Some((P, i)))).collect();
    // A read offsets 0..14 of partition 0, then lost it; B resumed from the
    // committed offset 10 and read 10..19.
    let a = replica(&p0[..15], &[20]);
    let b = replica(&p0[10..], &[20]);
    let t = merged(&[&a, &b], &[]).totals.records;
    assert_eq!(
        (t.consumed, t.verified, t.redeliveries, t.duplicates),
        (25, 20, 5, 0)
    );
}

#[test]
fn the_same_sequence_in_two_consumers_partitions_is_a_duplicate() {
    let a = replica(&[(0, 0, Some((P, 0))), (0, 1, Some((P, 1)))], &[2, 1]);
    let b = replica(&[(1, 0, Some((P, 1)))], &[2, 1]);
    let t = merged(&[&a, &b], &[]).totals;
    assert_eq!(
        (
            t.records.verified,
            t.records.duplicates,
            t.distinct_sequences
        ),
        (3, 1, 2)
    );
}

#[test]
fn merged_problem_sets_do_not_double_count() {
    // Both consumers read the same reordered record and the same foreign one.
    let records = vec![(0, 0, Some((P, 1))), (0, 1, Some((P, 0))), (0, 2, None)];
    let a = replica(&records, &[3]);
    let b = replica(&records, &[3]);
    let t = merged(&[&a, &b], &[]).totals.records;
    assert_eq!((t.reordered, t.foreign, t.redeliveries), (1, 1, 3));
}

#[test]
fn ledgers_tell_lost_from_failed_and_unknown() {
    // P assigned 0..10: 3 acknowledged but never consumed (lost); 5 never
    // reported (unknown, not consumed: not a loss); 7 failed and absent
    // (failed, not consumed); 8 failed but consumed anyway. Q has no ledger.
    let seen: Vec<Rec> = [0, 1, 2, 4, 6, 8, 9]
        .iter()
        .enumerate()
        .map(|(o, &s)| (0, o as i64, Some((P, s))))
        .chain([(1, 0, Some((Q, 0))), (1, 1, Some((Q, 1)))])
        .collect();
    let v = replica(&seen, &[7, 2]);
    let ledger = Ledger::new(
        None,
        P,
        10,
        IntervalSet::from_ranges([[0, 4], [6, 6], [9, 9]]),
        IntervalSet::from_ranges([[7, 8]]),
    );
    let a = merged(&[&v], &[&ledger]);
    assert_eq!(
        a.ledgers,
        LedgerTotals {
            ledger_producers: 1,
            acknowledged: 7,
            lost: 1,
            failed_not_consumed: 1,
            delivered_despite_failure: 1,
            unknown_not_consumed: 1,
            consumed_not_in_ledger: 0,
            producers_without_ledger: vec![Q],
        }
    );
    // P's gaps are 3, 5 and 7; only 7 is explained by a failed production.
    assert_eq!((a.totals.gaps, a.totals.unexplained_gaps), (3, 2));
    assert_eq!(a.totals.lost, 1);
    let p = &a.producers[0];
    assert_eq!(
        p.ledger.as_ref().map(|r| r.lost.ranges()),
        Some(&[[3, 3]][..])
    );
}
