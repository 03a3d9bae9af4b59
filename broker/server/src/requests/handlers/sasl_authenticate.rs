//! SaslAuthenticate: carries one message of the SASL exchange
//! (`security::sasl::session` runs it and calls `response`). On a
//! PLAINTEXT or SSL listener Kafka answers ILLEGAL_SASL_STATE (`handle`).

use bytes::Bytes;
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use kafka_protocol::protocol::StrBytes;

use super::sasl_handshake::sasl_error_code;
use super::Handled;
use crate::security::sasl::session::AuthenticateOutcome;

/// A SaslAuthenticate that reached the handlers: not a SASL listener.
pub fn handle(_version: i16, _request: SaslAuthenticateRequest) -> Option<Handled> {
    let response = SaslAuthenticateResponse::default()
        .with_error_code(ResponseError::IllegalSaslState.code())
        .with_error_message(Some(StrBytes::from_static_str(
            "SaslAuthenticate request received on a listener without SASL",
        )));
    Handled::new(Response::SaslAuthenticate(response), true)
}

/// The response to one step of the exchange.
pub fn response(outcome: AuthenticateOutcome) -> Response {
    let response = match outcome.result {
        Ok(reply) => SaslAuthenticateResponse::default()
            .with_auth_bytes(Bytes::from(reply))
            .with_session_lifetime_ms(outcome.session_lifetime_ms),
        Err(error) => SaslAuthenticateResponse::default()
            .with_error_code(sasl_error_code(&error))
            .with_error_message(Some(StrBytes::from_string(error.to_string()))),
    };
    Response::SaslAuthenticate(response)
}
