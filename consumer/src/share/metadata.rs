//! What the share-group client asks of any broker: the cluster's metadata
//! (brokers, topic ids, partition leaders), the group's coordinator, and
//! the group configs set before consuming (IncrementalAlterConfigs on the
//! GROUP resource, e.g. `share.auto.offset.reset=earliest`).
//!
//! Owns: `Cluster` (one Metadata answer, read), `metadata`,
//! `find_coordinator`, `set_group_configs`, and the walk over bootstrap
//! servers. Must not: keep connections open between calls or retry past
//! the caller's deadline (each call is one bounded attempt per server).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig, IncrementalAlterConfigsRequest,
};
use kafka_protocol::messages::metadata_request::{MetadataRequest, MetadataRequestTopic};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::conn::Conn;

/// Timeout of each metadata-type call.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Kafka's ConfigResource type of a group (KIP-848 / KIP-932 group configs).
const GROUP_RESOURCE: i8 = 32;

/// One Metadata answer: broker addresses and the subscribed topics.
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    /// node id -> host:port
    pub brokers: BTreeMap<i32, String>,
    /// topic name -> (topic id, partition -> leader node id; -1 = none)
    pub topics: BTreeMap<String, (Uuid, BTreeMap<i32, i32>)>,
}

impl Cluster {
    /// The name of the topic with id `id`.
    pub fn name_of(&self, id: Uuid) -> Option<&str> {
        self.topics
            .iter()
            .find(|(_, (tid, _))| *tid == id)
            .map(|(n, _)| n.as_str())
    }

    /// The leader of (topic id, partition).
    pub fn leader_of(&self, id: Uuid, partition: i32) -> Option<i32> {
        self.topics
            .values()
            .find(|(tid, _)| *tid == id)
            .and_then(|(_, parts)| parts.get(&partition).copied())
            .filter(|l| *l >= 0)
    }
}

/// A Kafka error code's name (or the number when this library does not know it).
pub fn error_name(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        Some(e) => format!("{e:?} ({code})"),
        None => format!("error code {code}"),
    }
}

/// Splits `host:port[,host:port...]`.
pub fn bootstrap_list(servers: &str) -> Vec<String> {
    servers
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// A connection to the first bootstrap server that answers.
async fn any_broker(servers: &[String], client_id: &str) -> anyhow::Result<Conn> {
    let mut last = anyhow!("no bootstrap servers");
    for s in servers {
        match Conn::connect(s, client_id).await {
            Ok(c) => return Ok(c),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Metadata v12 for `topics`.
pub async fn metadata(
    servers: &[String],
    client_id: &str,
    topics: &[String],
) -> anyhow::Result<Cluster> {
    let mut conn = any_broker(servers, client_id).await?;
    let request = MetadataRequest::default()
        .with_topics(Some(
            topics
                .iter()
                .map(|t| {
                    MetadataRequestTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_string(t.clone()))))
                })
                .collect(),
        ))
        .with_allow_auto_topic_creation(false);
    let response = conn.call(&request, 12, CALL_TIMEOUT).await?;
    let mut cluster = Cluster::default();
    for b in &response.brokers {
        cluster
            .brokers
            .insert(b.node_id.0, format!("{}:{}", b.host.as_str(), b.port));
    }
    for t in &response.topics {
        let Some(name) = &t.name else { continue };
        if t.error_code != 0 {
            tracing::debug!(topic = name.0.as_str(), error = %error_name(t.error_code), "metadata: topic error");
            continue;
        }
        let parts = t
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.leader_id.0))
            .collect();
        cluster
            .topics
            .insert(name.0.as_str().to_string(), (t.topic_id, parts));
    }
    Ok(cluster)
}

/// The coordinator (host:port) of `group` (FindCoordinator v4, GROUP key).
pub async fn find_coordinator(
    servers: &[String],
    client_id: &str,
    group: &str,
) -> anyhow::Result<String> {
    let mut conn = any_broker(servers, client_id).await?;
    let request = FindCoordinatorRequest::default()
        .with_key_type(0)
        .with_coordinator_keys(vec![StrBytes::from_string(group.to_string())]);
    let response = conn.call(&request, 4, CALL_TIMEOUT).await?;
    let c = response
        .coordinators
        .first()
        .context("FindCoordinator answered no coordinator")?;
    if c.error_code != 0 {
        bail!("FindCoordinator for {group}: {}", error_name(c.error_code));
    }
    Ok(format!("{}:{}", c.host.as_str(), c.port))
}

/// Sets `configs` on group `group` (IncrementalAlterConfigs v1, SET).
pub async fn set_group_configs(
    servers: &[String],
    client_id: &str,
    group: &str,
    configs: &[(String, String)],
) -> anyhow::Result<()> {
    if configs.is_empty() {
        return Ok(());
    }
    let mut conn = any_broker(servers, client_id).await?;
    let resource = AlterConfigsResource::default()
        .with_resource_type(GROUP_RESOURCE)
        .with_resource_name(StrBytes::from_string(group.to_string()))
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    AlterableConfig::default()
                        .with_name(StrBytes::from_string(k.clone()))
                        .with_config_operation(0)
                        .with_value(Some(StrBytes::from_string(v.clone())))
                })
                .collect(),
        );
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![resource]);
    let response = conn.call(&request, 1, CALL_TIMEOUT).await?;
    for r in &response.responses {
        if r.error_code != 0 {
            bail!(
                "setting group configs of {group}: {} {}",
                error_name(r.error_code),
                r.error_message.as_ref().map_or("", |m| m.as_str())
            );
        }
    }
    Ok(())
}
