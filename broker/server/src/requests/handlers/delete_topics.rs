//! DeleteTopics: by name (all versions) or by topic id (v6+). The deletion
//! goes through the controller; every broker then removes its local log
//! when it applies the new metadata image (this one before answering).

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
use crate::replica::ReplicaManager;
use crate::requests::topics::lookup::{is_internal_topic, resolve, to_uuid, topic_name};

pub async fn handle(
    replicas: &Arc<ReplicaManager>,
    log: &LogManager,
    version: i16,
    request: DeleteTopicsRequest,
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
        responses.push(delete_one(replicas, log, name, id).await);
    }
    let has_error = responses.iter().any(|r| r.error_code != 0);
    Handled::new(
        Response::DeleteTopics(DeleteTopicsResponse::default().with_responses(responses)),
        has_error,
    )
}

async fn delete_one(
    replicas: &Arc<ReplicaManager>,
    log: &LogManager,
    name: Option<TopicName>,
    id: Uuid,
) -> DeletableTopicResult {
    let requested_name = name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
    let result = DeletableTopicResult::default()
        .with_name(name.clone())
        .with_topic_id(id);
    let topic = match resolve(log, &requested_name, id) {
        Ok(topic) => topic,
        Err(error) => return result.with_error_code(error.code()),
    };
    if is_internal_topic(&topic.name) {
        return result
            .with_error_code(ResponseError::InvalidTopicException.code())
            .with_error_message(Some(StrBytes::from_string(format!(
                "{} is an internal topic and cannot be deleted",
                topic.name
            ))));
    }
    match replicas.cluster.delete_topic(&topic.name).await {
        Ok(()) => {
            info!(topic = %topic.name, "deleted topic");
            // Applying the image wakes every parked request.
            replicas.apply_latest().await;
            result
                .with_name(Some(topic_name(&topic.name)))
                .with_topic_id(to_uuid(topic.topic_id))
        }
        Err(e) => result
            .with_error_code(crate::requests::errors::cluster::cluster_error_code(&e).code())
            .with_error_message(Some(StrBytes::from_string(e.to_string()))),
    }
}
