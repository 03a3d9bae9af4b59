//! The admin APIs Kafka's CLI tools use to change and inspect a running
//! cluster — CreatePartitions, AlterConfigs, IncrementalAlterConfigs,
//! DescribeCluster, DescribeLogDirs, OffsetDelete and DeleteRecords — with
//! Kafka's errors,
//! on one node and on a 3-node cluster (where every node must see the
//! change, not only the one asked).

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use common::broker::Broker;
use common::cluster::{Cluster, FAST_FAILOVER};
use common::error_codes::{
    GROUP_ID_NOT_FOUND, INVALID_CONFIG, INVALID_PARTITIONS, INVALID_REQUEST,
    NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE, POLICY_VIOLATION, REQUEST_TIMED_OUT,
    UNKNOWN_TOPIC_OR_PARTITION, UNSUPPORTED_ENDPOINT_TYPE,
};
use common::kafka_client::{topic_metadata_request, Client};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::{
    alter_configs_request, incremental_alter_configs_request, AlterConfigsRequest,
    CreatePartitionsRequest, DeleteRecordsRequest, DescribeClusterRequest, DescribeConfigsRequest,
    DescribeLogDirsRequest, GroupId, IncrementalAlterConfigsRequest, MetadataRequest,
    OffsetDeleteRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

const RESOURCE_TOPIC: i8 = 2;
const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.into()))
}

fn grow(
    client: &mut Client,
    topic: &str,
    count: i32,
    validate_only: bool,
) -> Result<(i16, String)> {
    let request = CreatePartitionsRequest::default()
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(name(topic))
            .with_count(count)
            .with_assignments(None)])
        .with_timeout_ms(10_000)
        .with_validate_only(validate_only);
    let result = client.send(&request, 3)?.results.remove(0);
    Ok((
        result.error_code,
        result
            .error_message
            .map(|m| m.to_string())
            .unwrap_or_default(),
    ))
}

fn incremental(
    client: &mut Client,
    topic: &str,
    changes: &[(&str, i8, Option<&str>)],
) -> Result<i16> {
    use incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let configs = changes
        .iter()
        .map(|(k, op, v)| {
            AlterableConfig::default()
                .with_name(StrBytes::from_string((*k).into()))
                .with_config_operation(*op)
                .with_value(v.map(|v| StrBytes::from_string(v.into())))
        })
        .collect();
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(RESOURCE_TOPIC)
            .with_resource_name(StrBytes::from_string(topic.into()))
            .with_configs(configs),
    ]);
    Ok(client.send(&request, 1)?.responses[0].error_code)
}

fn replace_configs(client: &mut Client, topic: &str, configs: &[(&str, &str)]) -> Result<i16> {
    use alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let configs = configs
        .iter()
        .map(|(k, v)| {
            AlterableConfig::default()
                .with_name(StrBytes::from_string((*k).into()))
                .with_value(Some(StrBytes::from_string((*v).into())))
        })
        .collect();
    let request =
        AlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(RESOURCE_TOPIC)
            .with_resource_name(StrBytes::from_string(topic.into()))
            .with_configs(configs)]);
    Ok(client.send(&request, 2)?.responses[0].error_code)
}

/// (config, value, is it the topic's own override) as DescribeConfigs says.
fn topic_config(client: &mut Client, topic: &str, key: &str) -> Result<(String, bool)> {
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(RESOURCE_TOPIC)
            .with_resource_name(StrBytes::from_string(topic.into()))
            .with_configuration_keys(Some(vec![StrBytes::from_string(key.into())]))]);
    let response = client.send(&request, 4)?;
    let result = &response.results[0];
    ensure!(
        result.error_code == 0,
        "DescribeConfigs {topic}: {}",
        result.error_code
    );
    let entry = result.configs.first().context("config not described")?;
    Ok((
        entry
            .value
            .as_ref()
            .map(|v| v.to_string())
            .unwrap_or_default(),
        entry.config_source == 1,
    ))
}

