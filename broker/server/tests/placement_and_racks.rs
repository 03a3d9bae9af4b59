//! Placement, racks and follower fetching on a real 4-node cluster whose
//! nodes sit in racks a, a, b, b (`--broker-rack`, with Kafka's
//! `RackAwareReplicaSelector`), spoken to in raw Kafka requests:
//! 1. Metadata and DescribeCluster name every broker's rack;
//! 2. a new topic's replicas span both racks, and its leaders spread;
//! 3. CreateTopics and CreatePartitions with manual assignments put the
//!    replicas exactly where named (leader first), and refuse, with Kafka's
//!    errors and messages, what Kafka refuses: counts not -1, an unknown
//!    broker, a broker twice, unequal replica counts, gaps in the partition
//!    numbers, too few or too many assignments — validate_only included;
//! 4. the internal topics take config changes (a retention) but not a
//!    cleanup.policy that would delete what their coordinators keep;
//! 5. KIP-392: a v11 Fetch naming rack b gets the in-sync follower in rack
//!    b as preferred_read_replica (and no records) from the leader in rack
//!    a; that follower serves a v11 consumer Fetch up to its high watermark
//!    and counts the bytes as a follower's; a v10 Fetch there is refused
//!    NOT_LEADER_OR_FOLLOWER; an absurd rack id is simply matched against
//!    nothing.

mod common;

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use bytes::Bytes;
use common::cluster::Cluster;
use common::error_codes::{
    INVALID_CONFIG, INVALID_REPLICA_ASSIGNMENT, INVALID_REQUEST, NOT_LEADER_OR_FOLLOWER,
};
use common::kafka_client::Client;
use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_topics_request::{CreatableReplicaAssignment, CreatableTopic};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    BrokerId, CreatePartitionsRequest, CreateTopicsRequest, DescribeClusterRequest, FetchRequest,
    IncrementalAlterConfigsRequest, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

const RACKS: [&str; 4] = ["a", "a", "b", "b"];

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

/// A CreatableTopic with manual `assignments` (`counts`: numPartitions and
/// replicationFactor, -1 as Kafka's tools send them).
fn manual(topic: &str, assignments: &[(i32, &[i32])], counts: (i32, i16)) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(name(topic))
        .with_num_partitions(counts.0)
        .with_replication_factor(counts.1)
        .with_assignments(
            assignments
                .iter()
                .map(|(p, brokers)| {
                    CreatableReplicaAssignment::default()
                        .with_partition_index(*p)
                        .with_broker_ids(brokers.iter().copied().map(BrokerId).collect())
                })
                .collect(),
        )
}

/// CreateTopics of one topic: (error code, error message).
fn create(
    client: &mut Client,
    topic: CreatableTopic,
    validate_only: bool,
) -> Result<(i16, String)> {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_validate_only(validate_only)
        .with_topics(vec![topic]);
    let response = client.send(&request, 7)?;
    let t = response.topics.first().context("no topic in the answer")?;
    Ok((
        t.error_code,
        t.error_message
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or_default(),
    ))
}

/// CreatePartitions growing `topic` to `count` with `assignments`.
fn grow(
    client: &mut Client,
    topic: &str,
    count: i32,
    assignments: &[&[i32]],
) -> Result<(i16, String)> {
    let request = CreatePartitionsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(name(topic))
            .with_count(count)
            .with_assignments(Some(
                assignments
                    .iter()
                    .map(|b| {
                        CreatePartitionsAssignment::default()
                            .with_broker_ids(b.iter().copied().map(BrokerId).collect())
                    })
                    .collect(),
            ))]);
    let response = client.send(&request, 3)?;
    let r = response.results.first().context("no result")?;
    Ok((
        r.error_code,
        r.error_message
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or_default(),
    ))
}

