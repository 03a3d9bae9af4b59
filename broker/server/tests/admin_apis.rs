//! The admin APIs — CreateTopics (validate_only, v5+ configs), Metadata,
//! DescribeConfigs (topic and broker), DeleteTopics — give the same answers
//! on a 1-node broker and on a 3-node cluster, each with its own defaults:
//! replication factor and min.insync.replicas are reported as configured,
//! never as a hard-coded 1, and no config is listed twice.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use common::broker::Broker;
use common::cluster::Cluster;
use common::error_codes::{
    INVALID_PARTITIONS, INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS, UNKNOWN_TOPIC_OR_PARTITION,
};
use common::kafka_client::{topic_metadata_request, Client};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{
    CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DescribeConfigsRequest,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;

/// What a deployment was started with.
struct Defaults {
    replication_factor: i16,
    min_insync: &'static str,
}

fn topic(name: &str, partitions: i32, configs: &[(&str, &str)]) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_string(name.into())))
        .with_num_partitions(partitions)
        .with_replication_factor(-1)
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    CreatableTopicConfig::default()
                        .with_name(StrBytes::from_string((*k).into()))
                        .with_value(Some(StrBytes::from_string((*v).into())))
                })
                .collect(),
        )
}

fn create(
    client: &mut Client,
    topic: CreatableTopic,
    validate_only: bool,
) -> Result<CreateTopicsResponse> {
    let request = CreateTopicsRequest::default()
        .with_topics(vec![topic])
        .with_timeout_ms(10_000)
        .with_validate_only(validate_only);
    client.send(&request, 7)
}

fn describe(
    client: &mut Client,
    resource_type: i8,
    name: &str,
) -> Result<BTreeMap<String, String>> {
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(StrBytes::from_string(name.into()))
            .with_configuration_keys(None)]);
    let response = client.send(&request, 4)?;
    let result = response
        .results
        .first()
        .context("no DescribeConfigs result")?;
    ensure!(
        result.error_code == 0,
        "DescribeConfigs {name}: error {}",
        result.error_code
    );
    let mut configs = BTreeMap::new();
    for c in &result.configs {
        let value = c.value.as_ref().map(|v| v.to_string()).unwrap_or_default();
        ensure!(
            configs.insert(c.name.to_string(), value).is_none(),
            "{} described twice",
            c.name
        );
    }
    Ok(configs)
}

/// (error code, partition count, replicas of partition 0) from Metadata.
fn metadata(client: &mut Client, name: &str) -> Result<(i16, usize, usize)> {
    let response = client.send(&topic_metadata_request(name, false), 12)?;
    let t = response.topics.first().context("no topic in Metadata")?;
    Ok((
        t.error_code,
        t.partitions.len(),
        t.partitions.first().map_or(0, |p| p.replica_nodes.len()),
    ))
}

