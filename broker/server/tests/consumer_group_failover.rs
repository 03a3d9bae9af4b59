//! A real 3-node cluster on 127.0.0.1-3: a KIP-848 group outlives its
//! coordinator. Two members share a topic; one new member joins, so the
//! group is mid-rebalance (a member revoking, the other waiting); the
//! coordinator is killed with SIGKILL. The new coordinator (the next leader
//! of `__consumer_offsets`) answers every member at the epoch it had — none
//! is told UNKNOWN_MEMBER_ID or FENCED_MEMBER_EPOCH and rejoins at epoch 0 —
//! with the group epoch ConsumerGroupDescribe showed before, and the
//! rebalance completes there without a partition ever owned by two members.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Result};
use common::cluster::{Cluster, FAST_FAILOVER as FLAGS};
use common::kafka_client::Client;
use common::kip848::{group_id, Member};
use kafka_protocol::messages::ConsumerGroupDescribeRequest;
use uuid::Uuid;

const OFFSETS: &str = "__consumer_offsets";
const TOPIC: &str = "failover848";
const PARTITIONS: i32 = 6;
const GROUP: &str = "g848";
/// What a heartbeat may answer while the coordinator moves.
const NOT_COORDINATOR: i16 = 16;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;

#[test]
fn a_coordinator_failover_keeps_member_epochs_and_assignments() -> Result<()> {
    let mut cluster = Cluster::start(3, FLAGS)?;
    cluster.create_replicated(TOPIC, PARTITIONS)?;
    let coordinator = cluster.coordinator_of(OFFSETS)?;
    let mut client = Client::connect(cluster.node(coordinator))?;
    let topic_id = client.topic_id(TOPIC)?;

    let mut members = vec![Member::new(GROUP, TOPIC), Member::new(GROUP, TOPIC)];
    settle(&mut client, &mut members, topic_id)?;
    // A third member: the others must give up partitions, which they do
    // only on their next heartbeat — after the failover.
    members.push(Member::new(GROUP, TOPIC));
    members[2].beat(&mut client, topic_id)?;
    members[0].beat(&mut client, topic_id)?;
    check_disjoint(&members)?;
    let before = describe(&mut client)?;
    let epochs: Vec<i32> = members.iter().map(|m| m.epoch).collect();
    println!(
        "before the failover: group epoch {}, member epochs {epochs:?}",
        before.0
    );

    cluster.node(coordinator).kill_hard()?;
    let views = cluster.wait_for(
        OFFSETS,
        Duration::from_secs(30),
        "a new coordinator",
        |ps| ps.iter().all(|p| p.leader > 0 && p.leader != coordinator),
    )?;
    let mut client = Client::connect(cluster.node(views[0].leader))?;
    for i in 0..members.len() {
        let m = &mut members[i];
        let epoch = m.epoch;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let r = m.try_beat(&mut client, topic_id)?;
            match r.error_code {
                0 => break,
                NOT_COORDINATOR | COORDINATOR_NOT_AVAILABLE | COORDINATOR_LOAD_IN_PROGRESS
                    if Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(200));
                }
                code => bail!(
                    "member {} at epoch {epoch} answered error {code} by the new coordinator: \
                     it would have to rejoin at epoch 0\n{}",
                    m.id,
                    cluster.logs()
                ),
            }
        }
        ensure!(
            m.epoch >= epoch,
            "member {} went back from epoch {epoch} to {}",
            m.id,
            m.epoch
        );
        check_disjoint(&members)?;
    }
    let after = describe(&mut client)?;
    ensure!(
        after == before,
        "the group was {before:?} (epoch, members) before the failover and {after:?} after"
    );
    settle(&mut client, &mut members, topic_id)?;
    println!(
        "after the failover: group epoch {}, member epochs {:?}",
        after.0,
        members.iter().map(|m| m.epoch).collect::<Vec<_>>()
    );
    Ok(())
}

/// Heartbeats every member in turn until together they own every
/// partition at one epoch, checking no partition is ever owned twice.
fn settle(client: &mut Client, members: &mut [Member], topic_id: Uuid) -> Result<()> {
    let all: BTreeSet<i32> = (0..PARTITIONS).collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        for m in members.iter_mut() {
            m.beat(client, topic_id)?;
        }
        check_disjoint(members)?;
        let owned: BTreeSet<i32> = members.iter().flat_map(|m| m.owned.clone()).collect();
        let epochs: BTreeSet<i32> = members.iter().map(|m| m.epoch).collect();
        if owned == all && epochs.len() == 1 {
            return Ok(());
        }
        ensure!(Instant::now() < deadline, "the group did not settle");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn check_disjoint(members: &[Member]) -> Result<()> {
    let mut seen = BTreeSet::new();
    for m in members {
        for p in &m.owned {
            ensure!(seen.insert(*p), "partition {p} is owned by two members");
        }
    }
    Ok(())
}

/// (group epoch, member ids) as ConsumerGroupDescribe shows them.
fn describe(client: &mut Client) -> Result<(i32, BTreeSet<String>)> {
    let described = client.send(
        &ConsumerGroupDescribeRequest::default().with_group_ids(vec![group_id(GROUP)]),
        0,
    )?;
    let g = &described.groups[0];
    ensure!(
        g.error_code == 0,
        "ConsumerGroupDescribe: error {}",
        g.error_code
    );
    Ok((
        g.group_epoch,
        g.members.iter().map(|m| m.member_id.to_string()).collect(),
    ))
}
