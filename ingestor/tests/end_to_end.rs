//! End to end over real HTTP: the `chronik-ingestor` binary against a real
//! `chronik-server`, read back with rdkafka. Covers every produce route, the
//! envelope on every record, the ledger, fire-and-forget accounting and
//! graceful shutdown.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use base64::Engine as _;
use serde_json::{json, Value};

use common::http::{get, post_json, request};
use common::kafka::{consume, verify_envelopes};
use common::procs::{self, Ingestor};
use common::{metric, poll_json};

const PARTITIONS: i32 = 3;
const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// What a record must carry, by its (unique) value: key and non-envelope headers.
type Expected = HashMap<Vec<u8>, (Option<String>, Vec<(String, String)>)>;

fn producer_id(ingestor: &Ingestor) -> Result<u64> {
    get(ingestor.http, "/ledger")?.json()?["producer_id"]
        .as_u64()
        .context("ledger has producer_id")
}

#[test]
fn every_route_delivers_exactly_what_was_sent() -> Result<()> {
    let broker = procs::broker(&["--default-partitions", &PARTITIONS.to_string()])?;
    let ingestor = Ingestor::start(&broker.bootstrap(), &["--topic", "e2e"])?;
    poll_json(ingestor.http, "/ready", Duration::from_secs(30), |v| {
        v["status"] == "ready"
    })?;
    let health = get(ingestor.http, "/health")?.json()?;
    assert_eq!(health["ingestor_id"], "test-ingestor");

    // Expected (key, value, headers) by value, which is unique per message.
    let mut expected: Expected = HashMap::new();

    // 1. POST /produce: one message with key and headers.
    let single = post_json(
        ingestor.http,
        "/produce",
        &json!({"value": "single-0", "key": "user-1", "headers": {"source": "test", "trace": "t-1"}}),
    )?;
    assert_eq!(single.status, 200, "{}", single.text());
    let single_body = single.json()?;
    assert_eq!(single_body["topic"], "e2e");
    assert!(
        single_body["offset"].as_i64().is_some() && single_body["partition"].as_i64().is_some(),
        "{single_body}"
    );
    expected.insert(
        b"single-0".to_vec(),
        (
            Some("user-1".into()),
            vec![
                ("source".into(), "test".into()),
                ("trace".into(), "t-1".into()),
            ],
        ),
    );

    // 2. POST /produce/batch: 60 messages, some keyed, some binary, one escaped.
    let mut batch = Vec::new();
    for i in 0..60 {
        if i % 10 == 9 {
            let raw: Vec<u8> = vec![0, 159, 146, 150, i as u8, 255];
            batch.push(json!({"value_b64": base64::engine::general_purpose::STANDARD.encode(&raw), "key": format!("k{i}")}));
            expected.insert(raw, (Some(format!("k{i}")), vec![]));
        } else if i == 4 {
            let value = "quote \" and \\ and \u{e9} and \n newline";
            batch.push(json!({"value": value, "headers": {"h": "x\"y"}}));
            expected.insert(
                value.as_bytes().to_vec(),
                (None, vec![("h".into(), "x\"y".into())]),
            );
        } else {
            let value = format!("batch-{i}");
            let key = (i % 3 == 0).then(|| format!("k{}", i % 7));
            batch.push(json!({"value": value, "key": key}));
            expected.insert(value.into_bytes(), (key, vec![]));
        }
    }
    let resp = post_json(ingestor.http, "/produce/batch", &Value::Array(batch))?;
    assert_eq!(resp.status, 200, "{}", resp.text());
    let body = resp.json()?;
    assert_eq!(body["delivered"], 60);
    let results = body["results"].as_array().context("results")?;
    assert_eq!(results.len(), 60);
    assert!(
        results
            .iter()
            .all(|r| r["offset"].as_i64().is_some() && r["partition"].as_i64().is_some()),
        "{body}"
    );

    // 3. POST /produce/fire/batch: 3 x 100 messages, answered 202 at once.
    for round in 0..3 {
        let msgs: Vec<Value> = (0..100)
            .map(|i| json!({"value": format!("fire-{round}-{i}"), "key": format!("f{i}")}))
            .collect();
        for i in 0..100 {
            expected.insert(
                format!("fire-{round}-{i}").into_bytes(),
                (Some(format!("f{i}")), vec![]),
            );
        }
        let resp = post_json(ingestor.http, "/produce/fire/batch", &Value::Array(msgs))?;
        assert_eq!(resp.status, 202, "{}", resp.text());
        assert_eq!(resp.json()?["accepted"], 100);
    }
    let total = 1 + 60 + 300;

    // Fire-and-forget accounting: once nothing is in flight,
    // accepted = delivered + failed, in the ledger and in /metrics.
    let ledger = poll_json(ingestor.http, "/ledger", Duration::from_secs(30), |v| {
        v["in_flight"] == 0
    })?;
    assert_eq!(ledger["ingestor_id"], "test-ingestor");
    assert_eq!(ledger["next_sequence"], total);
    assert_eq!(ledger["acknowledged_count"], total);
    assert_eq!(ledger["failed_count"], 0);
    assert_eq!(
        ledger["acknowledged"],
        json!([[0, total - 1]]),
        "one compact range"
    );
    assert_eq!(ledger["failed"], json!([]));
    let metrics = get(ingestor.http, "/metrics")?.text();
    let accepted =
        metric(&metrics, "ingestor_messages_accepted_total").context("accepted metric")?;
    let delivered =
        metric(&metrics, "ingestor_messages_delivered_total").context("delivered metric")?;
    let failed = metric(&metrics, "ingestor_messages_failed_total").context("failed metric")?;
    assert_eq!(
        (accepted, delivered, failed),
        (total as f64, total as f64, 0.0)
    );
    assert_eq!(metric(&metrics, "ingestor_messages_in_flight"), Some(0.0));
    assert!(
        metrics.contains(
            r#"ingestor_http_requests_total{route="/produce/fire/batch",status="202"} 3"#
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains("ingestor_http_request_duration_seconds_bucket"),
        "latency histogram exported"
    );

    // Read everything back and compare.
    let pid = producer_id(&ingestor)?;
    let records = consume(
        &broker.bootstrap(),
        "e2e",
        PARTITIONS,
        total as usize,
        READ_TIMEOUT,
    )?;
    let by_seq = verify_envelopes(&records, pid)?;
    assert_eq!(
        by_seq.keys().copied().collect::<BTreeSet<u64>>(),
        (0..total as u64).collect(),
        "every sequence exactly once"
    );
    let partitions_used: BTreeSet<i32> = records.iter().map(|r| r.partition).collect();
    assert!(
        partitions_used.len() > 1,
        "keys spread over partitions: {partitions_used:?}"
    );
    for r in &records {
        let (key, headers) = expected
            .get(&r.value)
            .with_context(|| format!("unexpected value {:?}", String::from_utf8_lossy(&r.value)))?;
        assert_eq!(
            r.key.as_deref(),
            key.as_deref().map(str::as_bytes),
            "key of {:?}",
            String::from_utf8_lossy(&r.value)
        );
        let got: Vec<(String, String)> = r
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), String::from_utf8_lossy(v).into_owned()))
            .collect();
        assert_eq!(
            &got,
            headers,
            "headers of {:?}",
            String::from_utf8_lossy(&r.value)
        );
    }
    // The single message was sequence 0 and is where /produce said it is.
    let first = &by_seq[&0];
    assert_eq!(first.value, b"single-0");
    assert_eq!(
        (i64::from(first.partition), first.offset),
        (
            single_body["partition"].as_i64().unwrap_or(-1),
            single_body["offset"].as_i64().unwrap_or(-1)
        )
    );
    Ok(())
}

