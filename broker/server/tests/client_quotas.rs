//! Client quotas on a real 3-node cluster (quota windows of 3 × 1 s, so a
//! throttle lasts at most 3 s): set through AlterClientQuotas on node 1,
//! shown by DescribeClientQuotas and enforced on every node, surviving a
//! restart.
//!
//! - A raw client that ignores throttle_time_ms and pipelines Produce
//!   requests is held by the muted channel: each answer after the first
//!   comes no sooner than the previous answer's throttle.
//! - An rdkafka producer flooding over its producer_byte_rate is held near
//!   it (an upper bound on what it got acknowledged: a slow machine only
//!   lowers it), while a calm producer beside it is never throttled. A
//!   quota holds per broker, as Kafka's does.
//! - A consumer over its consumer_byte_rate is held likewise.
//! - CreateTopics v7 over a controller_mutation_rate answers
//!   THROTTLING_QUOTA_EXCEEDED with a throttle time (KIP-599).
//! - Connections over their IP's connection_creation_rate are closed
//!   unanswered (KIP-612).
//! - Kafka's INVALID_REQUEST refusals for bad entities and keys; hostile
//!   bytes (a truncated frame claiming 2^31 - 1 entries, a NaN value, a
//!   2,000-byte name) refused while the broker serves on.

mod common;

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use bytes::Bytes;
use common::clients::{assign_from_beginning, consumer_at, producer_at};
use common::cluster::{Cluster, FAST_FAILOVER};
use common::kafka_client::{self, plain_record, read_response, write_request_as, Client};
use common::prom;
use futures::stream::{FuturesUnordered, StreamExt};
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use rdkafka::message::Message;
use rdkafka::producer::FutureRecord;

const QUOTA: f64 = 100.0 * 1024.0; // bytes per second
const WINDOW_FLAGS: [&str; 4] = [
    "--quota-window-num",
    "3",
    "--quota-window-size-seconds",
    "1",
];
/// The measured span (3 s): the longest throttle.
const SPAN_S: f64 = 3.0;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// One AlterClientQuotas entry: `entity` (type, name; None = default)
/// with `ops` (key, Some(value) to set, None to remove).
fn entry(entity: &[(&str, Option<&str>)], ops: &[(&str, Option<f64>)]) -> EntryData {
    EntryData::default()
        .with_entity(
            entity
                .iter()
                .map(|(t, n)| {
                    EntityData::default()
                        .with_entity_type(s(t))
                        .with_entity_name(n.map(s))
                })
                .collect(),
        )
        .with_ops(
            ops.iter()
                .map(|(k, v)| {
                    OpData::default()
                        .with_key(s(k))
                        .with_value(v.unwrap_or(0.0))
                        .with_remove(v.is_none())
                })
                .collect(),
        )
}

fn alter(
    client: &mut Client,
    entries: Vec<EntryData>,
    validate_only: bool,
) -> Result<Vec<(i16, String)>> {
    let request = AlterClientQuotasRequest::default()
        .with_entries(entries)
        .with_validate_only(validate_only);
    let response = client.send(&request, 1)?;
    Ok(response
        .entries
        .iter()
        .map(|e| {
            (
                e.error_code,
                e.error_message.as_deref().unwrap_or_default().to_string(),
            )
        })
        .collect())
}

/// Every quota entity a broker's image holds: "type=name,..." → key → value.
fn describe(client: &mut Client) -> Result<BTreeMap<String, BTreeMap<String, f64>>> {
    let request = DescribeClientQuotasRequest::default().with_components(vec![]);
    let response = client.send(&request, 1)?;
    ensure!(
        response.error_code == 0,
        "DescribeClientQuotas: {}",
        response.error_code
    );
    Ok(response
        .entries
        .unwrap_or_default()
        .iter()
        .map(|e| {
            let entity: Vec<String> = e
                .entity
                .iter()
                .map(|c| {
                    format!(
                        "{}={}",
                        c.entity_type,
                        c.entity_name.as_deref().unwrap_or("<default>")
                    )
                })
                .collect();
            let values = e
                .values
                .iter()
                .map(|v| (v.key.to_string(), v.value))
                .collect();
            (entity.join(","), values)
        })
        .collect())
}

