//! Partition reassignment (KIP-455) and preferred leader election (KIP-460)
//! on a real 4-node cluster (127.0.0.1-4) while an idempotent acks=all
//! producer writes to the partition that moves:
//! 1. its replicas move off their first replica (usually the leader) onto
//!    the fourth node; the removed replica deletes its log;
//! 2. a move onto a broker that is SIGKILLed stalls, is listed by
//!    ListPartitionReassignments with its adding/removing replicas, and is
//!    cancelled back to the replicas it had;
//! 3. with that broker back, the move is made again and completes (its log
//!    fetched afresh from the leader);
//! 4. a reorder completes at once and ElectLeaders makes the new first
//!    replica lead.
//!
//! Every acknowledged record is read back exactly once, in order; the
//! partition never answers without a leader for long (the producer sees
//! no error).

mod common;

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use common::cluster::{Cluster, FAST_FAILOVER};
use common::kafka_client::Client;
use common::paced;
use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::list_partition_reassignments_response::OngoingPartitionReassignment;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, BrokerId, ElectLeadersRequest,
    ListPartitionReassignmentsRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

const TOPIC: &str = "moving";

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

/// AlterPartitionReassignments for partition 0 of `TOPIC`: its error code.
fn reassign(client: &mut Client, target: Option<&[i32]>) -> Result<i16> {
    let partition = ReassignablePartition::default()
        .with_partition_index(0)
        .with_replicas(target.map(|t| t.iter().copied().map(BrokerId).collect()));
    let request = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![ReassignableTopic::default()
            .with_name(name(TOPIC))
            .with_partitions(vec![partition])]);
    let response = client.send(&request, 0)?;
    ensure!(
        response.error_code == 0,
        "AlterPartitionReassignments failed: {response:?}"
    );
    let code = response
        .responses
        .first()
        .and_then(|t| t.partitions.first())
        .map(|p| p.error_code)
        .context("no partition in the answer")?;
    Ok(code)
}

/// The ongoing reassignment of partition 0 of `TOPIC`, if any.
fn ongoing(client: &mut Client) -> Result<Option<OngoingPartitionReassignment>> {
    let response = client.send(&ListPartitionReassignmentsRequest::default(), 0)?;
    ensure!(
        response.error_code == 0,
        "ListPartitionReassignments: {response:?}"
    );
    Ok(response
        .topics
        .into_iter()
        .filter(|t| t.name.0.as_str() == TOPIC)
        .flat_map(|t| t.partitions)
        .find(|p| p.partition_index == 0))
}

fn ids(v: &[BrokerId]) -> Vec<i32> {
    v.iter().map(|b| b.0).collect()
}

/// Waits until partition 0 has exactly `replicas` (in order), all in sync.
fn wait_for_replicas(cluster: &mut Cluster, replicas: &[i32], what: &str) -> Result<()> {
    let wanted = replicas.to_vec();
    cluster
        .wait_for(TOPIC, Duration::from_secs(40), what, |ps| {
            let mut isr = ps[0].isr.clone();
            isr.sort_unstable();
            let mut sorted = wanted.clone();
            sorted.sort_unstable();
            ps[0].replicas == wanted && isr == sorted && ps[0].leader > 0
        })
        .with_context(|| cluster.logs())?;
    Ok(())
}

