//! Tables of commands applied to small images: fencing, unfencing,
//! unregistering, topic creation, growth, config changes and deletion,
//! AlterPartition checks.

use super::*;
use crate::test_images::register;

fn fence(image: &mut MetadataImage, node_id: i32) {
    assert_eq!(
        apply(image, &Command::FenceBroker { node_id }),
        CommandResult::Done
    );
}

/// Brokers 1..=3 and topic "t" with the given assignments.
fn image_with(assignments: &[&[i32]]) -> MetadataImage {
    let mut image = MetadataImage::default();
    for id in 1..=3 {
        register(&mut image, id);
    }
    let command = Command::CreateTopic {
        name: "t".into(),
        topic_id: [7; 16],
        configs: BTreeMap::new(),
        assignments: assignments.iter().map(|a| a.to_vec()).collect(),
        isrs: Vec::new(),
    };
    assert!(matches!(
        apply(&mut image, &command),
        CommandResult::Topic(_)
    ));
    image
}

fn part(image: &MetadataImage, p: i32) -> &PartitionImage {
    image.partition("t", p).expect("partition")
}

/// (leader, isr, leader_epoch, partition_epoch)
fn state(image: &MetadataImage, p: i32) -> (i32, Vec<i32>, i32, i32) {
    let p = part(image, p);
    (p.leader, p.isr.clone(), p.leader_epoch, p.partition_epoch)
}

#[test]
fn create_topic_registers_partitions_and_rejects_duplicates() {
    let image = image_with(&[&[1, 2, 3], &[2, 3, 1]]);
    assert_eq!(state(&image, 0), (1, vec![1, 2, 3], 0, 0));
    assert_eq!(state(&image, 1), (2, vec![2, 3, 1], 0, 0));
    assert_eq!(
        image.topic_by_id([7; 16]).map(|t| t.name.as_str()),
        Some("t")
    );
    let mut image = image;
    let again = Command::CreateTopic {
        name: "t".into(),
        topic_id: [8; 16],
        configs: BTreeMap::new(),
        assignments: vec![vec![1]],
        isrs: Vec::new(),
    };
    assert_eq!(
        apply(&mut image, &again),
        CommandResult::Rejected(ClusterError::TopicAlreadyExists("t".into()))
    );
    let duplicate_replica = Command::CreateTopic {
        name: "u".into(),
        topic_id: [9; 16],
        configs: BTreeMap::new(),
        assignments: vec![vec![1, 1]],
        isrs: Vec::new(),
    };
    assert!(matches!(
        apply(&mut image, &duplicate_replica),
        CommandResult::Rejected(ClusterError::InvalidReplicationFactor(_))
    ));
    assert!(
        !image.topics.contains_key("u"),
        "a rejected command leaves the image unchanged"
    );
    assert_eq!(
        apply(&mut image, &Command::DeleteTopic { name: "t".into() }),
        CommandResult::Done
    );
    assert_eq!(
        apply(&mut image, &Command::DeleteTopic { name: "t".into() }),
        CommandResult::Rejected(ClusterError::UnknownTopic("t".into()))
    );
}

#[test]
fn topic_names_follow_kafka_rules() {
    let long = "a".repeat(249);
    let too_long = "a".repeat(250);
    let table: [(&str, bool); 9] = [
        ("orders", true),
        ("a.b_c-D9", true),
        (&long, true),
        (&too_long, false),
        ("", false),
        (".", false),
        ("..", false),
        ("a b", false),
        ("ünï", false),
    ];
    for (name, ok) in table {
        assert_eq!(validate_topic_name(name).is_ok(), ok, "{name:?}");
    }
}

