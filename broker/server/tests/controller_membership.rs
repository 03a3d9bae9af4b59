//! KIP-853's dynamic controller quorum on real nodes, through Kafka's
//! AddRaftVoter / RemoveRaftVoter / DescribeQuorum v2 sent to a broker:
//!
//! 1. `replace_the_active_controller_under_load`: 3 controllers (1-3) and 3
//!    brokers (4-6; a broker-only cluster needs 3 brokers to create its
//!    internal topics with Kafka's replication factor 3), an idempotent
//!    acks=all producer writing throughout. A 4th controller (7) starts with
//!    no `--peers` entry, follows the log as an observer, and is added with
//!    AddRaftVoter; the active controller is removed with RemoveRaftVoter and
//!    stopped. DescribeQuorum then lists the three remaining voters with the
//!    directory ids of their meta.properties, a new controller leads, topics
//!    can be created, and every acknowledged record reads back exactly once.
//!    On the way, hostile and mistaken requests are refused with Kafka's
//!    errors: another cluster's id (INCONSISTENT_CLUSTER_ID), a listener
//!    list of 10,000 entries (INVALID_REQUEST, at once), a wrong directory
//!    id on remove (VOTER_NOT_FOUND), adding a voter twice (DUPLICATE_VOTER).
//! 2. `the_last_voter_is_never_removed`: a node alone in its quorum refuses
//!    RemoveRaftVoter of itself (INVALID_REQUEST) and of an unknown
//!    directory id (VOTER_NOT_FOUND), and stays serving.
//!
//! The replacement's duration and the producer's longest gap between
//! acknowledgements are printed (figures for docs/performance.md).

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use common::cluster::{Cluster, FAST_FAILOVER};
use common::kafka_client::Client;
use common::paced;
use common::quorum::{describe_quorum, eventually, quorum_partition};
use kafka_protocol::messages::add_raft_voter_request::Listener;
use kafka_protocol::messages::{AddRaftVoterRequest, RemoveRaftVoterRequest};
use kafka_protocol::protocol::StrBytes;

const REQUEST_TIMED_OUT: i16 = 7;
const INVALID_REQUEST: i16 = 42;
const INCONSISTENT_CLUSTER_ID: i16 = 104;
const DUPLICATE_VOTER: i16 = 126;
const VOTER_NOT_FOUND: i16 = 127;
const NOT_CONTROLLER: i16 = 41;

/// The `directory.id` of a node's meta.properties, as Kafka's Uuid.
fn directory_id(data_dir: &Path) -> Result<uuid::Uuid> {
    use base64::Engine;
    let text = std::fs::read_to_string(data_dir.join("meta.properties"))?;
    let id = text
        .lines()
        .find_map(|l| l.strip_prefix("directory.id="))
        .context("meta.properties has no directory.id")?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(id.trim())?;
    Ok(uuid::Uuid::from_slice(&bytes)?)
}

fn add_voter(id: i32, directory: uuid::Uuid, listeners: Vec<Listener>) -> AddRaftVoterRequest {
    AddRaftVoterRequest::default()
        .with_cluster_id(None)
        .with_timeout_ms(30_000)
        .with_voter_id(id)
        .with_voter_directory_id(directory)
        .with_listeners(listeners)
}

fn controller_listener(host: &str, port: u16) -> Listener {
    Listener::default()
        .with_name(StrBytes::from_static_str("CONTROLLER"))
        .with_host(StrBytes::from_string(host.to_string()))
        .with_port(port)
}

fn remove_voter(id: i32, directory: uuid::Uuid) -> RemoveRaftVoterRequest {
    RemoveRaftVoterRequest::default()
        .with_cluster_id(None)
        .with_voter_id(id)
        .with_voter_directory_id(directory)
}

/// (leader, voters with their directory ids, observers) from DescribeQuorum v2.
type QuorumView = (i32, Vec<(i32, uuid::Uuid)>, Vec<i32>);

