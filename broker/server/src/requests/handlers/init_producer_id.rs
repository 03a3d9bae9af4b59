//! InitProducerId. Without a transactional id (idempotent producers):
//! always a fresh producer id at epoch 0, as Kafka's coordinator answers (a
//! named id is never bumped: that would let one client fence another's
//! producer). With one: the transaction coordinator's answer — the id's
//! producer id with its epoch bumped (fencing the previous producer), an
//! open transaction aborted first (CONCURRENT_TRANSACTIONS until it is).

use std::sync::Arc;

use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use tracing::{debug, warn};

use super::Handled;
use crate::coordinators::producer_ids::ProducerIdAllocator;
use crate::coordinators::txn::records::MAX_TRANSACTIONAL_ID_BYTES;
use crate::coordinators::txn::TxnCoordinator;
use crate::requests::errors::txn::for_version;

/// InitProducerId answers PRODUCER_FENCED from this version on.
const PRODUCER_FENCED_SINCE: i16 = 4;

pub async fn handle(
    txn: &Arc<TxnCoordinator>,
    producer_ids: &ProducerIdAllocator,
    version: i16,
    request: InitProducerIdRequest,
) -> Option<Handled> {
    let result = match request
        .transactional_id
        .as_ref()
        .filter(|id| !id.0.is_empty())
    {
        // Stored with a 16-bit length, as Kafka stores it: a longer id
        // could not be told apart from another with the same prefix.
        Some(id) if id.0.len() > MAX_TRANSACTIONAL_ID_BYTES => Err(ResponseError::InvalidRequest),
        Some(id) => {
            let expected = (request.producer_id.0 >= 0)
                .then_some((request.producer_id.0, request.producer_epoch));
            txn.init_producer_id(&id.0, request.transaction_timeout_ms, expected)
                .await
                .map_err(|e| for_version(e, version, PRODUCER_FENCED_SINCE))
        }
        // Kafka's coordinator answers a producer without a transactional id
        // with a new id at epoch 0 whatever (producer id, epoch) it names:
        // bumping a named id's epoch would let any client fence another
        // client's producer. (The idempotent producer bumps its epoch
        // itself, KIP-360, without asking the broker.)
        None => producer_ids.allocate().map(|id| (id, 0)).map_err(|e| {
            warn!(error = %e, "cannot allocate a producer id");
            ResponseError::KafkaStorageError
        }),
    };
    let response = match result {
        Ok((producer_id, epoch)) => {
            debug!(producer_id, epoch, "initialised producer id");
            InitProducerIdResponse::default()
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(epoch)
        }
        Err(error) => InitProducerIdResponse::default()
            .with_error_code(error.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    };
    let has_error = response.error_code != 0;
    Handled::new(Response::InitProducerId(response), has_error)
}
