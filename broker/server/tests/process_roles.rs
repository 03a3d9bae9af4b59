//! Kafka's split roles on 127.0.0.1–8: three controller-only nodes (1–3,
//! `--process-roles controller`, the voters) serving five broker-only nodes
//! (4–8, `--process-roles broker`, observers of the quorum; 4, 6 and 8 find
//! it through `--peers`, 5 and 7 through `--controller-quorum-bootstrap-servers`):
//! 1. Metadata and DescribeCluster list brokers 4–8 only and name one of
//!    them as the controller; a controller-only node has no Kafka listener.
//! 2. DescribeQuorum (asked of a broker): voters 1–3, observers 4–8.
//! 3. An RF-3 topic (min.insync.replicas 2) lives on brokers only; an
//!    idempotent acks=all producer runs while the quorum's leader (a
//!    controller) is SIGKILLed, then the partition's leader broker is:
//!    every acknowledged record reads back once, in order, and a new
//!    controller and a new partition leader take over.
//! 4. A broker stopped (SIGTERM), fenced and unregistered leaves the
//!    observers and the broker lists for good: an RF-4 topic created after
//!    lands on the four others.
//! 5. A live broker unregistered joins and registers again (as a combined
//!    node does at its next heartbeat).

mod common;

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use common::cluster::{Cluster, FAST_FAILOVER};
use common::kafka_client::Client;
use common::paced;
use common::quorum::{
    describe_quorum, described_brokers, eventually, metadata_brokers, quorum_partition, unregister,
};

const CONTROLLERS: [i32; 3] = [1, 2, 3];
const BROKERS: [i32; 5] = [4, 5, 6, 7, 8];

/// (leader, voters, observers) as broker `asked` answers DescribeQuorum v1.
fn quorum_view(cluster: &mut Cluster, asked: i32) -> Result<(i32, Vec<i32>, Vec<i32>)> {
    let response = describe_quorum(cluster.node(asked), 1)?;
    let p = quorum_partition(&response)?;
    let ids = |states: &[kafka_protocol::messages::describe_quorum_response::ReplicaState]| {
        let mut ids: Vec<i32> = states.iter().map(|s| s.replica_id.0).collect();
        ids.sort_unstable();
        ids
    };
    Ok((p.leader_id.0, ids(&p.current_voters), ids(&p.observers)))
}

