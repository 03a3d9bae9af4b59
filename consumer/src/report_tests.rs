//! Tables for `report`: the verdict follows the counts, the coverage and the
//! ledgers, and a report reads back into the tally it was made from. (The
//! counts themselves are tested once, in chronik-harness's `assess`.)

use super::*;
use crate::ledger::parse_ledgers;
use chronik_harness::test_support::{replica, Rec};

const P: u64 = 11;

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
fn replicas_with_half_the_partitions_each_are_inconclusive_alone_and_clean_merged() {
    let (p0, p1) = two_partition_stream(100);
    let a = replica(&p0, &[50, 50]);
    let b = replica(&p1, &[50, 50]);
    // Alone, each sees every other sequence missing, and knows it is partial.
    let alone = report(vec![Tally::from_verifier(&a)], &Vec::new());
    assert!(!alone.verdict.conclusive && alone.verdict.clean);
    assert!(
        alone.verdict.notes[0].contains("gaps (49)"),
        "{:?}",
        alone.verdict
    );
    let merged = report(
        vec![Tally::from_verifier(&a), Tally::from_verifier(&b)],
        &Vec::new(),
    );
    assert!(
        merged.verdict.conclusive && merged.verdict.clean,
        "{:?}",
        merged.verdict
    );
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
