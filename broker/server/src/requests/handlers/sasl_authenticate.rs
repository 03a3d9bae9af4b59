//! SaslAuthenticate: carries one message of the SASL exchange
//! (`security::sasl::session` runs it and calls `response`). On a
//! PLAINTEXT or SSL listener Kafka answers ILLEGAL_SASL_STATE (`handle`).

use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handled;

/// A SaslAuthenticate that reached the handlers: not a SASL listener.
pub fn handle(_version: i16, _request: SaslAuthenticateRequest) -> Option<Handled> {
    let response = SaslAuthenticateResponse::default()
        .with_error_code(ResponseError::IllegalSaslState.code())
        .with_error_message(Some(StrBytes::from_static_str(
            "SaslAuthenticate request received on a listener without SASL",
        )));
    Handled::new(Response::SaslAuthenticate(response), true)
}
