//! DeleteTopics: by name (all versions) or by topic id (v6+). The deletion
//! goes through the controller; every broker then removes its local log
//! when it applies the new metadata image (this one before answering).
//! Each topic deleted spends its partition count of the client's
//! controller_mutation_rate (KIP-599); from v5, once that is spent, the
//! next topics answer THROTTLING_QUOTA_EXCEEDED.

use chronik_metadata::Cluster;
use std::sync::Arc;

use chronik_log::LogManager;
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use tracing::info;
use uuid::Uuid;

use super::Handled;
use crate::quotas::MutationQuota;
use crate::replica::ReplicaManager;
use crate::requests::topics::lookup::{is_internal_topic, resolve, to_uuid, topic_name};

pub async fn handle(
    (replicas, cluster): (&Arc<ReplicaManager>, &Cluster),
    log: &LogManager,
    version: i16,
    request: DeleteTopicsRequest,
    mutations: &MutationQuota<'_>,
) -> Option<Handled> {
    let targets: Vec<(Option<TopicName>, Uuid)> = if version >= 6 {
        request
            .topics
            .into_iter()
            .map(|t| (t.name, t.topic_id))
            .collect()
    } else {
        request
            .topic_names
            .into_iter()
            .map(|n| (Some(n), Uuid::nil()))
            .collect()
    };
    let mut responses: Vec<DeletableTopicResult> = Vec::with_capacity(targets.len());
    for (name, id) in targets {
        if mutations.refuses() {
            responses.push(
                DeletableTopicResult::default()
                    .with_name(name)
                    .with_topic_id(id)
                    .with_error_code(ResponseError::ThrottlingQuotaExceeded.code())
                    .with_error_message(Some(StrBytes::from_static_str(
                        "The throttling quota has been exceeded.",
                    ))),
            );
            continue;
        }
        let (result, partitions) = delete_one((replicas, cluster), log, name, id).await;
        if result.error_code == 0 {
            mutations.record(partitions);
        }
        responses.push(result);
    }
    let has_error = responses.iter().any(|r| r.error_code != 0);
    Handled::new(
        Response::DeleteTopics(DeleteTopicsResponse::default().with_responses(responses)),
        has_error,
    )
}

async fn delete_one(
    (replicas, cluster): (&Arc<ReplicaManager>, &Cluster),
    log: &LogManager,
    name: Option<TopicName>,
    id: Uuid,
) -> (DeletableTopicResult, usize) {
    let requested_name = name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
    let result = DeletableTopicResult::default()
        .with_name(name.clone())
        .with_topic_id(id);
    let topic = match resolve(log, &requested_name, id) {
        Ok(topic) => topic,
        Err(error) => return (result.with_error_code(error.code()), 0),
    };
    if is_internal_topic(&topic.name) {
        let refused = result
            .with_error_code(ResponseError::InvalidTopicException.code())
            .with_error_message(Some(StrBytes::from_string(format!(
                "{} is an internal topic and cannot be deleted",
                topic.name
            ))));
        return (refused, 0);
    }
    let partitions = cluster
        .image()
        .topics
        .get(&topic.name)
        .map_or(0, |t| t.partitions.len());
    match cluster.delete_topic(&topic.name).await {
        Ok(()) => {
            info!(topic = %topic.name, "deleted topic");
            // Applying the image wakes every parked request.
            replicas.apply_latest().await;
            let deleted = result
                .with_name(Some(topic_name(&topic.name)))
                .with_topic_id(to_uuid(topic.topic_id));
            (deleted, partitions)
        }
        Err(e) => {
            let failed = result
                .with_error_code(crate::requests::errors::cluster::cluster_error_code(&e).code())
                .with_error_message(Some(StrBytes::from_string(e.to_string())));
            (failed, 0)
        }
    }
}
