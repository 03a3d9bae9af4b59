//! The broker as a real rdkafka client sees it.
//!
//! - Every compression codec (none, gzip, snappy, lz4, zstd) × acks 0 / 1 / all:
//!   200 keyed messages with headers round-trip exactly once, per-partition in
//!   produce order, at contiguous offsets from 0 and, for acked produces, at the
//!   offsets the acks reported. One case goes through topic auto-creation.
//! - AdminClient: create / duplicate create / delete / describe configs.
//! - ListOffsets: earliest, latest and by timestamp, and watermarks.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, ensure, Context, Result};
use rdkafka::admin::{NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::consumer::Consumer;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

use common::clients::{self, Record, CLIENT_TIMEOUT};
use common::Broker;

const CODECS: [&str; 5] = ["none", "gzip", "snappy", "lz4", "zstd"];
const ACKS: [&str; 3] = ["0", "1", "all"];
const MESSAGES: usize = 200;
const PARTITIONS: [i32; 3] = [0, 1, 2];

/// What the test sent, and where the broker said it went.
#[derive(Debug, Clone)]
struct Sent {
    key: Vec<u8>,
    value: Vec<u8>,
    headers: Vec<(String, Option<Vec<u8>>)>,
    timestamp: i64,
    partition: i32,
    /// `None` for acks=0, where the broker returns no offset.
    offset: Option<i64>,
}

fn now_ms() -> Result<i64> {
    Ok(SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as i64)
}

fn seq_of(record: &Record) -> Result<usize> {
    let (_, value) = record
        .headers
        .iter()
        .find(|(k, _)| k == "seq")
        .with_context(|| format!("record without seq header: {record:?}"))?;
    let text = String::from_utf8(value.clone().context("null seq header")?)?;
    Ok(text.parse()?)
}

/// Sends `MESSAGES` keyed records concurrently and awaits every delivery.
/// Timestamps are `base_ts + i * 10` ms.
async fn produce_all(
    producer: &FutureProducer,
    topic: &str,
    tag: &str,
    base_ts: i64,
) -> Result<Vec<Sent>> {
    let mut sent = Vec::with_capacity(MESSAGES);
    let mut deliveries = Vec::with_capacity(MESSAGES);
    for i in 0..MESSAGES {
        let key = format!("key-{i:04}").into_bytes();
        // Distinct and compressible, of varying length.
        let value = format!("{tag}|{i:04}|{}", "payload-".repeat(5 + i % 7)).into_bytes();
        let seq = i.to_string();
        let headers = vec![
            ("seq".to_string(), Some(seq.clone().into_bytes())),
            ("tag".to_string(), Some(tag.as_bytes().to_vec())),
            ("null-header".to_string(), None),
        ];
        let owned = OwnedHeaders::new()
            .insert(Header {
                key: "seq",
                value: Some(seq.as_str()),
            })
            .insert(Header {
                key: "tag",
                value: Some(tag),
            })
            .insert(Header {
                key: "null-header",
                value: None::<&[u8]>,
            });
        let timestamp = base_ts + i as i64 * 10;
        let record = FutureRecord::to(topic)
            .key(&key[..])
            .payload(&value[..])
            .headers(owned)
            .timestamp(timestamp);
        let delivery = producer
            .send_result(record)
            .map_err(|(e, _)| e)
            .with_context(|| format!("enqueueing message {i}"))?;
        deliveries.push(delivery);
        sent.push(Sent {
            key,
            value,
            headers,
            timestamp,
            partition: -1,
            offset: None,
        });
    }
    for (i, delivery) in deliveries.into_iter().enumerate() {
        let delivered = delivery
            .await
            .context("delivery future cancelled")?
            .map_err(|(e, _)| e)
            .with_context(|| format!("delivery of message {i}"))?;
        sent[i].partition = delivered.partition;
        sent[i].offset = (delivered.offset >= 0).then_some(delivered.offset);
    }
    Ok(sent)
}

/// Checks that `records` (consumed from all partitions) are exactly `sent`.
fn check_round_trip(sent: &[Sent], records: &[Record], expect_offsets: bool) -> Result<()> {
    ensure!(
        records.len() == sent.len(),
        "consumed {} records, produced {}",
        records.len(),
        sent.len()
    );
    let mut seen = vec![false; sent.len()];
    let mut by_partition: BTreeMap<i32, Vec<(i64, usize)>> = BTreeMap::new();
    for record in records {
        let seq = seq_of(record)?;
        let expected = sent
            .get(seq)
            .with_context(|| format!("unknown seq {seq}"))?;
        ensure!(
            !seen[seq],
            "seq {seq} consumed twice (second at p{} o{})",
            record.partition,
            record.offset
        );
        seen[seq] = true;
        ensure!(
            record.key.as_deref() == Some(&expected.key[..]),
            "seq {seq}: key {:?}",
            record.key
        );
        ensure!(
            record.value.as_deref() == Some(&expected.value[..]),
            "seq {seq}: value differs: {:?}",
            record.value_str()
        );
        ensure!(
            record.headers == expected.headers,
            "seq {seq}: headers {:?}, expected {:?}",
            record.headers,
            expected.headers
        );
        ensure!(
            record.timestamp == Some(expected.timestamp),
            "seq {seq}: timestamp {:?}, expected {}",
            record.timestamp,
            expected.timestamp
        );
        ensure!(
            record.partition == expected.partition,
            "seq {seq}: consumed from partition {}, delivered to {}",
            record.partition,
            expected.partition
        );
        if expect_offsets {
            ensure!(
                Some(record.offset) == expected.offset,
                "seq {seq}: at offset {}, ack said {:?}",
                record.offset,
                expected.offset
            );
        }
        by_partition
            .entry(record.partition)
            .or_default()
            .push((record.offset, seq));
    }
    for (partition, entries) in &by_partition {
        for (i, (offset, _)) in entries.iter().enumerate() {
            ensure!(
                *offset == i as i64,
                "partition {partition}: record #{i} has offset {offset} (offsets not contiguous from 0)"
            );
        }
        ensure!(
            entries.windows(2).all(|w| w[0].1 < w[1].1),
            "partition {partition}: not in produce order: {:?}",
            entries.iter().map(|e| e.1).collect::<Vec<_>>()
        );
    }
    ensure!(
        by_partition.len() == PARTITIONS.len(),
        "200 distinct keys landed in only {} partitions",
        by_partition.len()
    );
    Ok(())
}

async fn round_trip(broker: &Broker, topic: &str, codec: &str, acks: &str) -> Result<()> {
    let producer = clients::producer(
        broker,
        &[
            ("compression.type", codec),
            ("acks", acks),
            ("linger.ms", "20"),
            // Several batches per partition, so fetches span batches.
            ("batch.num.messages", "40"),
        ],
    )?;
    let tag = format!("{codec}/{acks}");
    let sent = produce_all(&producer, topic, &tag, now_ms()? - 60_000).await?;

    let partitions = clients::partitions_of(producer.client(), topic)?;
    ensure!(
        partitions == PARTITIONS,
        "{topic} has partitions {partitions:?}"
    );

    let consumer = clients::consumer(broker, &[])?;
    clients::assign_from_beginning(&consumer, topic, &PARTITIONS)?;
    let records = clients::drain(&consumer, &PARTITIONS, MESSAGES, Duration::from_secs(30))?;
    check_round_trip(&sent, &records, acks != "0")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_codec_and_acks_setting_round_trips_exactly_once() -> Result<()> {
    let mut broker = Broker::start(&[
        "--auto-create-topics",
        "true",
        "--default-partitions",
        "3",
        "--wal-profile",
        "low",
    ])?;
    let admin = clients::admin(&broker)?;
    let mut failures = Vec::new();
    for codec in CODECS {
        for acks in ACKS {
            let topic = format!("codec-{codec}-acks-{acks}");
            // One case relies on auto-creation (with --default-partitions 3).
            let auto_create = codec == "none" && acks == "1";
            if !auto_create {
                clients::create_topic(&admin, &topic, 3).await?;
            }
            if let Err(e) = round_trip(&broker, &topic, codec, acks).await {
                failures.push(format!("{codec} acks={acks}: {e:#}"));
            }
        }
    }
    ensure!(
        broker.is_running(),
        "broker died; stderr:\n{}",
        broker.log_tail(30)
    );
    if !failures.is_empty() {
        bail!(
            "{} of 15 cases failed:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_client_creates_describes_and_deletes_topics() -> Result<()> {
    let broker = Broker::start(&["--auto-create-topics", "false"])?;
    let admin = clients::admin(&broker)?;
    let opts = clients::admin_options();
    let topic = "admin-lifecycle";

    clients::create_topic(&admin, topic, 3).await?;
    ensure!(clients::partitions_of(admin.inner(), topic)? == PARTITIONS);

    // Creating it again is a per-topic TOPIC_ALREADY_EXISTS.
    let again = NewTopic::new(topic, 3, TopicReplication::Fixed(1));
    let results = admin.create_topics([&again], &opts).await?;
    match results.as_slice() {
        [Err((name, RDKafkaErrorCode::TopicAlreadyExists))] if name == topic => {}
        other => bail!("duplicate CreateTopics: expected TopicAlreadyExists, got {other:?}"),
    }

    // The broker advertises its bound listen address by default.
    let metadata = admin.inner().fetch_metadata(None, CLIENT_TIMEOUT)?;
    let brokers = metadata.brokers();
    ensure!(
        brokers.len() == 1,
        "expected one broker in Metadata, got {}",
        brokers.len()
    );
    let advertised = format!("{}:{}", brokers[0].host(), brokers[0].port());
    ensure!(
        advertised == broker.bootstrap(),
        "Metadata advertises {advertised}, listener is {}",
        broker.bootstrap()
    );
    let broker_id = brokers[0].id();

    // DescribeConfigs for the topic and for the broker.
    let topic_res = ResourceSpecifier::Topic(topic);
    let broker_res = ResourceSpecifier::Broker(broker_id);
    let configs = admin
        .describe_configs([&topic_res, &broker_res], &opts)
        .await?;
    ensure!(
        configs.len() == 2,
        "DescribeConfigs returned {} results",
        configs.len()
    );
    let topic_config = configs[0]
        .as_ref()
        .map_err(|e| anyhow::anyhow!("DescribeConfigs topic: {e:?}"))?;
    let retention = topic_config
        .get("retention.ms")
        .context("topic config lacks retention.ms")?;
    let retention_ms: i64 = retention
        .value
        .as_deref()
        .context("retention.ms has no value")?
        .parse()
        .context("retention.ms is not an integer")?;
    ensure!(
        retention_ms == -1 || retention_ms > 0,
        "retention.ms = {retention_ms}"
    );
    if let Err(e) = &configs[1] {
        bail!("DescribeConfigs broker {broker_id}: {e:?}");
    }

    // Data written before deletion must not resurface in a re-created topic.
    let producer = clients::producer(&broker, &[("acks", "all")])?;
    producer
        .send(
            FutureRecord::to(topic)
                .key("k")
                .payload("before-delete")
                .partition(0),
            CLIENT_TIMEOUT,
        )
        .await
        .map_err(|(e, _)| e)?;

    let deleted = admin.delete_topics(&[topic], &opts).await?;
    ensure!(
        matches!(deleted.as_slice(), [Ok(name)] if name == topic),
        "DeleteTopics: {deleted:?}"
    );
    wait_until_unlisted(&admin, topic).await?;

    // Deleting an unknown topic is a per-topic UNKNOWN_TOPIC_OR_PARTITION.
    let missing = admin.delete_topics(&["never-existed"], &opts).await?;
    match missing.as_slice() {
        [Err((_, RDKafkaErrorCode::UnknownTopicOrPartition))] => {}
        other => {
            bail!("DeleteTopics of unknown topic: expected UnknownTopicOrPartition, got {other:?}")
        }
    }

    // Auto-creation is off: Metadata for an unknown topic reports an error
    // and does not create it.
    let m = admin
        .inner()
        .fetch_metadata(Some("never-existed"), CLIENT_TIMEOUT)?;
    let t = m.topics().iter().find(|t| t.name() == "never-existed");
    ensure!(
        t.map(|t| t.error().is_some()).unwrap_or(true),
        "Metadata for an unknown topic with auto-create off returned it without error"
    );

    clients::create_topic(&admin, topic, 1).await?;
    ensure!(clients::partitions_of(admin.inner(), topic)? == [0]);
    let consumer = clients::consumer(&broker, &[])?;
    let (low, high) = consumer.fetch_watermarks(topic, 0, CLIENT_TIMEOUT)?;
    ensure!(
        (low, high) == (0, 0),
        "re-created topic has watermarks ({low}, {high})"
    );
    Ok(())
}

async fn wait_until_unlisted(
    admin: &rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext>,
    topic: &str,
) -> Result<()> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let metadata = admin.inner().fetch_metadata(None, CLIENT_TIMEOUT)?;
        let names: Vec<&str> = metadata.topics().iter().map(|t| t.name()).collect();
        if !names.contains(&topic) {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            bail!("{topic} still listed in Metadata 10 s after DeleteTopics: {names:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_offsets_by_earliest_latest_and_timestamp() -> Result<()> {
    let broker = Broker::start(&[])?;
    let admin = clients::admin(&broker)?;
    let topic = "list-offsets";
    clients::create_topic(&admin, topic, 3).await?;

    let producer = clients::producer(&broker, &[("acks", "all")])?;
    let base_ts = now_ms()? - 3_600_000;
    let sent = produce_all(&producer, topic, "offsets", base_ts).await?;

    let mut counts: HashMap<i32, i64> = HashMap::new();
    for s in &sent {
        *counts.entry(s.partition).or_default() += 1;
    }
    let consumer = clients::consumer(&broker, &[])?;
    for p in PARTITIONS {
        let expected = counts.get(&p).copied().unwrap_or(0);
        let (low, high) = consumer.fetch_watermarks(topic, p, CLIENT_TIMEOUT)?;
        ensure!(
            (low, high) == (0, expected),
            "p{p}: watermarks ({low}, {high}), expected (0, {expected})"
        );
    }

    let query = |offset: Offset| -> Result<HashMap<i32, Offset>> {
        let mut tpl = TopicPartitionList::new();
        for p in PARTITIONS {
            tpl.add_partition_offset(topic, p, offset)?;
        }
        let answer = consumer.offsets_for_times(tpl, CLIENT_TIMEOUT)?;
        Ok(answer
            .elements_for_topic(topic)
            .iter()
            .map(|e| (e.partition(), e.offset()))
            .collect())
    };

    // Every mismatch is collected so one run reports all of them.
    let mut problems = Vec::new();
    let mut expect = |what: String, got: Option<&Offset>, want: Offset| {
        if got != Some(&want) {
            problems.push(format!("{what}: got {got:?}, expected {want:?}"));
        }
    };

    // Earliest (-2) and latest (-1) as ListOffsets timestamps.
    let earliest = query(Offset::Beginning)?;
    let latest = query(Offset::End)?;
    for p in PARTITIONS {
        let count = counts.get(&p).copied().unwrap_or(0);
        expect(
            format!("p{p} earliest"),
            earliest.get(&p),
            Offset::Offset(0),
        );
        expect(
            format!("p{p} latest"),
            latest.get(&p),
            Offset::Offset(count),
        );
    }

    // By timestamp: the 100th message's timestamp finds its offset; other
    // partitions answer their first offset at or after it, or -1 if none.
    let target = &sent[99];
    let by_time = query(Offset::Offset(target.timestamp))?;
    for p in PARTITIONS {
        let want = sent
            .iter()
            .filter(|s| s.partition == p && s.timestamp >= target.timestamp)
            .filter_map(|s| s.offset)
            .min()
            .map(Offset::Offset)
            .unwrap_or(Offset::End);
        let what = if p == target.partition {
            format!("p{p} by timestamp of message #100 ({})", target.timestamp)
        } else {
            format!("p{p} by timestamp {}", target.timestamp)
        };
        expect(what, by_time.get(&p), want);
    }

    // Before everything: offset 0; after everything: -1 (no such offset).
    let before = query(Offset::Offset(base_ts - 1_000))?;
    let after = query(Offset::Offset(base_ts + 1_000_000))?;
    for p in PARTITIONS {
        expect(
            format!("p{p} timestamp before all"),
            before.get(&p),
            Offset::Offset(0),
        );
        expect(
            format!("p{p} timestamp after all"),
            after.get(&p),
            Offset::End,
        );
    }
    ensure!(
        problems.is_empty(),
        "ListOffsets mismatches:\n{}",
        problems.join("\n")
    );
    Ok(())
}
