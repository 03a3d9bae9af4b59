//! AddPartitionsToTxn: a producer names the partitions its open transaction
//! writes to (v0-3, clients), or a partition leader asks whether a
//! partition is in a producer's transaction (v4+, `verify_only`, KIP-890;
//! v4+ also batches several transactions). Partitions unknown to the
//! cluster fail the request for that transaction with
//! UNKNOWN_TOPIC_OR_PARTITION, and a client's (v0-3) internal topic with
//! TOPIC_AUTHORIZATION_FAILED, whether or not an authorizer is configured
//! (Kafka's handleAddPartitionsToTxnRequest filters them out before it asks
//! the authorizer); the others get OPERATION_NOT_ATTEMPTED, and nothing is
//! added.

use chronik_metadata::Cluster;
use std::sync::Arc;

use chronik_coordinator_state::txn::TopicPartition;
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};

use super::Handled;
use crate::coordinators::txn::TxnCoordinator;
use crate::requests::errors::txn::{for_version, partition_exists};
use crate::requests::refusals::{refused_to_clients, topic_results};

const PRODUCER_FENCED_SINCE: i16 = 2;

pub async fn handle(
    cluster: &Cluster,
    txn: &Arc<TxnCoordinator>,
    version: i16,
    request: AddPartitionsToTxnRequest,
) -> Option<Handled> {
    let mut has_error = false;
    let mut response = AddPartitionsToTxnResponse::default();
    if version <= 3 {
        let results = one_transaction(
            cluster,
            txn,
            version,
            &request.v3_and_below_transactional_id.0,
            (
                request.v3_and_below_producer_id.0,
                request.v3_and_below_producer_epoch,
            ),
            &request.v3_and_below_topics,
            false,
        )
        .await;
        has_error = any_error(&results);
        response = response.with_results_by_topic_v3_and_below(results);
    } else {
        let mut by_transaction = Vec::new();
        for t in &request.transactions {
            let results = one_transaction(
                cluster,
                txn,
                version,
                &t.transactional_id.0,
                (t.producer_id.0, t.producer_epoch),
                &t.topics,
                t.verify_only,
            )
            .await;
            has_error |= any_error(&results);
            by_transaction.push(
                AddPartitionsToTxnResult::default()
                    .with_transactional_id(t.transactional_id.clone())
                    .with_topic_results(results),
            );
        }
        response = response.with_results_by_transaction(by_transaction);
    }
    Handled::new(Response::AddPartitionsToTxn(response), has_error)
}

fn any_error(results: &[AddPartitionsToTxnTopicResult]) -> bool {
    results
        .iter()
        .flat_map(|t| &t.results_by_partition)
        .any(|p| p.partition_error_code != 0)
}

async fn one_transaction(
    cluster: &Cluster,
    txn: &Arc<TxnCoordinator>,
    version: i16,
    transactional_id: &str,
    producer: (i64, i16),
    topics: &[AddPartitionsToTxnTopic],
    verify_only: bool,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let partitions: Vec<TopicPartition> = topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.name.0.to_string(), *p)))
        .collect();
    // Per partition: why it cannot be added at all, if it cannot.
    let refusals: Vec<Option<ResponseError>> = partitions
        .iter()
        .map(|(t, p)| {
            if version <= 3 && refused_to_clients(t) {
                Some(ResponseError::TopicAuthorizationFailed)
            } else if !partition_exists(cluster, t, *p) {
                Some(ResponseError::UnknownTopicOrPartition)
            } else {
                None
            }
        })
        .collect();
    // Per partition: its error (None = success).
    let errors: Vec<Option<ResponseError>> = if refusals.iter().any(Option::is_some) {
        refusals
            .into_iter()
            .map(|r| Some(r.unwrap_or(ResponseError::OperationNotAttempted)))
            .collect()
    } else if verify_only {
        partitions
            .iter()
            .map(|tp| txn.verify_partition(transactional_id, producer, tp).err())
            .collect()
    } else {
        let result = txn
            .add_partitions(transactional_id, producer, &partitions)
            .await
            .err()
            .map(|e| for_version(e, version, PRODUCER_FENCED_SINCE));
        vec![result; partitions.len()]
    };
    let mut errors = errors.into_iter();
    topic_results(topics, || errors.next().flatten().map_or(0, |e| e.code()))
}
