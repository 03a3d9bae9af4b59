//! InitProducerId for idempotent producers: a fresh producer id at epoch 0,
//! or (KIP-360) the same id with its epoch bumped when the client presents
//! its current one. Transactional ids are refused: transactions are not
//! supported.

use std::sync::Arc;

use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use tracing::{debug, warn};

use super::Handled;
use crate::broker::Broker;

pub fn handle(broker: &Arc<Broker>, _version: i16, request: InitProducerIdRequest) -> Option<Handled> {
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
    if request.transactional_id.as_ref().is_some_and(|id| !id.0.is_empty()) {
        warn!("InitProducerId with a transactional id refused: transactions are not supported");
        return fail(ResponseError::TransactionalIdAuthorizationFailed);
    }
    let (producer_id, epoch) = if request.producer_id.0 >= 0 && request.producer_epoch >= 0 && request.producer_epoch < i16::MAX - 1 {
        (request.producer_id.0, request.producer_epoch + 1)
    } else {
        match broker.producer_ids.allocate() {
            Ok(id) => (id, 0),
            Err(e) => {
                warn!(error = %e, "cannot allocate a producer id");
                return fail(ResponseError::KafkaStorageError);
            }
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
