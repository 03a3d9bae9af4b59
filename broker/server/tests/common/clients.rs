//! rdkafka clients pointed at a test broker: a `FutureProducer` (and
//! `send_all`, which sends a batch of values and waits for each), a
//! `BaseConsumer` that is always `assign`ed explicit partitions (the broker
//! has no consumer groups yet, so no `subscribe`, no commits), an
//! `AdminClient`, and `drain`, which reads assigned partitions to their end.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{Client, ClientContext, DefaultClientContext};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, Headers, Message};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

use super::Broker;

/// Generous bound for one client round trip on a loaded 2-core machine.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(15);

fn base_config(broker: &Broker) -> ClientConfig {
    base_config_at(&broker.bootstrap())
}

pub fn base_config_at(bootstrap: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("broker.address.family", "v4")
        .set("socket.timeout.ms", "10000");
    config
}

fn apply(config: &mut ClientConfig, extra: &[(&str, &str)]) {
    for (k, v) in extra {
        config.set(*k, *v);
    }
}

/// A producer with bounded timeouts; `extra` overrides any setting
/// (e.g. `("acks", "all")`, `("compression.type", "zstd")`).
pub fn producer(broker: &Broker, extra: &[(&str, &str)]) -> Result<FutureProducer> {
    producer_at(&broker.bootstrap(), extra)
}

/// `producer` for a bare `host:port`, for tasks that cannot borrow the `Broker`.
pub fn producer_at(bootstrap: &str, extra: &[(&str, &str)]) -> Result<FutureProducer> {
    let mut config = base_config_at(bootstrap);
    config
        .set("enable.idempotence", "false")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "15000");
    apply(&mut config, extra);
    config.create().context("creating FutureProducer")
}

/// Sends each of `values` to partition 0 of `topic` without waiting, then
/// waits for every acknowledgement; fails on the first refused or lost.
pub fn send_all(producer: &FutureProducer, topic: &str, values: &[&[u8]]) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut pending = Vec::new();
        for value in values {
            let record = FutureRecord::<(), _>::to(topic)
                .partition(0)
                .payload(*value);
            pending.push(
                producer
                    .send_result(record)
                    .map_err(|(e, _)| anyhow::anyhow!("enqueue: {e}"))?,
            );
        }
        for delivery in pending {
            delivery
                .await
                .map_err(|_| anyhow::anyhow!("cancelled"))?
                .map_err(|(e, _)| anyhow::anyhow!("produce: {e}"))?;
        }
        anyhow::Ok(())
    })
}

/// A consumer for `assign()` only: no commits, partition-EOF events on, CRCs
/// checked, short fetch waits so `drain` finishes quickly. librdkafka refuses
/// `assign` without a `group.id` ("Unknown group"), so one is set, but it is
/// never joined and no offsets are committed.
pub fn consumer(broker: &Broker, extra: &[(&str, &str)]) -> Result<BaseConsumer> {
    consumer_at(&broker.bootstrap(), extra)
}

/// `consumer` for a bootstrap list (e.g. every node of a cluster).
pub fn consumer_at(bootstrap: &str, extra: &[(&str, &str)]) -> Result<BaseConsumer> {
    let mut config = base_config_at(bootstrap);
    config
        .set("group.id", "chronik-tests-assign-only")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "true")
        .set("check.crcs", "true")
        .set("fetch.wait.max.ms", "100")
        .set("auto.offset.reset", "earliest");
    apply(&mut config, extra);
    config.create().context("creating BaseConsumer")
}

pub fn admin(broker: &Broker) -> Result<AdminClient<DefaultClientContext>> {
    base_config(broker).create().context("creating AdminClient")
}

pub fn admin_options() -> AdminOptions {
    AdminOptions::new().request_timeout(Some(CLIENT_TIMEOUT))
}

