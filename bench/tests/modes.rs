//! Every mode against a real chronik-server: produce (count mode, every
//! output file), consume (reads exactly what was produced), round-trip
//! (clean verification, end-to-end latency) and metadata.

mod common;

use common::{broker, hlog, num, read_json, run_bench};

const OMB_FIELDS: &[&str] = &[
    "workload",
    "driver",
    "messageSize",
    "topics",
    "partitions",
    "producersPerTopic",
    "consumersPerTopic",
    "publishRate",
    "publishErrorRate",
    "consumeRate",
    "backlog",
    "publishLatencyAvg",
    "publishLatency50pct",
    "publishLatency75pct",
    "publishLatency95pct",
    "publishLatency99pct",
    "publishLatency999pct",
    "publishLatency9999pct",
    "publishLatencyMax",
    "publishDelayLatencyAvg",
    "publishDelayLatency50pct",
    "publishDelayLatency99pct",
    "publishDelayLatencyMax",
    "aggregatedPublishLatencyAvg",
    "aggregatedPublishLatency50pct",
    "aggregatedPublishLatency75pct",
    "aggregatedPublishLatency95pct",
    "aggregatedPublishLatency99pct",
    "aggregatedPublishLatency999pct",
    "aggregatedPublishLatency9999pct",
    "aggregatedPublishLatencyMax",
    "aggregatedPublishDelayLatencyAvg",
    "aggregatedPublishDelayLatency50pct",
    "aggregatedPublishDelayLatency99pct",
    "aggregatedPublishDelayLatencyMax",
    "aggregatedPublishLatencyQuantiles",
    "aggregatedPublishDelayLatencyQuantiles",
    "endToEndLatencyAvg",
    "endToEndLatency50pct",
    "endToEndLatency99pct",
    "endToEndLatencyMax",
    "aggregatedEndToEndLatencyAvg",
    "aggregatedEndToEndLatency50pct",
    "aggregatedEndToEndLatency99pct",
    "aggregatedEndToEndLatencyMax",
    "aggregatedEndToEndLatencyQuantiles",
];

