//! CreateTopics: Kafka's validation (name, partitions, known config values,
//! the replication factor against the live brokers) and `validate_only`;
//! the controller assigns replicas and commits the topic through the
//! metadata quorum, and this broker applies it before answering. A manual
//! assignment (`kafka-topics.sh --replica-assignment`) is checked with
//! Kafka's rules: partitions numbered 0..n once each here, the brokers
//! (registered, each once per partition, equal counts) by the controller.
//! The partitions created spend the client's controller_mutation_rate
//! (KIP-599); from v6, once that is spent, the next topics answer
//! THROTTLING_QUOTA_EXCEEDED.

use chronik_metadata::Cluster;
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
use crate::config::slices::TopicCreation;
use crate::quotas::MutationQuota;
use crate::replica::ReplicaManager;
use crate::requests::errors::cluster::cluster_error_code;
use crate::requests::topics::lookup::to_uuid;

pub async fn handle(
    (replicas, cluster): (&Arc<ReplicaManager>, &Cluster),
    log: &LogManager,
    settings: TopicCreation<'_>,
    version: i16,
    request: CreateTopicsRequest,
    mutations: &MutationQuota<'_>,
) -> Option<Handled> {
    let mut topics: Vec<CreatableTopicResult> = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        // KIP-599: validate_only requests spend nothing and are not refused.
        if !request.validate_only && mutations.refuses() {
            topics.push(
                CreatableTopicResult::default()
                    .with_name(topic.name)
                    .with_error_code(ResponseError::ThrottlingQuotaExceeded.code())
                    .with_error_message(Some(StrBytes::from_static_str(
                        "The throttling quota has been exceeded.",
                    )))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1),
            );
            continue;
        }
        let result = create(
            (replicas, cluster),
            log,
            settings,
            version,
            topic,
            request.validate_only,
        )
        .await;
        if !request.validate_only && result.error_code == 0 {
            mutations.record(usize::try_from(result.num_partitions).unwrap_or(0));
        }
        topics.push(result);
    }
    let has_error = topics.iter().any(|t| t.error_code != 0);
    Handled::new(
        Response::CreateTopics(CreateTopicsResponse::default().with_topics(topics)),
        has_error,
    )
}

async fn create(
    (replicas, cluster): (&Arc<ReplicaManager>, &Cluster),
    log: &LogManager,
    settings: TopicCreation<'_>,
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
    let manual = match manual_assignment(&topic) {
        Ok(manual) => manual,
        Err((code, message)) => return fail(code, message),
    };
    let (partitions, replication_factor) = match manual.first() {
        Some(first) => (
            i32::try_from(manual.len()).unwrap_or(i32::MAX),
            i16::try_from(first.len()).unwrap_or(i16::MAX),
        ),
        None => (
            if topic.num_partitions == -1 {
                i32::try_from(settings.defaults.partitions).unwrap_or(1)
            } else {
                topic.num_partitions
            },
            if topic.replication_factor == -1 {
                settings.defaults.replication_factor
            } else {
                topic.replication_factor
            },
        ),
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
    let live = cluster.image().live_brokers().count();
    let needs_live = usize::try_from(replication_factor).unwrap_or(usize::MAX) > live;
    if replication_factor < 1 || (manual.is_empty() && needs_live) {
        return fail(
            ResponseError::InvalidReplicationFactor,
            format!("replication factor {replication_factor} needs that many live brokers; {live} are live"),
        );
    }
    if let Err((code, message)) = crate::requests::topics::caps::check_capacity(
        cluster,
        settings.limits,
        partitions,
        replication_factor,
    ) {
        return fail(code, message);
    }
    let topic_id = if validate_only {
        let image = cluster.image();
        if image.topics.contains_key(&name) {
            return fail(
                ResponseError::TopicAlreadyExists,
                format!("topic {name:?} already exists"),
            );
        }
        if let Err(e) = chronik_metadata::check_manual_assignment(&image, 0, &manual, None) {
            return fail(cluster_error_code(&e), e.to_string());
        }
        [0u8; 16]
    } else {
        let request = CreateTopic {
            name: name.clone(),
            partitions,
            replication_factor,
            configs: configs.clone(),
            topic_id: None,
            assignments: manual,
        };
        match cluster.create_topic(request).await {
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
            settings.defaults.min_insync_replicas,
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

/// The replica lists of a manual assignment, by partition (empty: none
/// given). Kafka's rules: numPartitions and replicationFactor must then be
/// -1, and the partitions are numbered 0..n, each once.
fn manual_assignment(topic: &CreatableTopic) -> Result<Vec<Vec<i32>>, (ResponseError, String)> {
    if topic.assignments.is_empty() {
        return Ok(Vec::new());
    }
    if topic.replication_factor != -1 {
        return Err((
            ResponseError::InvalidRequest,
            "A manual partition assignment was specified, but replication factor was not set to -1."
                .to_string(),
        ));
    }
    if topic.num_partitions != -1 {
        return Err((
            ResponseError::InvalidRequest,
            "A manual partition assignment was specified, but numPartitions was not set to -1."
                .to_string(),
        ));
    }
    let mut by_partition: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for a in &topic.assignments {
        let brokers = a.broker_ids.iter().map(|b| b.0).collect();
        if by_partition.insert(a.partition_index, brokers).is_some() {
            return Err((
                ResponseError::InvalidReplicaAssignment,
                format!(
                    "Found multiple manual partition assignments for partition {}",
                    a.partition_index
                ),
            ));
        }
    }
    let consecutive = by_partition
        .keys()
        .enumerate()
        .all(|(i, &p)| i64::try_from(i).ok() == Some(i64::from(p)));
    if !consecutive {
        return Err((
            ResponseError::InvalidReplicaAssignment,
            "partitions should be a consecutive 0-based integer sequence".to_string(),
        ));
    }
    Ok(by_partition.into_values().collect())
}