/// (replicas, leader) of every partition of `topic`, by partition.
fn placement(client: &mut Client, topic: &str) -> Result<Vec<(Vec<i32>, i32)>> {
    let request = MetadataRequest::default().with_topics(Some(vec![
        kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
            .with_name(Some(name(topic))),
    ]));
    let response = client.send(&request, 12)?;
    let t = response.topics.first().context("no topic")?;
    ensure!(
        t.error_code == 0,
        "Metadata for {topic}: error {}",
        t.error_code
    );
    let mut partitions: Vec<_> = t
        .partitions
        .iter()
        .map(|p| {
            (
                p.partition_index,
                (p.replica_nodes.iter().map(|b| b.0).collect(), p.leader_id.0),
            )
        })
        .collect();
    partitions.sort_by_key(|(p, _)| *p);
    Ok(partitions.into_iter().map(|(_, v)| v).collect())
}

fn wait_placement(client: &mut Client, topic: &str, count: usize) -> Result<Vec<(Vec<i32>, i32)>> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match placement(client, topic) {
            Ok(p) if p.len() == count && p.iter().all(|(_, l)| *l >= 0) => return Ok(p),
            other if Instant::now() > deadline => anyhow::bail!("{topic}: {other:?}"),
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

fn rack_of(node: i32) -> &'static str {
    RACKS[usize::try_from(node - 1).expect("node id")]
}

fn racks_are_shown(client: &mut Client) -> Result<()> {
    let metadata = client.send(&MetadataRequest::default().with_topics(Some(vec![])), 12)?;
    let mut shown: Vec<(i32, Option<String>)> = metadata
        .brokers
        .iter()
        .map(|b| (b.node_id.0, b.rack.as_ref().map(|r| r.to_string())))
        .collect();
    shown.sort();
    let want: Vec<(i32, Option<String>)> =
        (1..=4).map(|n| (n, Some(rack_of(n).to_string()))).collect();
    ensure!(shown == want, "Metadata racks {shown:?}, want {want:?}");
    let cluster = client.send(&DescribeClusterRequest::default(), 1)?;
    let mut described: Vec<(i32, Option<String>)> = cluster
        .brokers
        .iter()
        .map(|b| (b.broker_id.0, b.rack.as_ref().map(|r| r.to_string())))
        .collect();
    described.sort();
    ensure!(described == want, "DescribeCluster racks {described:?}");
    Ok(())
}

fn new_topics_span_racks(client: &mut Client) -> Result<()> {
    let topic = CreatableTopic::default()
        .with_name(name("spread"))
        .with_num_partitions(8)
        .with_replication_factor(2);
    let (code, message) = create(client, topic, false)?;
    ensure!(code == 0, "create spread: {code} {message}");
    let placed = wait_placement(client, "spread", 8)?;
    let mut leaders = std::collections::BTreeMap::<i32, usize>::new();
    for (replicas, leader) in &placed {
        let racks: std::collections::BTreeSet<_> = replicas.iter().map(|&r| rack_of(r)).collect();
        ensure!(racks.len() == 2, "replicas {replicas:?} sit in one rack");
        *leaders.entry(*leader).or_default() += 1;
    }
    ensure!(
        leaders.len() == 4 && leaders.values().all(|&n| n == 2),
        "leaders not spread: {leaders:?}"
    );
    Ok(())
}

