//! A real 3-node cluster on 127.0.0.1-3: the nodes agree on one cluster id
//! (chosen once by the quorum, reported by every node in Metadata, stored in
//! every meta.properties), and SIGTERM on a partition leader is a controlled
//! shutdown — leadership moves to another ISR member before the process
//! exits, so an idempotent acks=all producer sees no error and no stall of
//! the broker session timeout's length.

mod common;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use common::cluster::{Cluster, FAST_FAILOVER as FLAGS};
use common::kafka_client::Client;
use common::paced;
use kafka_protocol::messages::MetadataRequest;

static SERIAL: Mutex<()> = Mutex::new(());

/// The session timeout the shutdown must beat: without controlled shutdown
/// the leader's partitions move only after it.
const SESSION_TIMEOUT_MS: u64 = 3000;

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn cluster_id_of(data_dir: &std::path::Path) -> Result<String> {
    let text = std::fs::read_to_string(data_dir.join("meta.properties"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("cluster.id="))
        .map(str::to_string)
        .context("meta.properties has no cluster.id")
}

#[test]
fn every_node_reports_the_quorums_one_cluster_id() -> Result<()> {
    let _serial = serial();
    let mut cluster = Cluster::start(3, FLAGS)?;
    let mut ids = Vec::new();
    for node in 1..=3 {
        let broker = cluster.node(node);
        let mut client = Client::connect(broker)?;
        let response = client.send(&MetadataRequest::default().with_topics(Some(vec![])), 12)?;
        let reported = response
            .cluster_id
            .map(|s| s.to_string())
            .context("Metadata without a cluster id")?;
        let stored = cluster_id_of(broker.data_dir())?;
        ensure!(
            reported == stored,
            "node {node} reports {reported} but stores {stored}"
        );
        ids.push(reported);
    }
    ensure!(
        ids.iter().all(|id| *id == ids[0]),
        "nodes report different cluster ids: {ids:?}"
    );

    // A restart keeps it.
    cluster.node(2).stop()?;
    cluster.node(2).respawn()?;
    cluster.node(2).finish_start()?;
    let mut client = Client::connect(cluster.node(2))?;
    let response = client.send(&MetadataRequest::default().with_topics(Some(vec![])), 12)?;
    ensure!(
        response.cluster_id.map(|s| s.to_string()).as_deref() == Some(ids[0].as_str()),
        "cluster id changed across a restart"
    );
    Ok(())
}

#[test]
fn sigterm_on_a_leader_moves_leadership_before_exit() -> Result<()> {
    let _serial = serial();
    let mut cluster = Cluster::start(3, FLAGS)?;
    let topic = "controlled";
    {
        let mut client = Client::connect(cluster.node(1))?;
        client.create_topic_replicated(topic, 1, 3, &[("min.insync.replicas", "2")])?;
    }
    cluster.wait_for_full_isr(topic, Duration::from_secs(20))?;
    let bootstrap = cluster.bootstrap();

    // One message every 5 ms for 6 s; each records send and ack times.
    let count: u64 = 1200;
    const WARM: u64 = 200;
    let producer_thread = paced::spawn(bootstrap, topic, count, Duration::from_millis(5));

    std::thread::sleep(Duration::from_millis(2000));
    let leader = cluster.partitions(topic)?[0].leader;
    ensure!(leader > 0, "no leader before the shutdown");
    let stopping = Instant::now();
    let status = cluster.node(leader).stop()?;
    let exit_took = stopping.elapsed();
    ensure!(status.success(), "node {leader} exited with {status:?}");
    let log = cluster.node(leader).log_tail(80);
    ensure!(
        log.contains("shutdown: leaderships moved (controlled shutdown)"),
        "no controlled shutdown in the log:\n{log}"
    );

    let results = paced::join_all_acknowledged(producer_thread)?;
    // The first messages wait for the producer id and connections; the
    // stall that matters is around the shutdown, 2 s in.
    let stall = results
        .iter()
        .filter(|(seq, _, _)| *seq >= WARM)
        .map(|(_, _, latency)| *latency)
        .max()
        .unwrap_or_default();
    println!("controlled shutdown of node {leader}: exit after {exit_took:?}; longest acks=all latency {stall:?} over {count} messages");
    ensure!(
        stall < Duration::from_millis(SESSION_TIMEOUT_MS),
        "a produce waited {stall:?}: leadership moved only after the session timeout"
    );

    // Every acknowledged message is there exactly once, in order.
    let survivor = (1..=3).find(|&n| n != leader).unwrap_or(1);
    let survivor_bootstrap = cluster.node(survivor).bootstrap();
    paced::check_read_back(&survivor_bootstrap, topic, count)?;
    Ok(())
}