#[test]
fn sigterm_flushes_in_flight_messages_and_reports_final_counts() -> Result<()> {
    let broker = procs::broker(&[])?;
    // A long linger keeps fire-and-forget messages queued when SIGTERM arrives.
    let mut ingestor = Ingestor::start(
        &broker.bootstrap(),
        &["--topic", "drain", "--linger-ms", "2000"],
    )?;
    let mut sent = 0;
    for round in 0..10 {
        let msgs: Vec<Value> = (0..100)
            .map(|i| json!({"value": format!("drain-{round}-{i}")}))
            .collect();
        let resp = post_json(ingestor.http, "/produce/fire/batch", &Value::Array(msgs))?;
        ensure!(
            resp.status == 202,
            "fire batch: {} {}",
            resp.status,
            resp.text()
        );
        sent += 100;
    }
    let before = get(ingestor.http, "/ledger")?.json()?;
    let pid = before["producer_id"].as_u64().context("producer_id")?;
    // Lingering in librdkafka's queue: SIGTERM must wait for these.
    assert!(
        before["in_flight"].as_u64().is_some_and(|n| n > 0),
        "messages in flight at SIGTERM: {before}"
    );
    let addr = ingestor.http;
    let stopped = ingestor.stop()?;
    assert_eq!(stopped.accepted, sent);
    assert_eq!(
        (stopped.delivered, stopped.failed, stopped.in_flight),
        (sent, 0, 0),
        "{stopped:?}"
    );
    assert!(
        request(addr, "GET", "/health", None, b"").is_err(),
        "listener closed after shutdown"
    );
    let records = consume(&broker.bootstrap(), "drain", 1, sent as usize, READ_TIMEOUT)?;
    let by_seq = verify_envelopes(&records, pid)?;
    assert_eq!(by_seq.len() as u64, sent);
    Ok(())
}

