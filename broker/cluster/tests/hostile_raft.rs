//! Hostile clients on the raft/controller port. It used to accept a
//! Heartbeat from anyone — registering an unknown broker whose host clients
//! and followers then connected to — and DeleteTopic and AlterPartition
//! from anyone. Now a connection must prove the cluster secret first, a
//! broker may only heartbeat for itself, only configured voters at their
//! configured hosts register, and the port's connections are capped.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use chronik_cluster::{ClusterSecret, CreateTopic};
use common::{eventually, TestCluster};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A raft RPC frame (`u32` length + JSON) of a controller request.
fn frame(json: &str) -> Vec<u8> {
    let mut out = (json.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(json.as_bytes());
    out
}

fn heartbeat(node_id: i32, host: &str) -> Vec<u8> {
    frame(&format!(r#"{{"Controller":{{"Heartbeat":{{"node_id":{node_id},"host":"{host}","port":9092}}}}}}"#))
}

/// Everything the server sends until it closes (bounded wait).
async fn drain(stream: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut out)).await;
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_secret_nothing_registers_or_deletes() {
    let cluster = TestCluster::start().await;
    let controller = cluster.controller().await;
    cluster
        .node(controller)
        .create_topic(CreateTopic { name: "keep".into(), partitions: 1, replication_factor: 3, configs: BTreeMap::new() })
        .await
        .expect("create");
    let addr = cluster.config(controller).raft_listen;

    // No handshake at all: frames straight away.
    let mut raw = TcpStream::connect(addr).await.expect("connect");
    let mut attack = heartbeat(9, "10.6.6.6");
    attack.extend(frame(r#"{"Controller":{"DeleteTopic":"keep"}}"#));
    let _ = raw.write_all(&attack).await;
    let answer = drain(&mut raw).await;
    assert!(answer.len() <= 32, "an unauthenticated client got {} bytes back", answer.len());

    // A wrong secret.
    let mut wrong = TcpStream::connect(addr).await.expect("connect");
    let refused = chronik_cluster::auth::client_handshake(&mut wrong, &ClusterSecret::from_bytes(b"not the cluster's secret"), 2).await;
    assert!(refused.is_err(), "a wrong secret was accepted");

    tokio::time::sleep(Duration::from_millis(500)).await;
    let image = cluster.node(controller).image();
    assert!(!image.brokers.contains_key(&9), "an unauthenticated heartbeat registered broker 9");
    assert!(image.topics.contains_key("keep"), "an unauthenticated DeleteTopic deleted a topic");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voter_may_heartbeat_only_for_itself_at_its_own_host() {
    let cluster = TestCluster::start().await;
    let controller = cluster.controller().await;
    let addr = cluster.config(controller).raft_listen;
    let secret = cluster.config(controller).secret;
    let other = [1, 2, 3].into_iter().find(|&id| id != controller).expect("another node");

    // Authenticated as `other`, heartbeating for someone else.
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    chronik_cluster::auth::client_handshake(&mut stream, &secret, other).await.expect("handshake");
    let victim = [1, 2, 3].into_iter().find(|&id| id != other).expect("a victim");
    stream.write_all(&heartbeat(victim, "10.6.6.6")).await.expect("write");
    let answer = String::from_utf8_lossy(&drain(&mut stream).await).to_string();
    assert!(answer.contains("may not heartbeat for node"), "{answer}");

    // Authenticated as itself, but moving its endpoint to another host.
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    chronik_cluster::auth::client_handshake(&mut stream, &secret, other).await.expect("handshake");
    stream.write_all(&heartbeat(other, "10.6.6.6")).await.expect("write");
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).await.expect("a reply");
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    stream.read_exact(&mut body).await.expect("reply body");
    let reply = String::from_utf8_lossy(&body).to_string();
    assert!(reply.contains("not a configured voter"), "{reply}");

    let image = cluster.node(controller).image();
    for (id, broker) in &image.brokers {
        assert_eq!(broker.host, format!("127.0.0.{id}"), "broker {id} moved to {}", broker.host);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_cap_are_refused_and_peers_keep_working() {
    let cluster = TestCluster::start().await;
    let controller = cluster.controller().await;
    let addr = cluster.config(controller).raft_listen;
    // From 127.0.0.9: not a peer's address, so the per-address cap hits
    // only the attacker.
    let mut held = Vec::new();
    for _ in 0..40 {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.bind("127.0.0.9:0".parse().expect("addr")).expect("bind");
        held.push(socket.connect(addr).await.expect("connect"));
    }
    // The 17th and later from that address are closed at once, unanswered.
    let mut closed = 0;
    for stream in held.iter_mut().skip(16) {
        let mut byte = [0u8; 1];
        if matches!(tokio::time::timeout(Duration::from_secs(2), stream.read(&mut byte)).await, Ok(Ok(0)) | Ok(Err(_))) {
            closed += 1;
        }
    }
    assert_eq!(closed, 24, "connections past the per-address cap were kept");
    // Meanwhile the quorum still commits.
    let created = cluster
        .node(controller)
        .create_topic(CreateTopic { name: "while-attacked".into(), partitions: 1, replication_factor: 3, configs: BTreeMap::new() })
        .await;
    assert!(created.is_ok(), "the quorum stalled: {created:?}");
    eventually(Duration::from_secs(5), "the topic everywhere", || {
        cluster.running().all(|(_, n)| n.image().topics.contains_key("while-attacked")).then_some(())
    })
    .await;
}
