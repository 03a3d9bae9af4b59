//! ElectLeaders (KIP-460, v0–2; `kafka-leader-election.sh`): preferred
//! elections (the first replica leads again) and unclean ones (a leaderless
//! partition takes any live replica), through the controller. Null
//! partitions means every partition, and then those that need no election
//! are left out of the answer, as Kafka does.
//!
//! Owns: the request's shape and the per-partition answer. Must not: elect
//! anything itself (`chronik_metadata`'s `reassign::elect` does).

use chronik_metadata::Cluster;
use std::collections::BTreeMap;
use std::sync::Arc;

use chronik_metadata::{ClusterError, ElectionType};
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handled;
use crate::replica::ReplicaManager;
use crate::requests::errors::cluster::cluster_error_code;

pub async fn handle(
    (replicas, cluster): (&Arc<ReplicaManager>, &Cluster),
    version: i16,
    request: ElectLeadersRequest,
) -> Option<Handled> {
    // v0 has no election type: preferred.
    let election = match (version, request.election_type) {
        (0, _) | (_, 0) => ElectionType::Preferred,
        (_, 1) => ElectionType::Unclean,
        (_, other) => {
            let response = ElectLeadersResponse::default()
                .with_error_code(ResponseError::InvalidRequest.code());
            tracing::debug!(election_type = other, "ElectLeaders: unknown election type");
            return Handled::new(Response::ElectLeaders(response), true);
        }
    };
    let all = request.topic_partitions.is_none();
    let image = cluster.image();
    let partitions: Vec<(String, i32)> = match request.topic_partitions {
        None => image
            .topics
            .values()
            .flat_map(|t| t.partitions.iter().map(|p| (t.name.clone(), p.partition)))
            .collect(),
        Some(topics) => topics
            .into_iter()
            .flat_map(|t| {
                let name = t.topic.0.to_string();
                t.partitions.into_iter().map(move |p| (name.clone(), p))
            })
            .collect(),
    };
    let outcomes: Vec<Option<ClusterError>> =
        match cluster.elect_leaders(election, partitions.clone()).await {
            Ok(outcomes) => outcomes,
            Err(e) => {
                let response =
                    ElectLeadersResponse::default().with_error_code(cluster_error_code(&e).code());
                return Handled::new(Response::ElectLeaders(response), true);
            }
        };
    replicas.apply_latest().await;
    let mut by_topic: BTreeMap<String, Vec<PartitionResult>> = BTreeMap::new();
    let mut has_error = false;
    for ((topic, partition), outcome) in partitions.into_iter().zip(outcomes) {
        if all && matches!(outcome, Some(ClusterError::ElectionNotNeeded(_))) {
            continue;
        }
        let mut result = PartitionResult::default().with_partition_id(partition);
        if let Some(e) = outcome {
            has_error = true;
            result = result
                .with_error_code(cluster_error_code(&e).code())
                .with_error_message(Some(StrBytes::from_string(e.to_string())));
        }
        by_topic.entry(topic).or_default().push(result);
    }
    let results = by_topic
        .into_iter()
        .map(|(topic, partition_result)| {
            ReplicaElectionResult::default()
                .with_topic(StrBytes::from_string(topic).into())
                .with_partition_result(partition_result)
        })
        .collect();
    Handled::new(
        Response::ElectLeaders(
            ElectLeadersResponse::default().with_replica_election_results(results),
        ),
        has_error,
    )
}
