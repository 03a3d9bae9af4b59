//! InitProducerId for idempotent producers: always a fresh producer id at
//! epoch 0, as Kafka's coordinator answers a producer without a
//! transactional id (a named id is never bumped: that would let one client
//! fence another's producer). Transactional ids are refused: transactions
//! are not supported.

use std::sync::Arc;

use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use tracing::{debug, warn};

use super::Handled;
use crate::broker::Broker;

pub fn handle(
    broker: &Arc<Broker>,
    _version: i16,
    request: InitProducerIdRequest,
) -> Option<Handled> {
    let fail = |error: ResponseError| {
        Handled::new(
            Response::InitProducerId(
                InitProducerIdResponse::default()
                    .with_error_code(error.code())
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1),
            ),
            true,
        )
    };
    if request
        .transactional_id
        .as_ref()
        .is_some_and(|id| !id.0.is_empty())
    {
        warn!("InitProducerId with a transactional id refused: transactions are not supported");
        return fail(ResponseError::TransactionalIdAuthorizationFailed);
    }
    // Kafka's coordinator answers a producer without a transactional id
    // with a new id at epoch 0 whatever (producer id, epoch) it names:
    // bumping a named id's epoch would let any client fence another
    // client's producer. (The idempotent producer bumps its epoch itself,
    // KIP-360, without asking the broker.)
    let (producer_id, epoch) = match broker.producer_ids.allocate() {
        Ok(id) => (id, 0),
        Err(e) => {
            warn!(error = %e, "cannot allocate a producer id");
            return fail(ResponseError::KafkaStorageError);
        }
    };
    debug!(producer_id, epoch, "initialised producer id");
    Handled::new(
        Response::InitProducerId(
            InitProducerIdResponse::default()
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(epoch),
        ),
        false,
    )
}