fn quorum_view(cluster: &mut Cluster, asked: i32) -> Result<QuorumView> {
    let response = describe_quorum(cluster.node(asked), 2)?;
    let p = quorum_partition(&response)?;
    let mut voters: Vec<(i32, uuid::Uuid)> = p
        .current_voters
        .iter()
        .map(|v| (v.replica_id.0, v.replica_directory_id))
        .collect();
    voters.sort_unstable();
    let mut observers: Vec<i32> = p.observers.iter().map(|o| o.replica_id.0).collect();
    observers.sort_unstable();
    Ok((p.leader_id.0, voters, observers))
}

/// The producer's longest wait between two consecutive acknowledgements
/// (its sends are paced `every` apart, so send `seq` left at `seq * every`).
fn longest_ack_gap(deliveries: &[paced::Delivery], every: Duration) -> Duration {
    let mut acks: Vec<Duration> = deliveries
        .iter()
        .map(|(seq, _, latency)| every * u32::try_from(*seq).unwrap_or(u32::MAX) + *latency)
        .collect();
    acks.sort_unstable();
    acks.windows(2)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or_default()
}

#[test]
fn replace_the_active_controller_under_load() -> Result<()> {
    let mut cluster = Cluster::start_split(3, 3, FAST_FAILOVER)?;
    let asked = 4;
    let topic = "controller-membership";
    Client::connect(cluster.node(asked))?.create_topic_replicated(
        topic,
        1,
        3,
        &[("min.insync.replicas", "2")],
    )?;
    cluster.wait_for(topic, Duration::from_secs(20), "a full ISR", |ps| {
        ps.iter().all(|p| p.leader > 0 && p.isr.len() == 3)
    })?;
    // Every controller has recorded its directory id with its vote.
    let (old_leader, voters, _) = eventually(
        Duration::from_secs(20),
        "3 voters with directory ids",
        || {
            let view = quorum_view(&mut cluster, asked)?;
            let recorded = view.1.len() == 3 && view.1.iter().all(|(_, d)| !d.is_nil());
            Ok((recorded && view.0 > 0).then_some(view))
        },
    )?;
    for (id, directory) in &voters {
        ensure!(
            *directory == directory_id(cluster.node(*id).data_dir())?,
            "voter {id}: DescribeQuorum's directory id is not its meta.properties'"
        );
    }

    let every = Duration::from_millis(10);
    let count: u64 = 2500;
    let producer = paced::spawn(cluster.bootstrap(), topic, count, every);
    std::thread::sleep(Duration::from_secs(2));

    // A new controller joins as an observer.
    let replacing = Instant::now();
    let new_id = cluster.start_joining_controller(&[])?;
    let new_directory = directory_id(cluster.node(new_id).data_dir())?;
    eventually(
        Duration::from_secs(20),
        "the new controller observing",
        || {
            let (_, _, observers) = quorum_view(&mut cluster, asked)?;
            Ok(observers.contains(&new_id).then_some(()))
        },
    )?;
    let raft_port = {
        let response = describe_quorum(cluster.node(asked), 2)?;
        response.nodes[0].listeners[0].port
    };
    let new_host = format!("127.0.0.{new_id}");
    let mut client = Client::connect(cluster.node(asked))?;

    // Refused at once: another cluster's id, 10,000 listeners.
    let wrong_cluster = add_voter(
        new_id,
        new_directory,
        vec![controller_listener(&new_host, raft_port)],
    )
    .with_cluster_id(Some(StrBytes::from_static_str("another-cluster")));
    let response = client.send(&wrong_cluster, 0)?;
    ensure!(
        response.error_code == INCONSISTENT_CLUSTER_ID,
        "another cluster's id: {response:?}"
    );
    let huge = add_voter(
        new_id,
        new_directory,
        (0..10_000)
            .map(|_| controller_listener(&new_host, raft_port))
            .collect(),
    );
    let response = client.send(&huge, 0)?;
    ensure!(
        response.error_code == INVALID_REQUEST,
        "10,000 listeners: {response:?}"
    );

    // Added once caught up (REQUEST_TIMED_OUT until then, as Kafka answers).
    let add = add_voter(
        new_id,
        new_directory,
        vec![controller_listener(&new_host, raft_port)],
    );
    eventually(Duration::from_secs(30), "AddRaftVoter accepted", || {
        let response = Client::connect(cluster.node(asked))?.send(&add, 0)?;
        match response.error_code {
            0 => Ok(Some(())),
            REQUEST_TIMED_OUT | NOT_CONTROLLER => Ok(None),
            _ => anyhow::bail!("AddRaftVoter: {response:?}"),
        }
    })?;
    let again = Client::connect(cluster.node(asked))?.send(&add, 0)?;
    ensure!(
        again.error_code == DUPLICATE_VOTER,
        "adding it twice: {again:?}"
    );

    // The active controller leaves: a wrong directory id first.
    let old_directory = voters
        .iter()
        .find(|(id, _)| *id == old_leader)
        .map(|(_, d)| *d)
        .context("the leader among the voters")?;
    let response = Client::connect(cluster.node(asked))?.send(
        &remove_voter(old_leader, uuid::Uuid::from_bytes([9; 16])),
        0,
    )?;
    ensure!(
        response.error_code == VOTER_NOT_FOUND,
        "a wrong directory id: {response:?}"
    );
    eventually(Duration::from_secs(30), "RemoveRaftVoter accepted", || {
        let response = Client::connect(cluster.node(asked))?
            .send(&remove_voter(old_leader, old_directory), 0)?;
        match response.error_code {
            0 => Ok(Some(())),
            REQUEST_TIMED_OUT | NOT_CONTROLLER => Ok(None),
            _ => anyhow::bail!("RemoveRaftVoter: {response:?}"),
        }
    })?;
    let replaced_in = replacing.elapsed();
    cluster.node(old_leader).stop()?;

    let expected: Vec<i32> = [1, 2, 3, new_id]
        .into_iter()
        .filter(|id| *id != old_leader)
        .collect();
    let (new_leader, now_voting, _) = eventually(
        Duration::from_secs(30),
        "a new leader among the voters left",
        || {
            let view = quorum_view(&mut cluster, asked)?;
            let ids: Vec<i32> = view.1.iter().map(|(id, _)| *id).collect();
            Ok((ids == expected && view.0 > 0 && view.0 != old_leader).then_some(view))
        },
    )?;
    for (id, directory) in &now_voting {
        ensure!(
            *directory == directory_id(cluster.node(*id).data_dir())?,
            "voter {id}: DescribeQuorum's directory id is not its meta.properties'"
        );
    }
    let response = describe_quorum(cluster.node(asked), 2)?;
    let listed: Vec<i32> = response.nodes.iter().map(|n| n.node_id.0).collect();
    ensure!(
        listed.contains(&new_id) && !listed.contains(&old_leader),
        "DescribeQuorum v2 nodes {listed:?}"
    );

    // The new controller serves metadata changes.
    eventually(Duration::from_secs(20), "a topic created", || {
        Ok(Client::connect(cluster.node(5))?
            .create_topic_replicated("after-replacement", 1, 3, &[])
            .ok())
    })?;

    let deliveries = paced::join_all_acknowledged(producer)?;
    paced::check_read_back(&cluster.bootstrap(), topic, count)?;
    println!(
        "controller {old_leader} replaced by {new_id} in {:.1} s (new leader {new_leader}); \
         longest gap between acknowledgements {:.3} s",
        replaced_in.as_secs_f64(),
        longest_ack_gap(&deliveries, every).as_secs_f64()
    );
    Ok(())
}

#[test]
fn the_last_voter_is_never_removed() -> Result<()> {
    let mut node = common::broker::Broker::start(&[])?;
    let directory = directory_id(node.data_dir())?;
    let mut client = Client::connect(&node)?;
    let response = client.send(&remove_voter(1, directory), 0)?;
    ensure!(
        response.error_code == INVALID_REQUEST,
        "removing the only voter: {response:?}"
    );
    let response = client.send(&remove_voter(1, uuid::Uuid::from_bytes([9; 16])), 0)?;
    ensure!(
        response.error_code == VOTER_NOT_FOUND,
        "an unknown directory id: {response:?}"
    );
    let response = describe_quorum(&node, 2)?;
    let p = quorum_partition(&response)?;
    ensure!(
        p.current_voters.len() == 1 && p.current_voters[0].replica_directory_id == directory,
        "{p:?}"
    );
    ensure!(node.is_running(), "the node stopped");
    Ok(())
}