/// Creates one topic with replication factor 1 and fails on any error.
pub async fn create_topic(
    admin: &AdminClient<DefaultClientContext>,
    name: &str,
    partitions: i32,
) -> Result<()> {
    let topic = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
    let results = admin
        .create_topics([&topic], &admin_options())
        .await
        .with_context(|| format!("CreateTopics {name}"))?;
    for result in results {
        if let Err((topic, code)) = result {
            bail!("CreateTopics {topic} failed: {code:?}");
        }
    }
    Ok(())
}

/// Partition ids of `topic` from a Metadata request (sorted).
pub fn partitions_of<C: ClientContext>(client: &Client<C>, topic: &str) -> Result<Vec<i32>> {
    let metadata = client
        .fetch_metadata(Some(topic), CLIENT_TIMEOUT)
        .with_context(|| format!("Metadata for {topic}"))?;
    let t = metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .with_context(|| format!("{topic} missing from Metadata response"))?;
    if let Some(err) = t.error() {
        bail!("Metadata for {topic}: topic error {err:?}");
    }
    let mut ids: Vec<i32> = t.partitions().iter().map(|p| p.id()).collect();
    ids.sort_unstable();
    Ok(ids)
}

/// Assigns `partitions` of `topic`, each starting at `Offset::Beginning`.
pub fn assign_from_beginning(
    consumer: &BaseConsumer,
    topic: &str,
    partitions: &[i32],
) -> Result<()> {
    let mut tpl = TopicPartitionList::new();
    for &p in partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)?;
    }
    consumer.assign(&tpl).context("assign")
}

/// One consumed record, owned.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub timestamp: Option<i64>,
}

impl Record {
    fn from_message(m: &BorrowedMessage<'_>) -> Record {
        let headers = m
            .headers()
            .map(|hs| {
                hs.iter()
                    .map(|h| (h.key.to_string(), h.value.map(|v| v.to_vec())))
                    .collect()
            })
            .unwrap_or_default();
        Record {
            partition: m.partition(),
            offset: m.offset(),
            key: m.key().map(|k| k.to_vec()),
            value: m.payload().map(|v| v.to_vec()),
            headers,
            timestamp: m.timestamp().to_millis(),
        }
    }

    pub fn value_str(&self) -> String {
        String::from_utf8_lossy(self.value.as_deref().unwrap_or_default()).into_owned()
    }
}

/// Polls an assigned consumer until it has seen at least `min_records` and
/// every one of `partitions` has reported end-of-partition since its last
/// record. Records arrive in per-partition order.
pub fn drain(
    consumer: &BaseConsumer,
    partitions: &[i32],
    min_records: usize,
    timeout: Duration,
) -> Result<Vec<Record>> {
    let deadline = Instant::now() + timeout;
    let mut records = Vec::new();
    let mut at_end: HashSet<i32> = HashSet::new();
    while records.len() < min_records || partitions.iter().any(|p| !at_end.contains(p)) {
        if Instant::now() > deadline {
            bail!(
                "drain timed out after {timeout:?}: {} records (wanted >= {min_records}), \
                 partitions at end {at_end:?} of {partitions:?}",
                records.len()
            );
        }
        match consumer.poll(Duration::from_millis(200)) {
            None => {}
            Some(Ok(m)) => {
                at_end.remove(&m.partition());
                records.push(Record::from_message(&m));
            }
            Some(Err(KafkaError::PartitionEOF(p))) => {
                at_end.insert(p);
            }
            // a stopped node is still in the bootstrap list or the metadata
            Some(Err(e)) if transient(&e) => {}
            Some(Err(e)) => bail!("consumer error after {} records: {e}", records.len()),
        }
    }
    Ok(records)
}

/// Errors a client sees while a node is down or leadership moves: the
/// client retries them, so a test waits on, never takes them as a verdict.
pub fn transient(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::BrokerTransportFailure
                | RDKafkaErrorCode::AllBrokersDown
                | RDKafkaErrorCode::NotCoordinator
                | RDKafkaErrorCode::CoordinatorNotAvailable
                | RDKafkaErrorCode::NotLeaderForPartition
                | RDKafkaErrorCode::LeaderNotAvailable
        )
    )
}
