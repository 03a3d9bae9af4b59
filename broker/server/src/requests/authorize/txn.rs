//! The transaction APIs: WRITE on the transactional id for InitProducerId,
//! AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and TxnOffsetCommit
//! (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer's
//! InitProducerId needs IDEMPOTENT_WRITE on the cluster or WRITE on some
//! topic (CLUSTER_AUTHORIZATION_FAILED); AddOffsetsToTxn and TxnOffsetCommit
//! also READ on the group (GROUP_AUTHORIZATION_FAILED); DESCRIBE on the id
//! to describe or list a transaction, and a described transaction shows
//! only the topics the caller may DESCRIBE. AddPartitionsToTxn v4+ from brokers
//! (verification) and WriteTxnMarkers need CLUSTER_ACTION (else
//! CLUSTER_AUTHORIZATION_FAILED; the handlers also check the sender's
//! registered address). AddPartitionsToTxn v0–3 also needs WRITE on every
//! topic it adds, and never takes an internal one: if any is refused,
//! nothing is added (Kafka's rule):
//! TOPIC_AUTHORIZATION_FAILED for those, OPERATION_NOT_ATTEMPTED for the rest.
//! TxnOffsetCommit also needs READ on each topic: a refused topic answers
//! TOPIC_AUTHORIZATION_FAILED and the others are committed (Kafka's rule).

use chronik_metadata::acl::operation;
use chronik_protocol::{Request, Response};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestTopic;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnResponse, AddPartitionsToTxnResponse, EndTxnResponse, InitProducerIdResponse,
    TxnOffsetCommitResponse, WriteTxnMarkersResponse,
};

use super::{split, Admission, After, Gate, Routed};
use crate::requests::refusals::{refused_to_clients, topic_results};

const TXN_DENIED: ResponseError = ResponseError::TransactionalIdAuthorizationFailed;

pub enum Denied {
    /// DescribeTransactions / ListTransactions answers to filter.
    Describe,
    /// TxnOffsetCommit topics without READ, answered next to the others'.
    TxnOffsetCommit(Vec<TxnOffsetCommitRequestTopic>),
}

