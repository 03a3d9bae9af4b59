//! Real network partitions (Linux network namespaces, `common::netns`): a
//! 3-node cluster whose nodes each live in their own namespace, cut apart
//! by routes while the test's clients still reach every node.
//!
//! - An isolated partition leader acknowledges no acks=all write; the
//!   majority elects a new leader that does, and after healing the old
//!   leader rejoins the ISR and nothing acknowledged is lost or doubled.
//! - An isolated controller is replaced: the majority elects a new one and
//!   keeps creating topics and serving produces; the old one catches up.
//! - A cut that is not transitive (1 and 2 cannot talk, 3 reaches both)
//!   under an idempotent acks=all producer: every acknowledged message is
//!   read back once, in order.
//!
//! Skipped (with a message) where namespaces cannot be made: not root, or
//! no iproute2.

mod common;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use bytes::Bytes;
use common::clients::{assign_from_beginning, consumer_at, drain};
use common::cluster::{Cluster, FAST_FAILOVER};
use common::kafka_client::Client;
use common::netns::Network;
use common::paced;
use kafka_protocol::messages::MetadataRequest;

static SERIAL: Mutex<()> = Mutex::new(());
/// Each node has its own namespace, so the ports can be the same fixed ones.
const PORTS: (u16, u16, u16) = (9092, 9093, 9644);

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The network and the cluster in it (the cluster is dropped first).
fn start() -> Result<Option<(Cluster, Network)>> {
    if !Network::usable() {
        eprintln!("skipped: network namespaces need root and iproute2");
        return Ok(None);
    }
    let net = Network::new(3)?;
    let mut flags = FAST_FAILOVER.to_vec();
    flags.extend_from_slice(&["--group-initial-rebalance-delay-ms", "0"]);
    let cluster = Cluster::start_on(net.hosts(), Some(net.namespaces()), PORTS, &flags)?;
    Ok(Some((cluster, net)))
}

/// One partition, min.insync.replicas 2.
fn create(cluster: &mut Cluster, via: i32, topic: &str, replication_factor: i16) -> Result<()> {
    Client::connect(cluster.node(via))?.create_topic_replicated(
        topic,
        1,
        replication_factor,
        &[("min.insync.replicas", "2")],
    )?;
    Ok(())
}

