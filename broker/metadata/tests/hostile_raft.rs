//! Hostile clients on the raft/controller port. It used to accept a
//! Heartbeat from anyone — registering an unknown broker whose host clients
//! and followers then connected to — and DeleteTopic and AlterPartition
//! from anyone. Now a connection must prove the cluster secret first, a
//! broker may only heartbeat for itself, only configured voters at their
//! configured hosts (and observers at the hosts they joined with)
//! register, only voters send raft RPCs, and the port's connections are
//! capped.

mod common;

use std::time::Duration;

use chronik_metadata::ClusterSecret;
use common::{eventually, topic, TestCluster};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A raft RPC frame (`u32` length + JSON) of a controller request.
fn frame(json: &str) -> Vec<u8> {
    let mut out = (json.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(json.as_bytes());
    out
}

fn heartbeat(node_id: i32, host: &str) -> Vec<u8> {
    frame(&format!(
        r#"{{"Controller":{{"Heartbeat":{{"node_id":{node_id},"host":"{host}","port":9092}}}}}}"#
    ))
}

/// A connection to `addr` that has proved `secret` as node `id`.
async fn authenticated(addr: std::net::SocketAddr, secret: &ClusterSecret, id: i32) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    chronik_metadata::peer_auth::client_handshake(&mut stream, secret, id)
        .await
        .expect("handshake");
    stream
}

/// A three-node cluster, its controller, and a topic `name` of one
/// partition on all three nodes.
async fn cluster_with_topic(name: &str) -> (TestCluster, i32) {
    let cluster = TestCluster::start().await;
    let controller = cluster.controller().await;
    cluster
        .node(controller)
        .create_topic(topic(name, 1, 3))
        .await
        .expect("create");
    (cluster, controller)
}

/// A node of the three-node cluster other than `node`.
fn node_other_than(node: i32) -> i32 {
    [1, 2, 3]
        .into_iter()
        .find(|&id| id != node)
        .expect("three nodes")
}

/// One reply frame's body, as text.
async fn read_reply(stream: &mut TcpStream) -> String {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).await.expect("a reply");
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    stream.read_exact(&mut body).await.expect("reply body");
    String::from_utf8_lossy(&body).to_string()
}