#[test]
fn fencing_moves_leadership_within_the_isr_and_keeps_the_last_replica() {
    // p0 led by 1 (ISR 1,2,3); p1 led by 2; p2 has only 1 in its ISR after a shrink.
    let mut image = image_with(&[&[1, 2, 3], &[2, 3, 1], &[1, 2]]);
    let shrink = AlterPartition {
        topic: "t".into(),
        partition: 2,
        leader_id: 1,
        leader_epoch: 0,
        partition_epoch: 0,
        new_isr: vec![1],
    };
    assert!(matches!(
        apply(&mut image, &Command::AlterPartition(shrink)),
        CommandResult::Partition(_)
    ));

    fence(&mut image, 1);
    assert!(image.brokers[&1].fenced);
    // (partition, expected (leader, isr, leader_epoch, partition_epoch), why)
    let table = [
        (
            0,
            (2, vec![2, 3], 1, 1),
            "leader fenced: next live ISR replica in replica order, epochs bumped",
        ),
        (
            1,
            (2, vec![2, 3], 0, 1),
            "follower fenced: leaves the ISR, only the partition epoch moves",
        ),
        (
            2,
            (NO_LEADER, vec![1], 1, 2),
            "last ISR member fenced: no leader, ISR kept (clean election)",
        ),
    ];
    for (p, expected, why) in table {
        assert_eq!(state(&image, p), expected, "{why}");
    }

    fence(&mut image, 1);
    assert_eq!(
        state(&image, 0),
        (2, vec![2, 3], 1, 1),
        "fencing twice changes nothing"
    );

    register(&mut image, 1);
    assert!(!image.brokers[&1].fenced);
    let table = [
        (
            0,
            (2, vec![2, 3], 1, 1),
            "unfenced broker does not rejoin an ISR by itself",
        ),
        (1, (2, vec![2, 3], 0, 1), "nor take over a led partition"),
        (
            2,
            (1, vec![1], 2, 3),
            "but leads the leaderless partition whose ISR has it",
        ),
    ];
    for (p, expected, why) in table {
        assert_eq!(state(&image, p), expected, "{why}");
    }
}

#[test]
fn fencing_every_isr_member_leaves_the_partition_offline_until_one_returns() {
    let mut image = image_with(&[&[1, 2]]);
    fence(&mut image, 2);
    assert_eq!(state(&image, 0), (1, vec![1], 0, 1));
    fence(&mut image, 1);
    assert_eq!(state(&image, 0), (NO_LEADER, vec![1], 1, 2));
    register(&mut image, 2);
    assert_eq!(
        state(&image, 0),
        (NO_LEADER, vec![1], 1, 2),
        "2 is out of sync: never elected"
    );
    register(&mut image, 1);
    assert_eq!(state(&image, 0), (1, vec![1], 2, 3));
}

