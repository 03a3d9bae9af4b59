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
//!    replica lead;
//! 5. a topic trimmed by DeleteRecords moves whole onto a broker that never
//!    held it: the newcomer's fetch from 0 is out of range, it starts its
//!    log at the leader's log start and catches up from there;
//! 6. with Kafka's replication throttles (dynamic broker configs
//!    `leader.`/`follower.replication.throttled.rate` and the topic's
//!    throttled-replica lists, as `kafka-reassign-partitions.sh --throttle`
//!    sets them) a newcomer catches up at no more than the limit (+10 %);
//! 7. a throttled move under way when the controller is SIGKILLed is
//!    finished by the next controller, the new replica holding the whole log;
//! 8. a broker is drained (every replica it holds, internal topics'
//!    included, moved away in one request), stopped, unregistered, and gets
//!    no replica of a topic created afterwards.
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
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::list_partition_reassignments_response::OngoingPartitionReassignment;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, BrokerId, DeleteRecordsRequest, DescribeLogDirsRequest,
    ElectLeadersRequest, IncrementalAlterConfigsRequest, ListPartitionReassignmentsRequest,
    MetadataRequest, TopicName, UnregisterBrokerRequest,
};
use kafka_protocol::protocol::StrBytes;

const TOPIC: &str = "moving";

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

/// AlterPartitionReassignments for partition 0 of `TOPIC`: its error code.
fn reassign(client: &mut Client, target: Option<&[i32]>) -> Result<i16> {
    reassign_topic(client, TOPIC, target)
}

fn reassign_topic(client: &mut Client, topic: &str, target: Option<&[i32]>) -> Result<i16> {
    let partition = ReassignablePartition::default()
        .with_partition_index(0)
        .with_replicas(target.map(|t| t.iter().copied().map(BrokerId).collect()));
    let request = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![ReassignableTopic::default()
            .with_name(name(topic))
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
    // Asked through a node that is never killed below.
    let mut admin = Client::connect(cluster.node(newcomer))?;

    // 4,000 messages over 20 s.
    let count: u64 = 4000;
    let producer = paced::spawn(cluster.bootstrap(), TOPIC, count, Duration::from_millis(5));
    std::thread::sleep(Duration::from_millis(1500));

    // A target longer than the cluster is refused before the quorum's log.
    let oversized: Vec<i32> = (1..=5000).collect();
    ensure!(
        reassign(&mut admin, Some(&oversized))? == 39,
        "an oversized target is not INVALID_REPLICA_ASSIGNMENT"
    );

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
    let code = elect_preferred(&mut admin, TOPIC)?;
    ensure!(code == 0 || code == 84, "ElectLeaders answered {code}");
    cluster
        .wait_for(
            TOPIC,
            Duration::from_secs(10),
            "the preferred leader",
            |ps| ps[0].leader == reordered[0],
        )
        .with_context(|| cluster.logs())?;
    ensure!(
        elect_preferred(&mut admin, TOPIC)? == 84,
        "a second preferred election is not ELECTION_NOT_NEEDED"
    );

    let results = paced::join_all_acknowledged(producer)?;
    let (slowest_seq, slowest) = results
        .iter()
        .map(|(seq, _, l)| (*seq, *l))
        .max_by_key(|(_, l)| *l)
        .unwrap_or_default();
    println!("{count} messages acknowledged through 4 reassignments and an election; slowest {slowest:?} (message {slowest_seq}, sent {} ms in)", slowest_seq * 5);
    paced::check_read_back(&cluster.bootstrap(), TOPIC, count)?;
    move_a_trimmed_topic_onto_a_broker_that_never_held_it(&mut cluster, &mut admin)?;
    a_throttled_move_holds_its_rate(&mut cluster, &mut admin)
}

/// IncrementalAlterConfigs SET of `configs` on one resource; its error code.
fn set_configs(client: &mut Client, resource: (i8, &str), configs: &[(&str, &str)]) -> Result<i16> {
    let configs = configs
        .iter()
        .map(|(k, v)| {
            AlterableConfig::default()
                .with_name(StrBytes::from_string((*k).into()))
                .with_config_operation(0)
                .with_value(Some(StrBytes::from_string((*v).into())))
        })
        .collect();
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(resource.0)
            .with_resource_name(StrBytes::from_string(resource.1.into()))
            .with_configs(configs),
    ]);
    Ok(client.send(&request, 1)?.responses[0].error_code)
}

