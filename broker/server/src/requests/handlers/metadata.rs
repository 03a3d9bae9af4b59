//! Metadata: the listed brokers (their endpoints of the listener the
//! client connected on), the controller and every partition's
//! leader, leader epoch, replicas and ISR exactly as the metadata quorum's
//! latest applied image has them (a quorum of one alike). Unknown topics
//! are created through the controller when auto-creation is on and
//! allowed.

use chronik_metadata::Cluster;
use std::collections::BTreeMap;
use std::sync::Arc;

use chronik_metadata::{CreateTopic, MetadataImage, TopicImage};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse};
use kafka_protocol::protocol::StrBytes;
use tracing::info;

use super::Handled;
use crate::config::slices::TopicCreation;
use crate::replica::ReplicaManager;
use crate::requests::errors::cluster::cluster_error_code;
use crate::requests::topics::lookup::{is_internal_topic, to_uuid, topic_name};
use chronik_protocol::Response;

/// Kafka's "authorized operations not requested" sentinel.
pub(super) const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

pub async fn handle(
    (replicas, cluster): (&Arc<ReplicaManager>, &Cluster),
    settings: TopicCreation<'_>,
    cluster_id: &str,
    version: i16,
    request: MetadataRequest,
    listener: &str,
) -> Option<Handled> {
    let wants_all = match &request.topics {
        None => true,
        Some(t) => t.is_empty() && version == 0,
    };
    let allow_auto_create =
        settings.defaults.auto_create && (version < 4 || request.allow_auto_topic_creation);
    let mut topics = Vec::new();
    let mut image = cluster.image();
    if wants_all {
        topics.extend(
            image
                .topics
                .values()
                .map(|t| describe_topic(&image, t, listener, version)),
        );
    } else {
        for requested in request.topics.unwrap_or_default() {
            let name = requested
                .name
                .as_ref()
                .map(|n| n.0.to_string())
                .unwrap_or_default();
            let found = if !requested.topic_id.is_nil() {
                image
                    .topic_by_id(*requested.topic_id.as_bytes())
                    .cloned()
                    .ok_or(ResponseError::UnknownTopicId)
            } else if let Some(t) = image.topics.get(&name) {
                Ok(t.clone())
            } else if allow_auto_create {
                let created = auto_create((replicas, cluster), settings, &name).await;
                image = cluster.image();
                created
            } else {
                Err(ResponseError::UnknownTopicOrPartition)
            };
            topics.push(match found {
                Ok(topic) => describe_topic(&image, &topic, listener, version),
                Err(error) => MetadataResponseTopic::default()
                    .with_error_code(error.code())
                    .with_name(requested.name.clone())
                    .with_topic_id(requested.topic_id)
                    .with_topic_authorized_operations(OPERATIONS_NOT_REQUESTED),
            });
        }
    }
    // Each broker's endpoint of the listener this client connected on;
    // a broker without that listener is left out, as Kafka does.
    let brokers = image
        .listed_brokers()
        .filter_map(|b| {
            let (host, port) = b.endpoint(listener)?;
            Some(
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(b.node_id))
                    .with_host(StrBytes::from_string(host.to_string()))
                    .with_port(i32::from(port))
                    .with_rack(b.rack.clone().map(StrBytes::from_string)),
            )
        })
        .collect();
    let controller = controller_for_clients(cluster);
    let has_error = topics.iter().any(|t| t.error_code != 0);
    let response = MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id(Some(StrBytes::from_string(cluster_id.to_string())))
        .with_controller_id(BrokerId(controller))
        .with_cluster_authorized_operations(OPERATIONS_NOT_REQUESTED)
        .with_topics(topics);
    Handled::new(Response::Metadata(response), has_error)
}

async fn auto_create(
    (replicas, cluster): (&Arc<ReplicaManager>, &Cluster),
    settings: TopicCreation<'_>,
    name: &str,
) -> Result<TopicImage, ResponseError> {
    let partitions = i32::try_from(settings.defaults.partitions).unwrap_or(i32::MAX);
    crate::requests::topics::caps::check_capacity(
        cluster,
        settings.limits,
        partitions,
        settings.defaults.replication_factor,
    )
    .map_err(|(code, message)| {
        tracing::warn!(topic = name, %message, "auto-creation refused");
        code
    })?;
    let request = CreateTopic {
        name: name.to_string(),
        partitions: i32::try_from(settings.defaults.partitions).unwrap_or(1),
        replication_factor: settings.defaults.replication_factor,
        configs: BTreeMap::new(),
        topic_id: None,
        assignments: Vec::new(),
    };
    match cluster.create_topic(request).await {
        Ok(topic) => {
            info!(
                topic = name,
                partitions = topic.partitions.len(),
                "auto-created topic"
            );
            replicas.apply_latest().await;
            Ok(topic)
        }
        Err(chronik_metadata::ClusterError::TopicAlreadyExists(_)) => cluster
            .image()
            .topics
            .get(name)
            .cloned()
            .ok_or(ResponseError::LeaderNotAvailable),
        Err(e) => Err(cluster_error_code(&e)),
    }
}

