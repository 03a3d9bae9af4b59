//! A real 3-node cluster on 127.0.0.1-3: a KIP-848 group outlives its
//! coordinator. Two members share a topic; one new member joins, so the
//! group is mid-rebalance (a member revoking, the other waiting); the
//! coordinator is killed with SIGKILL. The new coordinator (the next leader
//! of `__consumer_offsets`) answers every member at the epoch it had — none
//! is told UNKNOWN_MEMBER_ID or FENCED_MEMBER_EPOCH and rejoins at epoch 0 —
//! with the group epoch ConsumerGroupDescribe showed before, and the
//! rebalance completes there without a partition ever owned by two members.
//!
//! The same with real clients: two librdkafka consumers
//! (`group.protocol=consumer`) read a topic, the coordinator is killed, and
//! they read on without a rebalance callback (no rejoin, no assignment
//! change) and without reading any record twice.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Result};
use common::cluster::{Cluster, FAST_FAILOVER as FLAGS};
use common::group_members::{
    assignment, callbacks, consume_until, produce_numbers, read_twice, real_member,
};
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
    let new_coordinator = cluster.new_coordinator_of(OFFSETS, coordinator)?;
    let mut client = Client::connect(cluster.node(new_coordinator))?;
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

#[test]
fn real_consumers_read_on_through_a_coordinator_failover_without_a_rebalance() -> Result<()> {
    const HALF: u64 = 3_000;
    const REAL_GROUP: &str = "real848";
    let mut cluster = Cluster::start(3, FLAGS)?;
    cluster.create_replicated(TOPIC, PARTITIONS)?;
    let coordinator = cluster.coordinator_of(OFFSETS)?;
    let bootstrap = cluster.bootstrap();
    produce_numbers(&bootstrap, TOPIC, PARTITIONS, 0, HALF)?;
    let member = |name| real_member(&bootstrap, REAL_GROUP, "consumer", TOPIC, name);
    let members = [member("a")?, member("b")?];
    let mut seen = BTreeMap::new();
    let mut nobody_else = |_: &mut BTreeMap<u64, usize>| Ok(());
    consume_until(&members, &mut seen, HALF, &mut nobody_else)?;
    // Both members hold a share of the partitions, and the group is quiet.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (before, callbacks_before) = loop {
        for (consumer, _) in &members {
            let _ = consumer.poll(Duration::from_millis(100));
        }
        let shares = (assignment(&members[0].0)?, assignment(&members[1].0)?);
        if !shares.0.is_empty() && !shares.1.is_empty() && shares.0.len() + shares.1.len() == 6 {
            break (shares, callbacks(&members));
        }
        ensure!(
            Instant::now() < deadline,
            "the two members never shared the topic: {shares:?}"
        );
    };

    let killed = Instant::now();
    cluster.node(coordinator).kill_hard()?;
    cluster.new_coordinator_of(OFFSETS, coordinator)?;
    produce_numbers(&bootstrap, TOPIC, PARTITIONS, HALF, 2 * HALF)?;
    let first_read = consume_until(&members, &mut seen, 2 * HALF, &mut nobody_else)?;
    let stall: Vec<String> = first_read
        .iter()
        .map(|t| {
            t.map_or("-".into(), |t| {
                format!("{:.2} s", (t - killed).as_secs_f64())
            })
        })
        .collect();
    eprintln!(
        "KIP-848 group: from SIGKILL of the coordinator to each member's first record after it: {stall:?}; all {HALF} records read after {:.2} s",
        killed.elapsed().as_secs_f64()
    );
    // A few more heartbeats at the new coordinator.
    let settle = Instant::now() + Duration::from_secs(3);
    while Instant::now() < settle {
        for (consumer, _) in &members {
            let extra = consumer.poll(Duration::from_millis(100));
            ensure!(!matches!(extra, Some(Ok(_))), "a record beyond the last");
        }
    }
    let twice = read_twice(&seen);
    ensure!(
        twice.is_empty(),
        "{} records read twice, e.g. {:?}",
        twice.len(),
        &twice[..twice.len().min(5)]
    );
    let after = (assignment(&members[0].0)?, assignment(&members[1].0)?);
    let callbacks_after = callbacks(&members);
    println!("assignments {before:?}, rebalance callbacks {callbacks_before:?} before the failover; {after:?}, {callbacks_after:?} after");
    ensure!(
        callbacks_after == callbacks_before && after == before,
        "the members rebalanced through the failover: callbacks {callbacks_before:?} -> {callbacks_after:?}, \
         assignments {before:?} -> {after:?}\n{}",
        cluster.logs()
    );
    Ok(())
}
