//! The metadata quorum over real TCP on loopback: registration, topic
//! creation through a non-controller, broker fencing and return,
//! controller failover, AlterPartition checks, and a full restart.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chronik_metadata::{AlterPartition, ClusterError, NO_LEADER};
use common::{
    eventually, eventually_async, live, topic, TestCluster, HEARTBEAT_INTERVAL, IDS, KAFKA_PORT,
    SESSION_TIMEOUT,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// A connection that cannot prove the cluster secret gets nothing but the
/// handshake's challenge and is closed; an authenticated one sending a frame
/// that is not JSON gets an error frame and is closed. The node keeps
/// serving.
async fn reject_garbage(id: i32, cluster: &TestCluster) {
    let addr = cluster.config(id).raft_listen;
    let mut http = TcpStream::connect(addr).await.expect("connect");
    http.write_all(
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n0123456789012345678901234567890123456789012345678901",
    )
    .await
    .expect("write");
    let mut rest = Vec::new();
    // Closed after the 32-byte challenge and (unless a reset overtakes it)
    // the 32-byte refusal: EOF or a reset, never an answer.
    let _ = http.read_to_end(&mut rest).await;
    assert!(
        rest.len() <= 32 || (rest.len() == 64 && rest[32..].starts_with(b"chronik-refused\0")),
        "an unauthenticated client got {} bytes",
        rest.len()
    );

    let mut junk = TcpStream::connect(addr).await.expect("connect");
    let config = cluster.config(id);
    chronik_metadata::peer_auth::client_handshake(&mut junk, &config.secret, id)
        .await
        .expect("handshake");
    junk.write_all(&[0, 0, 0, 5, b'n', b'o', b'p', b'e', b'!'])
        .await
        .expect("write");
    let mut reply = Vec::new();
    junk.read_to_end(&mut reply).await.expect("read");
    let text = String::from_utf8_lossy(reply.get(4..).unwrap_or_default());
    assert!(text.contains("undecodable request"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_register_and_create_topics_through_any_node() {
    let cluster = TestCluster::start().await;
    for (id, node) in cluster.running() {
        let image = eventually(
            Duration::from_secs(10),
            "three live brokers in every image",
            || {
                let image = node.image();
                (live(&image) == IDS).then_some(image)
            },
        )
        .await;
        for broker in image.brokers.values() {
            assert_eq!(
                broker.host,
                format!("127.0.0.{}", broker.node_id),
                "seen by {id}"
            );
            assert_eq!(broker.port, KAFKA_PORT);
        }
        assert_eq!(node.status().live_brokers, 3);
        assert!(
            node.leader_changes() >= 1,
            "node {id} saw the first election"
        );
    }

    let controller = cluster.controller().await;
    reject_garbage(controller, &cluster).await;
    let other = IDS
        .into_iter()
        .find(|&id| id != controller)
        .expect("a non-controller");
    let node = cluster.node(other);
    let created = node
        .create_topic(topic("orders", 6, 3))
        .await
        .expect("create");
    assert_eq!(created.partitions.len(), 6);
    let mut leaders = BTreeMap::new();
    for (index, p) in created.partitions.iter().enumerate() {
        assert_eq!(p.partition, i32::try_from(index).expect("small"));
        assert_eq!(
            p.replicas.iter().collect::<BTreeSet<_>>().len(),
            3,
            "{p:?}: three distinct replicas"
        );
        assert_eq!(p.isr, p.replicas);
        assert_eq!(
            (p.leader, p.leader_epoch, p.partition_epoch),
            (p.replicas[0], 0, 0)
        );
        *leaders.entry(p.leader).or_insert(0) += 1;
    }
    assert_eq!(
        leaders,
        BTreeMap::from([(1, 2), (2, 2), (3, 2)]),
        "leaders spread evenly"
    );
    assert_eq!(
        node.image().topics.get("orders"),
        Some(&created),
        "applied locally before returning"
    );
    assert_eq!(
        node.image()
            .topic_by_id(created.topic_id)
            .map(|t| t.name.as_str()),
        Some("orders")
    );

    let table = [
        (topic("orders", 1, 1), "duplicate"),
        (topic("wide", 1, 4), "rf above live brokers"),
        (topic("none", 1, 0), "rf 0"),
        (topic("empty", 0, 1), "no partitions"),
        (topic("bad/name", 1, 1), "invalid name"),
    ];
    for (request, why) in table {
        let result = node.create_topic(request).await;
        let ok = match why {
            "duplicate" => matches!(result, Err(ClusterError::TopicAlreadyExists(_))),
            "no partitions" => matches!(result, Err(ClusterError::InvalidPartitions(_))),
            "invalid name" => matches!(result, Err(ClusterError::InvalidTopic(_))),
            _ => matches!(result, Err(ClusterError::InvalidReplicationFactor(_))),
        };
        assert!(ok, "{why}: {result:?}");
    }

    node.delete_topic("orders").await.expect("delete");
    assert!(!node.image().topics.contains_key("orders"));
    assert_eq!(
        node.delete_topic("orders").await,
        Err(ClusterError::UnknownTopic("orders".into()))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_broker_is_fenced_and_leads_only_leaderless_partitions_on_return() {
    let mut cluster = TestCluster::start().await;
    let controller = cluster.controller().await;
    let victim = IDS
        .into_iter()
        .find(|&id| id != controller)
        .expect("a non-controller");
    let created = cluster
        .node(controller)
        .create_topic(topic("events", 6, 3))
        .await
        .expect("create");
    let led: Vec<i32> = created
        .partitions
        .iter()
        .filter(|p| p.leader == victim)
        .map(|p| p.partition)
        .collect();
    assert_eq!(led.len(), 2, "{created:?}");
    // One of the victim's partitions keeps only the victim in sync, so it
    // goes offline with it; the other has a full ISR to elect from.
    let (offline, moved) = (led[0], led[1]);
    let shrunk = cluster
        .node(victim)
        .alter_partition(AlterPartition {
            topic: "events".into(),
            partition: offline,
            leader_id: victim,
            leader_epoch: 0,
            partition_epoch: 0,
            new_isr: vec![victim],
        })
        .await
        .expect("shrink");
    assert_eq!(
        (shrunk.isr.clone(), shrunk.partition_epoch),
        (vec![victim], 1)
    );

    let stopped_at = Instant::now();
    cluster.stop_node(victim).await;
    let observer = cluster.node(controller).clone();
    let image = eventually(
        SESSION_TIMEOUT + Duration::from_secs(4),
        "the victim is fenced",
        || {
            let image = observer.image();
            image
                .brokers
                .get(&victim)
                .is_some_and(|b| b.fenced)
                .then_some(image)
        },
    )
    .await;
    let fenced_after = stopped_at.elapsed();
    assert!(
        // Its last heartbeat may precede the stop by one interval.
        fenced_after >= SESSION_TIMEOUT - HEARTBEAT_INTERVAL,
        "fenced too early: {fenced_after:?}"
    );
    println!("broker fenced {fenced_after:?} after it stopped");

    for p in &image.topics["events"].partitions {
        if p.partition == offline {
            assert_eq!(
                (p.leader, p.isr.clone(), p.leader_epoch, p.partition_epoch),
                (NO_LEADER, vec![victim], 1, 2)
            );
        } else {
            assert!(!p.isr.contains(&victim), "{p:?}: victim left the ISR");
            assert_ne!(p.leader, victim);
            if p.partition == moved {
                assert!(p.isr.contains(&p.leader), "{p:?}: new leader from the ISR");
                assert_eq!((p.leader_epoch, p.partition_epoch), (1, 1), "{p:?}");
            } else {
                assert_eq!(
                    (p.leader_epoch, p.partition_epoch),
                    (0, 1),
                    "{p:?}: only the ISR shrank"
                );
            }
        }
    }

    cluster.start_node(victim).await;
    cluster
        .node(victim)
        .wait_ready(Duration::from_secs(15))
        .await
        .expect("victim ready again");
    let image = eventually(
        Duration::from_secs(5),
        "the victim leads its offline partition",
        || {
            let image = observer.image();
            (image.partition("events", offline)?.leader == victim).then_some(image)
        },
    )
    .await;
    assert!(!image.brokers[&victim].fenced);
    let p = image
        .partition("events", offline)
        .expect("offline partition");
    assert_eq!(
        (p.isr.clone(), p.leader_epoch, p.partition_epoch),
        (vec![victim], 2, 3)
    );
    let p = image.partition("events", moved).expect("moved partition");
    assert_ne!(p.leader, victim, "a led partition is not taken back");
    assert!(
        !p.isr.contains(&victim),
        "rejoining an ISR takes an AlterPartition"
    );
    assert_eq!(
        cluster.node(victim).image().topics,
        image.topics,
        "the restarted node caught up"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_fails_over_when_it_dies() {
    let mut cluster = TestCluster::start().await;
    let old = cluster.controller().await;
    cluster
        .node(old)
        .create_topic(topic("before", 3, 3))
        .await
        .expect("create");

    let stopped_at = Instant::now();
    cluster.stop_node(old).await;
    // Issued at once: it waits for the new controller instead of failing.
    let survivor = IDS.into_iter().find(|&id| id != old).expect("a survivor");
    let created = cluster
        .node(survivor)
        .create_topic(topic("after", 2, 2))
        .await
        .expect("create during failover");
    let new = cluster.controller().await;
    let failover = stopped_at.elapsed();
    assert_ne!(new, old);
    println!("controller {old} -> {new} in {failover:?}");
    assert!(
        failover < Duration::from_secs(10),
        "failover took {failover:?}"
    );
    assert_eq!(created.partitions.len(), 2);
    for (_, node) in cluster.running() {
        let image = eventually(Duration::from_secs(5), "both topics everywhere", || {
            let image = node.image();
            (image.topics.contains_key("before") && image.topics.contains_key("after"))
                .then_some(image)
        })
        .await;
        assert_eq!(image.topics["after"], created);
        assert!(
            node.leader_changes() >= 2,
            "saw the first controller and the new one"
        );
    }
    let image = eventually(
        SESSION_TIMEOUT + Duration::from_secs(5),
        "the dead controller is fenced",
        || {
            let image = cluster.node(new).image();
            image.brokers[&old].fenced.then_some(image)
        },
    )
    .await;
    assert_eq!(live(&image).len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_partition_checks_epochs_and_versions() {
    let cluster = TestCluster::start().await;
    let controller = cluster.controller().await;
    let caller = cluster.node(
        IDS.into_iter()
            .find(|&id| id != controller)
            .expect("non-controller"),
    );
    let created = caller
        .create_topic(topic("isr", 1, 3))
        .await
        .expect("create");
    let p0 = &created.partitions[0];
    let leader = p0.leader;
    let follower = p0.replicas[1];
    // ISR changes are accepted only from the leader they name, so they are
    // sent from the leader's node.
    let caller = cluster.node(leader);
    let request = |leader_id, leader_epoch, partition_epoch, new_isr: Vec<i32>| AlterPartition {
        topic: "isr".into(),
        partition: 0,
        leader_id,
        leader_epoch,
        partition_epoch,
        new_isr,
    };
    let shrink: Vec<i32> = p0
        .replicas
        .iter()
        .copied()
        .filter(|&r| r != p0.replicas[2])
        .collect();

    let table = [
        (request(follower, 0, 0, shrink.clone()), "not the leader"),
        (
            request(leader, 1, 0, shrink.clone()),
            "leader epoch from the future",
        ),
        (
            request(leader, 0, 7, shrink.clone()),
            "wrong partition epoch",
        ),
        (
            request(leader, 0, 0, vec![follower]),
            "ISR without its leader",
        ),
        (
            request(leader, 0, 0, vec![leader, 42]),
            "ISR member not a replica",
        ),
    ];
    for (req, why) in table {
        let result = caller.alter_partition(req).await;
        let ok = match why {
            "wrong partition epoch" => result == Err(ClusterError::InvalidUpdateVersion),
            "ISR without its leader" | "ISR member not a replica" => {
                matches!(result, Err(ClusterError::InvalidRequest(_)))
            }
            // From the leader's node in a follower's name: refused by the
            // raft port (unless the leader is the controller itself, which
            // then refuses it as not the leader).
            "not the leader" => {
                result == Err(ClusterError::FencedLeaderEpoch)
                    || matches!(&result, Err(ClusterError::Unavailable(m)) if m.contains("may not alter"))
            }
            _ => result == Err(ClusterError::FencedLeaderEpoch),
        };
        assert!(ok, "{why}: {result:?}");
    }
    assert_eq!(
        caller.image().partition("isr", 0),
        Some(p0),
        "rejections change nothing"
    );

    let shrunk = caller
        .alter_partition(request(leader, 0, 0, shrink.clone()))
        .await
        .expect("shrink");
    assert_eq!(
        (
            shrunk.isr.clone(),
            shrunk.partition_epoch,
            shrunk.leader_epoch
        ),
        (shrink.clone(), 1, 0)
    );
    assert_eq!(
        caller.image().partition("isr", 0),
        Some(&shrunk),
        "applied locally before returning"
    );
    assert_eq!(
        caller.alter_partition(request(leader, 0, 0, shrink)).await,
        Err(ClusterError::InvalidUpdateVersion),
        "the same proposal again is based on an old version"
    );
    let expanded = caller
        .alter_partition(request(leader, 0, 1, p0.replicas.clone()))
        .await
        .expect("expand");
    assert_eq!(
        (expanded.isr.clone(), expanded.partition_epoch),
        (p0.replicas.clone(), 2)
    );
    assert_eq!(
        caller
            .alter_partition(AlterPartition {
                topic: "nope".into(),
                ..request(leader, 0, 2, vec![leader])
            })
            .await,
        Err(ClusterError::UnknownTopic("nope-0".into()))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_survive_a_full_restart() {
    let mut cluster = TestCluster::start().await;
    let first = cluster
        .node(1)
        .create_topic(topic("kept", 4, 3))
        .await
        .expect("create");
    let second = cluster
        .node(3)
        .create_topic(topic("also-kept", 2, 1))
        .await
        .expect("create");
    cluster
        .node(2)
        .delete_topic("also-kept")
        .await
        .expect("delete");
    let third = cluster
        .node(2)
        .create_topic(topic("third", 1, 2))
        .await
        .expect("create");
    assert_ne!(second.topic_id, third.topic_id);

    cluster.stop_all().await;
    for id in IDS {
        cluster.start_node(id).await;
    }
    cluster.wait_all_ready().await;
    for (id, node) in cluster.running() {
        let image = eventually_async(Duration::from_secs(10), "topics restored", || async {
            let image = node.image();
            (image.topics.len() == 2 && live(&image) == IDS).then_some(image)
        })
        .await;
        assert_eq!(image.topics["kept"], first, "node {id}");
        assert_eq!(image.topics["third"], third, "node {id}");
        assert!(
            !image.topics.contains_key("also-kept"),
            "node {id}: deletion survived too"
        );
    }
    assert!(matches!(
        cluster.node(1).create_topic(topic("kept", 1, 1)).await,
        Err(ClusterError::TopicAlreadyExists(_))
    ));
    cluster
        .node(3)
        .create_topic(topic("after-restart", 1, 3))
        .await
        .expect("create after restart");
}
