//! AddPartitionsToTxn: a producer names the partitions its open transaction
//! writes to (v0-3, clients), or a partition leader asks whether a
//! partition is in a producer's transaction (v4+, `verify_only`, KIP-890;
//! v4+ also batches several transactions). Partitions unknown to the
//! cluster fail the request for that transaction with
//! UNKNOWN_TOPIC_OR_PARTITION, the others get OPERATION_NOT_ATTEMPTED, and
//! nothing is added.

use std::sync::Arc;

use chronik_coordinator::txn::TopicPartition;
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};

use super::txn_errors::{for_version, partition_exists};
use super::Handled;
use crate::broker::Broker;

const PRODUCER_FENCED_SINCE: i16 = 2;

pub async fn handle(
    broker: &Arc<Broker>,
    version: i16,
    request: AddPartitionsToTxnRequest,
) -> Option<Handled> {
    let mut has_error = false;
    let mut response = AddPartitionsToTxnResponse::default();
    if version <= 3 {
        let results = one_transaction(
            broker,
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
                broker,
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
    broker: &Arc<Broker>,
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
    let unknown = |(t, p): &TopicPartition| !partition_exists(broker, t, *p);
    // Per partition: its error (None = success).
    let errors: Vec<Option<ResponseError>> = if partitions.iter().any(unknown) {
        partitions
            .iter()
            .map(|tp| {
                Some(if unknown(tp) {
                    ResponseError::UnknownTopicOrPartition
                } else {
                    ResponseError::OperationNotAttempted
                })
            })
            .collect()
    } else if verify_only {
        partitions
            .iter()
            .map(|tp| {
                broker
                    .txn
                    .verify_partition(broker, transactional_id, producer, tp)
                    .err()
            })
            .collect()
    } else {
        let result = broker
            .txn
            .add_partitions(broker, transactional_id, producer, &partitions)
            .await
            .err()
            .map(|e| for_version(e, version, PRODUCER_FENCED_SINCE));
        vec![result; partitions.len()]
    };
    let mut errors = errors.into_iter();
    topic_results(topics, || errors.next().flatten().map_or(0, |e| e.code()))
}

/// The per-partition results of `topics`, each partition's error code
/// from `code` in request order; also the ACL gate's answer for a refused
/// transactional id.
pub(crate) fn topic_results(
    topics: &[AddPartitionsToTxnTopic],
    mut code: impl FnMut() -> i16,
) -> Vec<AddPartitionsToTxnTopicResult> {
    topics
        .iter()
        .map(|t| {
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.name.clone())
                .with_results_by_partition(
                    t.partitions
                        .iter()
                        .map(|p| {
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(*p)
                                .with_partition_error_code(code())
                        })
                        .collect(),
                )
        })
        .collect()
}