/// Throttles partition 0 of `topic` as `kafka-reassign-partitions.sh
/// --throttle` does: its `leader` on the leader side, the `newcomer` on
/// the follower side.
fn throttle_partition_0(
    client: &mut Client,
    topic: &str,
    leader: i32,
    newcomer: i32,
) -> Result<()> {
    let (leader_list, follower_list) = (format!("0:{leader}"), format!("0:{newcomer}"));
    let lists = [
        (
            "leader.replication.throttled.replicas",
            leader_list.as_str(),
        ),
        (
            "follower.replication.throttled.replicas",
            follower_list.as_str(),
        ),
    ];
    ensure!(
        set_configs(client, (2, topic), &lists)? == 0,
        "topic throttle refused"
    );
    Ok(())
}

/// A preferred ElectLeaders (v2) for partition 0 of `topic`: its error code.
fn elect_preferred(client: &mut Client, topic: &str) -> Result<i16> {
    let election = ElectLeadersRequest::default()
        .with_election_type(0)
        .with_timeout_ms(30_000)
        .with_topic_partitions(Some(vec![TopicPartitions::default()
            .with_topic(name(topic))
            .with_partitions(vec![0])]));
    let response = client.send(&election, 2)?;
    response
        .replica_election_results
        .first()
        .and_then(|t| t.partition_result.first())
        .map(|p| p.error_code)
        .with_context(|| format!("no partition in {response:?}"))
}

/// `count` records of 1 KiB to partition 0 of `topic` (acks=1), stamped now.
fn produce_kib_records(cluster: &Cluster, topic: &str, count: usize) -> Result<()> {
    let producer = common::clients::producer_at(&cluster.bootstrap(), &[("acks", "1")])?;
    let payload = [b'x'; 1024];
    common::clients::send_all(&producer, topic, &vec![&payload[..]; count])
}

fn a_throttled_move_holds_its_rate(cluster: &mut Cluster, admin: &mut Client) -> Result<()> {
    const LIMIT: u64 = 1_000_000;
    let topic = "throttled";
    admin.create_topic_replicated(topic, 1, 1, &[("min.insync.replicas", "1")])?;
    let view = cluster.wait_for(topic, Duration::from_secs(20), "a leader", |ps| {
        ps[0].leader > 0
    })?;
    let leader = view[0].leader;
    let newcomer = (1..=4).find(|&n| n != leader).context("one node")?;
    // About 6 MB in 1 KiB records, stamped now.
    produce_kib_records(cluster, topic, 6000)?;
    let limit = LIMIT.to_string();
    let rates = [
        ("leader.replication.throttled.rate", limit.as_str()),
        ("follower.replication.throttled.rate", limit.as_str()),
    ];
    ensure!(
        set_configs(admin, (4, ""), &rates)? == 0,
        "broker throttle refused"
    );
    throttle_partition_0(admin, topic, leader, newcomer)?;
    ensure!(
        set_configs(admin, (4, ""), &[("num.io.threads", "8")])? == 42,
        "a static broker config is not refused with INVALID_REQUEST"
    );

    let started = std::time::Instant::now();
    ensure!(
        reassign_topic(admin, topic, Some(&[leader, newcomer]))? == 0,
        "move refused"
    );
    cluster
        .wait_for(topic, Duration::from_secs(60), "the throttled move", |ps| {
            ps[0].isr.contains(&newcomer) && ps[0].replicas.len() == 2
        })
        .with_context(|| cluster.logs())?;
    let took = started.elapsed();
    let mut on_newcomer = Client::connect(cluster.node(newcomer))?;
    let dirs = on_newcomer.send(&DescribeLogDirsRequest::default().with_topics(None), 4)?;
    let moved: i64 = dirs.results[0]
        .topics
        .iter()
        .filter(|t| t.name.0.as_str() == topic)
        .flat_map(|t| t.partitions.iter())
        .map(|p| p.partition_size)
        .sum();
    let rate = moved as f64 / took.as_secs_f64();
    println!(
        "throttled move: {moved} bytes in {took:?} = {rate:.0} B/s against a limit of {LIMIT} B/s"
    );
    ensure!(moved > 6_000_000, "only {moved} bytes moved");
    ensure!(
        rate <= LIMIT as f64 * 1.1,
        "the throttle did not hold: {rate:.0} B/s against {LIMIT}"
    );
    // Slower only if this machine could not keep up (not a throttle fault).
    ensure!(
        rate >= LIMIT as f64 * 0.5,
        "the move crawled at {rate:.0} B/s"
    );
    a_move_survives_the_controllers_sigkill(cluster, admin)
}

