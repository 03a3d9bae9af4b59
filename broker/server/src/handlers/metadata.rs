//! Metadata: standalone, this broker as the only node and the leader of
//! every partition; creates requested unknown topics when auto-creation is
//! on and allowed. Cluster mode is answered by `metadata_cluster`.

use std::sync::Arc;

use chronik_log::{Error as LogError, TopicLog};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse};
use kafka_protocol::protocol::StrBytes;
use tracing::info;

use super::topic_lookup::{to_uuid, topic_name};
use super::Handled;
use crate::broker::Broker;
use crate::groups::OFFSETS_TOPIC;
use chronik_protocol::Response;

/// Kafka's "authorized operations not requested" sentinel.
pub(super) const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

pub async fn handle(broker: &Arc<Broker>, version: i16, request: MetadataRequest) -> Option<Handled> {
    if let Some(manager) = &broker.replicas {
        let response = super::metadata_cluster::metadata(broker, manager, version, request).await;
        let has_error = response.topics.iter().any(|t| t.error_code != 0);
        return Handled::new(Response::Metadata(response), has_error);
    }
    // v0: an empty list means all topics; v1+: null means all topics.
    let wants_all = match &request.topics {
        None => true,
        Some(t) => t.is_empty() && version == 0,
    };
    let allow_auto_create = broker.config.auto_create_topics && (version < 4 || request.allow_auto_topic_creation);
    let mut topics = Vec::new();
    if wants_all {
        topics.extend(broker.log.topics().iter().map(|t| describe_topic(broker, t)));
    } else {
        for requested in request.topics.unwrap_or_default() {
            let name = requested.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
            let found = if !requested.topic_id.is_nil() {
                broker.log.topic_by_id(*requested.topic_id.as_bytes()).ok_or(ResponseError::UnknownTopicId)
            } else {
                lookup_or_create(broker, &name, allow_auto_create)
            };
            topics.push(match found {
                Ok(topic) => describe_topic(broker, &topic),
                Err(error) => MetadataResponseTopic::default()
                    .with_error_code(error.code())
                    .with_name(requested.name.clone())
                    .with_topic_id(requested.topic_id)
                    .with_topic_authorized_operations(OPERATIONS_NOT_REQUESTED),
            });
        }
    }
    let has_error = topics.iter().any(|t| t.error_code != 0);
    let (host, port) = &broker.advertised;
    let response = MetadataResponse::default()
        .with_brokers(vec![MetadataResponseBroker::default()
            .with_node_id(BrokerId(broker.node_id()))
            .with_host(StrBytes::from_string(host.clone()))
            .with_port(i32::from(*port))])
        .with_cluster_id(Some(StrBytes::from_string(broker.cluster_id.clone())))
        .with_controller_id(BrokerId(broker.node_id()))
        .with_cluster_authorized_operations(OPERATIONS_NOT_REQUESTED)
        .with_topics(topics);
    Handled::new(Response::Metadata(response), has_error)
}

fn lookup_or_create(broker: &Broker, name: &str, allow_auto_create: bool) -> Result<Arc<TopicLog>, ResponseError> {
    if let Some(topic) = broker.log.topic(name) {
        return Ok(topic);
    }
    if !allow_auto_create {
        return Err(ResponseError::UnknownTopicOrPartition);
    }
    let partitions = i32::try_from(broker.config.default_partitions).unwrap_or(i32::MAX);
    super::topic_caps::check_capacity(broker, partitions, 1).map_err(|(code, message)| {
        tracing::warn!(topic = name, %message, "auto-creation refused");
        code
    })?;
    match broker
        .log
        .create_topic(name, broker.config.default_partitions, Default::default())
    {
        Ok(topic) => {
            info!(topic = name, partitions = broker.config.default_partitions, "auto-created topic");
            Ok(topic)
        }
        // Another request created it first.
        Err(LogError::TopicAlreadyExists(_)) => broker.log.topic(name).ok_or(ResponseError::UnknownTopicOrPartition),
        Err(LogError::InvalidTopicName { .. }) => Err(ResponseError::InvalidTopicException),
        Err(_) => Err(ResponseError::UnknownServerError),
    }
}

fn describe_topic(broker: &Broker, topic: &TopicLog) -> MetadataResponseTopic {
    let node = BrokerId(broker.node_id());
    let partitions = topic
        .partitions()
        .iter()
        .map(|p| {
            MetadataResponsePartition::default()
                .with_partition_index(p.partition())
                .with_leader_id(node)
                .with_leader_epoch(0)
                .with_replica_nodes(vec![node])
                .with_isr_nodes(vec![node])
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(topic_name(&topic.name)))
        .with_topic_id(to_uuid(topic.topic_id))
        .with_is_internal(topic.name == OFFSETS_TOPIC)
        .with_partitions(partitions)
        .with_topic_authorized_operations(OPERATIONS_NOT_REQUESTED)
}