/// TxnOffsetCommit's answer `code` for every partition of `topics`.
fn txn_commit_errors(
    topics: &[TxnOffsetCommitRequestTopic],
    code: i16,
) -> Vec<TxnOffsetCommitResponseTopic> {
    topics
        .iter()
        .map(|t| {
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            TxnOffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect()
}

/// AddOffsetsToTxn and TxnOffsetCommit need WRITE on the transactional id
/// (`code`, its refusal) and READ on the group (GROUP_AUTHORIZATION_FAILED).
fn txn_and_group_denied(
    gate: &Gate<'_>,
    code: i16,
    transactional_id: &str,
    group: &str,
) -> Option<i16> {
    if !gate.transactional_id(operation::WRITE, transactional_id) {
        Some(code)
    } else if !gate.group(operation::READ, group) {
        Some(ResponseError::GroupAuthorizationFailed.code())
    } else {
        None
    }
}

fn refused(response: Response) -> Routed {
    Routed::Governed(Admission::Refused(response))
}

/// Kafka 2.8+: an idempotent producer needs IDEMPOTENT_WRITE on the cluster
/// or WRITE on any topic.
fn may_write_idempotently(gate: &Gate<'_>) -> bool {
    gate.cluster(operation::IDEMPOTENT_WRITE)
        || gate
            .cluster
            .image()
            .topics
            .keys()
            .any(|t| gate.topic(operation::WRITE, t))
}

/// A client may add `topic` to its transaction: WRITE on it, and never an
/// internal topic (the handler refuses those also without an authorizer).
fn may_add_to_txn(gate: &Gate<'_>, topic: &str) -> bool {
    !refused_to_clients(topic) && gate.topic(operation::WRITE, topic)
}

pub fn admit(gate: &Gate<'_>, version: i16, request: Request) -> Routed {
    let code = TXN_DENIED.code();
    match request {
        Request::InitProducerId(r) => {
            let denied = match &r.transactional_id {
                Some(id) if !gate.transactional_id(operation::WRITE, &id.0) => Some(code),
                None if !may_write_idempotently(gate) => {
                    Some(ResponseError::ClusterAuthorizationFailed.code())
                }
                _ => None,
            };
            match denied {
                Some(code) => refused(Response::InitProducerId(
                    InitProducerIdResponse::default()
                        .with_error_code(code)
                        .with_producer_id((-1).into())
                        .with_producer_epoch(-1),
                )),
                None => Routed::Governed(Admission::Admitted(
                    Request::InitProducerId(r),
                    After::Nothing,
                )),
            }
        }
        Request::AddPartitionsToTxn(r) if version >= 4 => {
            if gate.cluster(operation::CLUSTER_ACTION) {
                Routed::Governed(Admission::Admitted(
                    Request::AddPartitionsToTxn(r),
                    After::Nothing,
                ))
            } else {
                refused(Response::AddPartitionsToTxn(
                    AddPartitionsToTxnResponse::default()
                        .with_error_code(ResponseError::ClusterAuthorizationFailed.code()),
                ))
            }
        }
        Request::AddPartitionsToTxn(r)
            if !gate.transactional_id(operation::WRITE, &r.v3_and_below_transactional_id.0) =>
        {
            let results = topic_results(&r.v3_and_below_topics, || code);
            refused(Response::AddPartitionsToTxn(
                AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results),
            ))
        }
        Request::AddPartitionsToTxn(r)
            if r.v3_and_below_topics
                .iter()
                .any(|t| !may_add_to_txn(gate, &t.name.0)) =>
        {
            let results = r
                .v3_and_below_topics
                .iter()
                .flat_map(|t| {
                    let code = if may_add_to_txn(gate, &t.name.0) {
                        ResponseError::OperationNotAttempted.code()
                    } else {
                        ResponseError::TopicAuthorizationFailed.code()
                    };
                    topic_results(std::slice::from_ref(t), || code)
                })
                .collect();
            refused(Response::AddPartitionsToTxn(
                AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results),
            ))
        }
        Request::WriteTxnMarkers(r) => {
            if gate.cluster(operation::CLUSTER_ACTION) {
                return Routed::Governed(Admission::Admitted(
                    Request::WriteTxnMarkers(r),
                    After::Nothing,
                ));
            }
            let denied = ResponseError::ClusterAuthorizationFailed.code();
            let markers = r
                .markers
                .into_iter()
                .map(|m| {
                    WritableTxnMarkerResult::default()
                        .with_producer_id(m.producer_id)
                        .with_topics(
                            m.topics
                                .into_iter()
                                .map(|t| {
                                    WritableTxnMarkerTopicResult::default()
                                        .with_name(t.name)
                                        .with_partitions(
                                            t.partition_indexes
                                                .into_iter()
                                                .map(|p| {
                                                    WritableTxnMarkerPartitionResult::default()
                                                        .with_partition_index(p)
                                                        .with_error_code(denied)
                                                })
                                                .collect(),
                                        )
                                })
                                .collect(),
                        )
                })
                .collect();
            refused(Response::WriteTxnMarkers(
                WriteTxnMarkersResponse::default().with_markers(markers),
            ))
        }
        Request::AddOffsetsToTxn(r) => {
            let denied = txn_and_group_denied(gate, code, &r.transactional_id.0, &r.group_id.0);
            match denied {
                Some(code) => refused(Response::AddOffsetsToTxn(
                    AddOffsetsToTxnResponse::default().with_error_code(code),
                )),
                None => Routed::Governed(Admission::Admitted(
                    Request::AddOffsetsToTxn(r),
                    After::Nothing,
                )),
            }
        }
        Request::EndTxn(r) if !gate.transactional_id(operation::WRITE, &r.transactional_id.0) => {
            refused(Response::EndTxn(
                EndTxnResponse::default()
                    .with_error_code(code)
                    .with_producer_id((-1).into())
                    .with_producer_epoch(-1),
            ))
        }
        Request::TxnOffsetCommit(mut r) => {
            let denied = txn_and_group_denied(gate, code, &r.transactional_id.0, &r.group_id.0);
            if let Some(code) = denied {
                return refused(Response::TxnOffsetCommit(
                    TxnOffsetCommitResponse::default()
                        .with_topics(txn_commit_errors(&r.topics, code)),
                ));
            }
            // topics without READ are refused, the others committed (Kafka's rule)
            let (ok, refused_topics) = split(std::mem::take(&mut r.topics), |t| {
                gate.topic(operation::READ, &t.name.0)
            });
            r.topics = ok;
            Routed::Governed(Admission::Admitted(
                Request::TxnOffsetCommit(r),
                After::Txn(Denied::TxnOffsetCommit(refused_topics)),
            ))
        }
        r @ (Request::DescribeTransactions(_) | Request::ListTransactions(_)) => {
            Routed::Governed(Admission::Admitted(r, After::Txn(Denied::Describe)))
        }
        r @ (Request::AddPartitionsToTxn(_) | Request::EndTxn(_)) => {
            Routed::Governed(Admission::Admitted(r, After::Nothing))
        }
        other => Routed::NotMine(other),
    }
}

impl Denied {
    pub fn apply(self, gate: &Gate<'_>, response: &mut Response) -> bool {
        let describe = |id: &str| gate.transactional_id(operation::DESCRIBE, id);
        match (self, response) {
            (Denied::Describe, Response::DescribeTransactions(resp)) => {
                let mut any = false;
                for t in resp
                    .transaction_states
                    .iter_mut()
                    .filter(|t| !describe(&t.transactional_id.0))
                {
                    *t = kafka_protocol::messages::describe_transactions_response::TransactionState::default()
                        .with_transactional_id(t.transactional_id.clone())
                        .with_error_code(TXN_DENIED.code());
                    any = true;
                }
                // a described transaction shows only the topics the caller
                // may describe (Kafka's rule); leaving one out is no error
                for t in &mut resp.transaction_states {
                    t.topics
                        .retain(|topic| gate.topic(operation::DESCRIBE, &topic.topic.0));
                }
                any
            }
            (Denied::TxnOffsetCommit(refused), Response::TxnOffsetCommit(resp)) => {
                let any = !refused.is_empty();
                resp.topics.extend(txn_commit_errors(
                    &refused,
                    ResponseError::TopicAuthorizationFailed.code(),
                ));
                any
            }
            (Denied::Describe, Response::ListTransactions(resp)) => {
                resp.transaction_states
                    .retain(|t| describe(&t.transactional_id.0));
                false
            }
            _ => false,
        }
    }
}