/// Step 7: a throttled move (so it is still under way) while the controller is
/// SIGKILLed and restarted: the move lives in the quorum's log, the next
/// controller finishes it, and the new replica holds the whole log.
fn a_move_survives_the_controllers_sigkill(
    cluster: &mut Cluster,
    admin: &mut Client,
) -> Result<()> {
    let topic = "controller-killed";
    admin.create_topic_replicated(topic, 1, 1, &[("min.insync.replicas", "1")])?;
    let view = cluster.wait_for(topic, Duration::from_secs(20), "a leader", |ps| {
        ps[0].leader > 0
    })?;
    let leader = view[0].leader;
    produce_kib_records(cluster, topic, 3000)?;
    let controller = cluster.controller_at(leader)?;
    let newcomer = (1..=4)
        .find(|&n| n != leader && n != controller)
        .context("a third node")?;
    // Asked through a node that stays up.
    let mut steady = Client::connect(cluster.node(newcomer))?;
    throttle_partition_0(&mut steady, topic, leader, newcomer)?;
    ensure!(
        reassign_topic(&mut steady, topic, Some(&[leader, newcomer]))? == 0,
        "move refused"
    );
    std::thread::sleep(Duration::from_millis(1000));
    let moving = cluster.partitions_at(newcomer, topic)?.remove(0);
    ensure!(
        moving.replicas.len() == 2 && !moving.isr.contains(&newcomer),
        "the move was over before the controller's SIGKILL: {moving:?}"
    );
    cluster.node(controller).kill_hard()?;
    std::thread::sleep(Duration::from_millis(1500));
    cluster.node(controller).respawn()?;
    cluster.node(controller).finish_start()?;
    cluster
        .wait_for(
            topic,
            Duration::from_secs(60),
            "the move after the controller's SIGKILL",
            |ps| ps[0].replicas.len() == 2 && ps[0].isr.len() == 2,
        )
        .with_context(|| cluster.logs())?;
    // The new replica leads (a reorder, then a preferred election): it
    // answers for the whole log.
    let mut steady = Client::connect(cluster.node(newcomer))?;
    ensure!(
        reassign_topic(&mut steady, topic, Some(&[newcomer, leader]))? == 0,
        "reorder refused"
    );
    elect_preferred(&mut steady, topic)?;
    cluster.wait_for(
        topic,
        Duration::from_secs(20),
        "the new replica leading",
        |ps| ps[0].leader == newcomer,
    )?;
    let copied = steady.log_end_offset(topic)?;
    ensure!(copied == 3000, "the new replica ends at {copied}, not 3000");
    // The admin connection may have been to the controller that died.
    *admin = Client::connect(cluster.node(newcomer))?;
    drain_stop_and_unregister(cluster, admin, newcomer)
}

/// (topic, partition, replicas) of every partition.
type Placements = Vec<(String, i32, Vec<i32>)>;

/// Every partition of every topic (internal ones included) and the
/// brokers Metadata lists.
fn all_partitions(client: &mut Client) -> Result<(Placements, Vec<i32>)> {
    let response = client.send(&MetadataRequest::default().with_topics(None), 12)?;
    let brokers = response.brokers.iter().map(|b| b.node_id.0).collect();
    let mut partitions = Vec::new();
    for t in &response.topics {
        let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
        for p in &t.partitions {
            partitions.push((name.clone(), p.partition_index, ids(&p.replica_nodes)));
        }
    }
    Ok((partitions, brokers))
}