#[test]
fn three_controllers_serve_five_brokers_through_failures_and_a_retirement() -> Result<()> {
    let mut cluster = Cluster::start_split(3, 5, FAST_FAILOVER)?;

    // 1. Clients see brokers only.
    let listed = eventually(Duration::from_secs(30), "brokers 4-8 listed", || {
        let mut ids = metadata_brokers(cluster.node(4))?;
        ids.sort_unstable();
        Ok((ids == BROKERS).then_some(ids))
    })?;
    let described: Vec<i32> = described_brokers(cluster.node(5))?
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    ensure!(
        described.iter().all(|id| BROKERS.contains(id)) && described.len() == 5,
        "DescribeCluster lists {described:?}, metadata {listed:?}"
    );
    let controller_for_clients = cluster.controller_at(6)?;
    ensure!(
        BROKERS.contains(&controller_for_clients),
        "Metadata names {controller_for_clients} as controller: not a broker clients can reach"
    );
    let kafka_port = cluster.kafka_port;
    ensure!(
        std::net::TcpStream::connect(("127.0.0.1", kafka_port)).is_err(),
        "controller-only node 1 accepts connections on the Kafka port"
    );

    // 2. The quorum: three voters, five observers.
    let (quorum_leader, voters, observers) =
        eventually(Duration::from_secs(30), "5 observers", || {
            let view = quorum_view(&mut cluster, 7)?;
            Ok((view.2 == BROKERS).then_some(view))
        })?;
    ensure!(voters == CONTROLLERS, "voters {voters:?}");
    ensure!(
        CONTROLLERS.contains(&quorum_leader),
        "quorum leader {quorum_leader}"
    );
    println!("quorum: leader {quorum_leader}, voters {voters:?}, observers {observers:?}");

    // 3. Produce through the loss of the quorum leader and a partition leader.
    let topic = "split-roles";
    Client::connect(cluster.node(4))?.create_topic_replicated(
        topic,
        1,
        3,
        &[("min.insync.replicas", "2")],
    )?;
    let first = cluster.wait_for(topic, Duration::from_secs(20), "a full ISR", |ps| {
        ps.iter().all(|p| p.leader > 0 && p.isr.len() == 3)
    })?;
    ensure!(
        first[0].replicas.iter().all(|r| BROKERS.contains(r)),
        "replicas {:?} include a controller-only node",
        first[0].replicas
    );
    let count: u64 = 1500;
    let producer = paced::spawn(cluster.bootstrap(), topic, count, Duration::from_millis(5));
    std::thread::sleep(Duration::from_millis(1500));
    cluster.node(quorum_leader).kill_hard()?;
    let asked = first[0]
        .replicas
        .iter()
        .copied()
        .chain(BROKERS)
        .find(|b| !first[0].replicas.contains(b))
        .context("a broker outside the partition")?;
    let new_leader = eventually(Duration::from_secs(20), "a new quorum leader", || {
        let (leader, _, _) = quorum_view(&mut cluster, asked)?;
        Ok((leader > 0 && leader != quorum_leader).then_some(leader))
    })?;
    let partition_leader = cluster.partitions(topic)?[0].leader;
    cluster.node(partition_leader).kill_hard()?;
    let results = paced::join_all_acknowledged(producer)?;
    ensure!(results.len() as u64 == count);
    let after = cluster.new_leader_of(topic, partition_leader, "a new partition leader")?;
    println!(
        "quorum leader {quorum_leader} -> {new_leader}; partition leader {partition_leader} -> {after}"
    );
    paced::check_read_back(&cluster.node(asked).bootstrap(), topic, count)?;
    cluster.node(quorum_leader).restart_same_ports()?;
    cluster.node(partition_leader).restart_same_ports()?;

    // 4. Retire a broker for good.
    let retired = 8;
    let stayer = 5;
    cluster.node(retired).stop()?;
    eventually(Duration::from_secs(20), "broker 8 fenced", || {
        let fenced = described_brokers(cluster.node(stayer))?
            .into_iter()
            .any(|(id, fenced)| id == retired && fenced);
        Ok(fenced.then_some(()))
    })?;
    let code = unregister(cluster.node(stayer), retired)?;
    ensure!(code == 0, "UnregisterBroker: error {code}");
    eventually(
        Duration::from_secs(20),
        "broker 8 gone from the observers",
        || {
            let (_, _, observers) = quorum_view(&mut cluster, stayer)?;
            Ok((!observers.contains(&retired) && observers.len() == 4).then_some(()))
        },
    )?;
    let wide = "after-retirement";
    Client::connect(cluster.node(stayer))?.create_topic_replicated(wide, 4, 4, &[])?;
    let placed = cluster.wait_for(wide, Duration::from_secs(20), "full ISRs", |ps| {
        ps.iter().all(|p| p.leader > 0 && p.isr.len() == 4)
    })?;
    for p in &placed {
        ensure!(
            !p.replicas.contains(&retired) && p.replicas.iter().all(|r| BROKERS.contains(r)),
            "replicas {:?} after broker {retired} was unregistered",
            p.replicas
        );
    }
    let listed = metadata_brokers(cluster.node(stayer))?;
    ensure!(
        !listed.contains(&retired),
        "Metadata still lists {retired}: {listed:?}"
    );

    // 5. A live broker unregistered comes back: it joins and registers again.
    let live = 7;
    let code = unregister(cluster.node(stayer), live)?;
    ensure!(code == 0, "UnregisterBroker of a live broker: error {code}");
    eventually(Duration::from_secs(20), "broker 7 back", || {
        let (_, _, observers) = quorum_view(&mut cluster, stayer)?;
        let listed = metadata_brokers(cluster.node(stayer))?;
        Ok((observers.contains(&live) && listed.contains(&live)).then_some(()))
    })?;
    Ok(())
}
