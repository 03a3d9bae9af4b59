//! SaslHandshake: picks the SASL mechanism of a connection on a SASL
//! listener (`security::sasl::session` runs the exchange and calls
//! `response`). On a PLAINTEXT or SSL listener, or where the exchange
//! does not expect it, Kafka answers ILLEGAL_SASL_STATE (`handle`).

use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SaslHandshakeRequest, SaslHandshakeResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handled;
use crate::security::sasl::session::HandshakeOutcome;
use crate::security::sasl::SaslError;

/// A SaslHandshake that reached the handlers: not a SASL listener.
pub fn handle(_version: i16, _request: SaslHandshakeRequest) -> Option<Handled> {
    let response =
        SaslHandshakeResponse::default().with_error_code(ResponseError::IllegalSaslState.code());
    Handled::new(Response::SaslHandshake(response), true)
}

/// The response to a handshake the SASL session ran.
pub fn response(outcome: HandshakeOutcome) -> Response {
    let error_code = outcome.error.as_ref().map_or(0, sasl_error_code);
    Response::SaslHandshake(
        SaslHandshakeResponse::default()
            .with_error_code(error_code)
            .with_mechanisms(
                outcome
                    .enabled
                    .into_iter()
                    .map(StrBytes::from_static_str)
                    .collect(),
            ),
    )
}

/// Kafka's error code of a SASL failure.
pub fn sasl_error_code(error: &SaslError) -> i16 {
    match error {
        SaslError::UnsupportedMechanism(_) => ResponseError::UnsupportedSaslMechanism.code(),
        SaslError::IllegalState(_) => ResponseError::IllegalSaslState.code(),
        SaslError::AuthenticationFailed(_) => ResponseError::SaslAuthenticationFailed.code(),
    }
}