#[test]
fn fire_with_a_full_queue_answers_503_saying_how_many_were_accepted() -> Result<()> {
    let broker = procs::broker(&[])?;
    // A long linger keeps the first messages queued, so the 50-message queue fills.
    let mut ingestor = Ingestor::start(
        &broker.bootstrap(),
        &[
            "--topic",
            "full",
            "--queue-max-messages",
            "50",
            "--linger-ms",
            "20000",
        ],
    )?;
    poll_json(ingestor.http, "/ready", Duration::from_secs(30), |v| {
        v["status"] == "ready"
    })?;
    let msgs: Vec<Value> = (0..80)
        .map(|i| json!({"value": format!("full-{i}")}))
        .collect();
    let resp = post_json(ingestor.http, "/produce/fire/batch", &Value::Array(msgs))?;
    assert_eq!(resp.status, 503, "{}", resp.text());
    assert_eq!(resp.header("retry-after"), Some("1"));
    let body = resp.json()?;
    assert_eq!(body["error"], "queue_full");
    assert_eq!(
        (
            body["accepted"].as_u64(),
            body["rejected"].as_u64(),
            body["resend_from"].as_u64()
        ),
        (Some(50), Some(30), Some(50)),
        "{body}"
    );
    let ledger = get(ingestor.http, "/ledger")?.json()?;
    assert_eq!(
        ledger["next_sequence"], 50,
        "rejected messages got no sequence number"
    );
    let metrics = get(ingestor.http, "/metrics")?.text();
    assert!(
        metrics.contains(r#"ingestor_messages_rejected_total{reason="queue_full"} 30"#),
        "{metrics}"
    );

    // Shutdown flushes the 50 accepted ones despite the linger.
    let stopped = ingestor.stop()?;
    assert_eq!(
        (stopped.accepted, stopped.delivered, stopped.failed),
        (50, 50, 0),
        "{stopped:?}"
    );
    let records = consume(&broker.bootstrap(), "full", 1, 50, READ_TIMEOUT)?;
    let values: BTreeSet<Vec<u8>> = records.iter().map(|r| r.value.clone()).collect();
    assert_eq!(
        values,
        (0..50).map(|i| format!("full-{i}").into_bytes()).collect()
    );
    Ok(())
}