#[test]
fn produce_then_consume_with_every_output() -> anyhow::Result<()> {
    let broker = broker()?;
    let dir = tempfile::tempdir()?;
    let json = dir.path().join("produce.json");
    let csv = dir.path().join("runs.csv");
    let results = dir.path().join("results");
    let pid = broker.pid().to_string();
    let run = run_bench(
        &broker,
        &[
            "--topic",
            "modes",
            "--create-topic",
            "--partitions",
            "2",
            "--message-count",
            "20000",
            "--warmup-duration",
            "0s",
            "--message-size",
            "200",
            "--acks",
            "all",
            "--linger-ms",
            "2",
            "--batch-size",
            "32768",
            "--report-interval-secs",
            "1",
            "--json-output",
            json.to_str().unwrap_or_default(),
            "--csv-output",
            csv.to_str().unwrap_or_default(),
            "--results-dir",
            results.to_str().unwrap_or_default(),
            "--broker-pid",
            &pid,
        ],
    )?;
    run.assert_success("produce");
    assert!(
        run.stdout.contains("Chronik Benchmark Results"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("║ Mode:             Produce"),
        "{}",
        run.stdout
    );

    // JSON: OMB's fields, our figures, the meta block.
    let doc = read_json(&json)?;
    for field in OMB_FIELDS {
        assert!(doc.get(*field).is_some(), "JSON lacks OMB field {field}");
    }
    assert_eq!(
        doc["messages"], 20000,
        "count mode counts every acknowledged message"
    );
    assert_eq!(doc["publish"]["failed"], 0);
    assert_eq!(doc["messageSize"], 200);
    assert_eq!(doc["partitions"], 2);
    assert!(
        doc["publishRate"].as_array().is_some_and(|a| !a.is_empty()),
        "{}",
        doc["publishRate"]
    );
    assert!(num(&doc, "achievedRate") > 0.0);
    assert!(num(&doc, "durationSecs") > 0.0);
    let p50 = num(&doc, "aggregatedPublishLatency50pct");
    let max = num(&doc, "aggregatedPublishLatencyMax");
    assert!(p50 > 0.0 && p50 <= max, "p50 {p50} max {max}");
    assert!(!doc["aggregatedPublishLatencyQuantiles"]
        .as_object()
        .map(|m| m.is_empty())
        .unwrap_or(true));
    let meta = &doc["meta"];
    assert_eq!(meta["tool"], "chronik-bench");
    assert!(meta["gitCommit"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(
        meta["broker"]["clusterId"]
            .as_str()
            .is_some_and(|s| !s.is_empty()),
        "cluster id: {}",
        meta["broker"]
    );
    let apis = meta["broker"]["apiVersions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        apis.iter().any(|a| a["name"] == "Produce"),
        "ApiVersions: {apis:?}"
    );
    assert_eq!(meta["settings"]["acks"], "all");
    assert_eq!(meta["settings"]["lingerMs"], 2);
    assert_eq!(meta["settings"]["batchSize"], 32768);
    assert!(meta["host"]["cores"].as_u64().unwrap_or(0) >= 1);
    let broker_cpu = &doc["resources"]["broker"];
    assert!(
        broker_cpu["cpuSecs"].as_f64().is_some(),
        "broker resources: {}",
        doc["resources"]
    );
    assert!(broker_cpu["peakRssBytes"].as_u64().unwrap_or(0) > 0);

    // CSV: the seed's columns then ours, one row.
    let text = std::fs::read_to_string(&csv)?;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    let header: Vec<&str> = lines[0].split(',').collect();
    let row: Vec<&str> = lines[1].split(',').collect();
    assert_eq!(header.len(), row.len());
    assert_eq!(&header[..3], &["timestamp", "mode", "duration_secs"]);
    let col = |name: &str| {
        row[header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("no column {name}"))]
    };
    assert_eq!(col("mode"), "Produce");
    assert_eq!(col("total_messages"), "20000");
    assert_eq!(col("acks"), "all");
    assert_eq!(col("linger_ms"), "2");
    assert_eq!(col("batch_size"), "32768");
    assert_eq!(col("partitions"), "2");
    assert_eq!(col("replication_factor"), "1");
    assert_eq!(col("compression"), "None");

    // .hlog: parses, and holds every measured sample.
    let (service, samples) = hlog(&doc, "publish-service")?;
    assert_eq!(
        samples, 20000,
        "every acknowledged message is in the interval log"
    );
    let run_dir = service.parent().expect("dir");
    assert!(read_json(&run_dir.join("result.json"))?["meta"].is_object());

    // Consume: reads back exactly what was produced, envelopes verified.
    let consumed_json = dir.path().join("consume.json");
    let run = run_bench(
        &broker,
        &[
            "--topic",
            "modes",
            "--mode",
            "consume",
            "--until-caught-up",
            "--concurrency",
            "2",
            "--warmup-duration",
            "0s",
            "--duration",
            "60s",
            "--json-output",
            consumed_json.to_str().unwrap_or_default(),
        ],
    )?;
    run.assert_success("consume");
    let doc = read_json(&consumed_json)?;
    assert_eq!(doc["consumed"], 20000, "{}", run.stdout);
    assert_eq!(doc["consumedBytes"], 20000 * 200);
    let v = &doc["verification"];
    assert_eq!(v["verified"], 20000);
    assert_eq!(v["duplicates"], 0);
    assert_eq!(v["corrupt"], 0);
    assert_eq!(v["outOfOrder"], 0, "broker log:\n{}", broker.log_tail(30));
    assert_eq!(v["noEnvelope"], 0);
    assert_eq!(v["missingInObservedRange"], 0);
    assert!(num(&doc, "aggregatedEndToEndLatencyMax") > 0.0);
    Ok(())
}

#[test]
fn round_trip_verifies_every_message_while_producing() -> anyhow::Result<()> {
    let broker = broker()?;
    let dir = tempfile::tempdir()?;
    let json = dir.path().join("rt.json");
    let run = run_bench(
        &broker,
        &[
            "--topic",
            "rt",
            "--create-topic",
            "--partitions",
            "3",
            "--mode",
            "round-trip",
            "--concurrency",
            "2",
            "--rate",
            "3000",
            "--duration",
            "3s",
            "--warmup-duration",
            "1s",
            "--message-size",
            "128",
            "--key-pattern",
            "sequential",
            "--report-interval-secs",
            "1",
            "--json-output",
            json.to_str().unwrap_or_default(),
            "--strict",
        ],
    )?;
    run.assert_success("round-trip");
    let doc = read_json(&json)?;
    let v = &doc["verification"];
    assert_eq!(v["reconciliation"]["lost"], 0, "{v}");
    assert_eq!(v["reconciliation"]["gaps"], 0, "{v}");
    assert_eq!(v["duplicates"], 0);
    assert_eq!(v["outOfOrder"], 0);
    assert_eq!(v["corrupt"], 0);
    let acknowledged = v["reconciliation"]["acknowledged"].as_u64().unwrap_or(0);
    assert!(
        acknowledged >= 3000 * 3,
        "warmup and window are both verified: {acknowledged}"
    );
    assert_eq!(
        v["verified"].as_u64(),
        Some(acknowledged),
        "every acknowledged message was consumed once"
    );
    // Consumed while producing: the window has consumption, not just the drain.
    assert!(num(&doc, "consumed") > 0.0);
    let consume_rates = doc["consumeRate"].as_array().cloned().unwrap_or_default();
    assert!(
        consume_rates
            .iter()
            .any(|r| r.as_f64().unwrap_or(0.0) > 0.0),
        "{consume_rates:?}"
    );
    let e2e_p50 = num(&doc, "aggregatedEndToEndLatency50pct");
    assert!(e2e_p50 > 0.0 && e2e_p50 < 5_000.0, "e2e p50 {e2e_p50} ms");
    assert_eq!(doc["valid"], true);
    // Periodic lines show producing and consuming side by side.
    assert!(
        run.stdout
            .lines()
            .any(|l| l.starts_with('[') && l.contains("Consumed:")),
        "{}",
        run.stdout
    );
    Ok(())
}

#[test]
fn metadata_mode_times_metadata_requests() -> anyhow::Result<()> {
    let broker = broker()?;
    let dir = tempfile::tempdir()?;
    let json = dir.path().join("md.json");
    let run = run_bench(
        &broker,
        &[
            "--topic",
            "md",
            "--create-topic",
            "--mode",
            "metadata",
            "--duration",
            "2s",
            "--warmup-duration",
            "0.5s",
            "--json-output",
            json.to_str().unwrap_or_default(),
        ],
    )?;
    run.assert_success("metadata");
    let doc = read_json(&json)?;
    assert!(
        num(&doc, "messages") > 10.0,
        "requests answered: {}",
        doc["messages"]
    );
    assert_eq!(doc["publish"]["failed"], 0);
    let p50 = num(&doc, "aggregatedPublishLatency50pct");
    assert!(p50 > 0.0 && p50 < 1000.0, "metadata p50 {p50} ms");
    assert!(run.stdout.contains("Metadata request latency"));
    Ok(())
}
