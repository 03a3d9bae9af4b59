//! DescribeTransactions (kafka-transactions.sh describe): each named
//! transactional id's state as its coordinator holds it;
//! TRANSACTIONAL_ID_NOT_FOUND for an unknown id, NOT_COORDINATOR on a
//! broker that does not coordinate transactions.

use std::collections::BTreeMap;

use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId,
};
use kafka_protocol::protocol::StrBytes;

use super::Handled;
use crate::coordinators::txn::TxnCoordinator;
use crate::requests::topics::lookup::topic_name;

pub fn handle(
    txn: &TxnCoordinator,
    _version: i16,
    request: DescribeTransactionsRequest,
) -> Option<Handled> {
    let readable = txn.store.readable().err();
    let mut has_error = false;
    let states = request
        .transactional_ids
        .into_iter()
        .map(|id| {
            let found = match readable {
                Some(e) => Err(e),
                None => txn
                    .store
                    .get(&id.0)
                    .ok_or(ResponseError::TransactionalIdNotFound),
            };
            let state = TransactionState::default().with_transactional_id(id);
            match found {
                Err(e) => {
                    has_error = true;
                    state
                        .with_error_code(e.code())
                        .with_transaction_state(StrBytes::from_static_str(""))
                        .with_producer_id(ProducerId(-1))
                        .with_producer_epoch(-1)
                        .with_transaction_start_time_ms(-1)
                }
                Ok(m) => {
                    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
                    for (t, p) in &m.partitions {
                        topics.entry(t).or_default().push(*p);
                    }
                    state
                        .with_transaction_state(StrBytes::from_static_str(m.state.name()))
                        .with_transaction_timeout_ms(m.timeout_ms)
                        .with_transaction_start_time_ms(m.start_ms)
                        .with_producer_id(ProducerId(m.producer_id))
                        .with_producer_epoch(m.producer_epoch)
                        .with_topics(
                            topics
                                .into_iter()
                                .map(|(t, ps)| {
                                    TopicData::default()
                                        .with_topic(topic_name(t))
                                        .with_partitions(ps)
                                })
                                .collect(),
                        )
                }
            }
        })
        .collect();
    Handled::new(
        Response::DescribeTransactions(
            DescribeTransactionsResponse::default().with_transaction_states(states),
        ),
        has_error,
    )
}
