//! Share-group mode against a real chronik-server: two chronik-consumer
//! members of one share group on a one-partition topic (both are assigned
//! it: records, not partitions, are what members hold), one of them killed
//! with SIGKILL while it holds records it has not acknowledged. Its
//! records are redelivered to the survivor once their lock expires
//! (share.record.lock.duration.ms=15000, the minimum), and the merge of
//! the killed member's last checkpoint with the survivor's report shows
//! zero loss, every record accepted exactly once, and the redeliveries
//! counted and explained, not called faults.

mod common;

use std::time::{Duration, Instant};

use common::{read_json, Broker, TestProducer, WAIT};

const RECORDS: u64 = 3000;
const PRODUCER: u64 = 0x5a4e;

fn share(s: &serde_json::Value, field: &str) -> u64 {
    s["share"][field].as_u64().unwrap_or(0)
}

#[test]
fn a_killed_member_s_records_are_redelivered_and_accepted_once() -> anyhow::Result<()> {
    let started = Instant::now();
    let broker = Broker::start()?;
    broker.create_topic("queue", 1)?;
    let (a_report, b_report) = (broker.path("a.json"), broker.path("b.json"));
    let member = |name: &str, report: &std::path::Path, extra: &[&str]| {
        let report = report.display().to_string();
        let mut args = vec![
            "--topic",
            "queue",
            "--share-group",
            "q",
            "--from-beginning",
            "--share-config",
            "share.record.lock.duration.ms=15000",
            "--report",
            &report,
        ];
        args.extend_from_slice(extra);
        broker.consumer(name, &args)
    };
    // A acknowledges only after a checkpoint, at most every second: killed
    // right after its first delivery, it still holds those records. A
    // alone first, so that it is the one holding records when killed.
    let mut a = member("a", &a_report, &["--checkpoint-interval", "1s"])?;
    a.wait_summary("A joined with the partition", |s| {
        s["share"]["memberEpoch"].as_i64().unwrap_or(0) > 0
            && s["assigned"].as_array().is_some_and(|a| !a.is_empty())
    })?;
    let producer = TestProducer::new(&broker.bootstrap, "queue")?;
    producer.send_seqs(0, PRODUCER, 0..RECORDS)?;
    producer.flush()?;
    let ledger = broker.path("ledger.json");
    std::fs::write(&ledger, serde_json::to_vec(&producer.ledger())?)?;
    a.wait_summary("a delivery to A", |s| share(s, "deliveries") > 0)?;
    a.process.kill()?;
    // B joins, takes what A never acquired, then A's records once their
    // locks expire (15 s after A acquired them), then stops when idle
    let mut b = member("b", &b_report, &["--until-idle", "18"])?;
    let b_status = b.process.wait_exit_code(WAIT)?;
    assert_eq!(b_status, 0, "B: {}", b.process.log_tail(20));

    let b_json = read_json(&b_report)?;
    assert!(
        share(&b_json, "redeliveries") > 0,
        "B got A's records again: {}",
        b_json["share"]
    );
    let mut reports = vec![b_report.clone()];
    // A's last checkpoint; none if it died before its first one (then it
    // acknowledged nothing: acknowledgements wait for a checkpoint)
    if a_report.exists() {
        let a_json = read_json(&a_report)?;
        assert_eq!(a_json["run"]["stopReason"], "checkpoint");
        reports.push(a_report.clone());
    }
    let ledger_arg = ledger.display().to_string();
    let (status, merged) = broker.merge(&reports, &["--ledger", &ledger_arg])?;
    let s = &merged["share"];
    assert_eq!(status, 0, "merge verdict: {}", merged["verdict"]);
    assert_eq!(merged["verdict"]["conclusive"], true);
    assert_eq!(merged["counts"]["lost"], 0, "no loss");
    assert_eq!(merged["counts"]["duplicates"], 0);
    assert_eq!(s["acceptedTwice"], 0, "no record accepted twice");
    assert_eq!(s["notAccepted"], 0, "every record accepted");
    assert_eq!(
        share(&merged, "recordsAccepted") + share(&merged, "acceptOutcomeUnknown"),
        RECORDS,
        "each record accepted once (by B, or by A just before it died): {s}"
    );
    assert!(share(&merged, "redeliveries") > 0);
    assert!(s["maxDeliveryCount"].as_u64().unwrap_or(0) >= 2);
    assert!(s["byDeliveryCount"]["2"].as_u64().unwrap_or(0) > 0);
    if a_report.exists() {
        assert_eq!(share(&merged, "membersDied"), 1);
    }
    let explanation = s["explanation"].to_string();
    assert!(explanation.contains("redeliveries"), "{explanation}");
    assert!(
        started.elapsed() < Duration::from_secs(90),
        "took {:?}",
        started.elapsed()
    );
    Ok(())
}
