//! CreateTopics: Kafka's validation (name, partitions, known config values,
//! the replication factor against the live brokers) and `validate_only`;
//! the controller assigns replicas and commits the topic through the
//! metadata quorum, and this broker applies it before answering. Explicit
//! replica assignments are refused.

use std::collections::BTreeMap;
use std::sync::Arc;

use chronik_log::LogManager;
use chronik_metadata::CreateTopic;
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::protocol::StrBytes;
use tracing::info;

use super::describe_configs::{SOURCE_DEFAULT, SOURCE_TOPIC};
use super::Handled;
use crate::replica::ReplicaManager;
use crate::requests::errors::cluster::cluster_error_code;
use crate::requests::topics::lookup::to_uuid;
use crate::startup::config::Config;

pub async fn handle(
    replicas: &Arc<ReplicaManager>,
    log: &LogManager,
    config: &Config,
    version: i16,
    request: CreateTopicsRequest,
) -> Option<Handled> {
    let mut topics: Vec<CreatableTopicResult> = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        topics.push(create(replicas, log, config, version, topic, request.validate_only).await);
    }
    let has_error = topics.iter().any(|t| t.error_code != 0);
    Handled::new(
        Response::CreateTopics(CreateTopicsResponse::default().with_topics(topics)),
        has_error,
    )
}

async fn create(
    replicas: &Arc<ReplicaManager>,
    log: &LogManager,
    config: &Config,
    version: i16,
    topic: CreatableTopic,
    validate_only: bool,
) -> CreatableTopicResult {
    let name = topic.name.0.to_string();
    let result = CreatableTopicResult::default().with_name(topic.name.clone());
    let fail = |error: ResponseError, message: String| {
        result
            .clone()
            .with_error_code(error.code())
            .with_error_message(Some(StrBytes::from_string(message)))
            .with_num_partitions(-1)
            .with_replication_factor(-1)
    };
    if !topic.assignments.is_empty() {
        return fail(
            ResponseError::InvalidReplicaAssignment,
            "explicit replica assignments are not supported".into(),
        );
    }
    let partitions = if topic.num_partitions == -1 {
        i32::try_from(config.default_partitions).unwrap_or(1)
    } else {
        topic.num_partitions
    };
    let replication_factor = if topic.replication_factor == -1 {
        config.default_replication_factor
    } else {
        topic.replication_factor
    };
    let mut configs = BTreeMap::new();
    for config in &topic.configs {
        if let Some(value) = &config.value {
            configs.insert(config.name.to_string(), value.to_string());
        }
    }
    let log_config = match crate::requests::topics::configs::validate(log, &configs) {
        Ok(c) => c,
        Err((code, message)) => return fail(code, message),
    };
    if let Err(e) = chronik_log::validate_topic_name(&name) {
        let (code, message) = crate::requests::topics::configs::log_error(&e);
        return fail(code, message);
    }
    if partitions <= 0 {
        return fail(
            ResponseError::InvalidPartitions,
            format!("number of partitions must be positive, got {partitions}"),
        );
    }
    let live = replicas.cluster.image().live_brokers().count();
    if replication_factor < 1 || usize::try_from(replication_factor).unwrap_or(usize::MAX) > live {
        return fail(
            ResponseError::InvalidReplicationFactor,
            format!("replication factor {replication_factor} needs that many live brokers; {live} are live"),
        );
    }
    if let Err((code, message)) = crate::requests::topics::caps::check_capacity(
        replicas,
        config,
        partitions,
        replication_factor,
    ) {
        return fail(code, message);
    }
    let topic_id = if validate_only {
        if replicas.cluster.image().topics.contains_key(&name) {
            return fail(
                ResponseError::TopicAlreadyExists,
                format!("topic {name:?} already exists"),
            );
        }
        [0u8; 16]
    } else {
        let request = CreateTopic {
            name: name.clone(),
            partitions,
            replication_factor,
            configs: configs.clone(),
            topic_id: None,
        };
        match replicas.cluster.create_topic(request).await {
            Ok(created) => {
                info!(topic = %name, partitions, replication_factor, "created topic");
                replicas.apply_latest().await;
                created.topic_id
            }
            Err(e) => return fail(cluster_error_code(&e), e.to_string()),
        }
    };
    let mut result = result
        .with_num_partitions(partitions)
        .with_replication_factor(replication_factor);
    if version >= 7 {
        result = result.with_topic_id(to_uuid(topic_id));
    }
    if version >= 5 {
        let described: Vec<CreatableTopicConfigs> = crate::requests::topics::configs::describe(
            config.min_insync_replicas,
            &log_config,
            &configs,
        )
        .into_iter()
        .map(|entry| {
            CreatableTopicConfigs::default()
                .with_name(StrBytes::from_string(entry.name))
                .with_value(Some(StrBytes::from_string(entry.value)))
                .with_read_only(entry.read_only)
                .with_config_source(if entry.is_default {
                    SOURCE_DEFAULT
                } else {
                    SOURCE_TOPIC
                })
        })
        .collect();
        result = result.with_configs(Some(described));
    }
    result
}
