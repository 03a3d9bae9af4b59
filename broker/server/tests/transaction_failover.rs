//! A real 3-node cluster on 127.0.0.1-3: a transaction open when its
//! coordinator (the leader of `__transaction_state`-0) is killed with
//! SIGKILL commits through the new coordinator, and read_committed
//! consumers see it whole — every record of the committed transaction, none
//! of an aborted one, never part of either.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Result};
use common::clients::{assign_from_beginning, consumer_at, transient};
use common::cluster::{Cluster, FAST_FAILOVER as FLAGS};
use rdkafka::config::ClientConfig;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

const TXN_STATE: &str = "__transaction_state";
const TOPIC: &str = "tx-out";
const PARTITIONS: i32 = 3;
const COMMITTED: usize = 300;
const ABORTED: usize = 100;

fn send(producer: &BaseProducer, prefix: &str, count: usize) -> Result<()> {
    for i in 0..count {
        let value = format!("{prefix}-{i}");
        let partition = i32::try_from(i)? % PARTITIONS;
        let mut record = BaseRecord::<(), String>::to(TOPIC)
            .payload(&value)
            .partition(partition);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((e, r)) => {
                    ensure!(
                        e.rdkafka_error_code() == Some(rdkafka::types::RDKafkaErrorCode::QueueFull),
                        "send: {e}"
                    );
                    producer.poll(Duration::from_millis(50));
                    record = r;
                }
            }
        }
    }
    producer.flush(Duration::from_secs(60))?;
    Ok(())
}

/// Values a read_committed consumer of every partition gets, once nothing
/// new has arrived for a few seconds (or `want` arrived).
fn read_committed(bootstrap: &str, want: usize) -> Result<Vec<String>> {
    let consumer = consumer_at(
        bootstrap,
        &[
            ("isolation.level", "read_committed"),
            ("enable.partition.eof", "false"),
        ],
    )?;
    assign_from_beginning(&consumer, TOPIC, &(0..PARTITIONS).collect::<Vec<_>>())?;
    let mut values = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut quiet_since = Instant::now();
    while Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                values.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
                quiet_since = Instant::now();
            }
            // the killed node is still in the bootstrap list
            Some(Err(e)) if transient(&e) => {}
            Some(Err(e)) => bail!("consume: {e}"),
            None if values.len() >= want && quiet_since.elapsed() > Duration::from_secs(3) => break,
            None => {}
        }
    }
    Ok(values)
}

#[test]
fn an_open_transaction_commits_whole_through_a_coordinator_failover() -> Result<()> {
    let mut cluster = Cluster::start(3, FLAGS)?;
    cluster.create_replicated(TOPIC, PARTITIONS)?;
    let coordinator = cluster.coordinator_of(TXN_STATE)?;
    let bootstrap = cluster.bootstrap();
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("broker.address.family", "v4")
        .set("transactional.id", "failover-tx")
        .set("transaction.timeout.ms", "60000")
        .set("message.timeout.ms", "60000")
        .set("linger.ms", "5")
        .create()?;
    if let Err(e) = producer.init_transactions(Duration::from_secs(30)) {
        bail!("init_transactions: {e}\n{}", cluster.logs());
    }
    producer.begin_transaction()?;
    send(&producer, "committed", COMMITTED)?;

    cluster.node(coordinator).kill_hard()?;
    let started = Instant::now();
    producer.commit_transaction(Duration::from_secs(90))?;
    eprintln!(
        "commit through the new coordinator took {:?}",
        started.elapsed()
    );
    cluster.new_coordinator_of(TXN_STATE, coordinator)?;

    producer.begin_transaction()?;
    send(&producer, "aborted", ABORTED)?;
    producer.abort_transaction(Duration::from_secs(60))?;

    let seen = read_committed(&bootstrap, COMMITTED)?;
    let unique: BTreeSet<&String> = seen.iter().collect();
    let expected: BTreeSet<String> = (0..COMMITTED).map(|i| format!("committed-{i}")).collect();
    ensure!(
        seen.len() == COMMITTED && unique.len() == COMMITTED,
        "read {} records ({} distinct), want {COMMITTED}\n{}",
        seen.len(),
        unique.len(),
        cluster.logs()
    );
    ensure!(
        unique.into_iter().cloned().collect::<BTreeSet<_>>() == expected,
        "read_committed saw records outside the committed transaction"
    );
    Ok(())
}
