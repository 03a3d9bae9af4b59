//! The metrics listener: /health and /ready answer 200, and /metrics exposes
//! counters and gauges that move with the traffic a test generates —
//! requests per API, network bytes in/out, records in/out, fsyncs (per WAL
//! profile) and per-partition log end offset / high watermark.

mod common;

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use rdkafka::admin::AdminClient;
use rdkafka::client::DefaultClientContext;
use rdkafka::producer::FutureRecord;

use common::clients::{self, CLIENT_TIMEOUT};
use common::prom::{self, Sample};
use common::{http, Broker};

const TOPIC: &str = "metered";
const MESSAGES: usize = 10;
const VALUE_LEN: usize = 200;

fn scrape(broker: &Broker) -> Result<Vec<Sample>> {
    Ok(prom::parse(&broker.metrics_text()?))
}

/// Value of `name` (summed over series matching `labels`); a missing metric
/// is an error that lists what the broker does expose.
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Result<f64> {
    prom::sum(samples, name, labels).with_context(|| {
        format!(
            "no sample {name}{labels:?} in /metrics; names present: {:?}",
            prom::names(samples)
        )
    })
}

/// Value of `name` in `after` minus its value in `before` (absent = 0 before).
fn delta(before: &[Sample], after: &[Sample], name: &str, labels: &[(&str, &str)]) -> Result<f64> {
    let b = prom::sum(before, name, labels).unwrap_or(0.0);
    Ok(value(after, name, labels)? - b)
}

/// Produces `MESSAGES` values of `VALUE_LEN` bytes (acks=1), one request each,
/// then reads them back with a Fetch.
/// A broker on `wal_profile` with `TOPIC` (one partition), and the admin
/// client that created it, still connected.
async fn broker_with_topic(
    wal_profile: &str,
) -> Result<(Broker, AdminClient<DefaultClientContext>)> {
    let broker = Broker::start(&["--wal-profile", wal_profile])?;
    let admin = clients::admin(&broker)?;
    clients::create_topic(&admin, TOPIC, 1).await?;
    Ok((broker, admin))
}

async fn produce_and_fetch(broker: &Broker) -> Result<()> {
    let producer = clients::producer(broker, &[("acks", "1"), ("linger.ms", "0")])?;
    for i in 0..MESSAGES {
        let value = format!("{i:03}{}", "m".repeat(VALUE_LEN - 3));
        producer
            .send(
                FutureRecord::<(), _>::to(TOPIC)
                    .partition(0)
                    .payload(&value),
                CLIENT_TIMEOUT,
            )
            .await
            .map_err(|(e, _)| e)
            .with_context(|| format!("produce {i}"))?;
    }
    let consumer = clients::consumer(broker, &[])?;
    clients::assign_from_beginning(&consumer, TOPIC, &[0])?;
    let records = clients::drain(&consumer, &[0], MESSAGES, Duration::from_secs(30))?;
    ensure!(
        records.len() == MESSAGES,
        "read back {} records",
        records.len()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_ready_and_metrics_endpoints_answer() -> Result<()> {
    let broker = Broker::start(&[])?;
    for path in ["/health", "/ready"] {
        let resp = http::get(broker.metrics_addr(), path)?;
        ensure!(resp.status == 200, "GET {path} answered {}", resp.status);
    }
    let resp = http::get(broker.metrics_addr(), "/metrics")?;
    ensure!(resp.status == 200, "GET /metrics answered {}", resp.status);
    let content_type = resp.header("content-type").unwrap_or_default();
    ensure!(
        content_type.starts_with("text/plain")
            || content_type.starts_with("application/openmetrics-text"),
        "/metrics content-type {content_type:?}"
    );
    let text = resp.text();
    ensure!(
        text.contains("# TYPE "),
        "/metrics has no # TYPE lines:\n{text}"
    );
    ensure!(!prom::parse(&text).is_empty(), "/metrics has no samples");

    let resp = http::get(broker.metrics_addr(), "/no-such-endpoint")?;
    ensure!(
        resp.status == 404,
        "GET /no-such-endpoint answered {}",
        resp.status
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_and_gauges_move_with_produce_and_fetch() -> Result<()> {
    let (broker, _admin) = broker_with_topic("medium").await?;

    let before = scrape(&broker)?;
    produce_and_fetch(&broker).await?;
    let after = scrape(&broker)?;

    let requests = "chronik_requests_total";
    let produced = delta(&before, &after, requests, &[("api", "Produce")])?;
    ensure!(
        (MESSAGES as f64..=2.0 * MESSAGES as f64).contains(&produced),
        "{requests}{{api=\"Produce\"}} moved by {produced} for {MESSAGES} awaited produces"
    );
    let fetched = delta(&before, &after, requests, &[("api", "Fetch")])?;
    ensure!(
        fetched >= 1.0,
        "{requests}{{api=\"Fetch\"}} moved by {fetched}"
    );
    for api in ["ApiVersions", "Metadata", "CreateTopics"] {
        let n = value(&after, requests, &[("api", api)])?;
        ensure!(n >= 1.0, "{requests}{{api=\"{api}\"}} = {n}");
    }

    let payload = (MESSAGES * VALUE_LEN) as f64;
    let bytes_in = delta(&before, &after, "chronik_network_bytes_in_total", &[])?;
    ensure!(
        bytes_in >= payload,
        "network bytes in moved by {bytes_in}, but {payload} payload bytes were produced"
    );
    let bytes_out = delta(&before, &after, "chronik_network_bytes_out_total", &[])?;
    ensure!(
        bytes_out >= payload,
        "network bytes out moved by {bytes_out}, but {payload} payload bytes were fetched"
    );

    let records_in = delta(&before, &after, "chronik_records_in_total", &[])?;
    ensure!(
        records_in == MESSAGES as f64,
        "records in moved by {records_in}, expected {MESSAGES}"
    );
    let records_out = delta(&before, &after, "chronik_records_out_total", &[])?;
    ensure!(
        records_out >= MESSAGES as f64,
        "records out moved by {records_out}, expected >= {MESSAGES}"
    );

    let fsyncs = delta(&before, &after, "chronik_fsync_total", &[])?;
    ensure!(
        fsyncs >= 1.0,
        "fsync count moved by {fsyncs} across {MESSAGES} acks=1 produces (wal-profile medium)"
    );

    let partition = [("topic", TOPIC), ("partition", "0")];
    let leo = value(&after, "chronik_log_end_offset", &partition)?;
    ensure!(
        leo == MESSAGES as f64,
        "log end offset gauge {leo}, expected {MESSAGES}"
    );
    let hw = value(&after, "chronik_high_watermark", &partition)?;
    ensure!(
        hw == MESSAGES as f64,
        "high watermark gauge {hw}, expected {MESSAGES}"
    );

    let open = value(&after, "chronik_connections_open", &[])?;
    ensure!(
        open >= 1.0,
        "connections open {open} while an admin client is connected"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wal_profile_none_never_fsyncs() -> Result<()> {
    let (broker, _admin) = broker_with_topic("none").await?;
    produce_and_fetch(&broker).await?;
    let after = scrape(&broker)?;
    let records_in = value(&after, "chronik_records_in_total", &[])?;
    ensure!(records_in == MESSAGES as f64, "records in {records_in}");
    if let Some(fsyncs) = prom::sum(&after, "chronik_fsync_total", &[]) {
        ensure!(fsyncs == 0.0, "wal-profile none made {fsyncs} fsync calls");
    }
    Ok(())
}
