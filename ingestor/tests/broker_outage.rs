//! The broker stops mid-run: the ingestor answers 503 within the message
//! timeout (never hangs, never crashes), accounts for every message in its
//! ledger, and recovers when the broker comes back on the same data dir.

mod common;

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::{json, Value};

use common::http::{get, post_json};
use common::kafka::{consume, verify_envelopes};
use common::poll_json;
use common::procs::{self, Ingestor};

const MESSAGE_TIMEOUT_MS: u64 = 3000;

fn batch(prefix: &str, n: usize) -> Value {
    Value::Array(
        (0..n)
            .map(|i| json!({"value": format!("{prefix}-{i}")}))
            .collect(),
    )
}

#[test]
fn broker_down_gives_503_within_the_message_timeout_and_recovers() -> Result<()> {
    let mut broker = procs::broker(&[])?;
    let mut ingestor = Ingestor::start(
        &broker.bootstrap(),
        &[
            "--topic",
            "outage",
            "--message-timeout-ms",
            &MESSAGE_TIMEOUT_MS.to_string(),
        ],
    )?;
    let limit = Duration::from_millis(MESSAGE_TIMEOUT_MS) + Duration::from_secs(3);

    let before = post_json(ingestor.http, "/produce/batch", &batch("before", 20))?;
    assert_eq!(before.status, 200, "{}", before.text());

    let status = broker.stop()?;
    assert!(status.success(), "broker exited with {status}");

    // Blocking batch: 503 with a per-message verdict, within the timeout.
    let started = Instant::now();
    let down = post_json(ingestor.http, "/produce/batch", &batch("down", 10))?;
    let took = started.elapsed();
    assert_eq!(down.status, 503, "{}", down.text());
    assert!(took < limit, "answered after {took:?}, limit {limit:?}");
    assert_eq!(down.header("retry-after"), Some("1"));
    let body = down.json()?;
    assert_eq!(body["error"], "delivery_failed");
    assert_eq!(body["failed"], 10);
    let results = body["results"].as_array().context("results")?;
    assert_eq!(results.len(), 10);
    assert!(
        results
            .iter()
            .all(|r| r["error"].is_string() && r["retriable"] == true),
        "{body}"
    );

    // Single message: the same, as {"error","detail"}.
    let started = Instant::now();
    let single = post_json(ingestor.http, "/produce", &json!({"value": "down-single"}))?;
    assert_eq!(single.status, 503, "{}", single.text());
    assert!(started.elapsed() < limit);
    let single_body = single.json()?;
    assert!(
        single_body["error"].is_string() && single_body["detail"].is_string(),
        "{single_body}"
    );

    // A topic never seen before: metadata cannot be fetched -> 503, bounded.
    let started = Instant::now();
    let fresh = post_json(
        ingestor.http,
        "/produce/batch",
        &json!([{"value": "x", "topic": "fresh"}]),
    )?;
    assert_eq!(fresh.status, 503, "{}", fresh.text());
    assert!(started.elapsed() < limit);

    // Fire-and-forget is accepted (queued) and then fails in the background.
    let fire = post_json(ingestor.http, "/produce/fire/batch", &batch("fire-down", 5))?;
    assert_eq!(fire.status, 202, "{}", fire.text());

    assert_eq!(
        get(ingestor.http, "/ready")?.status,
        503,
        "not ready without a broker"
    );
    assert_eq!(get(ingestor.http, "/health")?.status, 200, "alive");
    assert!(ingestor.is_running());

    let ledger = poll_json(
        ingestor.http,
        "/ledger",
        limit + Duration::from_secs(5),
        |v| v["in_flight"] == 0,
    )?;
    assert_eq!(ledger["acknowledged_count"], 20);
    assert_eq!(ledger["failed_count"], 10 + 1 + 5);
    assert_eq!(ledger["acknowledged"], json!([[0, 19]]));
    assert_eq!(ledger["failed"], json!([[20, 35]]));

    // The broker comes back on the same data dir and port.
    broker.restart_same_ports()?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let after = loop {
        let resp = post_json(ingestor.http, "/produce/batch", &batch("after", 20))?;
        if resp.status == 200 {
            break resp;
        }
        assert!(
            Instant::now() < deadline,
            "no recovery within 60 s: {} {}",
            resp.status,
            resp.text()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(after.json()?["delivered"], 20);
    poll_json(ingestor.http, "/ready", Duration::from_secs(30), |v| {
        v["status"] == "ready"
    })?;

    // Every acknowledged message is in the topic, with a valid envelope.
    let ledger = poll_json(ingestor.http, "/ledger", Duration::from_secs(30), |v| {
        v["in_flight"] == 0
    })?;
    let producer_id = ledger["producer_id"].as_u64().context("producer_id")?;
    let acknowledged = ledger["acknowledged_count"]
        .as_u64()
        .context("acknowledged_count")?;
    let records = consume(
        &broker.bootstrap(),
        "outage",
        1,
        acknowledged as usize,
        Duration::from_secs(60),
    )?;
    let by_seq = verify_envelopes(&records, producer_id)?;
    for range in ledger["acknowledged"].as_array().context("ranges")? {
        let (first, last) = (
            range[0].as_u64().context("first")?,
            range[1].as_u64().context("last")?,
        );
        for seq in first..=last {
            assert!(
                by_seq.contains_key(&seq),
                "acknowledged sequence {seq} missing from the topic"
            );
        }
    }
    assert!(
        records.iter().any(|r| r.value == b"before-0")
            && records.iter().any(|r| r.value == b"after-19")
    );

    let stopped = ingestor.stop()?;
    assert_eq!(
        stopped.accepted,
        stopped.delivered + stopped.failed,
        "{stopped:?}"
    );
    Ok(())
}
