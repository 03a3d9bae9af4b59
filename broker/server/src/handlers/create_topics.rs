//! CreateTopics: topic creation with Kafka's validation (name, partitions,
//! replication factor, known config values) and `validate_only`. Standalone
//! the replication factor must be 1; in cluster mode the controller assigns
//! replicas and `min.insync.replicas` is accepted as a topic config.

use std::collections::BTreeMap;
use std::sync::Arc;

use chronik_log::{Error as LogError, LogConfig};
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{CreatableTopicConfigs, CreatableTopicResult};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::protocol::StrBytes;
use tracing::info;

use super::describe_configs::{SOURCE_DEFAULT, SOURCE_TOPIC};
use super::topic_lookup::to_uuid;
use super::Handled;
use crate::broker::Broker;

pub async fn handle(broker: &Arc<Broker>, version: i16, request: CreateTopicsRequest) -> Option<Handled> {
    let mut topics: Vec<CreatableTopicResult> = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        topics.push(match &broker.replicas {
            Some(manager) => super::create_topics_cluster::create(broker, manager, version, topic, request.validate_only).await,
            None => create_one(broker, version, topic, request.validate_only),
        });
    }
    let has_error = topics.iter().any(|t| t.error_code != 0);
    Handled::new(Response::CreateTopics(CreateTopicsResponse::default().with_topics(topics)), has_error)
}

fn create_one(broker: &Broker, version: i16, topic: CreatableTopic, validate_only: bool) -> CreatableTopicResult {
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

    let partitions = if !topic.assignments.is_empty() {
        if let Some(bad) = topic
            .assignments
            .iter()
            .find(|a| a.broker_ids.len() != 1 || a.broker_ids[0].0 != broker.node_id())
        {
            return fail(
                ResponseError::InvalidReplicaAssignment,
                format!("partition {} must be assigned to broker {} only", bad.partition_index, broker.node_id()),
            );
        }
        topic.assignments.len() as i32
    } else if topic.num_partitions == -1 {
        broker.config.default_partitions as i32
    } else {
        topic.num_partitions
    };
    if partitions <= 0 {
        return fail(ResponseError::InvalidPartitions, format!("number of partitions must be positive, got {partitions}"));
    }
    if topic.replication_factor != -1 && topic.replication_factor != 1 {
        return fail(
            ResponseError::InvalidReplicationFactor,
            format!("replication factor {} is larger than the 1 available broker", topic.replication_factor),
        );
    }
    let mut overrides = BTreeMap::new();
    for config in &topic.configs {
        if let Some(value) = &config.value {
            overrides.insert(config.name.to_string(), value.to_string());
        }
    }
    if let Err((code, message)) = super::topic_caps::check_capacity(broker, partitions, 1) {
        return fail(code, message);
    }
    let created = if validate_only {
        validate(broker, &name, partitions, &overrides).map(|config| (config, [0u8; 16]))
    } else {
        broker
            .log
            .create_topic(&name, partitions as u32, overrides.clone())
            .map(|t| (t.config.clone(), t.topic_id))
    };
    match created {
        Ok((config, topic_id)) => {
            if !validate_only {
                info!(topic = %name, partitions, "created topic");
            }
            let mut result = result.with_num_partitions(partitions).with_replication_factor(1);
            if version >= 7 {
                result = result.with_topic_id(to_uuid(topic_id));
            }
            if version >= 5 {
                let configs = super::topic_configs::describe(broker, &config, &overrides)
                    .into_iter()
                    .map(|entry| {
                        CreatableTopicConfigs::default()
                            .with_name(StrBytes::from_string(entry.name))
                            .with_value(Some(StrBytes::from_string(entry.value)))
                            .with_read_only(entry.read_only)
                            .with_config_source(if entry.is_default { SOURCE_DEFAULT } else { SOURCE_TOPIC })
                    })
                    .collect();
                result = result.with_configs(Some(configs));
            }
            result
        }
        Err(e) => {
            let (code, message) = log_error(&e);
            fail(code, message)
        }
    }
}

pub(super) fn validate(broker: &Broker, name: &str, partitions: i32, overrides: &BTreeMap<String, String>) -> Result<LogConfig, LogError> {
    chronik_log::validate_topic_name(name)?;
    if broker.log.topic(name).is_some() {
        return Err(LogError::TopicAlreadyExists(name.to_string()));
    }
    if partitions <= 0 {
        return Err(LogError::InvalidPartitions(i64::from(partitions)));
    }
    broker.log.default_log_config().with_overrides(overrides)
}

pub(super) fn log_error(e: &LogError) -> (ResponseError, String) {
    let code = match e {
        LogError::TopicAlreadyExists(_) => ResponseError::TopicAlreadyExists,
        LogError::InvalidTopicName { .. } => ResponseError::InvalidTopicException,
        LogError::InvalidPartitions(_) => ResponseError::InvalidPartitions,
        LogError::InvalidConfig { .. } => ResponseError::InvalidConfig,
        _ => ResponseError::UnknownServerError,
    };
    (code, e.to_string())
}