fn partition_count(client: &mut Client, topic: &str) -> Result<usize> {
    let response = client.send(&topic_metadata_request(topic, false), 12)?;
    let t = response.topics.first().context("no topic in Metadata")?;
    ensure!(t.error_code == 0, "Metadata {topic}: {}", t.error_code);
    ensure!(
        t.partitions.iter().all(|p| p.leader_id.0 >= 0),
        "a partition of {topic} has no leader: {:?}",
        t.partitions
    );
    Ok(t.partitions.len())
}

/// Polls `check` until it holds (another node applies a change a moment
/// after the node asked answers).
fn eventually(what: &str, mut check: impl FnMut() -> Result<bool>) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match check() {
            Ok(true) => return Ok(()),
            Ok(false) | Err(_) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100))
            }
            Ok(false) => anyhow::bail!("{what}: not so after 20 s"),
            Err(e) => return Err(e.context(what.to_string())),
        }
    }
}

fn offset_delete(client: &mut Client, group: &str, topic: &str) -> Result<(i16, i16)> {
    let request = OffsetDeleteRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.into())))
        .with_topics(vec![OffsetDeleteRequestTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![
                OffsetDeleteRequestPartition::default().with_partition_index(0)
            ])]);
    let response = client.send(&request, 0)?;
    let partition = response
        .topics
        .first()
        .map_or(0, |t| t.partitions[0].error_code);
    Ok((response.error_code, partition))
}

/// (error code, low watermark) of DeleteRecords for partition 0 of `topic`.
fn delete_records(client: &mut Client, topic: &str, offset: i64) -> Result<(i16, i64)> {
    delete_records_within(client, topic, offset, 10_000)
}

/// `delete_records` with the request's timeout_ms.
fn delete_records_within(
    client: &mut Client,
    topic: &str,
    offset: i64,
    timeout_ms: i32,
) -> Result<(i16, i64)> {
    let request = DeleteRecordsRequest::default()
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![
                DeleteRecordsPartition::default().with_offset(offset)
            ])])
        .with_timeout_ms(timeout_ms);
    let p = client
        .send(&request, 2)?
        .topics
        .remove(0)
        .partitions
        .remove(0);
    Ok((p.error_code, p.low_watermark))
}

/// The leader of partition 0 of `topic` as Metadata names it.
fn leader_of(client: &mut Client, topic: &str) -> Result<i32> {
    let response = client.send(&topic_metadata_request(topic, false), 12)?;
    Ok(response.topics[0].partitions[0].leader_id.0)
}

/// The broker ids Metadata lists (registered and not fenced).
fn listed_brokers(client: &mut Client) -> Result<Vec<i32>> {
    let response = client.send(&MetadataRequest::default().with_topics(Some(vec![])), 12)?;
    Ok(response.brokers.iter().map(|b| b.node_id.0).collect())
}