#[test]
fn alter_partition_checks_leader_epochs_version_and_isr() {
    let base = image_with(&[&[1, 2, 3]]);
    let request = |leader_id, leader_epoch, partition_epoch, new_isr: &[i32]| AlterPartition {
        topic: "t".into(),
        partition: 0,
        leader_id,
        leader_epoch,
        partition_epoch,
        new_isr: new_isr.to_vec(),
    };
    let invalid = |_: &str| ClusterError::InvalidRequest(String::new());
    // (request, expected error or new (isr, partition_epoch), why)
    type Expected = Result<(Vec<i32>, i32), ClusterError>;
    let table: Vec<(AlterPartition, Expected, &str)> = vec![
        (
            request(1, 0, 0, &[1, 2]),
            Ok((vec![1, 2], 1)),
            "valid shrink",
        ),
        (
            request(2, 0, 0, &[1, 2]),
            Err(ClusterError::FencedLeaderEpoch),
            "not the leader",
        ),
        (
            request(1, 1, 0, &[1, 2]),
            Err(ClusterError::FencedLeaderEpoch),
            "unknown leader epoch",
        ),
        (
            request(1, 0, 1, &[1, 2]),
            Err(ClusterError::InvalidUpdateVersion),
            "wrong partition epoch",
        ),
        (
            request(1, 0, 0, &[2, 3]),
            Err(invalid("leader")),
            "ISR without the leader",
        ),
        (
            request(1, 0, 0, &[1, 4]),
            Err(invalid("replica")),
            "ISR member not a replica",
        ),
        (
            request(1, 0, 0, &[1, 1]),
            Err(invalid("dup")),
            "duplicate member",
        ),
        (request(1, 0, 0, &[]), Err(invalid("empty")), "empty ISR"),
    ];
    for (req, expected, why) in table {
        let mut image = base.clone();
        let result = apply(&mut image, &Command::AlterPartition(req));
        match (result, expected) {
            (CommandResult::Partition(p), Ok((isr, epoch))) => {
                assert_eq!(
                    (p.isr.clone(), p.partition_epoch, p.leader_epoch),
                    (isr, epoch, 0),
                    "{why}"
                );
                assert_eq!(image.partition("t", 0), Some(&p), "{why}: applied");
            }
            (
                CommandResult::Rejected(ClusterError::InvalidRequest(_)),
                Err(ClusterError::InvalidRequest(_)),
            ) => {
                assert_eq!(image, base, "{why}: image unchanged");
            }
            (CommandResult::Rejected(e), Err(expected)) => {
                assert_eq!(e, expected, "{why}");
                assert_eq!(image, base, "{why}: image unchanged");
            }
            (other, expected) => panic!("{why}: {other:?}, expected {expected:?}"),
        }
    }

    let mut image = base.clone();
    let unknown = AlterPartition {
        partition: 5,
        ..request(1, 0, 0, &[1])
    };
    assert_eq!(
        apply(&mut image, &Command::AlterPartition(unknown)),
        CommandResult::Rejected(ClusterError::UnknownTopic("t-5".into()))
    );
}

#[test]
fn a_fenced_broker_cannot_be_added_to_an_isr() {
    let mut image = image_with(&[&[1, 2, 3]]);
    fence(&mut image, 3);
    assert_eq!(state(&image, 0), (1, vec![1, 2], 0, 1));
    let add_back = |partition_epoch| AlterPartition {
        topic: "t".into(),
        partition: 0,
        leader_id: 1,
        leader_epoch: 0,
        partition_epoch,
        new_isr: vec![1, 2, 3],
    };
    assert!(matches!(
        apply(&mut image, &Command::AlterPartition(add_back(1))),
        CommandResult::Rejected(ClusterError::InvalidRequest(_))
    ));
    register(&mut image, 3);
    match apply(&mut image, &Command::AlterPartition(add_back(1))) {
        CommandResult::Partition(p) => assert_eq!((p.isr, p.partition_epoch), (vec![1, 2, 3], 2)),
        other => panic!("{other:?}"),
    }
}

fn unregister(image: &mut MetadataImage, node_id: i32) -> CommandResult {
    apply(image, &Command::UnregisterBroker { node_id })
}

#[test]
fn unregistering_a_live_broker_moves_it_off_as_fencing_does() {
    let mut image = image_with(&[&[1, 2, 3], &[2, 3, 1], &[1]]);
    assert_eq!(unregister(&mut image, 1), CommandResult::Done);
    assert!(!image.brokers.contains_key(&1), "registration removed");
    assert!(
        !image.listed_brokers().any(|b| b.node_id == 1)
            && !image.live_brokers().any(|b| b.node_id == 1),
        "neither listed (Metadata) nor live (replica assignment, elections)"
    );
    let table = [
        (
            0,
            (2, vec![2, 3], 1, 1),
            "led: leadership moved within the ISR",
        ),
        (1, (2, vec![2, 3], 0, 1), "followed: left the ISR"),
        (
            2,
            (NO_LEADER, vec![1], 1, 1),
            "sole replica: offline, ISR kept",
        ),
    ];
    for (p, expected, why) in table {
        assert_eq!(state(&image, p), expected, "{why}");
    }
    assert_eq!(
        part(&image, 0).replicas,
        vec![1, 2, 3],
        "assignments keep it (an offline replica)"
    );
    assert_eq!(
        unregister(&mut image, 1),
        CommandResult::Rejected(ClusterError::BrokerIdNotRegistered(1)),
        "twice: not registered"
    );
    assert_eq!(
        unregister(&mut image, 99),
        CommandResult::Rejected(ClusterError::BrokerIdNotRegistered(99))
    );
    // Registering again (its next heartbeat) brings it back.
    register(&mut image, 1);
    assert!(image.live_brokers().any(|b| b.node_id == 1));
    assert_eq!(state(&image, 2).0, 1, "the sole replica leads again");
}

