//! One chronik-consumer against a real chronik-server: a clean stream reads
//! all zeros; injected gap, duplicate, reordering, corruption and foreign
//! records are each counted exactly; a ledger claiming one more
//! acknowledged message than exists is reported as loss.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use common::{count, read_json, Broker, TestProducer, WAIT};

const A: u64 = 0xA0;
const B: u64 = 0xB0;

#[test]
fn a_clean_stream_reads_all_zeros() -> anyhow::Result<()> {
    let broker = Broker::start()?;
    broker.create_topic("clean", 3)?;
    let producer = TestProducer::new(&broker.bootstrap, "clean")?;
    // Each producer's sequences spread over every partition.
    for s in 0..1500u64 {
        producer.send_seqs((s % 3) as i32, A, [s])?;
        producer.send_seqs(((s + 1) % 3) as i32, B, [s])?;
    }
    producer.flush()?;
    let report_path = broker.path("clean.json");
    let report_arg = report_path.display().to_string();
    let mut c = broker.consumer(
        "clean",
        &[
            "--topic",
            "clean",
            "--group",
            "g-clean",
            "--from-beginning",
            "--until-idle",
            "3",
            "--report",
            &report_arg,
        ],
    )?;
    assert_eq!(c.process.wait_exit_code(WAIT)?, 0, "clean stream exits 0");
    let r = read_json(&report_path)?;
    assert_eq!(
        (
            count(&r, "consumed"),
            count(&r, "verified"),
            count(&r, "producers")
        ),
        (3000, 3000, 2)
    );
    for zero in [
        "duplicates",
        "reordered",
        "corrupt",
        "redeliveries",
        "foreign",
        "gaps",
        "lost",
        "envelopeErrors",
    ] {
        assert_eq!(count(&r, zero), 0, "{zero}");
    }
    assert_eq!(r["verdict"]["clean"], true);
    assert_eq!(r["verdict"]["conclusive"], true, "{}", r["verdict"]);
    assert_eq!(r["latency"]["e2e"]["count"], 3000);
    assert!(r["latency"]["e2e"]["p99Us"]
        .as_u64()
        .is_some_and(|p| p > 0 && p < 60_000_000));
    let hlog = std::fs::read_to_string(report_path.with_extension("hlog"))?;
    assert!(
        hlog.contains("HISTFAA"),
        "the .hlog holds interval histograms"
    );
    let result = c.process.wait_line("RESULT ", WAIT)?;
    assert!(
        result.contains("clean=true") && result.contains("verified=3000"),
        "{result}"
    );
    Ok(())
}

#[test]
fn injected_faults_are_each_counted_exactly() -> anyhow::Result<()> {
    let broker = Broker::start()?;
    broker.create_topic("faults", 2)?;
    let p = TestProducer::new(&broker.bootstrap, "faults")?;
    // Partition 0, producer A (offsets in brackets):
    p.send_seqs(0, A, 0..=19)?; // [0..19]
    p.send_seqs(0, A, 21..=39)?; // [20..38]  gap: 20
    p.send_seqs(0, A, [41, 40])?; // [39, 40] reordered: 40 after 41
    p.send(0, Some((A, 42)), b"intact?", true)?; // [41] corrupt
    p.send_seqs(0, A, [5])?; // [42] duplicate of sequence 5
    p.send(0, None, b"no envelope", false)?; // [43] foreign
    p.send(0, None, b"no envelope either", false)?; // [44] foreign
    p.send_seqs(0, A, [43])?; // [45]
                              // Partition 1, producer B, clean.
    p.send_seqs(1, B, 0..30)?;
    p.flush()?;
    let total = 46 + 30;

    let report_path = broker.path("faults.json");
    let report_arg = report_path.display().to_string();
    let mut c = broker.consumer(
        "faults",
        &[
            "--topic",
            "faults",
            "--group",
            "g-faults",
            "--from-beginning",
            "--report",
            &report_arg,
        ],
    )?;
    c.wait_summary("every record consumed", |s| {
        s["counts"]["consumed"] == total
    })?;
    // Live endpoints show the same counts before shutdown.
    let summary = c.wait_summary("assigned partitions and lag published", |s| {
        s["assigned"]
            .as_array()
            .is_some_and(|a| a.len() == 2 && a.iter().all(|p| p["lag"] == 0))
    })?;
    assert_eq!(summary["counts"]["duplicates"], 1);
    assert_eq!(summary["gaps"], 1);
    let metrics = c.get("/metrics")?;
    for line in [
        format!("chronik_consumer_consumed_total {total}"),
        "chronik_consumer_verified_total 74".to_string(),
        "chronik_consumer_duplicates_total 1".to_string(),
        "chronik_consumer_reordered_total 1".to_string(),
        "chronik_consumer_corrupt_total 1".to_string(),
        "chronik_consumer_foreign_total 2".to_string(),
        "chronik_consumer_redeliveries_total 0".to_string(),
        "chronik_consumer_gaps 1".to_string(),
        "chronik_consumer_lag{topic=\"faults\",partition=\"0\"} 0".to_string(),
        "chronik_consumer_e2e_latency_seconds_count 74".to_string(),
    ] {
        assert!(
            metrics.contains(&line),
            "missing {line:?} in /metrics:\n{metrics}"
        );
    }

    c.process.sigterm()?;
    assert_eq!(
        c.process.wait_exit_code(WAIT)?,
        1,
        "problems found: exit status 1"
    );
    let r = read_json(&report_path)?;
    let expected = [
        ("consumed", total),
        ("verified", 74),
        ("duplicates", 1),
        ("reordered", 1),
        ("corrupt", 1),
        ("foreign", 2),
        ("envelopeErrors", 0),
        ("redeliveries", 0),
        ("gaps", 1),
        ("unexplainedGaps", 1),
    ];
    for (name, n) in expected {
        assert_eq!(count(&r, name), n, "{name}");
    }
    assert_eq!(
        r["verdict"]["failures"],
        serde_json::json!(["duplicates", "corrupt", "reordered", "gaps"])
    );
    let producer_a = r["producers"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["producerId"] == A))
        .cloned();
    assert_eq!(
        producer_a.map(|p| p["gaps"].clone()),
        Some(serde_json::json!([[20, 20]]))
    );
    let ex = &r["examples"];
    assert_eq!(
        (
            ex["reordered"][0]["offset"].as_i64(),
            ex["reordered"][0]["sequence"].as_u64()
        ),
        (Some(40), Some(40))
    );
    assert_eq!(ex["reordered"][0]["previousSequence"], 41);
    assert_eq!(
        (
            ex["corrupt"][0]["offset"].as_i64(),
            ex["duplicates"][0]["offset"].as_i64()
        ),
        (Some(41), Some(42))
    );
    assert_eq!(r["coverage"]["complete"], true);
    Ok(())
}

