//! Kafka's quorum and cluster views asked of a test node: DescribeQuorum,
//! DescribeCluster, Metadata's broker list, UnregisterBroker, and
//! `eventually`, which polls a check until it holds.

use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Result};
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::{
    BrokerId, DescribeClusterRequest, DescribeQuorumRequest, DescribeQuorumResponse,
    MetadataRequest, TopicName, UnregisterBrokerRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::kafka_client::Client;
use super::Broker;

pub fn describe_quorum(node: &Broker, version: i16) -> Result<DescribeQuorumResponse> {
    let request = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
        .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
    Client::connect(node)?.send(&request, version)
}

pub fn unregister(node: &Broker, id: i32) -> Result<i16> {
    let response = Client::connect(node)?.send(
        &UnregisterBrokerRequest::default().with_broker_id(BrokerId(id)),
        0,
    )?;
    Ok(response.error_code)
}

/// (broker id, fenced) as DescribeCluster v2 lists them, fenced included.
pub fn described_brokers(node: &Broker) -> Result<Vec<(i32, bool)>> {
    let response = Client::connect(node)?.send(
        &DescribeClusterRequest::default()
            .with_include_fenced_brokers(true)
            .with_endpoint_type(1),
        2,
    )?;
    ensure!(response.error_code == 0, "DescribeCluster: {response:?}");
    Ok(response
        .brokers
        .iter()
        .map(|b| (b.broker_id.0, b.is_fenced))
        .collect())
}

pub fn metadata_brokers(node: &Broker) -> Result<Vec<i32>> {
    let response =
        Client::connect(node)?.send(&MetadataRequest::default().with_topics(Some(vec![])), 12)?;
    Ok(response.brokers.iter().map(|b| b.node_id.0).collect())
}

/// Polls `check` every 100 ms until it yields `Some`, for at most `timeout`.
pub fn eventually<T>(
    timeout: Duration,
    what: &str,
    mut check: impl FnMut() -> Result<Option<T>>,
) -> Result<T> {
    let deadline = Instant::now() + timeout;
    let mut last = String::new();
    loop {
        match check() {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => {}
            Err(e) => last = format!("{e:#}"),
        }
        if Instant::now() > deadline {
            bail!("timed out after {timeout:?} waiting for {what} (last error: {last})");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The partition DescribeQuorum answered with, after checking its shape.
pub fn quorum_partition(
    response: &DescribeQuorumResponse,
) -> Result<&kafka_protocol::messages::describe_quorum_response::PartitionData> {
    ensure!(response.error_code == 0, "DescribeQuorum: {response:?}");
    let [topic] = response.topics.as_slice() else {
        bail!("DescribeQuorum topics: {response:?}");
    };
    ensure!(topic.topic_name.0.as_str() == "__cluster_metadata");
    let [partition] = topic.partitions.as_slice() else {
        bail!("DescribeQuorum partitions: {response:?}");
    };
    ensure!(
        partition.partition_index == 0 && partition.error_code == 0,
        "{partition:?}"
    );
    Ok(partition)
}