/// Polls node `at` until `check` accepts its view of `topic`.
fn wait_at(
    cluster: &mut Cluster,
    at: i32,
    topic: &str,
    what: &str,
    check: impl Fn(&[common::cluster::PartitionView]) -> bool,
) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = None;
    loop {
        if let Ok(v) = cluster.partitions_at(at, topic) {
            if check(&v) {
                return Ok(());
            }
            seen = Some(v);
        }
        ensure!(
            Instant::now() < deadline,
            "node {at}: timed out waiting for {what}; last view {seen:?}\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Produces `values` acks=all through `client` every 200 ms until they are
/// acknowledged (20 s at most: then fails saying `what`).
fn produce_until_accepted(
    cluster: &mut Cluster,
    client: &mut Client,
    topic: &str,
    values: &[Bytes],
    what: &str,
) -> Result<()> {
    cluster.poll_until(
        Duration::from_secs(20),
        Duration::from_millis(200),
        |_| Ok(client.produce_values_acks(topic, values, -1)?.0),
        |&code| code == 0,
        |_| what.to_string(),
    )?;
    Ok(())
}

fn values(range: std::ops::Range<u32>) -> Vec<Bytes> {
    range.map(|i| Bytes::from(i.to_string())).collect()
}

/// Reads partition 0 of `topic` from its leader; the values as numbers.
fn read_back(cluster: &Cluster, topic: &str, at_least: usize) -> Result<Vec<u64>> {
    let consumer = consumer_at(&cluster.bootstrap(), &[])?;
    assign_from_beginning(&consumer, topic, &[0])?;
    let records = drain(&consumer, &[0], at_least, Duration::from_secs(30))?;
    Ok(records
        .iter()
        .filter_map(|r| r.value_str().parse().ok())
        .collect())
}

#[test]
fn an_isolated_leader_acknowledges_no_acks_all_write_and_rejoins() -> Result<()> {
    let _serial = serial();
    let Some((mut cluster, mut net)) = start()? else {
        return Ok(());
    };
    create(&mut cluster, 1, "isolated", 3)?;
    wait_at(&mut cluster, 1, "isolated", "a full ISR", |ps| {
        ps[0].leader > 0 && ps[0].isr.len() == 3
    })?;
    let old = cluster.partitions_at(1, "isolated")?[0].leader;
    let mut to_old = Client::connect(cluster.node(old))?;
    let (code, _) = to_old.produce_values_acks("isolated", &values(0..100), -1)?;
    ensure!(
        code == 0,
        "produce before the cut failed with error {code}\n{}",
        cluster.logs()
    );

    net.isolate(usize::try_from(old)?)?;
    let majority: Vec<i32> = (1..=3).filter(|&n| n != old).collect();
    wait_at(
        &mut cluster,
        majority[0],
        "isolated",
        "a new leader in the majority",
        |ps| ps[0].leader > 0 && ps[0].leader != old,
    )?;
    // The old leader still believes it leads; clients still reach it. It
    // must not acknowledge acks=all alone.
    let (code, _) = to_old.produce_values_acks("isolated", &values(1000..1010), -1)?;
    ensure!(
        code != 0,
        "the isolated old leader acknowledged an acks=all write\n{}",
        cluster.logs()
    );
    let new = cluster.partitions_at(majority[0], "isolated")?[0].leader;
    let mut to_new = Client::connect(cluster.node(new))?;
    produce_until_accepted(
        &mut cluster,
        &mut to_new,
        "isolated",
        &values(100..200),
        "the new leader does not accept acks=all",
    )?;

    net.heal()?;
    wait_at(
        &mut cluster,
        new,
        "isolated",
        "the old leader back in the ISR",
        |ps| ps[0].isr.len() == 3,
    )?;
    let read = read_back(&cluster, "isolated", 200)?;
    ensure!(
        read == (0..200).collect::<Vec<u64>>(),
        "read back {} values, not 0..200 once in order: {:?}",
        read.len(),
        &read[..read.len().min(20)]
    );
    Ok(())
}

#[test]
fn an_isolated_controller_is_replaced_and_the_majority_keeps_serving() -> Result<()> {
    let _serial = serial();
    let Some((mut cluster, mut net)) = start()? else {
        return Ok(());
    };
    let controller = cluster.controller_at(1)?;
    ensure!(controller > 0, "no controller");
    net.isolate(usize::try_from(controller)?)?;
    let majority: Vec<i32> = (1..=3).filter(|&n| n != controller).collect();
    cluster.poll_until(
        Duration::from_secs(30),
        Duration::from_millis(200),
        |cluster| cluster.controller_at(majority[0]),
        |&now| now > 0 && now != controller,
        |now| format!("the majority kept controller {now}"),
    )?;
    // Once the new controller fences the silent node (a session after it
    // took over), metadata changes go on without it.
    cluster.poll_until(
        Duration::from_secs(30),
        Duration::from_millis(200),
        |cluster| {
            let mut client = Client::connect(cluster.node(majority[0]))?;
            Ok(client
                .send(&MetadataRequest::default().with_topics(Some(vec![])), 12)?
                .brokers)
        },
        |brokers| brokers.iter().all(|b| b.node_id.0 != controller),
        |_| format!("the cut-off node {controller} is never fenced"),
    )?;
    // Two brokers are live: replication factor 2.
    create(&mut cluster, majority[1], "after-the-cut", 2)?;
    wait_at(
        &mut cluster,
        majority[0],
        "after-the-cut",
        "a leader",
        |ps| ps[0].leader > 0,
    )?;
    let leader = cluster.partitions_at(majority[0], "after-the-cut")?[0].leader;
    ensure!(
        leader != controller,
        "the cut-off node leads a topic created without it"
    );
    let mut client = Client::connect(cluster.node(leader))?;
    produce_until_accepted(
        &mut cluster,
        &mut client,
        "after-the-cut",
        &values(0..50),
        "acks=all fails on the majority",
    )?;
    net.heal()?;
    // The old controller learns what was decided without it.
    wait_at(
        &mut cluster,
        controller,
        "after-the-cut",
        "the topic on the healed node",
        |ps| ps[0].leader == leader && ps[0].isr.len() == 2,
    )?;
    ensure!(
        read_back(&cluster, "after-the-cut", 50)? == (0..50).collect::<Vec<u64>>(),
        "records lost"
    );
    Ok(())
}

#[test]
fn a_non_transitive_cut_keeps_every_acknowledged_message() -> Result<()> {
    let _serial = serial();
    let Some((mut cluster, mut net)) = start()? else {
        return Ok(());
    };
    create(&mut cluster, 3, "cut", 3)?;
    wait_at(&mut cluster, 3, "cut", "a full ISR", |ps| {
        ps[0].leader > 0 && ps[0].isr.len() == 3
    })?;
    // ~200 msg/s for 12 s, idempotent acks=all; the cut spans the middle.
    let count: u64 = 2400;
    let producer = paced::spawn(cluster.bootstrap(), "cut", count, Duration::from_millis(5));
    std::thread::sleep(Duration::from_secs(3));
    net.cut(1, 2)?;
    std::thread::sleep(Duration::from_secs(6));
    net.heal()?;
    let acked: Vec<u64> = producer
        .join()
        .map_err(|_| anyhow::anyhow!("producer panicked"))??
        .into_iter()
        .filter(|(_, outcome, _)| outcome.is_ok())
        .map(|(seq, _, _)| seq)
        .collect();
    ensure!(
        acked.len() > usize::try_from(count / 2)?,
        "only {} of {count} acknowledged\n{}",
        acked.len(),
        cluster.logs()
    );
    let read = read_back(&cluster, "cut", acked.len())?;
    let mut seen = std::collections::HashSet::new();
    ensure!(
        read.iter().all(|v| seen.insert(*v)),
        "a value was read twice"
    );
    ensure!(read.windows(2).all(|w| w[0] < w[1]), "values out of order");
    let missing: Vec<u64> = acked
        .iter()
        .copied()
        .filter(|s| !seen.contains(s))
        .take(10)
        .collect();
    ensure!(missing.is_empty(), "acknowledged but lost: {missing:?}");
    println!(
        "non-transitive cut: {} of {count} acknowledged, all read back once in order",
        acked.len()
    );
    Ok(())
}
