//! SaslHandshake: picks the SASL mechanism of a connection on a SASL
//! listener (`security::sasl::session` runs the exchange and calls
//! `response`). On a PLAINTEXT or SSL listener, or where the exchange
//! does not expect it, Kafka answers ILLEGAL_SASL_STATE (`handle`).

use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SaslHandshakeRequest, SaslHandshakeResponse};

use super::Handled;

/// A SaslHandshake that reached the handlers: not a SASL listener.
pub fn handle(_version: i16, _request: SaslHandshakeRequest) -> Option<Handled> {
    let response =
        SaslHandshakeResponse::default().with_error_code(ResponseError::IllegalSaslState.code());
    Handled::new(Response::SaslHandshake(response), true)
}