/// Everything the server sends until it closes (bounded wait).
async fn drain(stream: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut out)).await;
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_secret_nothing_registers_or_deletes() {
    let (cluster, controller) = cluster_with_topic("keep").await;
    let addr = cluster.config(controller).raft_listen;

    // No handshake at all: frames straight away.
    let mut raw = TcpStream::connect(addr).await.expect("connect");
    let mut attack = heartbeat(9, "10.6.6.6");
    attack.extend(frame(r#"{"Controller":{"DeleteTopic":"keep"}}"#));
    let _ = raw.write_all(&attack).await;
    let answer = drain(&mut raw).await;
    // The challenge and (unless a reset overtakes it) the refusal, never a frame.
    assert!(
        answer.len() <= 32
            || (answer.len() == 64 && answer[32..].starts_with(b"chronik-refused\0")),
        "an unauthenticated client got {} bytes back",
        answer.len()
    );

    // A wrong secret.
    let mut wrong = TcpStream::connect(addr).await.expect("connect");
    let refused = chronik_metadata::peer_auth::client_handshake(
        &mut wrong,
        &ClusterSecret::from_bytes(b"not the cluster's secret"),
        2,
    )
    .await;
    assert!(refused.is_err(), "a wrong secret was accepted");

    tokio::time::sleep(Duration::from_millis(500)).await;
    let image = cluster.node(controller).image();
    assert!(
        !image.brokers.contains_key(&9),
        "an unauthenticated heartbeat registered broker 9"
    );
    assert!(
        image.topics.contains_key("keep"),
        "an unauthenticated DeleteTopic deleted a topic"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voter_may_heartbeat_only_for_itself_at_its_own_host() {
    let cluster = TestCluster::start().await;
    let controller = cluster.controller().await;
    let addr = cluster.config(controller).raft_listen;
    let secret = cluster.config(controller).secret;
    let other = node_other_than(controller);

    // Authenticated as `other`, heartbeating for someone else.
    let mut stream = authenticated(addr, &secret, other).await;
    let victim = node_other_than(other);
    stream
        .write_all(&heartbeat(victim, "10.6.6.6"))
        .await
        .expect("write");
    let answer = String::from_utf8_lossy(&drain(&mut stream).await).to_string();
    assert!(answer.contains("may not heartbeat for node"), "{answer}");

    // Authenticated as itself, but moving its endpoint to another host.
    let mut stream = authenticated(addr, &secret, other).await;
    stream
        .write_all(&heartbeat(other, "10.6.6.6"))
        .await
        .expect("write");
    let reply = read_reply(&mut stream).await;
    assert!(
        reply.contains("neither a configured voter nor an observer"),
        "{reply}"
    );

    let image = cluster.node(controller).image();
    for (id, broker) in &image.brokers {
        assert_eq!(
            broker.host,
            format!("127.0.0.{id}"),
            "broker {id} moved to {}",
            broker.host
        );
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
        socket
            .bind("127.0.0.9:0".parse().expect("addr"))
            .expect("bind");
        held.push(socket.connect(addr).await.expect("connect"));
    }
    // The 17th and later from that address are closed at once, unanswered.
    let mut closed = 0;
    for stream in held.iter_mut().skip(16) {
        let mut byte = [0u8; 1];
        if matches!(
            tokio::time::timeout(Duration::from_secs(2), stream.read(&mut byte)).await,
            Ok(Ok(0)) | Ok(Err(_))
        ) {
            closed += 1;
        }
    }
    assert_eq!(closed, 24, "connections past the per-address cap were kept");
    // Meanwhile the quorum still commits.
    let created = cluster
        .node(controller)
        .create_topic(topic("while-attacked", 1, 3))
        .await;
    assert!(created.is_ok(), "the quorum stalled: {created:?}");
    eventually(Duration::from_secs(5), "the topic everywhere", || {
        cluster
            .running()
            .all(|(_, n)| n.image().topics.contains_key("while-attacked"))
            .then_some(())
    })
    .await;
}

/// Attack: strangers (no secret) from several addresses keep every raft
/// connection slot busy with handshakes they never finish, reopening each
/// one the moment it is closed. Heartbeats open a connection per call, so
/// if strangers could take every slot the controller would stop hearing
/// the brokers and fence them all. Connections from the voters' own
/// addresses have places strangers cannot take.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_holding_every_slot_cannot_fence_the_voters() {
    let cluster = TestCluster::start().await;
    let controller = cluster.controller().await;
    let addr = cluster.config(controller).raft_listen;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut attackers = Vec::new();
    // 6 addresses x 16: more than the whole cap of 64.
    for host in 10..16u8 {
        for _ in 0..16 {
            let stop = stop.clone();
            attackers.push(tokio::spawn(async move {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
                    socket
                        .bind(std::net::SocketAddr::from(([127, 0, 0, host], 0)))
                        .expect("bind");
                    let Ok(mut stream) = socket.connect(addr).await else {
                        continue;
                    };
                    let mut sink = [0u8; 64];
                    // Hold it until the server gives up on it.
                    while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }));
        }
    }
    // Longer than the session timeout (3 s) and than a stranger's handshake
    // deadline (5 s): every broker must stay registered and unfenced.
    let until = tokio::time::Instant::now() + Duration::from_secs(7);
    while tokio::time::Instant::now() < until {
        let image = cluster.node(controller).image();
        let fenced: Vec<i32> = image
            .brokers
            .values()
            .filter(|b| b.fenced)
            .map(|b| b.node_id)
            .collect();
        assert!(
            fenced.is_empty(),
            "strangers on the raft port got brokers {fenced:?} fenced"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let created = cluster
        .node(controller)
        .create_topic(topic("under-siege", 1, 3))
        .await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for attacker in attackers {
        attacker.abort();
    }
    assert!(created.is_ok(), "the quorum stalled: {created:?}");
}

/// Attack: hold raft connections without finishing anything — one never
/// answers the handshake, one (authenticated) sends a frame's length prefix
/// and a few bytes of its body and stops. Both are closed within their
/// deadlines (handshake 5 s, frame body 10 s) while another voter's
/// connection is answered at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_handshakes_and_frames_are_cut_off() {
    let cluster = TestCluster::start().await;
    let controller = cluster.controller().await;
    let addr = cluster.config(controller).raft_listen;
    let secret = cluster.config(controller).secret;
    let other = node_other_than(controller);
    let started = tokio::time::Instant::now();

    let silent = TcpStream::connect(addr).await.expect("connect");
    let mut half_frame = authenticated(addr, &secret, other).await;
    half_frame
        .write_all(&1000u32.to_be_bytes())
        .await
        .expect("prefix");
    half_frame
        .write_all(b"{\"Controll")
        .await
        .expect("some body");

    // Meanwhile an honest heartbeat is answered.
    let mut honest = authenticated(addr, &secret, other).await;
    honest
        .write_all(&heartbeat(other, &format!("127.0.0.{other}")))
        .await
        .expect("write");
    let mut len = [0u8; 4];
    tokio::time::timeout(Duration::from_secs(5), honest.read_exact(&mut len))
        .await
        .expect("an honest heartbeat answered while others stall")
        .expect("reply");

    // Read until the server closes, for longer than either deadline.
    let closed_at = |mut stream: TcpStream| async move {
        let mut sink = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut sink)).await;
        started.elapsed()
    };
    let silent_closed = tokio::spawn(closed_at(silent));
    let half_closed = tokio::spawn(closed_at(half_frame));
    let silent_after = silent_closed.await.expect("task");
    let half_after = half_closed.await.expect("task");
    assert!(
        silent_after < Duration::from_secs(8),
        "a connection that never authenticated was held {silent_after:?}"
    );
    assert!(
        half_after < Duration::from_secs(13),
        "a frame body that never came held the connection {half_after:?}"
    );
}

/// Attack: a voter (authenticated, but not the partition's leader) sends
/// AlterPartition in the leader's name, shrinking the ISR to itself — the
/// leader would then count acks=all against a follower set it never chose.
/// Only the partition's leader may propose its ISR, over its own connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voter_may_not_alter_a_partition_in_its_leaders_name() {
    let (cluster, controller) = cluster_with_topic("isr").await;
    let before = cluster
        .node(controller)
        .image()
        .partition("isr", 0)
        .cloned()
        .expect("partition");
    let impostor = node_other_than(before.leader);
    let addr = cluster.config(controller).raft_listen;
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    chronik_metadata::peer_auth::client_handshake(
        &mut stream,
        &cluster.config(controller).secret,
        impostor,
    )
    .await
    .expect("handshake");
    let alter = format!(
        r#"{{"Controller":{{"AlterPartition":{{"topic":"isr","partition":0,"leader_id":{},"leader_epoch":{},"partition_epoch":{},"new_isr":[{}]}}}}}}"#,
        before.leader, before.leader_epoch, before.partition_epoch, before.leader
    );
    stream.write_all(&frame(&alter)).await.expect("write");
    let answer = String::from_utf8_lossy(&drain(&mut stream).await).to_string();
    assert!(answer.contains("may not alter"), "{answer}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = cluster
        .node(controller)
        .image()
        .partition("isr", 0)
        .cloned()
        .expect("partition");
    assert_eq!(
        after.isr, before.isr,
        "an impostor's AlterPartition changed the ISR"
    );
}

/// Any node id may connect with the cluster secret (brokers that are not
/// voters join as observers), but only voters run elections: a Vote from
/// node 9 with a far higher term is refused and the leader keeps its term;
/// node 9 cannot register as a broker without joining as an observer, nor
/// ask to join in another node's name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_is_no_voter_cannot_vote_or_register() {
    let cluster = TestCluster::start().await;
    let controller = cluster.controller().await;
    let term_before = cluster.node(controller).status().raft_term;
    let addr = cluster.config(controller).raft_listen;
    let secret = cluster.config(controller).secret;

    let mut stream = TcpStream::connect(addr).await.expect("connect");
    chronik_metadata::peer_auth::client_handshake(&mut stream, &secret, 9)
        .await
        .expect("any node id that proves the secret is admitted");
    let vote = r#"{"Vote":{"vote":{"leader_id":{"term":1000000,"node_id":9},"committed":false},"last_log_id":null}}"#;
    stream.write_all(&frame(vote)).await.expect("write");
    let answer = String::from_utf8_lossy(&drain(&mut stream).await).to_string();
    assert!(answer.contains("raft RPCs refused"), "{answer}");

    let mut stream = authenticated(addr, &secret, 9).await;
    stream
        .write_all(&heartbeat(9, "127.0.0.9"))
        .await
        .expect("write");
    let reply = read_reply(&mut stream).await;
    assert!(
        reply.contains("neither a configured voter nor an observer"),
        "{reply}"
    );

    let mut stream = authenticated(addr, &secret, 9).await;
    let join = r#"{"Controller":{"AddObserver":{"node_id":10,"raft_addr":"127.0.0.10:9093"}}}"#;
    stream.write_all(&frame(join)).await.expect("write");
    let answer = String::from_utf8_lossy(&drain(&mut stream).await).to_string();
    assert!(
        answer.contains("may not ask to join for node 10"),
        "{answer}"
    );

    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = cluster.node(controller).status();
    assert!(status.is_controller, "the leader was deposed");
    assert_eq!(status.raft_term, term_before, "the term moved");
    assert!(!cluster.node(controller).image().brokers.contains_key(&9));
}