fn wait_metadata(
    client: &mut Client,
    name: &str,
    want: impl Fn((i16, usize, usize)) -> bool,
) -> Result<(i16, usize, usize)> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let seen = metadata(client, name)?;
        if want(seen) {
            return Ok(seen);
        }
        ensure!(
            Instant::now() < deadline,
            "Metadata for {name} stayed {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn exercise(client: &mut Client, defaults: &Defaults) -> Result<()> {
    let rf = defaults.replication_factor;
    // Validation, with and without validate_only.
    for validate_only in [true, false] {
        let response = create(client, topic("admin-zero", 0, &[]), validate_only)?;
        ensure!(
            response.topics[0].error_code == INVALID_PARTITIONS,
            "0 partitions (validate_only={validate_only}): {:?}",
            response.topics[0]
        );
        let response = create(client, topic("bad/name", 1, &[]), validate_only)?;
        ensure!(
            response.topics[0].error_code == INVALID_TOPIC_EXCEPTION,
            "bad name: {:?}",
            response.topics[0]
        );
    }
    let dry = create(client, topic("admin-a", 3, &[]), true)?;
    ensure!(
        dry.topics[0].error_code == 0,
        "validate_only create: {:?}",
        dry.topics[0]
    );
    ensure!(
        metadata(client, "admin-a")?.0 == UNKNOWN_TOPIC_OR_PARTITION,
        "validate_only created the topic"
    );

    // A real creation reports its effective configs once each.
    let created = create(
        client,
        topic("admin-a", 3, &[("retention.ms", "60000")]),
        false,
    )?;
    let t = &created.topics[0];
    ensure!(t.error_code == 0, "create: {t:?}");
    ensure!(
        t.num_partitions == 3 && t.replication_factor == rf,
        "create answered {} partitions, RF {}",
        t.num_partitions,
        t.replication_factor
    );
    let configs = t
        .configs
        .as_ref()
        .context("CreateTopics v7 without configs")?;
    let mut seen = BTreeMap::new();
    for c in configs {
        ensure!(
            seen.insert(c.name.to_string(), c.value.as_ref().map(|v| v.to_string()))
                .is_none(),
            "CreateTopics lists {} twice",
            c.name
        );
    }
    ensure!(
        seen.get("min.insync.replicas") == Some(&Some(defaults.min_insync.to_string())),
        "CreateTopics min.insync.replicas: {seen:?}"
    );
    ensure!(
        seen.get("retention.ms") == Some(&Some("60000".to_string())),
        "CreateTopics retention.ms: {seen:?}"
    );
    let again = create(client, topic("admin-a", 3, &[]), true)?;
    ensure!(
        again.topics[0].error_code == TOPIC_ALREADY_EXISTS,
        "validate_only of an existing topic: {:?}",
        again.topics[0]
    );

    let (_, partitions, replicas) = wait_metadata(client, "admin-a", |(e, n, _)| e == 0 && n == 3)?;
    ensure!(
        partitions == 3 && replicas == usize::try_from(rf)?,
        "Metadata: {partitions} partitions, {replicas} replicas"
    );

    let topic_configs = wait_for_describe(client, "admin-a")?;
    ensure!(
        topic_configs.get("min.insync.replicas").map(String::as_str) == Some(defaults.min_insync),
        "topic configs: {topic_configs:?}"
    );
    ensure!(
        topic_configs.get("retention.ms").map(String::as_str) == Some("60000"),
        "topic configs: {topic_configs:?}"
    );
    let broker_configs = describe(client, RESOURCE_BROKER, "")?;
    ensure!(
        broker_configs.get("default.replication.factor") == Some(&rf.to_string()),
        "broker configs: {broker_configs:?}"
    );
    ensure!(
        broker_configs
            .get("min.insync.replicas")
            .map(String::as_str)
            == Some(defaults.min_insync),
        "broker configs: {broker_configs:?}"
    );

    // DeleteTopics: the topic goes; the internal topic stays.
    let delete = |client: &mut Client, name: &str| -> Result<i16> {
        let request = DeleteTopicsRequest::default()
            .with_topics(vec![DeleteTopicState::default()
                .with_name(Some(TopicName(StrBytes::from_string(name.into()))))])
            .with_timeout_ms(10_000);
        Ok(client.send(&request, 6)?.responses[0].error_code)
    };
    ensure!(delete(client, "admin-a")? == 0, "DeleteTopics failed");
    wait_metadata(client, "admin-a", |(e, _, _)| {
        e == UNKNOWN_TOPIC_OR_PARTITION
    })?;
    ensure!(
        delete(client, "__consumer_offsets")? != 0,
        "__consumer_offsets could be deleted"
    );
    ensure!(
        delete(client, "admin-never")? == UNKNOWN_TOPIC_OR_PARTITION,
        "deleting an unknown topic"
    );
    Ok(())
}

/// The node answering may learn of a new topic a moment after the create.
fn wait_for_describe(client: &mut Client, name: &str) -> Result<BTreeMap<String, String>> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match describe(client, RESOURCE_TOPIC, name) {
            Ok(configs) => return Ok(configs),
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(e),
        }
    }
}

#[test]
fn admin_apis_on_one_node() -> Result<()> {
    let broker = Broker::start(&[])?;
    let mut client = Client::connect(&broker)?;
    exercise(
        &mut client,
        &Defaults {
            replication_factor: 1,
            min_insync: "1",
        },
    )
}

#[test]
fn admin_apis_on_three_nodes() -> Result<()> {
    let mut cluster = Cluster::start(
        3,
        &[
            "--wal-profile",
            "low",
            "--min-insync-replicas",
            "2",
            "--default-replication-factor",
            "3",
        ],
    )?;
    // Through a node that is not necessarily the controller.
    let mut client = Client::connect(cluster.node(2))?;
    exercise(
        &mut client,
        &Defaults {
            replication_factor: 3,
            min_insync: "2",
        },
    )
}
