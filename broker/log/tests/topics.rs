//! Topic lifecycle: create, look up, delete, reload, validation.

mod common;

use std::collections::BTreeMap;

use chronik_log::{Error, FlushPolicy, LogConfig};
use common::*;

fn overrides(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn create_delete_and_reload_topics_with_overrides() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open_with(dir.path(), LogConfig::default(), FlushPolicy::Never);
    let o = overrides(&[
        ("retention.ms", "60000"),
        ("segment.bytes", "1048576"),
        ("cleanup.policy", "delete"),
    ]);
    let orders = manager
        .create_topic("orders", 3, o.clone())
        .expect("create orders");
    let audit = manager
        .create_topic("audit.log", 1, BTreeMap::new())
        .expect("create audit");
    assert_eq!(orders.partition_count(), 3);
    assert!(orders.partition(3).is_none() && orders.partition(-1).is_none());
    assert_eq!(orders.config.retention_ms, 60_000);
    assert_eq!(orders.config.segment_bytes, 1_048_576);
    assert_eq!(orders.overrides, o);
    assert_ne!(orders.topic_id, [0; 16]);
    assert_ne!(orders.topic_id, audit.topic_id);
    assert!(
        matches!(manager.create_topic("orders", 1, BTreeMap::new()), Err(Error::TopicAlreadyExists(n)) if n == "orders")
    );
    assert_eq!(
        manager
            .topics()
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        vec!["audit.log", "orders"]
    );
    assert_eq!(
        manager.topic_by_id(orders.topic_id).map(|t| t.name.clone()),
        Some("orders".to_string())
    );
    append(orders.partition(2).expect("p2"), 4, 0, 10);
    for p in 0..3 {
        assert!(partition_dir(dir.path(), "orders", p)
            .join("00000000000000000000.log")
            .exists());
    }
    let meta = std::fs::read_to_string(dir.path().join("__topics/orders.meta")).expect("meta file");
    assert!(
        meta.contains("partitions=3\n") && meta.contains("config.retention.ms=60000\n"),
        "{meta}"
    );

    let described = orders.config.describe(&orders.overrides);
    let retention = described
        .iter()
        .find(|e| e.name == "retention.ms")
        .expect("retention.ms listed");
    assert_eq!(
        (retention.value.as_str(), retention.is_default),
        ("60000", false)
    );
    assert!(
        described
            .iter()
            .find(|e| e.name == "max.message.bytes")
            .expect("listed")
            .is_default
    );

    let deleted_partition = audit.partition(0).expect("p0").clone();
    manager.delete_topic("audit.log").expect("delete");
    assert!(manager.topic("audit.log").is_none());
    assert!(manager.topic_by_id(audit.topic_id).is_none());
    assert!(!partition_dir(dir.path(), "audit.log", 0).exists());
    assert!(matches!(
        manager.delete_topic("audit.log"),
        Err(Error::UnknownTopic(_))
    ));
    assert!(matches!(
        deleted_partition.read(0, 100, i64::MAX),
        Err(Error::UnknownTopic(_))
    ));

    manager.shutdown();
    let orders_id = orders.topic_id;
    drop((orders, audit, manager));
    let manager = open_with(dir.path(), LogConfig::default(), FlushPolicy::Never);
    let names: Vec<String> = manager.topics().iter().map(|t| t.name.clone()).collect();
    assert_eq!(names, vec!["orders"]);
    let orders = manager.topic("orders").expect("reloaded");
    assert_eq!(orders.topic_id, orders_id);
    assert_eq!(orders.overrides, o);
    assert_eq!(orders.config.retention_ms, 60_000);
    assert_eq!(orders.partition(2).expect("p2").log_end_offset(), 4);

    // A deleted name can be created again, empty.
    let audit = manager
        .create_topic("audit.log", 2, BTreeMap::new())
        .expect("recreate");
    assert_eq!(audit.partition(0).expect("p0").log_end_offset(), 0);
}

