//! Tables for `report`: counts recomputed from sets agree with the
//! verifier's, merges are exact, and the verdict follows the ledgers.

use super::*;
use crate::ledger::parse_ledgers;
use crate::verify::Observed;
use chronik_harness::Envelope;

const P: u64 = 11;
const Q: u64 = 12;

/// (partition, offset, Some((producer, sequence)) or None for a foreign record)
type Rec = (i32, i64, Option<(u64, u64)>);

/// A verifier fed `records` of topic "t" whose partitions' high watermarks
/// are `hw` (partition i has hw[i], log start 0).
fn replica(records: &[Rec], hw: &[i64]) -> Verifier {
    let mut v = Verifier::new();
    for (partition, &high) in hw.iter().enumerate() {
        let slot = v.partition_slot("t", partition as i32);
        v.note_watermarks(slot, 0, high);
    }
    for &(partition, offset, env) in records {
        let header = env.map(|(p, s)| Envelope::new(p, s, 0, b"v").encode());
        let slot = v.partition_slot("t", partition);
        v.observe(
            slot,
            &Observed {
                offset,
                envelope: header.as_ref().map(|h| &h[..]),
                value: b"v",
                consumed_at_us: 10,
            },
        );
    }
    v
}

fn report(tallies: Vec<Tally>, ledgers: &LedgerSources) -> Report {
    let mut merged = Tally::default();
    for t in tallies {
        merged.absorb(t);
    }
    build_report(
        "merged",
        serde_json::Value::Null,
        &merged,
        ledgers,
        None,
        Vec::new(),
    )
}

/// Producer P's sequences 0..n round-robin over partitions 0 and 1, at
/// offsets 0.. in each.
fn two_partition_stream(n: u64) -> (Vec<Rec>, Vec<Rec>) {
    let (mut p0, mut p1) = (Vec::new(), Vec::new());
    for s in 0..n {
        let list = if s % 2 == 0 { &mut p0 } else { &mut p1 };
        let offset = list.len() as i64;
        list.push((if s % 2 == 0 { 0 } else { 1 }, offset, Some((P, s))));
    }
    (p0, p1)
}

#[test]
fn one_replica_report_agrees_with_the_verifier() {
    let cases: Vec<(&str, Vec<Rec>, Vec<i64>)> = vec![
        (
            "clean",
            vec![
                (0, 0, Some((P, 0))),
                (0, 1, Some((P, 1))),
                (1, 0, Some((Q, 0))),
            ],
            vec![2, 1],
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
            vec![6],
        ),
    ];
    for (name, records, hw) in cases {
        let v = replica(&records, &hw);
        let local = v.counts();
        let r = build_report(
            "replica",
            serde_json::Value::Null,
            &Tally::from_verifier(&v),
            &Vec::new(),
            None,
            Vec::new(),
        );
        let c = r.counts;
        assert_eq!(
            (
                c.consumed,
                c.verified,
                c.duplicates,
                c.reordered,
                c.corrupt,
                c.redeliveries,
                c.foreign
            ),
            (
                local.consumed,
                local.verified,
                local.duplicates,
                local.reordered,
                local.corrupt,
                local.redeliveries,
                local.foreign
            ),
            "{name}"
        );
        assert!(r.coverage.complete, "{name}");
    }
}

#[test]
fn verdict_table() {
    // (name, records, hw, ledger JSON or "", failures, gaps, lost, conclusive)
    let cases: &[(&str, Vec<Rec>, Vec<i64>, &str, &[&str], u64, u64, bool)] = &[
        (
            "clean",
            vec![(0, 0, Some((P, 0))), (0, 1, Some((P, 1)))],
            vec![2],
            "",
            &[],
            0,
            0,
            true,
        ),
        (
            "gap without ledger",
            vec![(0, 0, Some((P, 0))), (0, 1, Some((P, 2)))],
            vec![2],
            "",
            &["gaps"],
            1,
            0,
            true,
        ),
        (
            "gap explained by a failed production",
            vec![(0, 0, Some((P, 0))), (0, 1, Some((P, 2)))],
            vec![2],
            r#"{"producer_id": 11, "acknowledged": [[0, 0], [2, 2]], "failed": [[1, 1]]}"#,
            &[],
            1,
            0,
            true,
        ),
        (
            "ledger claims one more acknowledged",
            vec![(0, 0, Some((P, 0))), (0, 1, Some((P, 1)))],
            vec![2],
            r#"{"producer_id": 11, "acknowledged": [[0, 2]]}"#,
            &["lost"],
            0,
            1,
            true,
        ),
        (
            "a producer no one consumed, per its ledger",
            vec![(0, 0, Some((P, 0)))],
            vec![1],
            r#"[{"producer_id": 11, "acknowledged": [[0, 0]]}, {"producer_id": 12, "acknowledged": [[0, 4]]}]"#,
            &["lost"],
            0,
            5,
            true,
        ),
        (
            "unconsumed offsets make gaps and loss inconclusive",
            vec![(0, 0, Some((P, 0))), (0, 1, Some((P, 2)))],
            vec![5],
            r#"{"producer_id": 11, "acknowledged": [[0, 3]]}"#,
            &[],
            1,
            2,
            false,
        ),
        (
            "duplicates fail even when inconclusive",
            vec![(0, 0, Some((P, 0))), (0, 1, Some((P, 0)))],
            vec![9],
            "",
            &["duplicates"],
            0,
            0,
            false,
        ),
    ];
    for (name, records, hw, ledger, failures, gaps, lost, conclusive) in cases {
        let ledgers = if ledger.is_empty() {
            Vec::new()
        } else {
            vec![("l".to_string(), parse_ledgers("l", ledger).expect("ledger"))]
        };
        let r = report(vec![Tally::from_verifier(&replica(records, hw))], &ledgers);
        assert_eq!(
            r.verdict.failures,
            failures.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            "{name}"
        );
        assert_eq!(
            (r.counts.gaps, r.counts.lost, r.verdict.conclusive),
            (*gaps, *lost, *conclusive),
            "{name}"
        );
        assert_eq!(r.verdict.clean, failures.is_empty(), "{name}");
    }
}