/// Waits until node `id` shows `entity` with `key`.
fn wait_visible(cluster: &mut Cluster, id: i32, entity: &str, key: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut client = Client::connect(cluster.node(id))?;
        let seen = describe(&mut client)?;
        if seen.get(entity).is_some_and(|v| v.contains_key(key)) {
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "node {id} never showed {entity} {key}: {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A Produce of `kib` records of 1 KiB to `topic`-0 (v9, acks=1).
fn produce_request(topic: &str, kib: usize) -> Result<ProduceRequest> {
    let value = Bytes::from(vec![b'x'; 1024]);
    let records: Vec<_> = (0..kib)
        .map(|i| plain_record(i as i64, value.clone()))
        .collect();
    kafka_client::produce_request(topic, 0, &records, (1, 10_000), Compression::None)
}

/// The sum of a client quota metric for `client_id` over the nodes.
fn quota_metric(
    cluster: &mut Cluster,
    name: &str,
    quota_type: &str,
    client_id: &str,
) -> Result<f64> {
    let mut total = 0.0;
    for id in 1..=3 {
        let samples = prom::parse(&cluster.node(id).metrics_text()?);
        total += prom::sum(
            &samples,
            name,
            &[("quota_type", quota_type), ("client_id", client_id)],
        )
        .unwrap_or(0.0);
    }
    Ok(total)
}

#[test]
fn client_quotas_hold_clients_near_their_rates() -> Result<()> {
    let flags: Vec<&str> = FAST_FAILOVER.iter().copied().chain(WINDOW_FLAGS).collect();
    let mut cluster = Cluster::start(3, &flags)?;
    let bootstrap = cluster.bootstrap();
    let mut admin = Client::connect(cluster.node(1))?;

    // Kafka's refusals, one per entry; a valid entry beside them applies.
    let answers = alter(
        &mut admin,
        vec![
            entry(
                &[("group", Some("g"))],
                &[("producer_byte_rate", Some(1.0))],
            ),
            entry(
                &[("client-id", Some("c"))],
                &[("producer_byte_ratex", Some(1.0))],
            ),
            entry(
                &[("client-id", Some("c"))],
                &[("producer_byte_rate", Some(1.5))],
            ),
            entry(
                &[("ip", Some("10.0.0.1")), ("user", None)],
                &[("connection_creation_rate", Some(1.0))],
            ),
            entry(
                &[("ip", Some("nowhere"))],
                &[("connection_creation_rate", Some(1.0))],
            ),
            entry(
                &[("client-id", Some("raw-noisy"))],
                &[("producer_byte_rate", Some(QUOTA))],
            ),
        ],
        false,
    )?;
    let invalid = 42; // INVALID_REQUEST
    ensure!(
        answers[..5].iter().all(|(code, _)| *code == invalid),
        "{answers:?}"
    );
    ensure!(
        answers[0].1 == "Unhandled client quota entity type: group",
        "{answers:?}"
    );
    ensure!(
        answers[1].1 == "Invalid configuration key producer_byte_ratex",
        "{answers:?}"
    );
    ensure!(answers[2].1.contains("is not an integer"), "{answers:?}");
    ensure!(
        answers[3].1.contains("IP entity should not be combined"),
        "{answers:?}"
    );
    ensure!(answers[4].1.contains("not a valid IP"), "{answers:?}");
    ensure!(answers[5].0 == 0, "{answers:?}");
    // validate_only checks and stores nothing.
    let dry = alter(
        &mut admin,
        vec![entry(
            &[("client-id", Some("dry"))],
            &[("consumer_byte_rate", Some(1.0))],
        )],
        true,
    )?;
    ensure!(dry == vec![(0, String::new())], "{dry:?}");
    alter(
        &mut admin,
        vec![
            entry(
                &[("client-id", Some("flood"))],
                &[("producer_byte_rate", Some(QUOTA))],
            ),
            entry(
                &[
                    ("user", Some("ANONYMOUS")),
                    ("client-id", Some("slow-reader")),
                ],
                &[("consumer_byte_rate", Some(QUOTA))],
            ),
            entry(
                &[("client-id", Some("mutator"))],
                &[("controller_mutation_rate", Some(1.0))],
            ),
        ],
        false,
    )?;
    for id in 2..=3 {
        wait_visible(
            &mut cluster,
            id,
            "client-id=slow-reader,user=ANONYMOUS",
            "consumer_byte_rate",
        )?;
    }
    let shown = describe(&mut Client::connect(cluster.node(3))?)?;
    ensure!(
        !shown.contains_key("client-id=dry"),
        "validate_only stored a quota: {shown:?}"
    );
    ensure!(
        shown["client-id=raw-noisy"]["producer_byte_rate"] == QUOTA,
        "{shown:?}"
    );

    // 0. Hostile bytes: an AlterClientQuotas v0 frame that claims 2^31 - 1
    //    entries and ends after the count is closed, and one with a NaN
    //    value and a 2,000-byte client id is refused entry by entry; the
    //    broker keeps serving others and stores neither.
    let mut hostile = TcpStream::connect(cluster.node(1).kafka_addr())?;
    hostile.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut frame = Vec::new();
    frame.extend_from_slice(&49i16.to_be_bytes()); // AlterClientQuotas
    frame.extend_from_slice(&0i16.to_be_bytes()); // v0
    frame.extend_from_slice(&7i32.to_be_bytes()); // correlation id
    frame.extend_from_slice(&(-1i16).to_be_bytes()); // no client id
    frame.extend_from_slice(&i32::MAX.to_be_bytes()); // entries: 2^31 - 1
    let mut sized = (frame.len() as i32).to_be_bytes().to_vec();
    sized.extend_from_slice(&frame);
    std::io::Write::write_all(&mut hostile, &sized)?;
    let mut byte = [0u8; 1];
    let closed = matches!(std::io::Read::read(&mut hostile, &mut byte), Ok(0) | Err(_));
    ensure!(closed, "a truncated AlterClientQuotas frame was not closed");
    let long_name = "x".repeat(2000);
    let refused = alter(
        &mut admin,
        vec![
            entry(
                &[("client-id", Some("nan"))],
                &[("producer_byte_rate", Some(f64::NAN))],
            ),
            entry(
                &[("client-id", Some(&long_name))],
                &[("producer_byte_rate", Some(1024.0))],
            ),
        ],
        false,
    )?;
    ensure!(
        refused.iter().all(|(code, _)| *code == invalid),
        "hostile entries: {refused:?}"
    );
    let after = describe(&mut Client::connect(cluster.node(2))?)?;
    ensure!(
        !after.contains_key("client-id=nan") && after.keys().all(|k| k.len() < 1000),
        "a hostile entry was stored: {after:?}"
    );

    // 1. A raw client that ignores throttle_time_ms, pipelining three
    //    250 KiB Produce requests to the partition's leader.
    admin.create_topic_replicated("raw", 1, 1, &[])?;
    cluster.wait_for("raw", Duration::from_secs(20), "a leader", |ps| {
        ps[0].leader > 0
    })?;
    let leader = cluster.partitions("raw")?[0].leader;
    let mut stream = TcpStream::connect(cluster.node(leader).kafka_addr())?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let request = produce_request("raw", 250)?;
    for id in 1..=3 {
        write_request_as(&mut stream, (id, "raw-noisy"), &request, 9)?;
    }
    let mut answers = Vec::new();
    for id in 1..=3 {
        let response = read_response::<ProduceRequest, _>(&mut stream, id, 9)?;
        let error = response.responses[0].partition_responses[0].error_code;
        ensure!(error == 0, "raw produce {id}: error {error}");
        answers.push((Instant::now(), response.throttle_time_ms));
    }
    eprintln!(
        "raw pipelined answers' throttle_time_ms: {:?}",
        answers.iter().map(|a| a.1).collect::<Vec<_>>()
    );
    ensure!(
        answers.iter().all(|(_, t)| *t > 0),
        "every answer over the quota is throttled: {answers:?}"
    );
    for pair in answers.windows(2) {
        let gap = pair[1].0.duration_since(pair[0].0);
        let throttle = Duration::from_millis(u64::try_from(pair[0].1)?);
        ensure!(
            gap + Duration::from_millis(50) >= throttle,
            "the next answer came {gap:?} after one throttled {throttle:?}: the channel was not muted"
        );
    }

    // 2. An rdkafka producer flooding beside a calm one for 6 s.
    // One partition: a quota is per broker (Kafka's), so one leader
    // holds the whole flood.
    admin.create_topic_replicated("flooded", 1, 1, &[])?;
    admin.create_topic_replicated("calm", 1, 1, &[])?;
    cluster.wait_for("flooded", Duration::from_secs(20), "leaders", |ps| {
        ps.iter().all(|p| p.leader > 0)
    })?;
    cluster.wait_for("calm", Duration::from_secs(20), "a leader", |ps| {
        ps[0].leader > 0
    })?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let flood_s = 6.0;
    let (flooded, calm_latencies) = runtime.block_on(async {
        let noisy = producer_at(
            &bootstrap,
            &[
                ("client.id", "flood"),
                ("acks", "1"),
                ("batch.size", "65536"),
                ("message.timeout.ms", "60000"),
            ],
        )?;
        let calm = producer_at(&bootstrap, &[("client.id", "calm"), ("acks", "1")])?;
        let value = vec![b'n'; 1024];
        let calm_task = tokio::spawn(async move {
            let mut latencies = Vec::new();
            let started = Instant::now();
            while started.elapsed().as_secs_f64() < flood_s {
                let sent = Instant::now();
                calm.send(
                    FutureRecord::<(), _>::to("calm").payload(&b"calm"[..]),
                    Duration::from_secs(30),
                )
                .await
                .map_err(|(e, _)| anyhow::anyhow!("calm: {e}"))?;
                latencies.push(sent.elapsed());
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            anyhow::Ok(latencies)
        });
        let started = Instant::now();
        let mut in_flight = FuturesUnordered::new();
        let mut acknowledged = 0usize;
        while started.elapsed().as_secs_f64() < flood_s {
            while in_flight.len() < 2000 {
                in_flight.push(noisy.send(
                    FutureRecord::<(), _>::to("flooded").payload(&value),
                    Duration::from_secs(60),
                ));
            }
            if let Some(done) = in_flight.next().await {
                if done.is_ok() {
                    acknowledged += value.len();
                }
            }
        }
        drop(in_flight); // what was not acknowledged in time does not count
        let latencies = calm_task.await??;
        anyhow::Ok((acknowledged, latencies))
    })?;
    let bound = 1.5 * QUOTA * (flood_s + SPAN_S) + 256.0 * 1024.0;
    let mut sorted = calm_latencies.clone();
    sorted.sort();
    let p99 = sorted[(sorted.len() * 99 / 100).min(sorted.len() - 1)];
    eprintln!(
        "flood: {:.0} KiB acknowledged in {flood_s} s (quota {:.0} KiB/s, bound {:.0} KiB); calm: {} sends, p99 {p99:?}",
        flooded as f64 / 1024.0,
        QUOTA / 1024.0,
        bound / 1024.0,
        sorted.len()
    );
    ensure!(
        (flooded as f64) <= bound,
        "the flood got {flooded} bytes acknowledged, over {bound}"
    );
    let throttled = quota_metric(
        &mut cluster,
        "chronik_client_quota_throttle_time_ms_total",
        "Produce",
        "flood",
    )?;
    ensure!(throttled > 0.0, "no throttle time recorded for the flood");
    let calm_measured = quota_metric(
        &mut cluster,
        "chronik_client_quota_recorded_total",
        "Produce",
        "calm",
    )?;
    ensure!(
        calm_measured == 0.0,
        "the calm client, without a quota, was measured"
    );

    // 3. A consumer over its consumer_byte_rate (6 MiB waiting for it).
    admin.create_topic_replicated("backlog", 1, 1, &[])?;
    cluster.wait_for("backlog", Duration::from_secs(20), "a leader", |ps| {
        ps[0].leader > 0
    })?;
    runtime.block_on(async {
        // Batches of at most 16 KiB: a batch larger than a quota's window
        // holds (quota × 2 s here) would be throttled away at every fetch.
        let loader = producer_at(
            &bootstrap,
            &[
                ("client.id", "loader"),
                ("acks", "1"),
                ("batch.size", "16384"),
            ],
        )?;
        let value = vec![b'b'; 1024];
        let sends: Vec<_> = (0..6 * 1024)
            .map(|_| {
                loader.send(
                    FutureRecord::<(), _>::to("backlog").payload(&value),
                    Duration::from_secs(30),
                )
            })
            .collect();
        for sent in futures::future::join_all(sends).await {
            sent.map_err(|(e, _)| anyhow::anyhow!("loading: {e}"))?;
        }
        anyhow::Ok(())
    })?;
    let reader = consumer_at(
        &bootstrap,
        &[
            ("client.id", "slow-reader"),
            ("enable.partition.eof", "false"),
            ("fetch.max.bytes", "100000"),
            ("message.max.bytes", "65536"),
            ("max.partition.fetch.bytes", "65536"),
        ],
    )?;
    assign_from_beginning(&reader, "backlog", &[0])?;
    let (read_s, started) = (5.0, Instant::now());
    let mut read = 0usize;
    while started.elapsed().as_secs_f64() < read_s {
        if let Some(Ok(m)) = reader.poll(Duration::from_millis(100)) {
            read += m.payload().map_or(0, <[u8]>::len);
        }
    }
    let bound = 1.5 * QUOTA * (read_s + SPAN_S) + 256.0 * 1024.0;
    eprintln!(
        "slow reader: {:.0} KiB in {read_s} s (bound {:.0} KiB)",
        read as f64 / 1024.0,
        bound / 1024.0
    );
    ensure!(
        (read as f64) <= bound,
        "the reader got {read} bytes, over {bound}"
    );
    let fetch_throttle = quota_metric(
        &mut cluster,
        "chronik_client_quota_throttle_time_ms_total",
        "Fetch",
        "slow-reader",
    )?;
    ensure!(fetch_throttle > 0.0, "no Fetch throttle time recorded");
    drop(reader);

    // 4. KIP-599: CreateTopics v7 over a controller_mutation_rate of 1/s
    //    (3 credits): the first topic's 10 partitions are created, the
    //    second is refused with THROTTLING_QUOTA_EXCEEDED.
    let mut mutator = Client::connect(cluster.node(2))?.with_client_id("mutator");
    let topic = |name: &str| {
        CreatableTopic::default()
            .with_name(TopicName(s(name)))
            .with_num_partitions(10)
            .with_replication_factor(1)
    };
    let created = mutator.send(
        &CreateTopicsRequest::default()
            .with_topics(vec![topic("mutation-1"), topic("mutation-2")])
            .with_timeout_ms(10_000),
        7,
    )?;
    let codes: Vec<i16> = created.topics.iter().map(|t| t.error_code).collect();
    ensure!(
        codes == vec![0, 89],
        "CreateTopics over the mutation quota: {codes:?}"
    );
    ensure!(
        created.throttle_time_ms > 0,
        "no throttle_time_ms with THROTTLING_QUOTA_EXCEEDED"
    );

    // 5. Quotas survive a restart (from the quorum's log).
    cluster.node(3).stop()?;
    cluster.restart_node(3)?;
    wait_visible(&mut cluster, 3, "client-id=flood", "producer_byte_rate")?;

    // 6. KIP-612: connections from 127.0.0.1 over 2 per second are closed
    //    unanswered (the quota set last: every client here connects from it).
    alter(
        &mut admin,
        vec![entry(
            &[("ip", Some("127.0.0.1"))],
            &[("connection_creation_rate", Some(2.0))],
        )],
        false,
    )?;
    let target = cluster.node(2).kafka_addr();
    let (mut refused, mut tried) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(15);
    while refused == 0 && Instant::now() < deadline {
        tried += 1;
        let answered = Client::connect_to(target).and_then(|mut c| {
            c.send(&ApiVersionsRequest::default(), 0)
                .context("ApiVersions")
        });
        if answered.is_err() {
            refused += 1;
        }
    }
    eprintln!("a connection was closed for connection_creation_rate after {tried} tries");
    ensure!(
        refused > 0,
        "no connection was held for the connection_creation_rate in {tried} tries"
    );
    let removed = alter(
        &mut admin,
        vec![entry(
            &[("ip", Some("127.0.0.1"))],
            &[("connection_creation_rate", None)],
        )],
        false,
    )?;
    ensure!(removed == vec![(0, String::new())], "{removed:?}");
    Ok(())
}
