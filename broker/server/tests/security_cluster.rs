//! A 3-node cluster (127.0.0.1–3) whose nodes name two listeners each,
//! PLAINTEXT (inter-broker) and SASL_PLAINTEXT: every node registers both
//! with the metadata quorum, so a client of either listener on any node is
//! given every broker at that listener's endpoint; replica fetches keep
//! working over the PLAINTEXT listener (an acks=all produce to a topic of
//! replication factor 3 is acknowledged and the ISR holds all three).

mod common;
mod security_support;

use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use common::clients::{producer_at, CLIENT_TIMEOUT};
use common::cluster::free_port;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{CreateTopicsRequest, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use rdkafka::producer::FutureRecord;
use security_support::{Certs, Conn, SecureBroker};

/// (host, port) of every broker a Metadata answer lists, by node id.
fn endpoints(metadata: &MetadataResponse) -> Vec<(i32, String, i32)> {
    let mut found: Vec<_> = metadata
        .brokers
        .iter()
        .map(|b| (b.node_id.0, b.host.to_string(), b.port))
        .collect();
    found.sort();
    found
}

#[test]
fn every_node_answers_each_listener_with_that_listeners_endpoints() -> Result<()> {
    let certs = Certs::make()?; // only for its scratch directory
    let jaas = certs.path("jaas.conf");
    std::fs::write(
        &jaas,
        "KafkaServer { PlainLoginModule required user_alice=\"alice-secret\"; };",
    )?;
    let (plain, sasl, raft) = loop {
        let ports = (free_port()?, free_port()?, free_port()?);
        if ports.0 != ports.1 && ports.1 != ports.2 && ports.0 != ports.2 {
            break ports;
        }
    };
    let peers = "1@127.0.0.1,2@127.0.0.2,3@127.0.0.3";
    let secret = certs.arg("cluster.secret");
    let jaas = jaas.display().to_string();
    let mut nodes = Vec::new();
    for id in 1..=3 {
        let host = format!("127.0.0.{id}");
        let listeners = format!("PLAINTEXT://{host}:{plain},SASL_PLAINTEXT://{host}:{sasl}");
        let (node_id, raft_listen, metrics) = (
            id.to_string(),
            format!("{host}:{raft}"),
            format!("{host}:0"),
        );
        nodes.push(SecureBroker::spawn(
            &listeners,
            &[
                "--node-id",
                &node_id,
                "--peers",
                peers,
                "--raft-listen",
                &raft_listen,
                "--metrics-listen",
                &metrics,
                "--cluster-secret-file",
                &secret,
                "--sasl-enabled-mechanisms",
                "PLAIN",
                "--sasl-jaas-config-file",
                &jaas,
            ],
        )?);
    }
    for node in &mut nodes {
        node.wait_listening()?;
    }
    let expected = |port: u16| -> Vec<(i32, String, i32)> {
        (1..=3)
            .map(|id| (id, format!("127.0.0.{id}"), i32::from(port)))
            .collect()
    };
    for node in &nodes {
        // Brokers register with heartbeats: wait (bounded) for all three.
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut client = Conn::plain(node.addr("PLAINTEXT")?)?;
        while endpoints(&client.metadata()?).len() < 3 {
            ensure!(
                Instant::now() < deadline,
                "fewer than 3 brokers registered:\n{}",
                node.log_tail()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        ensure!(
            endpoints(&client.metadata()?) == expected(plain),
            "PLAINTEXT on {:?}",
            node.listeners
        );
        let mut sasl_client = Conn::plain(node.addr("SASL_PLAINTEXT")?)?;
        ensure!(
            sasl_client.login_plain("alice", "alice-secret")?.error_code == 0,
            "login"
        );
        ensure!(
            endpoints(&sasl_client.metadata()?) == expected(sasl),
            "SASL_PLAINTEXT on {:?}",
            node.listeners
        );
    }

    // Replication over the inter-broker (PLAINTEXT) listener.
    let topic = "replicated";
    let mut admin = Conn::plain(nodes[0].addr("PLAINTEXT")?)?;
    let created = admin.send(
        &CreateTopicsRequest::default()
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_static_str(topic)))
                .with_num_partitions(1)
                .with_replication_factor(3)])
            .with_timeout_ms(15_000),
        5,
    )?;
    ensure!(created.topics[0].error_code == 0, "{created:?}");
    let bootstrap = format!("127.0.0.1:{plain}");
    let producer = producer_at(&bootstrap, &[("acks", "all")])?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let delivered = runtime.block_on(producer.send(
        FutureRecord::<(), _>::to(topic).payload("v"),
        CLIENT_TIMEOUT,
    ));
    ensure!(delivered.is_ok(), "acks=all produce: {delivered:?}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let metadata = admin.send(&MetadataRequest::default().with_topics(None), 12)?;
        let isr = metadata
            .topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))
            .and_then(|t| t.partitions.first())
            .map_or(0, |p| p.isr_nodes.len());
        if isr == 3 {
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "ISR of {topic}-0 has {isr} nodes:\n{}",
            nodes[1].log_tail()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
