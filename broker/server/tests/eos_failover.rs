//! Exactly-once consume-transform-produce through a leader kill in a real
//! 3-node cluster on 127.0.0.1-3 (RF 3, min.insync.replicas 2): a
//! read_committed group member reads an input topic, a transactional
//! producer writes each record transformed to an output topic and commits
//! the member's offsets in the same transaction (librdkafka's
//! send_offsets_to_transaction, the EOS loop Kafka Streams and Flink run).
//! A third of the way through, a node leading a partition of the output
//! topic is killed with SIGKILL: not the group's coordinator, because
//! librdkafka (2.12) waits forever in send_offsets_to_transaction for a
//! group coordinator that died (its coordinator requests never time out and
//! are re-tried only on another broker's state change: librdkafka issues
//! #5456 and #5511; Chronik answers FindCoordinator as Kafka does, so Kafka
//! hangs it the same way). Group coordinator failover is
//! consumer_group_failover.rs's and classic_group_failover.rs's. The loop
//! aborts and rewinds to the committed offsets whenever a transaction
//! fails, as an EOS application must. A producer fenced because the coordinator aborted its transaction
//! past transaction.timeout.ms (a slow machine can hold one open that long
//! through the failover) is closed and a new one initialised under the same
//! transactional.id, as Kafka Streams does; that happens at most twice, and
//! only after the kill. Every input appears in the read_committed output
//! exactly once.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use common::clients::{assign_from_beginning, base_config_at, consumer_at, producer_at, transient};
use common::cluster::{Cluster, FAST_FAILOVER as FLAGS};
use common::kafka_client::Client;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{
    BaseRecord, DefaultProducerContext, FutureRecord, Producer, ThreadedProducer,
};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

const INPUT: &str = "eos-in";
const OUTPUT: &str = "eos-out";
const PARTITIONS: i32 = 3;
const RECORDS: usize = 3000;
const BATCH: usize = 100;
const TIMEOUT: Duration = Duration::from_secs(60);

/// Polled by its own thread: delivery reports are served while the loop
/// waits in commit or abort (a BaseProducer's abort_transaction fails when
/// nobody polls).
type Transactional = ThreadedProducer<DefaultProducerContext>;

/// The input, all in flight at once (idempotent: in order per partition).
fn produce_input(bootstrap: &str) -> Result<()> {
    let producer = producer_at(bootstrap, &[("enable.idempotence", "true")])?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let sends = (0..RECORDS).map(|i| {
            let producer = &producer;
            async move {
                let (key, value) = (format!("k{i}"), format!("in-{i}"));
                producer
                    .send(FutureRecord::to(INPUT).key(&key).payload(&value), TIMEOUT)
                    .await
                    .map_err(|(e, _)| anyhow::anyhow!("input {i}: {e}"))
            }
        });
        for sent in futures::future::join_all(sends).await {
            sent?;
        }
        anyhow::Ok(())
    })
}