#[test]
fn unregistering_a_fenced_broker_moves_nothing_again() {
    let mut image = image_with(&[&[1, 2, 3], &[1]]);
    fence(&mut image, 1);
    let fenced = image.clone();
    assert_eq!(unregister(&mut image, 1), CommandResult::Done);
    assert!(!image.brokers.contains_key(&1));
    assert_eq!(image.topics, fenced.topics, "partitions untouched");
    // Fencing an unregistered broker is a no-op (the fencer never does:
    // it only looks at listed brokers).
    fence(&mut image, 1);
    assert!(!image.brokers.contains_key(&1));
}

#[test]
fn controlled_shutdown_moves_leadership_but_keeps_the_broker_listed() {
    let mut image = image_with(&[&[1, 2, 3], &[2, 3, 1], &[1]]);
    let index = image.applied_index;
    assert_eq!(
        apply(&mut image, &Command::ControlledShutdown { node_id: 1 }),
        CommandResult::Done
    );
    let broker = &image.brokers[&1];
    assert!(broker.in_controlled_shutdown && !broker.fenced);
    assert!(
        image.listed_brokers().any(|b| b.node_id == 1),
        "still listed in Metadata"
    );
    assert!(
        !image.live_brokers().any(|b| b.node_id == 1),
        "not eligible to lead"
    );
    assert_eq!(
        state(&image, 0),
        (2, vec![2, 3], 1, 1),
        "leadership moved within the ISR"
    );
    assert_eq!(
        state(&image, 1),
        (2, vec![2, 3], 0, 1),
        "left a follower's ISR"
    );
    assert_eq!(
        state(&image, 2),
        (NO_LEADER, vec![1], 1, 1),
        "sole replica: offline, as Kafka"
    );
    assert_eq!(image.applied_index, index);

    // Repeating it changes nothing; fencing afterwards only marks it fenced.
    let before = image.clone();
    apply(&mut image, &Command::ControlledShutdown { node_id: 1 });
    assert_eq!(image, before);
    fence(&mut image, 1);
    assert!(image.brokers[&1].fenced && !image.brokers[&1].in_controlled_shutdown);
    assert_eq!(
        state(&image, 0),
        (2, vec![2, 3], 1, 1),
        "fencing after the shutdown moves nothing again"
    );

    // Registering again (a restart) makes it eligible and lets it lead what it can.
    register(&mut image, 1);
    assert!(image.live_brokers().any(|b| b.node_id == 1));
    assert_eq!(state(&image, 2).0, 1, "the sole replica leads again");
}

#[test]
fn the_first_cluster_id_committed_stays() {
    let mut image = MetadataImage::default();
    let init = |id: &str| Command::InitClusterId {
        cluster_id: id.to_string(),
        features: BTreeMap::new(),
        default_min_insync_replicas: None,
    };
    assert_eq!(apply(&mut image, &init("first")), CommandResult::Done);
    assert_eq!(apply(&mut image, &init("second")), CommandResult::Done);
    assert_eq!(image.cluster_id.as_deref(), Some("first"));
}