/// The log start offset `dir`'s replica of `topic`-0 persisted (None: it
/// never moved).
fn persisted_log_start(dir: &std::path::Path, topic: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(format!("{topic}-0")).join("log-start-offset"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// DeleteRecords on the leader of a replicated partition: Kafka's refusals,
/// the log start offset moves (ListOffsets earliest), and the answer comes
/// only once every replica moved it (Kafka's low watermark: each node's
/// `log-start-offset` file is written before its log start offset moves,
/// and a follower reports it only after).
fn exercise_delete_records(clients: &mut [Client], nodes: &[(i32, PathBuf)]) -> Result<()> {
    let rf = i16::try_from(nodes.len())?;
    // The test client stamps records in 2023: no retention by time.
    clients[0].create_topic_replicated("trim-me", 1, rf, &[("retention.ms", "-1")])?;
    let values: Vec<bytes::Bytes> = (0..10)
        .map(|i| bytes::Bytes::from(format!("v{i}")))
        .collect();
    let mut leader = 0;
    eventually("the leader takes 10 records", || {
        let id = leader_of(&mut clients[0], "trim-me")?;
        leader = nodes
            .iter()
            .position(|(n, _)| *n == id)
            .context("unknown leader")?;
        Ok(clients[leader].produce_values("trim-me", &values)?.0 == 0)
    })?;
    if nodes.len() > 1 {
        let follower = (leader + 1) % nodes.len();
        ensure!(
            delete_records(&mut clients[follower], "trim-me", 4)?.0 == NOT_LEADER_OR_FOLLOWER,
            "a follower deleted records"
        );
    }
    let client = &mut clients[leader];
    ensure!(
        delete_records(client, "trim-me", 11)?.0 == OFFSET_OUT_OF_RANGE,
        "deleting past the high watermark"
    );
    ensure!(
        delete_records(client, "__consumer_offsets", 1)?.0 == POLICY_VIOLATION,
        "records of an internal topic were deleted"
    );
    ensure!(
        delete_records(client, "trim-me", 4)? == (0, 4),
        "DeleteRecords to 4"
    );
    let backwards = delete_records(client, "trim-me", 2)?;
    ensure!(
        backwards == (0, 4),
        "DeleteRecords backwards: {backwards:?}"
    );
    ensure!(
        client.log_start_offset("trim-me")? == 4,
        "ListOffsets earliest after DeleteRecords"
    );
    for (id, dir) in nodes {
        let persisted = persisted_log_start(dir, "trim-me");
        ensure!(
            persisted.as_deref() == Some("4"),
            "node {id} had log start offset {persisted:?} when DeleteRecords answered"
        );
    }
    ensure!(
        delete_records(client, "trim-me", -1)? == (0, 10),
        "DeleteRecords to the high watermark"
    );
    for (id, dir) in nodes {
        let persisted = persisted_log_start(dir, "trim-me");
        ensure!(
            persisted.as_deref() == Some("10"),
            "node {id} had log start offset {persisted:?} when DeleteRecords answered"
        );
    }
    Ok(())
}

/// Runs every check through `clients[0]`; the others must see the result.
fn exercise(clients: &mut [Client], nodes: usize) -> Result<()> {
    let rf = i16::try_from(nodes)?;
    clients[0].create_topic_replicated("grow-me", 2, rf, &[])?;

    // CreatePartitions: Kafka's refusals, validate_only, then a real grow.
    let (code, message) = grow(&mut clients[0], "grow-me", 1, false)?;
    ensure!(
        code == INVALID_PARTITIONS && message.contains("Topic currently has 2 partitions"),
        "shrinking: {code} {message}"
    );
    ensure!(
        grow(&mut clients[0], "grow-me", 2, false)?.0 == INVALID_PARTITIONS,
        "same count"
    );
    ensure!(
        grow(&mut clients[0], "no-such-topic", 4, false)?.0 == UNKNOWN_TOPIC_OR_PARTITION,
        "unknown topic"
    );
    ensure!(
        grow(&mut clients[0], "__consumer_offsets", 4, false)?.0 == INVALID_REQUEST,
        "an internal topic grew"
    );
    ensure!(
        grow(&mut clients[0], "grow-me", 5, true)?.0 == 0,
        "validate_only"
    );
    ensure!(
        partition_count(&mut clients[0], "grow-me")? == 2,
        "validate_only grew the topic"
    );
    let (code, message) = grow(&mut clients[0], "grow-me", 5, false)?;
    ensure!(code == 0, "grow to 5: {code} {message}");
    for client in clients.iter_mut() {
        eventually("5 partitions with leaders on every node", || {
            Ok(partition_count(client, "grow-me")? == 5)
        })?;
    }

    // IncrementalAlterConfigs and AlterConfigs: every node describes the change.
    let changes = [
        ("retention.ms", SET, Some("3600000")),
        ("cleanup.policy", APPEND, Some("compact")),
    ];
    ensure!(
        incremental(&mut clients[0], "grow-me", &changes)? == 0,
        "incremental SET/APPEND"
    );
    for client in clients.iter_mut() {
        eventually("retention.ms altered everywhere", || {
            Ok(topic_config(client, "grow-me", "retention.ms")? == ("3600000".into(), true))
        })?;
        eventually("cleanup.policy appended everywhere", || {
            Ok(topic_config(client, "grow-me", "cleanup.policy")?.0 == "compact")
        })?;
    }
    ensure!(
        incremental(
            &mut clients[0],
            "grow-me",
            &[("retention.ms", SET, Some("-7"))]
        )? == INVALID_CONFIG,
        "an invalid retention.ms was accepted"
    );
    ensure!(
        incremental(
            &mut clients[0],
            "grow-me",
            &[("no.such.config", SET, Some("1"))]
        )? == INVALID_CONFIG,
        "an unknown config was accepted"
    );
    ensure!(
        incremental(
            &mut clients[0],
            "grow-me",
            &[("retention.ms", APPEND, Some("1"))]
        )? == INVALID_CONFIG,
        "APPEND on a scalar was accepted"
    );
    ensure!(
        incremental(
            &mut clients[0],
            "grow-me",
            &[("retention.ms", DELETE, None)]
        )? == 0,
        "DELETE"
    );
    eventually("retention.ms back to its default", || {
        Ok(!topic_config(&mut clients[0], "grow-me", "retention.ms")?.1)
    })?;
    ensure!(
        replace_configs(&mut clients[0], "grow-me", &[("segment.bytes", "1048576")])? == 0,
        "AlterConfigs"
    );
    eventually("AlterConfigs replaced the whole set", || {
        Ok(
            topic_config(&mut clients[0], "grow-me", "segment.bytes")? == ("1048576".into(), true)
                && topic_config(&mut clients[0], "grow-me", "cleanup.policy")?.0 == "delete",
        )
    })?;

    // DescribeCluster: every broker, a controller, the endpoint-type rule.
    let described = clients[0].send(&DescribeClusterRequest::default().with_endpoint_type(1), 1)?;
    ensure!(
        described.error_code == 0,
        "DescribeCluster: {}",
        described.error_code
    );
    ensure!(
        described.brokers.len() == nodes,
        "brokers: {:?}",
        described.brokers
    );
    ensure!(
        described.controller_id.0 >= 0,
        "no controller: {described:?}"
    );
    ensure!(!described.cluster_id.is_empty(), "no cluster id");
    let controllers =
        clients[0].send(&DescribeClusterRequest::default().with_endpoint_type(2), 1)?;
    ensure!(
        controllers.error_code == UNSUPPORTED_ENDPOINT_TYPE,
        "controller endpoints: {}",
        controllers.error_code
    );

    // DescribeLogDirs: one directory holding this node's replicas of grow-me.
    let dirs = clients[0].send(&DescribeLogDirsRequest::default().with_topics(None), 4)?;
    ensure!(dirs.results.len() == 1, "log dirs: {dirs:?}");
    let dir = &dirs.results[0];
    ensure!(
        dir.error_code == 0 && dir.total_bytes > 0 && dir.usable_bytes > 0,
        "log dir: {dir:?}"
    );
    let grown = dir
        .topics
        .iter()
        .find(|t| t.name.0.as_str() == "grow-me")
        .context("grow-me not in DescribeLogDirs")?;
    ensure!(
        grown.partitions.len() == 5,
        "grow-me replicas here: {:?}",
        grown.partitions
    );

    // OffsetDelete, at the group coordinator (the node leading
    // __consumer_offsets): a group with offsets and no members loses them.
    clients[0].create_topic_replicated("offsets-me", 1, rf, &[])?;
    let mut coordinator = None;
    eventually("a node accepts the commit as coordinator", || {
        for (i, client) in clients.iter_mut().enumerate() {
            if client.commit_offset("deleter", "offsets-me", 42)? == 0 {
                coordinator = Some(i);
                return Ok(true);
            }
        }
        Ok(false)
    })?;
    let client = &mut clients[coordinator.context("no coordinator")?];
    ensure!(
        client.committed_offset("deleter", "offsets-me")? == 42,
        "committed"
    );
    ensure!(
        offset_delete(client, "deleter", "offsets-me")? == (0, 0),
        "OffsetDelete"
    );
    ensure!(
        client.committed_offset("deleter", "offsets-me")? == -1,
        "the offset survived OffsetDelete"
    );
    ensure!(
        offset_delete(client, "never-was", "offsets-me")?.0 == GROUP_ID_NOT_FOUND,
        "an unknown group"
    );
    Ok(())
}

#[test]
fn admin_changes_on_one_node() -> Result<()> {
    let broker = Broker::start(&[])?;
    let mut clients = [Client::connect(&broker)?];
    exercise(&mut clients, 1)?;
    exercise_delete_records(&mut clients, &[(1, broker.data_dir().to_path_buf())])
}

#[test]
fn admin_changes_on_three_nodes() -> Result<()> {
    let mut cluster = Cluster::start(3, &["--wal-profile", "low", "--min-insync-replicas", "2"])?;
    let mut clients = Vec::new();
    let mut nodes = Vec::new();
    for id in [2, 1, 3] {
        clients.push(Client::connect(cluster.node(id))?);
        nodes.push((id, cluster.node(id).data_dir().to_path_buf()));
    }
    exercise(&mut clients, 3)?;
    exercise_delete_records(&mut clients, &nodes)
}

/// Kafka's rule for when DeleteRecords answers: the low watermark counts the
/// followers on live (unfenced) brokers, in the ISR or not. A paused
/// follower holds it back — REQUEST_TIMED_OUT, the leader's log start
/// offset moved all the same — until the controller fences its broker;
/// from then on the live replicas alone decide, and the paused one follows
/// the leader's log start offset once it runs again.
#[test]
fn delete_records_waits_for_the_replicas_on_live_brokers() -> Result<()> {
    let mut cluster = Cluster::start(3, FAST_FAILOVER)?;
    let topic = "trim-wait";
    Client::connect(cluster.node(1))?.create_topic_replicated(
        topic,
        1,
        3,
        &[("retention.ms", "-1")],
    )?;
    let view = cluster
        .wait_for(topic, Duration::from_secs(30), "an ISR of three", |ps| {
            ps.first().is_some_and(|p| p.leader > 0 && p.isr.len() == 3)
        })?
        .remove(0);
    let leader = view.leader;
    let followers = view.followers();
    let (paused, running) = (followers[0], followers[1]);
    let mut client = Client::connect(cluster.node(leader))?;
    let values: Vec<bytes::Bytes> = (0..10)
        .map(|i| bytes::Bytes::from(format!("v{i}")))
        .collect();
    eventually("the leader takes 10 records with acks=all", || {
        Ok(client.produce_values(topic, &values)?.0 == 0)
    })?;
    let dir = |cluster: &mut Cluster, id: i32| cluster.node(id).data_dir().to_path_buf();
    let (paused_dir, running_dir) = (dir(&mut cluster, paused), dir(&mut cluster, running));

    cluster.node(paused).pause()?;
    let (code, low_watermark) = delete_records_within(&mut client, topic, 4, 1_000)?;
    if code == 0 {
        // Only if the controller fenced the paused broker first.
        ensure!(
            !listed_brokers(&mut client)?.contains(&paused),
            "DeleteRecords answered (low watermark {low_watermark}) while a follower that \
             never moved its log start offset was on a live broker"
        );
    } else {
        ensure!(
            code == REQUEST_TIMED_OUT && low_watermark < 4,
            "a follower holding the low watermark: {code}, low watermark {low_watermark}"
        );
    }
    ensure!(
        client.log_start_offset(topic)? == 4,
        "the leader moved its log start offset even though the answer timed out"
    );

    eventually("the controller fences the paused broker", || {
        Ok(!listed_brokers(&mut client)?.contains(&paused))
    })
    .with_context(|| cluster.logs())?;
    ensure!(
        delete_records(&mut client, topic, 6)? == (0, 6),
        "DeleteRecords with the paused broker fenced"
    );
    ensure!(
        persisted_log_start(&running_dir, topic).as_deref() == Some("6"),
        "the running follower had not moved its log start offset when DeleteRecords answered"
    );
    ensure!(
        persisted_log_start(&paused_dir, topic).is_none(),
        "the paused follower moved its log start offset"
    );

    cluster.node(paused).resume()?;
    eventually("the resumed follower follows the log start offset", || {
        Ok(persisted_log_start(&paused_dir, topic).as_deref() == Some("6"))
    })
    .with_context(|| cluster.logs())?;
    ensure!(
        delete_records(&mut client, topic, 6)? == (0, 6),
        "DeleteRecords once every replica is back"
    );
    Ok(())
}
