//! CreatePartitions (kafka-topics.sh --alter --partitions): grows topics
//! through the controller, which assigns the new partitions' replicas with
//! the topic's replication factor (or takes the caller's assignment of
//! them, `--replica-assignment`, checked by the controller as Kafka checks
//! it); this broker applies the grown topic before answering. Kafka's
//! validation and messages; growing an internal topic is refused (its keys
//! are placed by hashing over its partition count). The partitions added
//! spend the client's controller_mutation_rate (KIP-599); from v3, once
//! that is spent, the next topics answer THROTTLING_QUOTA_EXCEEDED.

use chronik_metadata::Cluster;
use std::collections::BTreeSet;
use std::sync::Arc;

use chronik_metadata::CreatePartitions;
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::protocol::StrBytes;
use tracing::info;

use super::Handled;
use crate::config::limits::Limits;
use crate::quotas::MutationQuota;
use crate::replica::ReplicaManager;
use crate::requests::errors::cluster::cluster_error_code;
use crate::requests::topics::lookup::INTERNAL_TOPICS;

pub async fn handle(
    (replicas, cluster): (&Arc<ReplicaManager>, &Cluster),
    limits: &Limits,
    _version: i16,
    request: CreatePartitionsRequest,
    mutations: &MutationQuota<'_>,
) -> Option<Handled> {
    let mut seen = BTreeSet::new();
    let duplicated: BTreeSet<String> = request
        .topics
        .iter()
        .map(|t| t.name.0.to_string())
        .filter(|name| !seen.insert(name.clone()))
        .collect();
    let mut results = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let name = topic.name.clone();
        let outcome = if duplicated.contains(topic.name.0.as_str()) {
            Err((
                ResponseError::InvalidRequest,
                "Duplicate topic in request.".to_string(),
            ))
        } else if !request.validate_only && mutations.refuses() {
            Err((
                ResponseError::ThrottlingQuotaExceeded,
                "The throttling quota has been exceeded.".to_string(),
            ))
        } else {
            grow((replicas, cluster), limits, topic, request.validate_only)
                .await
                .map(|added| mutations.record(added))
        };
        let result = CreatePartitionsTopicResult::default().with_name(name);
        results.push(match outcome {
            Ok(()) => result,
            Err((error, message)) => result
                .with_error_code(error.code())
                .with_error_message(Some(StrBytes::from_string(message))),
        });
    }
    let has_error = results.iter().any(|r| r.error_code != 0);
    Handled::new(
        Response::CreatePartitions(CreatePartitionsResponse::default().with_results(results)),
        has_error,
    )
}

async fn grow(
    (replicas, cluster): (&Arc<ReplicaManager>, &Cluster),
    limits: &Limits,
    topic: CreatePartitionsTopic,
    validate_only: bool,
) -> Result<usize, (ResponseError, String)> {
    let name = topic.name.0.to_string();
    let manual: Vec<Vec<i32>> = topic
        .assignments
        .iter()
        .flatten()
        .map(|a| a.broker_ids.iter().map(|b| b.0).collect())
        .collect();
    if INTERNAL_TOPICS.contains(&name.as_str()) {
        return Err((
            ResponseError::InvalidRequest,
            format!("the partition count of internal topic {name} cannot change"),
        ));
    }
    let image = cluster.image();
    let current = image.topics.get(&name).ok_or_else(|| {
        (
            ResponseError::UnknownTopicOrPartition,
            format!("topic {name} does not exist"),
        )
    })?;
    let count = i32::try_from(current.partitions.len()).unwrap_or(i32::MAX);
    chronik_metadata::check_partition_growth(count, topic.count)
        .map_err(|e| (cluster_error_code(&e), e.to_string()))?;
    let replication_factor =
        i16::try_from(current.partitions.first().map_or(1, |p| p.replicas.len())).unwrap_or(1);
    crate::requests::topics::caps::check_partition_capacity(
        cluster,
        limits,
        topic.count - count,
        replication_factor,
    )?;
    if validate_only {
        if manual.is_empty() {
            return Ok(0);
        }
        let rf = usize::try_from(replication_factor).unwrap_or(0);
        return chronik_metadata::check_added_partitions(&image, (count, topic.count), &manual, rf)
            .map(|_| 0)
            .map_err(|e| (cluster_error_code(&e), e.to_string()));
    }
    let request = CreatePartitions {
        topic: name.clone(),
        total: topic.count,
        assignments: manual,
    };
    cluster
        .create_partitions(request)
        .await
        .map_err(|e| (cluster_error_code(&e), e.to_string()))?;
    info!(topic = %name, from = count, to = topic.count, "created partitions");
    replicas.apply_latest().await;
    Ok(usize::try_from(topic.count - count).unwrap_or(0))
}