#[test]
fn invalid_topic_names_and_partition_counts_are_rejected() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open_with(dir.path(), LogConfig::default(), FlushPolicy::Never);
    let long = "x".repeat(250);
    for name in ["", ".", "..", "bad name", "a/b", long.as_str()] {
        assert!(
            matches!(
                manager.create_topic(name, 1, BTreeMap::new()),
                Err(Error::InvalidTopicName { .. })
            ),
            "{name:?}"
        );
    }
    assert!(matches!(
        manager.create_topic("t", 0, BTreeMap::new()),
        Err(Error::InvalidPartitions(0))
    ));
    assert!(manager.topics().is_empty());
}

#[test]
fn invalid_config_values_are_rejected() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open_with(dir.path(), LogConfig::default(), FlushPolicy::Never);
    for (name, value) in [
        ("retention.ms", "forever"),
        ("segment.bytes", "1"),
        ("no.such.thing", "1"),
        ("cleanup.policy", "x"),
    ] {
        match manager.create_topic("t", 1, overrides(&[(name, value)])) {
            Err(Error::InvalidConfig {
                name: n,
                value: v,
                reason,
            }) => {
                assert_eq!((n.as_str(), v.as_str()), (name, value));
                assert!(!reason.is_empty());
            }
            other => panic!(
                "{name}={value}: expected InvalidConfig, got {:?}",
                other.map(|t| t.name.clone())
            ),
        }
    }
    assert!(manager.topic("t").is_none());
    assert!(!partition_dir(dir.path(), "t", 0).exists());
}

#[test]
fn topics_grow_and_change_config_and_both_survive_a_reopen() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open_with(dir.path(), LogConfig::default(), FlushPolicy::Never);
    let topic = manager
        .create_topic("grow", 2, overrides(&[("retention.ms", "60000")]))
        .expect("create");
    append(topic.partition(1).expect("p1"), 3, 0, 10);
    let grown = manager.add_partitions("grow", 5).expect("grow");
    assert_eq!(grown.partition_count(), 5);
    assert_eq!(grown.topic_id, topic.topic_id);
    assert_eq!(manager.topic("grow").expect("lookup").partition_count(), 5);
    // The old handle and the grown one share the existing partitions.
    assert!(std::sync::Arc::ptr_eq(
        topic.partition(1).expect("old p1"),
        grown.partition(1).expect("new p1")
    ));
    append(grown.partition(4).expect("p4"), 2, 0, 10);
    assert_eq!(
        manager
            .add_partitions("grow", 3)
            .expect("no-op")
            .partition_count(),
        5
    );

    let altered = manager
        .set_topic_overrides("grow", overrides(&[("segment.bytes", "1048576")]))
        .expect("alter");
    assert_eq!(altered.config.segment_bytes, 1_048_576);
    assert_eq!(
        altered.config.retention_ms,
        LogConfig::default().retention_ms
    );
    assert_eq!(
        grown.partition(0).expect("p0").config().segment_bytes,
        1_048_576,
        "a partition handle taken before the change sees it"
    );
    assert!(matches!(
        manager.set_topic_overrides("grow", overrides(&[("retention.ms", "x")])),
        Err(Error::InvalidConfig { .. })
    ));
    assert!(matches!(
        manager.add_partitions("nope", 2),
        Err(Error::UnknownTopic(_))
    ));
    manager.shutdown();
    drop(manager);

    let manager = open_with(dir.path(), LogConfig::default(), FlushPolicy::Never);
    let reopened = manager.topic("grow").expect("reopened");
    assert_eq!(reopened.partition_count(), 5);
    assert_eq!(
        reopened.overrides,
        overrides(&[("segment.bytes", "1048576")])
    );
    assert_eq!(reopened.partition(1).expect("p1").log_end_offset(), 3);
    assert_eq!(reopened.partition(4).expect("p4").log_end_offset(), 2);
}
