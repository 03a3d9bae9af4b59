//! The metadata quorum through Kafka's own APIs, on a real 3-node cluster
//! (127.0.0.1-3):
//! 1. DescribeQuorum (`kafka-metadata-quorum.sh describe`), asked of a node
//!    that is not the controller, v0 and v2: the controller leads
//!    `__cluster_metadata`-0, three voters, each with a log end offset, the
//!    leader's equal to the high watermark once the log is quiet; v2 names
//!    the voters' raft listeners.
//! 2. UnregisterBroker (`kafka-cluster.sh unregister`) of node 3 once it is
//!    stopped (SIGTERM) and fenced: broker 3 leaves DescribeCluster and
//!    Metadata and stays gone past the session timeout (nothing but its own
//!    heartbeat registers it again), a new RF-2 topic gets no replica on it,
//!    and unregistering it again, or an id never seen, is
//!    BROKER_ID_NOT_REGISTERED (102). Node 3 is still a voter: DescribeQuorum
//!    lists it. Restarted, it registers again.
//! 3. Unregistering a live broker is accepted (as Kafka does) and it is
//!    registered again at its next heartbeat.

mod common;

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use common::cluster::{Cluster, FAST_FAILOVER};
use common::kafka_client::Client;
use common::quorum::{
    describe_quorum, described_brokers, eventually, metadata_brokers, quorum_partition, unregister,
};

const BROKER_ID_NOT_REGISTERED: i16 = 102;
/// FAST_FAILOVER's `--broker-session-timeout-ms`.
const SESSION_TIMEOUT: Duration = Duration::from_millis(3000);

#[test]
fn describe_quorum_and_unregister_broker() -> Result<()> {
    let mut cluster = Cluster::start(3, FAST_FAILOVER)?;
    let controller = eventually(Duration::from_secs(15), "a controller", || {
        let id = cluster.controller_at(1)?;
        Ok((id > 0).then_some(id))
    })?;
    let asked = (1..=3).find(|&n| n != controller).context("a follower")?;

    // 1. DescribeQuorum from a node that is not the controller.
    for version in [0, 2] {
        let checked = eventually(
            Duration::from_secs(15),
            "every voter's log end offset, the leader's at the high watermark",
            || {
                let response = describe_quorum(cluster.node(asked), version)?;
                let p = quorum_partition(&response)?;
                ensure!(
                    p.leader_id.0 == controller,
                    "leader {} but the controller is {controller}",
                    p.leader_id.0
                );
                ensure!(p.leader_epoch > 0, "{p:?}");
                let voters: Vec<i32> = p.current_voters.iter().map(|v| v.replica_id.0).collect();
                ensure!(voters == [1, 2, 3], "voters {voters:?}");
                ensure!(p.observers.is_empty(), "observers {:?}", p.observers);
                let leader = p
                    .current_voters
                    .iter()
                    .find(|v| v.replica_id.0 == controller)
                    .context("the leader among the voters")?;
                // v1+: every voter heard from and caught up in this term.
                let timed = version < 1
                    || p.current_voters
                        .iter()
                        .all(|v| v.last_fetch_timestamp > 0 && v.last_caught_up_timestamp > 0);
                let settled = p.current_voters.iter().all(|v| v.log_end_offset > 0)
                    && leader.log_end_offset == p.high_watermark
                    && timed;
                Ok(settled.then(|| response.clone()))
            },
        )?;
        if version >= 2 {
            let nodes: Vec<(i32, String, String)> = checked
                .nodes
                .iter()
                .flat_map(|n| {
                    n.listeners
                        .iter()
                        .map(move |l| (n.node_id.0, l.name.to_string(), l.host.to_string()))
                })
                .collect();
            let expected: Vec<(i32, String, String)> = (1..=3)
                .map(|i| (i, "CONTROLLER".to_string(), format!("127.0.0.{i}")))
                .collect();
            ensure!(nodes == expected, "v2 nodes: {:?}", checked.nodes);
            ensure!(
                checked.nodes.iter().all(|n| n.listeners[0].port > 0),
                "{:?}",
                checked.nodes
            );
        }
    }

    // 2. Node 3 stops (SIGTERM), is fenced, and is unregistered.
    cluster.node(3).stop()?;
    let survivor = if controller == 3 { asked } else { controller };
    let other = (1..=2).find(|&n| n != survivor).context("another node")?;
    eventually(SESSION_TIMEOUT * 5, "broker 3 fenced", || {
        Ok(described_brokers(cluster.node(survivor))?
            .contains(&(3, true))
            .then_some(()))
    })
    .with_context(|| cluster.logs())?;
    ensure!(
        unregister(cluster.node(other), 3)? == 0,
        "UnregisterBroker 3 refused"
    );
    for node in [1, 2] {
        let described = described_brokers(cluster.node(node))?;
        ensure!(
            !described.iter().any(|(id, _)| *id == 3),
            "node {node} still describes broker 3: {described:?}"
        );
        let listed = metadata_brokers(cluster.node(node))?;
        ensure!(listed == [1, 2], "node {node}'s Metadata lists {listed:?}");
    }

    let mut client = Client::connect(cluster.node(survivor))?;
    client.create_topic_replicated("after-unregister", 6, 2, &[])?;
    let views = cluster.wait_for(
        "after-unregister",
        Duration::from_secs(10),
        "every partition led",
        |ps| ps.len() == 6 && ps.iter().all(|p| p.leader > 0),
    )?;
    for (p, view) in views.iter().enumerate() {
        ensure!(
            view.replicas.len() == 2 && !view.replicas.contains(&3),
            "partition {p} placed on {:?}",
            view.replicas
        );
    }

    // The controller's liveness registers nobody: still gone after twice
    // the session timeout.
    std::thread::sleep(SESSION_TIMEOUT * 2);
    let described = described_brokers(cluster.node(survivor))?;
    ensure!(
        !described.iter().any(|(id, _)| *id == 3),
        "broker 3 is back without a heartbeat: {described:?}"
    );
    for id in [3, 99] {
        let code = unregister(cluster.node(survivor), id)?;
        ensure!(
            code == BROKER_ID_NOT_REGISTERED,
            "UnregisterBroker {id}: {code}"
        );
    }
    // Still a voter of the metadata quorum.
    let response = describe_quorum(cluster.node(other), 1)?;
    let voters: Vec<i32> = quorum_partition(&response)?
        .current_voters
        .iter()
        .map(|v| v.replica_id.0)
        .collect();
    ensure!(
        voters == [1, 2, 3],
        "voters after unregistering: {voters:?}"
    );

    // Restarted, it registers again (its own heartbeat).
    cluster.node(3).respawn()?;
    cluster
        .node(3)
        .finish_start()
        .with_context(|| cluster.logs())?;
    eventually(Duration::from_secs(15), "broker 3 registered again", || {
        Ok(metadata_brokers(cluster.node(survivor))?
            .contains(&3)
            .then_some(()))
    })?;

    // 3. A live broker: accepted, and back at its next heartbeat.
    ensure!(
        unregister(cluster.node(survivor), other)? == 0,
        "UnregisterBroker of live broker {other} refused"
    );
    eventually(
        Duration::from_secs(10),
        "the live broker registered again",
        || {
            let described = described_brokers(cluster.node(survivor))?;
            Ok(described.contains(&(other, false)).then_some(()))
        },
    )?;
    Ok(())
}