#[test]
fn create_partitions_appends_registrations_and_configs_are_replaced() {
    let mut image = image_with(&[&[1, 2], &[2, 3]]);
    let grow = Command::CreatePartitions {
        name: "t".into(),
        assignments: vec![vec![3, 1], vec![1, 2]],
        isrs: Vec::new(),
    };
    let CommandResult::Topic(topic) = apply(&mut image, &grow) else {
        panic!("CreatePartitions refused");
    };
    assert_eq!(topic.partitions.len(), 4);
    assert_eq!(state(&image, 2), (3, vec![3, 1], 0, 0));
    assert_eq!(state(&image, 3), (1, vec![1, 2], 0, 0));
    assert_eq!(part(&image, 3).partition, 3);
    let unknown = Command::CreatePartitions {
        name: "nope".into(),
        assignments: vec![vec![1]],
        isrs: Vec::new(),
    };
    assert!(matches!(
        apply(&mut image, &unknown),
        CommandResult::Rejected(ClusterError::UnknownTopic(_))
    ));

    let configs: BTreeMap<String, String> = [("retention.ms".to_string(), "5".to_string())].into();
    let alter = Command::AlterTopicConfigs {
        name: "t".into(),
        configs: configs.clone(),
    };
    assert!(matches!(apply(&mut image, &alter), CommandResult::Topic(_)));
    assert_eq!(image.topics["t"].configs, configs);
}

#[test]
fn partition_growth_follows_kafka_rules() {
    assert!(crate::controller::check_partition_growth(3, 4).is_ok());
    for (current, requested) in [(3, 3), (3, 2), (3, 10_001)] {
        assert!(matches!(
            crate::controller::check_partition_growth(current, requested),
            Err(ClusterError::InvalidPartitions(_))
        ));
    }
}

