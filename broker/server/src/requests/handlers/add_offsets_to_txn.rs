//! AddOffsetsToTxn: the producer's transaction will commit offsets for a
//! group, so `__consumer_offsets`-0 (the group coordinator's partition)
//! joins the transaction and gets its marker at the end.

use std::sync::Arc;

use chronik_protocol::Response;
use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};

use super::Handled;
use crate::coordinators::groups::OFFSETS_TOPIC;
use crate::coordinators::txn::TxnCoordinator;
use crate::requests::errors::txn::{code, for_version};

const PRODUCER_FENCED_SINCE: i16 = 2;

pub async fn handle(
    txn: &Arc<TxnCoordinator>,
    version: i16,
    request: AddOffsetsToTxnRequest,
) -> Option<Handled> {
    let result = txn
        .add_partitions(
            &request.transactional_id.0,
            (request.producer_id.0, request.producer_epoch),
            &[(OFFSETS_TOPIC.to_string(), 0)],
        )
        .await
        .map_err(|e| for_version(e, version, PRODUCER_FENCED_SINCE));
    let error_code = code(&result);
    Handled::new(
        Response::AddOffsetsToTxn(AddOffsetsToTxnResponse::default().with_error_code(error_code)),
        error_code != 0,
    )
}
