//! EndTxn: commit or abort the producer's open transaction. Answered once
//! the decision (PrepareCommit / PrepareAbort) is durable in
//! `__transaction_state`; the coordinator then writes the markers, and
//! until they are written the next transaction's AddPartitionsToTxn gets
//! CONCURRENT_TRANSACTIONS.

use std::sync::Arc;

use chronik_protocol::Response;
use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse};

use super::Handled;
use crate::coordinators::txn::TxnCoordinator;
use crate::requests::errors::txn::{code, for_version};

const PRODUCER_FENCED_SINCE: i16 = 2;

pub async fn handle(
    txn: &Arc<TxnCoordinator>,
    version: i16,
    request: EndTxnRequest,
) -> Option<Handled> {
    let result = txn
        .end_txn(
            &request.transactional_id.0,
            (request.producer_id.0, request.producer_epoch),
            request.committed,
        )
        .await
        .map_err(|e| for_version(e, version, PRODUCER_FENCED_SINCE));
    let error_code = code(&result);
    Handled::new(
        Response::EndTxn(EndTxnResponse::default().with_error_code(error_code)),
        error_code != 0,
    )
}
