//! A real 3-node cluster on 127.0.0.1-3: offset commits are written to
//! `__consumer_offsets` as Kafka writes them, with acks=all. A commit the
//! ISR cannot have (both followers frozen with SIGSTOP) is not
//! acknowledged — COORDINATOR_NOT_AVAILABLE, and OffsetFetch does not show
//! it — and an acknowledged commit survives SIGKILL of the coordinator.
//! A broker that is not the coordinator answers OffsetFetch with
//! NOT_COORDINATOR, never with its own stale -1. An acks=all Produce the
//! ISR cannot have is answered with an error within its own timeout_ms
//! (one deadline for the append, the fsync and the ISR wait).

mod common;

use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use bytes::Bytes;
use common::cluster::{Cluster, FAST_FAILOVER as FLAGS};
use common::kafka_client::Client;

const OFFSETS: &str = "__consumer_offsets";
const COORDINATOR_NOT_AVAILABLE: i16 = 15;

#[test]
fn an_offset_commit_is_acknowledged_only_once_the_isr_has_it() -> Result<()> {
    let mut cluster = Cluster::start(3, FLAGS)?;
    let topic = "t";
    cluster.create_replicated(topic, 1)?;
    let coordinator = cluster.coordinator_of(OFFSETS)?;
    let followers: Vec<i32> = (1..=3).filter(|&n| n != coordinator).collect();
    let mut client = Client::connect(cluster.node(coordinator))?;
    // The coordinator may learn of the new topic a moment after Metadata
    // shows it (UNKNOWN_TOPIC_OR_PARTITION is retriable).
    cluster.poll_until(
        Duration::from_secs(10),
        Duration::from_millis(100),
        |_| client.commit_offset("g", topic, 5),
        |&first| first == 0,
        |first| format!("the first commit kept failing with error {first}"),
    )?;

    // A follower replicates the commit but does not serve it.
    for &f in &followers {
        let answer = Client::connect(cluster.node(f))?.committed_offset("g", topic);
        ensure!(
            matches!(&answer, Err(e) if e.to_string().contains("OffsetFetch error 16")),
            "node {f}, not the coordinator, answered OffsetFetch with {answer:?}, not NOT_COORDINATOR (16)"
        );
    }

    // Both followers frozen: the coordinator alone cannot satisfy acks=all.
    for &f in &followers {
        cluster.node(f).pause()?;
    }
    let refused = client.commit_offset("g", topic, 10);
    for &f in &followers {
        cluster.node(f).resume()?;
    }
    let refused = refused?;
    ensure!(
        refused == COORDINATOR_NOT_AVAILABLE,
        "a commit without the ISR answered error {refused}, not COORDINATOR_NOT_AVAILABLE"
    );
    ensure!(
        client.committed_offset("g", topic)? == 5,
        "OffsetFetch shows a commit that was not acknowledged"
    );

    // Once the followers are back, commits are acknowledged again...
    cluster.poll_until(
        Duration::from_secs(30),
        Duration::from_millis(200),
        |cluster| Client::connect(cluster.node(coordinator))?.commit_offset("g", topic, 20),
        |&code| code == 0,
        |_| "commits kept failing after the followers resumed".to_string(),
    )?;
    // ...and an acknowledged one survives the coordinator's SIGKILL.
    cluster.node(coordinator).kill_hard()?;
    let new_coordinator = cluster.new_coordinator_of(OFFSETS, coordinator)?;
    let mut client = Client::connect(cluster.node(new_coordinator))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let committed = loop {
        match client.committed_offset("g", topic) {
            Ok(offset) => break offset,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => return Err(e),
        }
    };
    ensure!(
        committed == 20,
        "the new coordinator has offset {committed}, not the acknowledged 20"
    );
    Ok(())
}

/// The write path waits for durability and for the ISR under one deadline:
/// with both followers frozen, an acks=all Produce with timeout_ms 2000 is
/// answered with an error (REQUEST_TIMED_OUT, or NOT_ENOUGH_REPLICAS once
/// the leader counts its followers stale) by then, never later.
#[test]
fn a_produce_never_waits_past_its_own_timeout() -> Result<()> {
    const TIMEOUT_MS: i32 = 2000;
    let mut cluster = Cluster::start(3, FLAGS)?;
    let topic = "bounded";
    Client::connect(cluster.node(1))?.create_topic_replicated(topic, 1, 3, &[])?;
    let views = cluster.wait_for_full_isr(topic, Duration::from_secs(20))?;
    let leader = views[0].leader;
    let mut client = Client::connect(cluster.node(leader))?;
    let value = [Bytes::from_static(b"v")];
    cluster.poll_until(
        Duration::from_secs(10),
        Duration::from_millis(100),
        |_| {
            Ok(client
                .produce_values_within(topic, &value, -1, TIMEOUT_MS)?
                .0)
        },
        |&code| code == 0,
        |_| "no acks=all produce succeeded with the full ISR".to_string(),
    )?;
    let followers: Vec<i32> = (1..=3).filter(|&n| n != leader).collect();
    for &f in &followers {
        cluster.node(f).pause()?;
    }
    let started = Instant::now();
    let answer = client.produce_values_within(topic, &value, -1, TIMEOUT_MS);
    let took = started.elapsed();
    for &f in &followers {
        cluster.node(f).resume()?;
    }
    let (error, _) = answer?;
    println!(
        "acks=all produce without its ISR: error {error} after {took:?} (timeout_ms {TIMEOUT_MS})"
    );
    ensure!(error != 0, "a produce the ISR cannot have was acknowledged");
    // Generous for a loaded machine, yet below the two timeouts a second
    // wait with a fresh timeout would take.
    ensure!(
        took < Duration::from_millis(u64::try_from(TIMEOUT_MS)? + 1500),
        "the produce was answered after {took:?}, past its timeout_ms {TIMEOUT_MS}"
    );
    Ok(())
}
