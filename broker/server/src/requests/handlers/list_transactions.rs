//! ListTransactions (kafka-transactions.sh list): the transactional ids
//! this broker coordinates, filtered by state names, producer ids and (v1)
//! how long their transaction has been open. An unknown state name is
//! listed back in unknown_state_filters, as Kafka does. A broker that does
//! not coordinate transactions lists none.

use chronik_coordinator_state::txn::TxnState;
use chronik_protocol::Response;
use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use super::Handled;
use crate::coordinators::groups::offset_store::now_ms;
use crate::coordinators::txn::TxnCoordinator;

pub fn handle(
    txn: &TxnCoordinator,
    _version: i16,
    request: ListTransactionsRequest,
) -> Option<Handled> {
    let (states, unknown): (Vec<_>, Vec<_>) = request
        .state_filters
        .iter()
        .map(|name| (TxnState::from_name(name), name.clone()))
        .partition(|(state, _)| state.is_some());
    let states: Vec<TxnState> = states.into_iter().filter_map(|(s, _)| s).collect();
    let now = now_ms();
    let listed = if txn.store.readable().is_ok() {
        txn.store.all()
    } else {
        Vec::new()
    };
    let transaction_states = listed
        .into_iter()
        .filter(|(_, m)| states.is_empty() || states.contains(&m.state))
        .filter(|(_, m)| {
            request.producer_id_filters.is_empty()
                || request
                    .producer_id_filters
                    .contains(&ProducerId(m.producer_id))
        })
        .filter(|(_, m)| {
            request.duration_filter < 0
                || (m.start_ms >= 0 && now.saturating_sub(m.start_ms) >= request.duration_filter)
        })
        .map(|(id, m)| {
            TransactionState::default()
                .with_transactional_id(TransactionalId(StrBytes::from_string(id)))
                .with_producer_id(ProducerId(m.producer_id))
                .with_transaction_state(StrBytes::from_static_str(m.state.name()))
        })
        .collect();
    Handled::new(
        Response::ListTransactions(
            ListTransactionsResponse::default()
                .with_unknown_state_filters(unknown.into_iter().map(|(_, n)| n).collect())
                .with_transaction_states(transaction_states),
        ),
        false,
    )
}