/// The application's transactional producer, initialised (which fences an
/// earlier instance under the same transactional.id and aborts its open
/// transaction). A retriable error (the coordinator still loading, or
/// moving) is retried, as librdkafka documents for init_transactions.
fn transactional_producer(bootstrap: &str) -> Result<Transactional> {
    let producer: Transactional = base_config_at(bootstrap)
        .set("transactional.id", "eos-app-0")
        .set("transaction.timeout.ms", "60000")
        .set("message.timeout.ms", "60000")
        .set("linger.ms", "5")
        .create()?;
    let deadline = Instant::now() + TIMEOUT;
    loop {
        match producer.init_transactions(TIMEOUT) {
            Ok(()) => return Ok(producer),
            Err(KafkaError::Transaction(e)) if e.is_retriable() && Instant::now() < deadline => {
                eprintln!("init_transactions: {e}; retrying");
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(e) => bail!("init_transactions: {e}"),
        }
    }
}

/// A transaction's failure that fenced the producer: it is fatal, and an
/// EOS application replaces the producer.
fn fenced(e: &KafkaError) -> bool {
    matches!(e, KafkaError::Transaction(t) if t.is_fatal())
}

/// Whether a transaction coordinator logged aborting a transaction past
/// its timeout: the one reason this test's only producer may be fenced.
fn coordinator_expired_a_transaction(cluster: &mut Cluster) -> bool {
    (1..=3).any(|id| {
        cluster
            .node(id)
            .log_tail(usize::MAX)
            .contains("aborting a transaction past its timeout")
    })
}

/// Puts the member back at its group's committed offsets (after an
/// aborted transaction: what it read since is read again).
fn rewind(consumer: &BaseConsumer) -> Result<()> {
    let committed = consumer.committed(TIMEOUT)?;
    let mut positions = TopicPartitionList::new();
    for e in committed.elements() {
        let offset = match e.offset() {
            Offset::Offset(o) => Offset::Offset(o),
            _ => Offset::Beginning,
        };
        positions.add_partition_offset(e.topic(), e.partition(), offset)?;
    }
    consumer.seek_partitions(positions, TIMEOUT)?;
    Ok(())
}

/// One transaction: the batch transformed to OUTPUT plus the member's
/// positions as the group's offsets.
fn transact(
    producer: &Transactional,
    consumer: &BaseConsumer,
    batch: &[(String, String)],
) -> Result<(), KafkaError> {
    producer.begin_transaction()?;
    for (key, value) in batch {
        let out = format!("out-{value}");
        let mut record = BaseRecord::to(OUTPUT).key(key).payload(&out);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((e, r)) if e.rdkafka_error_code() == Some(RDKafkaErrorCode::QueueFull) => {
                    std::thread::sleep(Duration::from_millis(20));
                    record = r;
                }
                Err((e, _)) => return Err(e),
            }
        }
    }
    let positions = consumer.position()?;
    let Some(metadata) = consumer.group_metadata() else {
        return Err(KafkaError::MessageConsumption(
            RDKafkaErrorCode::InvalidGroupId,
        ));
    };
    producer.send_offsets_to_transaction(&positions, &metadata, TIMEOUT)?;
    producer.commit_transaction(TIMEOUT)
}

