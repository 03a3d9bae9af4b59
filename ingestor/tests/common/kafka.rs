//! Reading back what the ingestor produced, with a real Kafka client
//! (rdkafka `BaseConsumer`, partitions assigned explicitly from the start),
//! and creating topics on a broker (or cluster) whose auto-create is off.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use chronik_harness::envelope::{Envelope, ENVELOPE_HEADER};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

/// One consumed record, with its envelope decoded.
#[derive(Debug, Clone)]
pub struct Record {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Vec<u8>,
    /// Headers other than the envelope, in order.
    pub headers: Vec<(String, Vec<u8>)>,
    pub envelope: Envelope,
    /// Wall clock µs when the test consumed it.
    pub consumed_us: i64,
}

/// A consumer (a group of its own, nothing committed) with partitions
/// 0..`partitions` of `topic` assigned from their beginning.
pub fn consumer_from_beginning(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
) -> Result<BaseConsumer> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set(
            "group.id",
            format!("ingestor-test-{}", uuid::Uuid::new_v4()),
        )
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .context("creating consumer")?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)?;
    }
    consumer.assign(&tpl)?;
    Ok(consumer)
}

/// Reads `partitions` partitions of `topic` from the beginning until `count`
/// records arrived (or `timeout` passed: then fails with what was read).
pub fn consume(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    count: usize,
    timeout: Duration,
) -> Result<Vec<Record>> {
    let consumer = consumer_from_beginning(bootstrap, topic, partitions)?;
    let deadline = Instant::now() + timeout;
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        if Instant::now() > deadline {
            bail!(
                "consumed {} of {count} records from {topic} within {timeout:?}",
                out.len()
            );
        }
        let Some(result) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let m = result.context("consumer error")?;
        let consumed_us = chronik_harness::now_us();
        let mut headers = Vec::new();
        let mut envelope = None;
        if let Some(hs) = m.headers() {
            for h in hs.iter() {
                let value = h.value.unwrap_or_default().to_vec();
                if h.key == ENVELOPE_HEADER {
                    envelope =
                        Some(Envelope::decode(&value).context("envelope header does not decode")?);
                } else {
                    headers.push((h.key.to_owned(), value));
                }
            }
        }
        out.push(Record {
            partition: m.partition(),
            offset: m.offset(),
            key: m.key().map(<[u8]>::to_vec),
            value: m.payload().unwrap_or_default().to_vec(),
            headers,
            envelope: envelope.with_context(|| {
                format!(
                    "record at {}/{} has no {ENVELOPE_HEADER} header",
                    m.partition(),
                    m.offset()
                )
            })?,
            consumed_us,
        });
    }
    Ok(out)
}

/// Checks every record's envelope against its value and `producer_id`, that
/// no sequence repeats, and that sequences rise with offsets in each partition.
/// Returns the records by sequence.
pub fn verify_envelopes(records: &[Record], producer_id: u64) -> Result<HashMap<u64, Record>> {
    let mut by_seq = HashMap::new();
    let mut last_in_partition: HashMap<i32, (i64, u64)> = HashMap::new();
    let mut sorted: Vec<&Record> = records.iter().collect();
    sorted.sort_by_key(|r| (r.partition, r.offset));
    for r in sorted {
        let e = &r.envelope;
        if e.producer_id != producer_id {
            bail!(
                "record {}/{} has producer_id {:x}, expected {producer_id:x}",
                r.partition,
                r.offset,
                e.producer_id
            );
        }
        if !e.matches(&r.value) {
            bail!(
                "record {}/{} value does not match its envelope CRC",
                r.partition,
                r.offset
            );
        }
        if e.send_time_us > r.consumed_us {
            bail!(
                "record {}/{} accepted at {} µs, after it was consumed ({})",
                r.partition,
                r.offset,
                e.send_time_us,
                r.consumed_us
            );
        }
        if let Some(&(offset, seq)) = last_in_partition.get(&r.partition) {
            if seq >= e.sequence {
                bail!(
                    "partition {}: sequence {} at offset {} follows {} at offset {offset}",
                    r.partition,
                    e.sequence,
                    r.offset,
                    seq
                );
            }
        }
        last_in_partition.insert(r.partition, (r.offset, e.sequence));
        if by_seq.insert(e.sequence, r.clone()).is_some() {
            bail!("sequence {} consumed twice", e.sequence);
        }
    }
    Ok(by_seq)
}

/// Creates `topic` with `partitions` partitions (for brokers with auto-create off).
pub fn create_topic(bootstrap: &str, topic: &str, partitions: i32) -> Result<()> {
    create_replicated_topic(bootstrap, topic, partitions, 1, &[])
}

/// Creates `topic` with `partitions` partitions of `replicas` replicas and
/// the topic `configs` (e.g. `min.insync.replicas`).
pub fn create_replicated_topic(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    replicas: i32,
    configs: &[(&str, &str)],
) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .context("creating admin client")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let new_topic = configs.iter().fold(
        NewTopic::new(topic, partitions, TopicReplication::Fixed(replicas)),
        |t, (key, value)| t.set(key, value),
    );
    let results = runtime.block_on(admin.create_topics(
        &[new_topic],
        &AdminOptions::new().operation_timeout(Some(Duration::from_secs(20))),
    ))?;
    for r in results {
        r.map_err(|(t, e)| anyhow::anyhow!("creating {t}: {e}"))?;
    }
    Ok(())
}