#[test]
fn replicas_with_half_the_partitions_each_merge_clean() {
    let (p0, p1) = two_partition_stream(100);
    let a = replica(&p0, &[50, 50]);
    let b = replica(&p1, &[50, 50]);
    // Alone, each sees every other sequence missing, and knows it is partial.
    let alone = report(vec![Tally::from_verifier(&a)], &Vec::new());
    assert_eq!(alone.counts.gaps, 49);
    assert!(!alone.verdict.conclusive && alone.verdict.clean);
    let merged = report(
        vec![Tally::from_verifier(&a), Tally::from_verifier(&b)],
        &Vec::new(),
    );
    assert_eq!(
        (
            merged.counts.verified,
            merged.counts.gaps,
            merged.counts.duplicates
        ),
        (100, 0, 0)
    );
    assert!(
        merged.verdict.conclusive && merged.verdict.clean,
        "{:?}",
        merged.verdict
    );
    assert_eq!(
        a.counts().verified + b.counts().verified,
        merged.counts.verified
    );
}

#[test]
fn a_record_read_by_two_replicas_is_a_redelivery_not_a_duplicate() {
    let p0: Vec<Rec> = (0..20).map(|i| (0, i as i64, Some((P, i)))).collect();
    // A read offsets 0..14 of partition 0, then lost it; B resumed from the
    // committed offset 10 and read 10..19.
    let a = replica(&p0[..15], &[20]);
    let b = replica(&p0[10..], &[20]);
    let merged = report(
        vec![Tally::from_verifier(&a), Tally::from_verifier(&b)],
        &Vec::new(),
    );
    let c = merged.counts;
    assert_eq!(
        (c.consumed, c.verified, c.redeliveries, c.duplicates),
        (25, 20, 5, 0)
    );
    assert!(
        merged.verdict.clean && merged.verdict.conclusive,
        "{:?}",
        merged.verdict
    );
}

#[test]
fn merged_problem_sets_do_not_double_count() {
    // Both replicas read the same reordered and corrupt record.
    let records = vec![(0, 0, Some((P, 1))), (0, 1, Some((P, 0))), (0, 2, None)];
    let a = replica(&records, &[3]);
    let b = replica(&records, &[3]);
    let merged = report(
        vec![Tally::from_verifier(&a), Tally::from_verifier(&b)],
        &Vec::new(),
    );
    assert_eq!(
        (
            merged.counts.reordered,
            merged.counts.foreign,
            merged.counts.redeliveries
        ),
        (1, 1, 3)
    );
    assert_eq!(merged.examples.reordered.len(), 1);
}

#[test]
fn reports_round_trip_through_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (p0, p1) = two_partition_stream(30);
    let all: Vec<Rec> = p0.iter().chain(p1.iter()).copied().collect();
    let v = replica(&all, &[15, 15]);
    let original = build_report(
        "replica",
        serde_json::json!({"tool": "t"}),
        &Tally::from_verifier(&v),
        &Vec::new(),
        None,
        vec![],
    );
    let path = dir.path().join("r.json");
    std::fs::write(&path, serde_json::to_string(&original).expect("json")).expect("write");
    let (tally, summary) = read_report(&path).expect("reads back");
    assert_eq!(
        (summary.kind.as_str(), summary.consumed, summary.verified),
        ("replica", 30, 30)
    );
    let again = build_report(
        "merged",
        serde_json::Value::Null,
        &tally,
        &Vec::new(),
        None,
        vec![summary],
    );
    assert_eq!(
        serde_json::to_value(again.counts).ok(),
        serde_json::to_value(original.counts).ok()
    );
    assert_eq!(again.latency.e2e, original.latency.e2e);
    assert_eq!(again.coverage.unconsumed_offsets, 0);
}

#[test]
fn histograms_survive_base64() {
    let mut h = new_latency_histogram();
    for v in [1, 10, 100, 1_000_000] {
        chronik_harness::histogram::record_us(&mut h, v);
    }
    let back = decode_histogram(&encode_histogram(&h)).expect("decodes");
    assert_eq!(back, h);
    assert!(decode_histogram("").expect("empty").is_empty());
    assert!(decode_histogram("!!").is_err());
}
