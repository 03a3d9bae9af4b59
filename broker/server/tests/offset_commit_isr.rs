//! A real 3-node cluster on 127.0.0.1-3: offset commits are written to
//! `__consumer_offsets` as Kafka writes them, with acks=all. A commit the
//! ISR cannot have (both followers frozen with SIGSTOP) is not
//! acknowledged — COORDINATOR_NOT_AVAILABLE, and OffsetFetch does not show
//! it — and an acknowledged commit survives SIGKILL of the coordinator.

mod common;

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use common::cluster::Cluster;
use common::kafka_client::Client;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{GroupId, OffsetCommitRequest, OffsetFetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

const OFFSETS: &str = "__consumer_offsets";
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const FLAGS: &[&str] = &[
    "--wal-profile",
    "low",
    "--broker-session-timeout-ms",
    "3000",
    "--replica-lag-time-max-ms",
    "3000",
    "--min-insync-replicas",
    "2",
    "--default-replication-factor",
    "3",
];

/// A simple (groupless) commit of `offset` for partition 0 of `topic`;
/// returns the partition's error code.
fn commit(client: &mut Client, topic: &str, offset: i64) -> Result<i16> {
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])]);
    let response = client.send(&request, 8)?;
    Ok(response.topics[0].partitions[0].error_code)
}

fn fetch(client: &mut Client, topic: &str) -> Result<i64> {
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_indexes(vec![0])]));
    let response = client.send(&request, 7)?;
    ensure!(
        response.error_code == 0,
        "OffsetFetch error {}",
        response.error_code
    );
    let p = &response
        .topics
        .first()
        .context("OffsetFetch without topics")?
        .partitions[0];
    ensure!(
        p.error_code == 0,
        "OffsetFetch partition error {}",
        p.error_code
    );
    Ok(p.committed_offset)
}

#[test]
fn an_offset_commit_is_acknowledged_only_once_the_isr_has_it() -> Result<()> {
    let mut cluster = Cluster::start(3, FLAGS)?;
    let topic = "t";
    Client::connect(cluster.node(1))?.create_topic_replicated(topic, 1, 3, &[])?;
    cluster.wait_for(
        topic,
        Duration::from_secs(20),
        "the topic on every node",
        |ps| ps.iter().all(|p| p.isr.len() == 3),
    )?;
    let views = cluster.wait_for(
        OFFSETS,
        Duration::from_secs(20),
        "a coordinator with a full ISR",
        |ps| ps.iter().all(|p| p.leader > 0 && p.isr.len() == 3),
    )?;
    let coordinator = views[0].leader;
    let followers: Vec<i32> = (1..=3).filter(|&n| n != coordinator).collect();
    let mut client = Client::connect(cluster.node(coordinator))?;
    // The coordinator may learn of the new topic a moment after Metadata
    // shows it (UNKNOWN_TOPIC_OR_PARTITION is retriable).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let first = commit(&mut client, topic, 5)?;
        if first == 0 {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "the first commit kept failing with error {first}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // Both followers frozen: the coordinator alone cannot satisfy acks=all.
    for &f in &followers {
        cluster.node(f).pause()?;
    }
    let refused = commit(&mut client, topic, 10);
    for &f in &followers {
        cluster.node(f).resume()?;
    }
    let refused = refused?;
    ensure!(
        refused == COORDINATOR_NOT_AVAILABLE,
        "a commit without the ISR answered error {refused}, not COORDINATOR_NOT_AVAILABLE"
    );
    ensure!(
        fetch(&mut client, topic)? == 5,
        "OffsetFetch shows a commit that was not acknowledged"
    );

    // Once the followers are back, commits are acknowledged again...
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut client = Client::connect(cluster.node(coordinator))?;
        if commit(&mut client, topic, 20)? == 0 {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "commits kept failing after the followers resumed\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // ...and an acknowledged one survives the coordinator's SIGKILL.
    cluster.node(coordinator).kill_hard()?;
    let views = cluster.wait_for(
        OFFSETS,
        Duration::from_secs(20),
        "a new coordinator",
        |ps| ps.iter().all(|p| p.leader > 0 && p.leader != coordinator),
    )?;
    let mut client = Client::connect(cluster.node(views[0].leader))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let committed = loop {
        match fetch(&mut client, topic) {
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