fn manual_assignments(client: &mut Client) -> Result<()> {
    let (code, message) = create(
        client,
        manual("placed", &[(0, &[3, 1]), (1, &[4, 2])], (-1, -1)),
        false,
    )?;
    ensure!(code == 0, "manual create: {code} {message}");
    let placed = wait_placement(client, "placed", 2)?;
    ensure!(
        placed == vec![(vec![3, 1], 3), (vec![4, 2], 4)],
        "placed as {placed:?}"
    );
    let refusals: [(&str, CreatableTopic, i16, &str); 6] = [
        (
            "counts",
            manual("bad-counts", &[(0, &[1, 2])], (1, -1)),
            INVALID_REQUEST,
            "numPartitions was not set to -1",
        ),
        (
            "unknown broker",
            manual("bad-broker", &[(0, &[1, 9])], (-1, -1)),
            INVALID_REPLICA_ASSIGNMENT,
            "includes broker 9, but no such broker is registered",
        ),
        (
            "twice",
            manual("bad-twice", &[(0, &[2, 2])], (-1, -1)),
            INVALID_REPLICA_ASSIGNMENT,
            "includes the broker 2 more than once",
        ),
        (
            "unequal",
            manual("bad-unequal", &[(0, &[1, 2]), (1, &[3])], (-1, -1)),
            INVALID_REPLICA_ASSIGNMENT,
            "not consistent with previous partitions",
        ),
        (
            "gap",
            manual("bad-gap", &[(0, &[1, 2]), (2, &[3, 4])], (-1, -1)),
            INVALID_REPLICA_ASSIGNMENT,
            "consecutive 0-based",
        ),
        (
            "same partition twice",
            manual("bad-dup", &[(0, &[1, 2]), (0, &[3, 4])], (-1, -1)),
            INVALID_REPLICA_ASSIGNMENT,
            "multiple manual partition assignments for partition 0",
        ),
    ];
    for (what, topic, want, text) in refusals {
        let (code, message) = create(client, topic, false)?;
        ensure!(
            code == want && message.contains(text),
            "{what}: {code} {message:?}"
        );
    }
    let (code, message) = create(client, manual("bad-validate", &[(0, &[7])], (-1, -1)), true)?;
    ensure!(
        code == INVALID_REPLICA_ASSIGNMENT && message.contains("broker 7"),
        "validate_only with an unknown broker: {code} {message:?}"
    );
    let (code, message) = grow(client, "placed", 3, &[&[2, 4]])?;
    ensure!(code == 0, "grow with an assignment: {code} {message}");
    let placed = wait_placement(client, "placed", 3)?;
    ensure!(
        placed[2] == (vec![2, 4], 2),
        "partition 2 placed as {:?}",
        placed[2]
    );
    let (code, message) = grow(client, "placed", 5, &[&[1, 3]])?;
    ensure!(
        code == INVALID_REPLICA_ASSIGNMENT
            && message.contains("Attempted to add 2 additional partition(s), but only 1"),
        "too few assignments: {code} {message:?}"
    );
    let (code, message) = grow(client, "placed", 4, &[&[1, 2, 3]])?;
    ensure!(
        code == INVALID_REPLICA_ASSIGNMENT && message.contains("3 replica(s)"),
        "a third replica: {code} {message:?}"
    );
    Ok(())
}

/// IncrementalAlterConfigs SET of one config on `topic`: its error code.
fn set_topic_config(client: &mut Client, topic: &str, key: &str, value: &str) -> Result<i16> {
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s(topic))
            .with_configs(vec![AlterableConfig::default()
                .with_name(s(key))
                .with_config_operation(0)
                .with_value(Some(s(value)))]),
    ]);
    let response = client.send(&request, 1)?;
    Ok(response
        .responses
        .first()
        .context("no response")?
        .error_code)
}

fn internal_topic_configs(client: &mut Client) -> Result<()> {
    for topic in ["__consumer_offsets", "__transaction_state"] {
        let code = set_topic_config(client, topic, "retention.ms", "604800000")?;
        ensure!(code == 0, "retention.ms on {topic}: error {code}");
        let code = set_topic_config(client, topic, "cleanup.policy", "delete")?;
        ensure!(
            code == INVALID_CONFIG,
            "cleanup.policy=delete on {topic}: error {code}"
        );
    }
    Ok(())
}

