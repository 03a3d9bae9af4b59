//! AlterPartitionReassignments (KIP-455, v0–1; `kafka-reassign-partitions.sh
//! --execute / --cancel`): starts, replaces or cancels partition moves
//! through the controller, which applies them as `chronik_metadata`'s
//! `reassign` module describes. A move finishes on its own once the new
//! replicas have caught up and joined the ISR; ListPartitionReassignments
//! shows it until then.
//!
//! Owns: the request's checks (duplicates, v1's
//! `allow_replication_factor_change`) and its per-partition answer. Must
//! not: change the image other than through the controller.

use chronik_metadata::Cluster;
use std::collections::BTreeSet;
use std::sync::Arc;

use chronik_metadata::{ClusterError, Reassignment};
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::Handled;
use crate::replica::ReplicaManager;
use crate::requests::errors::cluster::cluster_error_code;

/// A refusal before (or instead of) the controller's answer.
type Refusal = (ResponseError, String);

pub async fn handle(
    (replicas, cluster): (&Arc<ReplicaManager>, &Cluster),
    version: i16,
    request: AlterPartitionReassignmentsRequest,
) -> Option<Handled> {
    let allow_rf_change = version < 1 || request.allow_replication_factor_change;
    let image = cluster.image();
    let mut seen = BTreeSet::new();
    // (topic, partition, refusal before proposing) in request order.
    let mut answers: Vec<(String, i32, Option<Refusal>)> = Vec::new();
    let mut proposed = Vec::new();
    for topic in &request.topics {
        let name = topic.name.0.to_string();
        for p in &topic.partitions {
            let target: Option<Vec<i32>> =
                p.replicas.as_ref().map(|r| r.iter().map(|b| b.0).collect());
            let refusal = if !seen.insert((name.clone(), p.partition_index)) {
                Some((
                    ResponseError::InvalidRequest,
                    "Duplicate partition in request.".to_string(),
                ))
            } else if target
                .as_ref()
                .is_some_and(|t| t.len() > image.brokers.len())
            {
                // Bounded here, before anything reaches the quorum's log.
                Some((
                    ResponseError::InvalidReplicaAssignment,
                    format!(
                        "{} replicas named, but only {} brokers are registered",
                        target.as_ref().map_or(0, Vec::len),
                        image.brokers.len()
                    ),
                ))
            } else {
                replication_factor_refusal(
                    &image,
                    &name,
                    p.partition_index,
                    &target,
                    allow_rf_change,
                )
            };
            if refusal.is_none() {
                proposed.push(Reassignment {
                    topic: name.clone(),
                    partition: p.partition_index,
                    target,
                });
            }
            answers.push((name.clone(), p.partition_index, refusal));
        }
    }
    let decided = if proposed.is_empty() {
        Ok(Vec::new())
    } else {
        cluster.alter_partition_reassignments(proposed).await
    };
    let mut controller_results = match decided {
        Ok(results) => results.into_iter(),
        Err(e) => {
            let error = cluster_error_code(&e);
            let response = AlterPartitionReassignmentsResponse::default()
                .with_allow_replication_factor_change(allow_rf_change)
                .with_error_code(error.code())
                .with_error_message(Some(StrBytes::from_string(e.to_string())));
            return Handled::new(Response::AlterPartitionReassignments(response), true);
        }
    };
    replicas.apply_latest().await;
    let mut topics: Vec<ReassignableTopicResponse> = Vec::new();
    let mut has_error = false;
    for (name, partition, refusal) in answers {
        let outcome: Option<Refusal> = match refusal {
            Some(refusal) => Some(refusal),
            None => controller_results
                .next()
                .flatten()
                .map(|e: ClusterError| (cluster_error_code(&e), e.to_string())),
        };
        let mut result = ReassignablePartitionResponse::default().with_partition_index(partition);
        if let Some((error, message)) = outcome {
            has_error = true;
            result = result
                .with_error_code(error.code())
                .with_error_message(Some(StrBytes::from_string(message)));
        }
        match topics.last_mut() {
            Some(t) if t.name.0.as_str() == name => t.partitions.push(result),
            _ => topics.push(
                ReassignableTopicResponse::default()
                    .with_name(StrBytes::from_string(name).into())
                    .with_partitions(vec![result]),
            ),
        }
    }
    let response = AlterPartitionReassignmentsResponse::default()
        .with_allow_replication_factor_change(allow_rf_change)
        .with_responses(topics);
    Handled::new(Response::AlterPartitionReassignments(response), has_error)
}

/// KIP-860: with `allow_replication_factor_change` false, a target of
/// another size than the original replica set is refused.
fn replication_factor_refusal(
    image: &chronik_metadata::MetadataImage,
    topic: &str,
    partition: i32,
    target: &Option<Vec<i32>>,
    allow: bool,
) -> Option<Refusal> {
    let target = target.as_ref().filter(|_| !allow)?;
    let current = image.partition(topic, partition)?.original_replicas().len();
    (current != target.len()).then(|| {
        (
            ResponseError::InvalidReplicationFactor,
            format!(
                "The replication factor is changed from {current} to {}",
                target.len()
            ),
        )
    })
}