#[test]
fn replicas_move_cancel_and_come_back_under_load_with_nothing_lost() -> Result<()> {
    let mut cluster = Cluster::start(4, FAST_FAILOVER)?;
    let mut admin = Client::connect(cluster.node(1))?;
    admin.create_topic_replicated(TOPIC, 1, 3, &[("min.insync.replicas", "2")])?;
    let start = cluster.wait_for(
        TOPIC,
        Duration::from_secs(20),
        "a leader with a full ISR",
        |ps| ps[0].leader > 0 && ps[0].isr.len() == 3,
    )?;
    let original = start[0].replicas.clone();
    let newcomer = (1..=4)
        .find(|n| !original.contains(n))
        .context("no fourth node")?;
    let removed = original[0];

    // 4,000 messages over 20 s.
    let count: u64 = 4000;
    let producer = paced::spawn(cluster.bootstrap(), TOPIC, count, Duration::from_millis(5));
    std::thread::sleep(Duration::from_millis(1500));

    // 1. Off the first replica, onto the newcomer.
    let moved = vec![newcomer, original[1], original[2]];
    ensure!(reassign(&mut admin, Some(&moved))? == 0, "move refused");
    wait_for_replicas(
        &mut cluster,
        &moved,
        "the move onto the newcomer to complete",
    )?;
    ensure!(
        ongoing(&mut admin)?.is_none(),
        "a completed move is still listed"
    );
    let deleted = "no longer a replica: deleting its log";
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !cluster.node(removed).log_tail(400).contains(deleted) {
        ensure!(
            std::time::Instant::now() < deadline,
            "node {removed} kept its log:\n{}",
            cluster.node(removed).log_tail(40)
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // 2. Back onto the removed broker while it is dead: the move stalls,
    // is listed, and is cancelled.
    cluster.node(removed).kill_hard()?;
    let back = vec![removed, moved[1], moved[2]];
    ensure!(
        reassign(&mut admin, Some(&back))? == 0,
        "second move refused"
    );
    std::thread::sleep(Duration::from_millis(1000));
    let listed = ongoing(&mut admin)?.context("the stalled move is not listed")?;
    ensure!(
        ids(&listed.adding_replicas) == vec![removed]
            && ids(&listed.removing_replicas) == vec![newcomer],
        "listed as {listed:?}"
    );
    ensure!(reassign(&mut admin, None)? == 0, "cancel refused");
    ensure!(
        ongoing(&mut admin)?.is_none(),
        "cancelled move still listed"
    );
    let after_cancel = cluster.partitions(TOPIC)?.remove(0);
    let mut kept = after_cancel.replicas.clone();
    kept.sort_unstable();
    let mut expected = moved.clone();
    expected.sort_unstable();
    ensure!(kept == expected, "cancel left replicas {after_cancel:?}");
    ensure!(
        reassign(&mut admin, None)? == 85,
        "a second cancel is not NO_REASSIGNMENT_IN_PROGRESS"
    );

    // 3. With the broker back, the same move completes.
    cluster.node(removed).respawn()?;
    cluster.node(removed).finish_start()?;
    ensure!(
        reassign(&mut admin, Some(&back))? == 0,
        "third move refused"
    );
    wait_for_replicas(&mut cluster, &back, "the move back to complete")?;

    // 4. A reorder completes at once; the preferred replica then leads.
    let reordered = vec![back[1], back[0], back[2]];
    ensure!(
        reassign(&mut admin, Some(&reordered))? == 0,
        "reorder refused"
    );
    wait_for_replicas(&mut cluster, &reordered, "the reorder")?;
    let election = ElectLeadersRequest::default()
        .with_election_type(0)
        .with_timeout_ms(30_000)
        .with_topic_partitions(Some(vec![TopicPartitions::default()
            .with_topic(name(TOPIC))
            .with_partitions(vec![0])]));
    let elected = admin.send(&election, 2)?;
    let code = elected.replica_election_results[0].partition_result[0].error_code;
    ensure!(code == 0 || code == 84, "ElectLeaders answered {elected:?}");
    cluster
        .wait_for(
            TOPIC,
            Duration::from_secs(10),
            "the preferred leader",
            |ps| ps[0].leader == reordered[0],
        )
        .with_context(|| cluster.logs())?;
    ensure!(
        admin.send(&election, 2)?.replica_election_results[0].partition_result[0].error_code == 84,
        "a second preferred election is not ELECTION_NOT_NEEDED"
    );

    let results = paced::join_all_acknowledged(producer)?;
    let slowest = results.iter().map(|(_, _, l)| *l).max().unwrap_or_default();
    println!("{count} messages acknowledged through 4 reassignments and an election; slowest {slowest:?}");
    paced::check_read_back(&cluster.bootstrap(), TOPIC, count)
}