/// Serves `body` to every GET on a loopback port (a stand-in for an
/// ingestor's /ledger) until the test ends.
fn serve_ledger(body: String) -> anyhow::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || {
        for mut stream in listener.incoming().map_while(Result::ok) {
            let mut buf = [0u8; 4096];
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let _ = stream.read(&mut buf);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    Ok(format!("http://{addr}/ledger"))
}

#[test]
fn a_ledger_claiming_one_more_acknowledged_message_is_loss() -> anyhow::Result<()> {
    let broker = Broker::start()?;
    broker.create_topic("ledger", 2)?;
    let p = TestProducer::new(&broker.bootstrap, "ledger")?;
    p.send_seqs(0, A, 0..100)?;
    // B's sequence 25 "failed to produce": never sent.
    p.send_seqs(1, B, (0..50).filter(|&s| s != 25))?;
    p.flush()?;
    // A's file ledger claims 0..=100: one more than was ever written.
    let a_ledger = broker.path("a-ledger.json");
    std::fs::write(
        &a_ledger,
        r#"{"producer_id": 160, "acknowledged": [[0, 100]], "failed": []}"#,
    )?;
    // B's ledger over HTTP, the ingestor's GET /ledger shape.
    let b_url = serve_ledger(
        r#"{"ingestor_id": "test", "producer_id": 176, "producer_id_hex": "00000000000000b0", "next_sequence": 50,
            "acknowledged": [[0, 24], [26, 49]], "failed": [[25, 25]], "acknowledged_count": 49, "failed_count": 1, "in_flight": 0}"#
            .to_string(),
    )?;
    let report_path = broker.path("ledger.json");
    let (report_arg, ledger_arg) = (
        report_path.display().to_string(),
        a_ledger.display().to_string(),
    );
    let mut c = broker.consumer(
        "ledger",
        &[
            "--topic",
            "ledger",
            "--group",
            "g-ledger",
            "--from-beginning",
            "--until-idle",
            "3",
            "--report",
            &report_arg,
            "--ledger",
            &ledger_arg,
            "--ledger",
            &b_url,
        ],
    )?;
    assert_eq!(
        c.process.wait_exit_code(WAIT)?,
        1,
        "loss found: exit status 1"
    );
    let r = read_json(&report_path)?;
    let expected = [
        ("verified", 149),
        ("lost", 1),
        ("gaps", 1),
        ("unexplainedGaps", 0),
        ("failedNotConsumed", 1),
        ("duplicates", 0),
    ];
    for (name, n) in expected {
        assert_eq!(count(&r, name), n, "{name}");
    }
    assert_eq!(r["verdict"]["failures"], serde_json::json!(["lost"]));
    assert_eq!(r["reconciliation"]["acknowledged"], 101 + 49);
    let a = r["producers"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["producerId"] == A))
        .cloned();
    assert_eq!(
        a.map(|p| p["ledger"]["lost"].clone()),
        Some(serde_json::json!([[100, 100]]))
    );
    Ok(())
}
