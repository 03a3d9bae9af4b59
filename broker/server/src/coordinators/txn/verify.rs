//! KIP-890's server-side defence: before a partition leader appends the
//! first transactional batch of a producer's transaction, it asks the
//! transaction coordinator whether that partition was added to the
//! producer's open transaction (AddPartitionsToTxn v4 with verify_only), so
//! a late or hanging batch from an ended transaction can never open a new
//! one that nobody will end (which would hold the last stable offset back
//! for good). Later batches of the same open transaction need no check.
//!
//! Owns: that question, asked locally when this broker is the coordinator,
//! else over a broker-to-broker connection to the coordinator, connecting
//! and waiting only until the Produce's deadline (the write path's). Must
//! not: decide the answer (the coordinator's state does).

use chronik_metadata::Cluster;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, ProducerId, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;
use tracing::debug;

use super::TxnCoordinator;
use super::TXN_TOPIC;
use crate::replica::leader_client::LeaderClient;
use crate::replica::ReplicaManager;

/// The first AddPartitionsToTxn version with verify_only.
const VERIFY_VERSION: i16 = 4;

/// Ok when `topic`-`partition` is in the open transaction of
/// `transactional_id` held by (producer id, epoch); else the error the
/// Produce answers for that partition. Waits no later than `deadline`.
pub async fn verify_transaction(
    (replicas, cluster): (&ReplicaManager, &Cluster),
    txn: &TxnCoordinator,
    transactional_id: &str,
    producer: (i64, i16),
    (topic, partition): (&str, i32),
    deadline: Instant,
) -> Result<(), ResponseError> {
    let tp = (topic.to_string(), partition);
    let coordinator = cluster
        .image()
        .partition(TXN_TOPIC, 0)
        .map_or(-1, |p| p.leader);
    if coordinator == replicas.node_id() {
        return txn
            .verify_partition(transactional_id, producer, &tp)
            .map_err(verification_error);
    }
    if coordinator < 0 {
        return Err(ResponseError::NotEnoughReplicas);
    }
    let request = AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(
                transactional_id.to_string(),
            )))
            .with_producer_id(ProducerId(producer.0))
            .with_producer_epoch(producer.1)
            .with_verify_only(true)
            .with_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(vec![partition])]),
    ]);
    let client_id = format!("chronik-txn-verify-{}", replicas.node_id());
    let left = || deadline.saturating_duration_since(Instant::now());
    let answer = async {
        let mut client =
            LeaderClient::connect_to_broker(replicas, coordinator, client_id, left()).await?;
        client.send(&request, VERIFY_VERSION, left()).await
    }
    .await;
    let response = answer.map_err(|e| {
        if Instant::now() >= deadline {
            return ResponseError::RequestTimedOut;
        }
        debug!(coordinator, error = %e, "transaction verification failed");
        ResponseError::NotEnoughReplicas
    })?;
    let code = response
        .results_by_transaction
        .iter()
        .flat_map(|t| &t.topic_results)
        .flat_map(|t| &t.results_by_partition)
        .map(|p| p.partition_error_code)
        .next()
        .unwrap_or(ResponseError::UnknownServerError.code());
    match code {
        0 => Ok(()),
        c => Err(verification_error(
            ResponseError::try_from_code(c).unwrap_or(ResponseError::UnknownServerError),
        )),
    }
}

/// What the Produce answers: a coordinator that cannot answer now is
/// retriable for the producer (NOT_ENOUGH_REPLICAS, as Kafka maps it);
/// anything else means the partition is not in an open transaction of
/// this producer.
fn verification_error(e: ResponseError) -> ResponseError {
    match e {
        ResponseError::NotCoordinator
        | ResponseError::CoordinatorLoadInProgress
        | ResponseError::CoordinatorNotAvailable
        | ResponseError::ConcurrentTransactions => ResponseError::NotEnoughReplicas,
        ResponseError::ProducerFenced | ResponseError::InvalidProducerEpoch => {
            ResponseError::InvalidProducerEpoch
        }
        _ => ResponseError::InvalidTxnState,
    }
}