#[test]
fn consume_transform_produce_is_exactly_once_through_a_leader_kill() -> Result<()> {
    let mut cluster = Cluster::start(3, FLAGS)?;
    let mut admin = Client::connect(cluster.node(1))?;
    for topic in [INPUT, OUTPUT] {
        admin.create_topic_replicated(topic, PARTITIONS, 3, &[])?;
        cluster.wait_for(topic, Duration::from_secs(20), "a full ISR", |ps| {
            ps.iter().all(|p| p.leader > 0 && p.isr.len() == 3)
        })?;
    }
    // The transaction coordinator: __transaction_state-0's leader, once
    // its whole ISR is in (as transaction_failover.rs waits for it).
    cluster.wait_for(
        "__transaction_state",
        Duration::from_secs(30),
        "a transaction coordinator with a full ISR",
        |ps| ps.iter().all(|p| p.leader > 0 && p.isr.len() == 3),
    )?;
    let bootstrap = cluster.bootstrap();
    produce_input(&bootstrap)?;

    let consumer = consumer_at(
        &bootstrap,
        &[
            ("group.id", "eos-app"),
            ("isolation.level", "read_committed"),
            ("enable.partition.eof", "false"),
        ],
    )?;
    consumer.subscribe(&[INPUT])?;
    let started = Instant::now();
    let at = || format!("{:.1} s", started.elapsed().as_secs_f64());
    let mut producer = transactional_producer(&bootstrap)
        .with_context(|| format!("the first producer\n{}", cluster.logs()))?;

    let coordinator = cluster.partitions("__consumer_offsets")?[0].leader;
    let victim = cluster
        .partitions(OUTPUT)?
        .iter()
        .map(|p| p.leader)
        .find(|&leader| leader != coordinator)
        .context("every output partition led by the group coordinator")?;
    let (mut committed, mut aborted, mut replaced, mut killed) = (0usize, 0usize, 0usize, false);
    let deadline = Instant::now() + Duration::from_secs(240);
    while committed < RECORDS {
        ensure!(
            Instant::now() < deadline,
            "{committed} of {RECORDS} committed after 240 s ({aborted} aborted)\n{}",
            cluster.logs()
        );
        if !killed && committed >= RECORDS / 3 {
            eprintln!(
                "{}: killing node {victim}, a leader of {OUTPUT} (the group coordinator is \
                 node {coordinator}), after {committed} records",
                at()
            );
            cluster.node(victim).kill_hard()?;
            killed = true;
        }
        let mut batch = Vec::with_capacity(BATCH);
        let until = Instant::now() + Duration::from_millis(500);
        while batch.len() < BATCH && Instant::now() < until {
            match consumer.poll(Duration::from_millis(100)) {
                Some(Ok(m)) => batch.push((
                    String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned(),
                    String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned(),
                )),
                Some(Err(e)) if transient(&e) => {}
                Some(Err(e)) => bail!("consume: {e}"),
                None => {}
            }
        }
        if batch.is_empty() {
            continue;
        }
        let attempt = Instant::now();
        let failure = match transact(&producer, &consumer, &batch) {
            Ok(()) => {
                committed += batch.len();
                continue;
            }
            Err(e) => e,
        };
        eprintln!(
            "{}: transaction of {} failed after {:.1} s ({failure}); aborting and rewinding",
            at(),
            batch.len(),
            attempt.elapsed().as_secs_f64()
        );
        aborted += batch.len();
        let mut failure = Some(failure);
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(e) = failure.take().filter(fenced) {
                replaced += 1;
                let expired = coordinator_expired_a_transaction(&mut cluster);
                ensure!(
                    killed && expired && replaced <= 2,
                    "{}: producer fenced ({replaced} times, killed: {killed}, a transaction \
                     expired by its coordinator: {expired}): {e}\n{}",
                    at(),
                    cluster.logs()
                );
                eprintln!("{}: producer fenced ({e}); replacing it", at());
                drop(producer);
                producer = transactional_producer(&bootstrap)
                    .with_context(|| format!("{}: a new producer\n{}", at(), cluster.logs()))?;
                break;
            }
            match producer.abort_transaction(TIMEOUT) {
                Ok(()) => break,
                Err(e) => {
                    ensure!(
                        Instant::now() < deadline,
                        "{}: abort_transaction: {e}",
                        at()
                    );
                    eprintln!("{}: abort_transaction: {e}", at());
                    failure = Some(e);
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
        rewind(&consumer).context("rewinding to the committed offsets")?;
    }
    ensure!(killed, "the run ended before the kill");
    drop(consumer);

    let reader = consumer_at(
        &bootstrap,
        &[
            ("isolation.level", "read_committed"),
            ("enable.partition.eof", "false"),
        ],
    )?;
    assign_from_beginning(&reader, OUTPUT, &(0..PARTITIONS).collect::<Vec<_>>())?;
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let (mut total, mut quiet_since) = (0usize, Instant::now());
    let read_deadline = Instant::now() + TIMEOUT;
    while Instant::now() < read_deadline
        && !(total >= RECORDS && quiet_since.elapsed() > Duration::from_secs(3))
    {
        match reader.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                *seen
                    .entry(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned())
                    .or_default() += 1;
                total += 1;
                quiet_since = Instant::now();
            }
            Some(Err(e)) if transient(&e) => {}
            Some(Err(e)) => bail!("read back: {e}"),
            None => {}
        }
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).take(5).collect();
    let missing: Vec<usize> = (0..RECORDS)
        .filter(|i| !seen.contains_key(&format!("out-in-{i}")))
        .take(5)
        .collect();
    eprintln!(
        "{}: committed {committed}, aborted and redone {aborted}, producers replaced {replaced}, read back {total}",
        at()
    );
    ensure!(twice.is_empty(), "duplicates in the output: {twice:?}");
    ensure!(
        missing.is_empty(),
        "inputs missing from the output, e.g. {missing:?}"
    );
    ensure!(
        total == RECORDS && seen.len() == RECORDS,
        "read {total} ({} distinct), want {RECORDS}",
        seen.len()
    );
    Ok(())
}
