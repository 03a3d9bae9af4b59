//! The SaslHandshake and SaslAuthenticate responses a SASL session sends,
//! and Kafka's error code of each SASL failure. Must not: decide an
//! outcome (`session` and the mechanisms do).

use bytes::Bytes;
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SaslAuthenticateResponse, SaslHandshakeResponse};
use kafka_protocol::protocol::StrBytes;

use super::session::{AuthenticateOutcome, HandshakeOutcome};
use super::SaslError;

/// The response to a handshake the SASL session ran.
pub fn handshake(outcome: HandshakeOutcome) -> Response {
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

/// The response to one step of the exchange.
pub fn authenticate(outcome: AuthenticateOutcome) -> Response {
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
