//! Transaction state survives restarts of a one-node broker, clean
//! (SIGTERM: producer snapshots) and unclean (SIGKILL: replay of the log):
//! a read_committed consumer still sees the committed transaction, never
//! the aborted one, and stops at the transaction left open — until the
//! reloaded coordinator aborts it at its timeout, after which later records
//! are visible again.

mod common;

use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Result};
use common::broker::Broker;
use common::clients::{assign_from_beginning, consumer};
use common::kafka_client::Client;
use rdkafka::config::ClientConfig;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

const TOPIC: &str = "tx-restart";
/// Long enough for both restarts, short enough for the test.
const OPEN_TIMEOUT_MS: u32 = 20_000;

fn txn_producer(broker: &Broker, id: &str, timeout_ms: u32) -> Result<BaseProducer> {
    let p: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("broker.address.family", "v4")
        .set("transactional.id", id)
        .set("transaction.timeout.ms", timeout_ms.to_string())
        .set("linger.ms", "1")
        .create()?;
    p.init_transactions(Duration::from_secs(30))?;
    Ok(p)
}

fn send(p: &BaseProducer, values: &[&str]) -> Result<()> {
    for v in values {
        p.send(BaseRecord::<(), str>::to(TOPIC).payload(*v).partition(0))
            .map_err(|(e, _)| e)?;
    }
    p.flush(Duration::from_secs(30))?;
    Ok(())
}

/// What a read_committed consumer gets, once `want` values arrived or
/// nothing new came for 2 s.
fn committed(broker: &Broker, want: usize) -> Result<Vec<String>> {
    let c = consumer(
        broker,
        &[
            ("isolation.level", "read_committed"),
            ("enable.partition.eof", "false"),
        ],
    )?;
    assign_from_beginning(&c, TOPIC, &[0])?;
    let (mut values, deadline, mut quiet) = (
        Vec::new(),
        Instant::now() + Duration::from_secs(20),
        Instant::now(),
    );
    while Instant::now() < deadline {
        match c.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                values.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
                quiet = Instant::now();
            }
            Some(Err(e)) => bail!("consume: {e}"),
            None if values.len() >= want && quiet.elapsed() > Duration::from_secs(2) => break,
            None => {}
        }
    }
    Ok(values)
}

#[test]
fn transactions_survive_clean_and_unclean_restarts() -> Result<()> {
    let mut broker = Broker::start(&["--wal-profile", "low"])?;
    Client::connect(&broker)?.create_topic(TOPIC)?;
    let p = txn_producer(&broker, "restart-tx", 60_000)?;
    p.begin_transaction()?;
    send(&p, &["a1", "a2"])?;
    p.commit_transaction(Duration::from_secs(30))?;
    p.begin_transaction()?;
    send(&p, &["b1", "b2"])?;
    p.abort_transaction(Duration::from_secs(30))?;
    // a second producer leaves a transaction open
    let open = txn_producer(&broker, "left-open", OPEN_TIMEOUT_MS)?;
    open.begin_transaction()?;
    send(&open, &["c1"])?;
    let plain: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("broker.address.family", "v4")
        .create()?;
    plain
        .send(
            BaseRecord::<(), str>::to(TOPIC)
                .payload("after-open")
                .partition(0),
        )
        .map_err(|(e, _)| e)?;
    plain.flush(Duration::from_secs(30))?;
    drop((p, plain));
    std::mem::forget(open); // its transaction must stay open across the restarts

    ensure!(committed(&broker, 2)? == ["a1", "a2"], "before any restart");
    broker.restart()?;
    let seen = committed(&broker, 2)?;
    ensure!(seen == ["a1", "a2"], "after a clean restart: {seen:?}");
    broker.kill_hard()?;
    broker.restart()?;
    let seen = committed(&broker, 2)?;
    ensure!(seen == ["a1", "a2"], "after SIGKILL: {seen:?}");

    // the reloaded coordinator aborts the open transaction at its timeout
    let deadline = Instant::now() + Duration::from_secs(45);
    loop {
        let seen = committed(&broker, 3)?;
        if seen == ["a1", "a2", "after-open"] {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "the open transaction was never aborted: {seen:?}\n{}",
            broker.log_tail(40)
        );
    }
    Ok(())
}