/// A partition whose leader has no endpoint on the client's listener is
/// LISTENER_NOT_FOUND from v6, LEADER_NOT_AVAILABLE before (Kafka's
/// `errorUnavailableListeners`).
fn describe_topic(
    image: &MetadataImage,
    topic: &TopicImage,
    listener: &str,
    version: i16,
) -> MetadataResponseTopic {
    let partitions = topic
        .partitions
        .iter()
        .map(|p| {
            let offline: Vec<BrokerId> = image
                .offline_replicas(p)
                .into_iter()
                .map(BrokerId)
                .collect();
            let unreachable = image
                .brokers
                .get(&p.leader)
                .is_some_and(|b| b.endpoint(listener).is_none());
            let error = if p.leader < 0 || (unreachable && version < 6) {
                ResponseError::LeaderNotAvailable.code()
            } else if unreachable {
                ResponseError::ListenerNotFound.code()
            } else {
                0
            };
            MetadataResponsePartition::default()
                .with_error_code(error)
                .with_partition_index(p.partition)
                .with_leader_id(BrokerId(p.leader))
                .with_leader_epoch(p.leader_epoch)
                .with_replica_nodes(p.replicas.iter().map(|&r| BrokerId(r)).collect())
                .with_isr_nodes(p.isr.iter().map(|&r| BrokerId(r)).collect())
                .with_offline_replicas(offline)
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(topic_name(&topic.name)))
        .with_topic_id(to_uuid(topic.topic_id))
        .with_is_internal(is_internal_topic(&topic.name))
        .with_partitions(partitions)
        .with_topic_authorized_operations(OPERATIONS_NOT_REQUESTED)
}

/// The controller id clients are given: the metadata quorum's leader when
/// it is a live broker (a combined node), else this broker, as KRaft brokers
/// answer with a broker, never a controller-only node clients cannot reach
/// (admin requests sent here are forwarded to the controller).
pub(crate) fn controller_for_clients(cluster: &Cluster) -> i32 {
    match cluster.status().controller_id {
        Some(id) if cluster.image().is_live(id) => id,
        Some(_) => cluster.node_id(),
        None => -1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chronik_metadata::{BrokerImage, Endpoint, PartitionImage};

    fn broker(node_id: i32, listeners: &[&str]) -> BrokerImage {
        BrokerImage {
            node_id,
            host: format!("h{node_id}"),
            port: 9092,
            fenced: false,
            in_controlled_shutdown: false,
            log_dir_offline: false,
            rack: None,
            listeners: listeners
                .iter()
                .map(|name| {
                    let endpoint = Endpoint {
                        host: format!("h{node_id}"),
                        port: 9092,
                    };
                    (name.to_string(), endpoint)
                })
                .collect(),
        }
    }

    fn partition(partition: i32, leader: i32) -> PartitionImage {
        PartitionImage::new(partition, vec![leader], vec![leader], leader)
    }

    /// A leader without the client's listener: LISTENER_NOT_FOUND from v6,
    /// LEADER_NOT_AVAILABLE before, nothing on a listener it has.
    #[test]
    fn leaders_unreachable_on_the_clients_listener_are_reported() {
        let mut image = MetadataImage::default();
        image.brokers.insert(1, broker(1, &["PLAINTEXT"]));
        image
            .brokers
            .insert(2, broker(2, &["PLAINTEXT", "SASL_SSL"]));
        let topic = TopicImage {
            name: "t".into(),
            topic_id: [1; 16],
            configs: BTreeMap::new(),
            partitions: vec![partition(0, 1), partition(1, 2)],
        };
        let errors = |listener: &str, version: i16| -> Vec<i16> {
            describe_topic(&image, &topic, listener, version)
                .partitions
                .iter()
                .map(|p| p.error_code)
                .collect()
        };
        assert_eq!(
            errors("SASL_SSL", 12),
            [ResponseError::ListenerNotFound.code(), 0]
        );
        assert_eq!(
            errors("SASL_SSL", 5),
            [ResponseError::LeaderNotAvailable.code(), 0]
        );
        assert_eq!(errors("PLAINTEXT", 12), [0, 0]);
    }
}