/// Registrations written before brokers named their listeners still
/// decode and serve every listener name at `host:port`; named ones serve
/// only their own names.
#[test]
fn registrations_with_and_without_listener_names() {
    let old: Command =
        serde_json::from_str(r#"{"RegisterBroker":{"node_id":1,"host":"h1","port":9092}}"#)
            .expect("an entry written before listener names decodes");
    let mut image = MetadataImage::default();
    assert_eq!(apply(&mut image, &old), CommandResult::Done);
    let endpoints = ListenerEndpoints::from([
        (
            "PLAINTEXT".to_string(),
            crate::image::Endpoint {
                host: "h2".into(),
                port: 9092,
            },
        ),
        (
            "SASL_SSL".to_string(),
            crate::image::Endpoint {
                host: "public-h2".into(),
                port: 9094,
            },
        ),
    ]);
    let named = Command::RegisterBroker {
        node_id: 2,
        host: "h2".into(),
        port: 9092,
        listeners: endpoints,
        log_dir_offline: false,
        rack: None,
    };
    assert_eq!(apply(&mut image, &named), CommandResult::Done);
    let old_entry = serde_json::to_string(&old).expect("encodes");
    assert!(
        !old_entry.contains("listeners"),
        "unnamed registrations encode as before: {old_entry}"
    );
    let b1 = &image.brokers[&1];
    let b2 = &image.brokers[&2];
    assert_eq!(b1.endpoint("SASL_SSL"), Some(("h1", 9092)));
    assert_eq!(b2.endpoint("SASL_SSL"), Some(("public-h2", 9094)));
    assert_eq!(b2.endpoint("PLAINTEXT"), Some(("h2", 9092)));
    assert_eq!(b2.endpoint("SSL"), None);
}

/// SCRAM credentials: upserted and deleted by one command, every node
/// applying the same entry; an image without them (older snapshots) loads.
#[test]
fn scram_credentials_are_upserted_and_deleted() {
    let credential = |iterations| crate::image::ScramCredentialImage {
        salt: vec![1, 2],
        iterations,
        stored_key: vec![3],
        server_key: vec![4],
    };
    let mut image = MetadataImage::default();
    let add = Command::AlterScramCredentials {
        upsertions: vec![
            ("alice".into(), "SCRAM-SHA-512".into(), credential(4096)),
            ("alice".into(), "SCRAM-SHA-256".into(), credential(8192)),
        ],
        deletions: vec![],
    };
    assert_eq!(apply(&mut image, &add), CommandResult::Done);
    assert_eq!(image.scram_credentials["alice"].len(), 2);
    let change = Command::AlterScramCredentials {
        upsertions: vec![("bob".into(), "SCRAM-SHA-512".into(), credential(4096))],
        deletions: vec![
            ("alice".into(), "SCRAM-SHA-512".into()),
            ("alice".into(), "SCRAM-SHA-256".into()),
            ("nobody".into(), "SCRAM-SHA-256".into()),
        ],
    };
    assert_eq!(apply(&mut image, &change), CommandResult::Done);
    assert_eq!(
        image.scram_credentials.keys().collect::<Vec<_>>(),
        ["bob"],
        "a user without credentials is gone"
    );
    let json = serde_json::to_string(&image).expect("encodes");
    let back: MetadataImage = serde_json::from_str(&json).expect("decodes");
    assert_eq!(back, image);
    let older: MetadataImage =
        serde_json::from_str(r#"{"applied_index":3,"brokers":{},"topics":{}}"#)
            .expect("older image");
    assert!(older.scram_credentials.is_empty());
}

#[test]
fn an_offline_log_dir_moves_leadership_and_isr_places_until_it_is_back() {
    let mut image = image_with(&[&[1, 2, 3], &[2, 3, 1], &[1]]);
    let offline = |image: &mut MetadataImage, offline: bool| {
        let command = Command::SetLogDirOffline {
            node_id: 1,
            offline,
        };
        assert_eq!(apply(image, &command), CommandResult::Done);
    };
    offline(&mut image, true);
    let broker = &image.brokers[&1];
    assert!(broker.log_dir_offline && !broker.fenced);
    assert!(
        image.listed_brokers().any(|b| b.node_id == 1),
        "still listed"
    );
    assert!(!image.is_live(1), "may not lead or join an ISR");
    assert_eq!(state(&image, 0), (2, vec![2, 3], 1, 1), "leader moved");
    assert_eq!(state(&image, 1), (2, vec![2, 3], 0, 1), "left the ISR");
    assert_eq!(
        state(&image, 2),
        (1, vec![1], 0, 0),
        "sole replica: keeps its leader (readable; writes fail) as no one else can lead"
    );
    // Reported again: nothing changes.
    let before = image.clone();
    offline(&mut image, true);
    assert_eq!(image, before);
    // An ISR expansion naming it is refused while it is offline.
    let rejoin = Command::AlterPartition(AlterPartition {
        topic: "t".into(),
        partition: 1,
        leader_id: 2,
        leader_epoch: 0,
        partition_epoch: 1,
        new_isr: vec![2, 3, 1],
    });
    assert!(matches!(
        apply(&mut image, &rejoin),
        CommandResult::Rejected(ClusterError::InvalidRequest(_))
    ));

    // Back online: it leads its sole-replica partition again and may
    // rejoin the ISRs through their leaders.
    offline(&mut image, false);
    assert!(image.is_live(1));
    assert_eq!(
        state(&image, 2),
        (1, vec![1], 1, 1),
        "a new leader epoch: its log was cut back to its durable offset"
    );
    assert_eq!(state(&image, 0), (2, vec![2, 3], 1, 1), "no leader change");
    assert!(matches!(
        apply(&mut image, &rejoin),
        CommandResult::Partition(_)
    ));

    // A registration carries the directory's state: a broker restarting
    // with its directory offline leads nothing.
    let register_offline = Command::RegisterBroker {
        node_id: 3,
        host: "127.0.0.3".into(),
        port: 9092,
        listeners: Default::default(),
        log_dir_offline: true,
        rack: None,
    };
    apply(&mut image, &register_offline);
    assert!(!image.is_live(3));
    assert!(part(&image, 0).isr.iter().all(|&r| r != 3));
}