/// One consumer Fetch of partition 0 of `topic` from 0 at `version` with
/// `rack`: (error code, high watermark, preferred read replica, records).
fn fetch(
    client: &mut Client,
    topic: &str,
    version: i16,
    rack: &str,
) -> Result<(i16, i64, i32, Bytes)> {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_bytes(1 << 20)
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_rack_id(s(rack))
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let response = client.send(&request, version)?;
    let p = &response.responses[0].partitions[0];
    Ok((
        p.error_code,
        p.high_watermark,
        p.preferred_read_replica.0,
        p.records.clone().unwrap_or_default(),
    ))
}

fn follower_fetching(cluster: &mut Cluster) -> Result<()> {
    let mut leader = Client::connect(cluster.node(1))?;
    let (code, message) = create(
        &mut leader,
        manual("racked", &[(0, &[1, 3])], (-1, -1)),
        false,
    )?;
    ensure!(code == 0, "create racked: {code} {message}");
    wait_placement(&mut leader, "racked", 1)?;
    let values: Vec<Bytes> = (0..10)
        .map(|i| Bytes::from(format!("record-{i}")))
        .collect();
    let (code, _) = leader.produce_values("racked", &values)?;
    ensure!(code == 0, "produce: error {code}");
    // acks=all: the follower holds them; it learns the high watermark on
    // its next fetch.
    let (code, hw, preferred, records) = fetch(&mut leader, "racked", 11, "b")?;
    ensure!(
        code == 0 && hw == 10 && preferred == 3 && records.is_empty(),
        "leader's answer to rack b: error {code}, hw {hw}, preferred {preferred}, {} bytes",
        records.len()
    );
    let (code, _, preferred, records) = fetch(&mut leader, "racked", 11, "a")?;
    ensure!(
        code == 0 && preferred == -1 && !records.is_empty(),
        "leader's answer to its own rack: error {code}, preferred {preferred}"
    );
    let huge = "r".repeat(30_000);
    let (code, _, preferred, _) = fetch(&mut leader, "racked", 11, &huge)?;
    ensure!(
        code == 0 && preferred == -1,
        "an absurd rack: error {code}, preferred {preferred}"
    );
    let mut follower = Client::connect(cluster.node(3))?;
    let deadline = Instant::now() + Duration::from_secs(15);
    let (served, hw) = loop {
        let (code, hw, _, records) = fetch(&mut follower, "racked", 11, "b")?;
        ensure!(code == 0, "follower's answer: error {code}");
        if hw == 10 {
            break (records, hw);
        }
        ensure!(
            Instant::now() < deadline,
            "follower's high watermark stuck at {hw}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let count = chronik_protocol::record_batch::count_records(&served);
    ensure!(
        count == 10,
        "the follower served {count} records below hw {hw}"
    );
    let (code, ..) = fetch(&mut follower, "racked", 10, "")?;
    ensure!(
        code == NOT_LEADER_OR_FOLLOWER,
        "a v10 Fetch on the follower: error {code}"
    );
    let metrics = cluster.node(3).metrics_text()?;
    let served_bytes = common::prom::sum(
        &common::prom::parse(&metrics),
        "chronik_consumer_fetch_bytes_total",
        &[("replica", "follower")],
    )
    .unwrap_or(0.0);
    ensure!(served_bytes > 0.0, "node 3 counted no follower bytes");
    Ok(())
}

#[test]
fn placement_racks_and_follower_fetching() -> Result<()> {
    let mut cluster = Cluster::start_each(
        4,
        &[
            "--default-replication-factor",
            "2",
            "--replica-selector-class",
            "org.apache.kafka.common.replica.RackAwareReplicaSelector",
        ],
        &|i| vec!["--broker-rack".to_string(), RACKS[i].to_string()],
    )?;
    let mut client = Client::connect(cluster.node(1))?;
    racks_are_shown(&mut client)?;
    new_topics_span_racks(&mut client)?;
    manual_assignments(&mut client)?;
    internal_topic_configs(&mut client)?;
    follower_fetching(&mut cluster)?;
    Ok(())
}