/// Step 8: a broker is drained (every replica it holds, internal topics'
/// included, moved away in one request), stopped, unregistered, and gets
/// no replica of a topic created afterwards.
fn drain_stop_and_unregister(cluster: &mut Cluster, admin: &mut Client, keep: i32) -> Result<()> {
    let drained = (1..=4).find(|&n| n != keep).context("a node to drain")?;
    let (partitions, _) = all_partitions(admin)?;
    let mut topics: Vec<ReassignableTopic> = Vec::new();
    for (topic, partition, replicas) in partitions.iter().filter(|(_, _, r)| r.contains(&drained)) {
        let spare = (1..=4)
            .find(|n| !replicas.contains(n))
            .context("no spare node")?;
        let target: Vec<BrokerId> = replicas
            .iter()
            .map(|&r| BrokerId(if r == drained { spare } else { r }))
            .collect();
        let entry = ReassignablePartition::default()
            .with_partition_index(*partition)
            .with_replicas(Some(target));
        match topics
            .iter_mut()
            .find(|t| t.name.0.as_str() == topic.as_str())
        {
            Some(t) => t.partitions.push(entry),
            None => topics.push(
                ReassignableTopic::default()
                    .with_name(name(topic))
                    .with_partitions(vec![entry]),
            ),
        }
    }
    let count: usize = topics.iter().map(|t| t.partitions.len()).sum();
    ensure!(count > 0, "node {drained} holds nothing to drain");
    let response = admin.send(
        &AlterPartitionReassignmentsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(topics),
        0,
    )?;
    let refused: Vec<_> = response
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter().filter(|p| p.error_code != 0))
        .collect();
    ensure!(
        response.error_code == 0 && refused.is_empty(),
        "drain refused: {response:?}"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (partitions, _) = all_partitions(admin)?;
        if partitions.iter().all(|(_, _, r)| !r.contains(&drained)) && ongoing(admin)?.is_none() {
            break;
        }
        ensure!(
            std::time::Instant::now() < deadline,
            "node {drained} still holds replicas: {partitions:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    println!("drained node {drained}: {count} partition replicas moved away");
    ensure!(
        cluster.node(drained).stop()?.success(),
        "node {drained} did not stop cleanly"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while all_partitions(admin)?.1.contains(&drained) {
        ensure!(
            std::time::Instant::now() < deadline,
            "node {drained} never fenced"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let unregistered = admin.send(
        &UnregisterBrokerRequest::default().with_broker_id(BrokerId(drained)),
        0,
    )?;
    ensure!(
        unregistered.error_code == 0,
        "UnregisterBroker: {unregistered:?}"
    );
    admin.create_topic_replicated("after-drain", 8, 3, &[])?;
    let placed = cluster.wait_for("after-drain", Duration::from_secs(20), "leaders", |ps| {
        ps.iter().all(|p| p.leader > 0)
    })?;
    ensure!(
        placed.iter().all(|p| !p.replicas.contains(&drained)),
        "the unregistered node {drained} got replicas: {placed:?}"
    );
    Ok(())
}

fn move_a_trimmed_topic_onto_a_broker_that_never_held_it(
    cluster: &mut Cluster,
    admin: &mut Client,
) -> Result<()> {
    let topic = "trimmed";
    admin.create_topic_replicated(topic, 1, 2, &[("min.insync.replicas", "1")])?;
    let view = cluster.wait_for(topic, Duration::from_secs(20), "a leader", |ps| {
        ps[0].leader > 0 && ps[0].isr.len() == 2
    })?;
    let stranger = (1..=4)
        .find(|n| !view[0].replicas.contains(n))
        .context("every node holds it")?;
    // Records stamped now (time retention must not take them).
    paced::join_all_acknowledged(paced::spawn(
        cluster.bootstrap(),
        topic,
        100,
        Duration::ZERO,
    ))?;
    let mut leader = Client::connect(cluster.node(view[0].leader))?;
    let trim = DeleteRecordsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(0)
                .with_offset(60)])]);
    let trimmed = leader.send(&trim, 2)?;
    ensure!(
        trimmed.topics[0].partitions[0].error_code == 0,
        "DeleteRecords: {trimmed:?}"
    );
    ensure!(
        reassign_topic(admin, topic, Some(&[stranger]))? == 0,
        "move refused"
    );
    cluster
        .wait_for(
            topic,
            Duration::from_secs(30),
            "the move onto the stranger",
            |ps| ps[0].replicas == vec![stranger] && ps[0].leader == stranger,
        )
        .with_context(|| cluster.logs())?;
    let mut moved = Client::connect(cluster.node(stranger))?;
    ensure!(
        moved.log_start_offset(topic)? == 60 && moved.log_end_offset(topic)? == 100,
        "the stranger holds [{}, {}):\n{}",
        moved.log_start_offset(topic)?,
        moved.log_end_offset(topic)?,
        cluster.node(stranger).log_tail(60)
    );
    Ok(())
}

/// `auto.leader.rebalance.enable` (on by default, as in Kafka; here checked
/// every second): a preferred leader that failed over and came back leads
/// its partition again without anyone asking.
#[test]
fn a_returning_broker_gets_its_preferred_leadership_back() -> Result<()> {
    let mut flags = FAST_FAILOVER.to_vec();
    flags.extend(["--leader-imbalance-check-interval-seconds", "1"]);
    let mut cluster = Cluster::start(3, &flags)?;
    let topic = "balanced";
    Client::connect(cluster.node(1))?.create_topic_replicated(topic, 1, 3, &[])?;
    let view = cluster.wait_for(topic, Duration::from_secs(20), "a full ISR", |ps| {
        ps[0].leader > 0 && ps[0].isr.len() == 3
    })?;
    let preferred = view[0].replicas[0];
    ensure!(
        view[0].leader == preferred,
        "not led by its first replica: {view:?}"
    );
    cluster.node(preferred).kill_hard()?;
    cluster.wait_for(topic, Duration::from_secs(20), "a failover", |ps| {
        ps[0].leader > 0 && ps[0].leader != preferred
    })?;
    cluster.node(preferred).respawn()?;
    cluster.node(preferred).finish_start()?;
    cluster
        .wait_for(
            topic,
            Duration::from_secs(30),
            "the preferred leader back",
            |ps| ps[0].leader == preferred,
        )
        .with_context(|| cluster.logs())?;
    Ok(())
}
