//! The one HTTP error type, and how Kafka error codes become HTTP statuses.
//!
//! Every error response is JSON `{"error": <stable code>, "detail": <text>, ...}`
//! with extra fields where they help (position, index, counts). Client errors
//! are returned, not logged; internal errors are logged, not leaked.
//! Must not: decide what to retry; it only describes.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use rdkafka::error::RDKafkaErrorCode;
use serde_json::{json, Map, Value};

use crate::message::{InvalidMessage, ParseError, ParseErrorKind};
use crate::topics::TopicError;

/// Seconds a client should wait before retrying after a 503.
pub const RETRY_AFTER_SECS: &str = "1";

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("{}", .0.detail)]
    Parse(ParseError),
    #[error("{}", .0.detail)]
    InvalidMessage(InvalidMessage),
    #[error("expected Content-Type application/json, got {0}")]
    UnsupportedMediaType(String),
    #[error("request body is larger than the limit of {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error("could not read the request body: {0}")]
    BodyRead(String),
    #[error("the request body did not arrive within {0:?} of its headers")]
    BodyTimeout(std::time::Duration),
    #[error("the batch is empty")]
    EmptyBatch,
    #[error("message {index}: {source}")]
    Topic { index: usize, source: TopicError },
    #[error("message {index}: partition {partition} of topic {topic:?} does not exist (it has {partitions})")]
    UnknownPartition {
        index: usize,
        topic: String,
        partition: i32,
        partitions: i32,
    },
    #[error("the local producer queue is full: {accepted} of {total} messages accepted, {rejected} rejected (resend from index {resend_from})")]
    QueueFull {
        accepted: usize,
        rejected: usize,
        total: usize,
        resend_from: usize,
    },
    #[error("the ingestor is shutting down")]
    ShuttingDown,
    #[error("missing or wrong bearer token (Authorization: Bearer <token>)")]
    Unauthorized,
    #[error("{0}")]
    BrokerUnavailable(String),
    /// A single message's delivery failed.
    #[error("{code}")]
    Delivery { code: RDKafkaErrorCode },
    #[error("internal error")]
    Internal(#[from] anyhow::Error),
}

impl AppError {
    pub fn status(&self) -> StatusCode {
        match self {
            AppError::Parse(p) if p.kind == ParseErrorKind::Data && p.index.is_some() => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            AppError::Parse(_) | AppError::EmptyBatch | AppError::BodyRead(_) => {
                StatusCode::BAD_REQUEST
            }
            AppError::InvalidMessage(_) => StatusCode::UNPROCESSABLE_ENTITY,
            AppError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            AppError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            AppError::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            AppError::Topic {
                source: TopicError::Unknown { .. },
                ..
            }
            | AppError::UnknownPartition { .. } => StatusCode::NOT_FOUND,
            AppError::Topic {
                source: TopicError::Unavailable { .. },
                ..
            } => StatusCode::SERVICE_UNAVAILABLE,
            AppError::Topic {
                source: TopicError::Refused { .. },
                ..
            } => StatusCode::BAD_GATEWAY,
            AppError::QueueFull { .. }
            | AppError::ShuttingDown
            | AppError::BrokerUnavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            AppError::Delivery { code } => status_for(*code),
            AppError::Unauthorized => StatusCode::UNAUTHORIZED,
            AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The stable machine-readable `error` field.
    pub fn code(&self) -> &'static str {
        match self {
            AppError::Parse(p) if p.kind == ParseErrorKind::Syntax => "malformed_json",
            AppError::Parse(p) if p.index.is_some() => "invalid_message",
            AppError::Parse(_) => "invalid_body",
            AppError::InvalidMessage(_) => "invalid_message",
            AppError::UnsupportedMediaType(_) => "unsupported_media_type",
            AppError::PayloadTooLarge { .. } => "payload_too_large",
            AppError::BodyRead(_) => "body_read_failed",
            AppError::BodyTimeout(_) => "body_timeout",
            AppError::EmptyBatch => "empty_batch",
            AppError::Topic {
                source: TopicError::Unknown { .. },
                ..
            } => "unknown_topic",
            AppError::Topic {
                source: TopicError::Unavailable { .. },
                ..
            } => "broker_unavailable",
            AppError::Topic {
                source: TopicError::Refused { .. },
                ..
            } => "topic_refused",
            AppError::UnknownPartition { .. } => "unknown_partition",
            AppError::QueueFull { .. } => "queue_full",
            AppError::ShuttingDown => "shutting_down",
            AppError::BrokerUnavailable(_) => "broker_unavailable",
            AppError::Delivery { .. } => "delivery_failed",
            AppError::Unauthorized => "unauthorized",
            AppError::Internal(_) => "internal",
        }
    }

    fn extra(&self, body: &mut Map<String, Value>) {
        match self {
            AppError::Parse(p) => {
                body.insert("line".into(), json!(p.line));
                body.insert("column".into(), json!(p.column));
                if let Some(i) = p.index {
                    body.insert("index".into(), json!(i));
                }
            }
            AppError::InvalidMessage(m) => {
                body.insert("index".into(), json!(m.index));
            }
            AppError::PayloadTooLarge { limit } => {
                body.insert("limit_bytes".into(), json!(limit));
            }
            AppError::Topic { index, source } => {
                body.insert("index".into(), json!(index));
                let (TopicError::Unknown { topic, kafka_error }
                | TopicError::Unavailable { topic, kafka_error }
                | TopicError::Refused { topic, kafka_error }) = source;
                body.insert("topic".into(), json!(topic));
                body.insert("kafka_error".into(), json!(kafka_error));
            }
            AppError::UnknownPartition {
                index,
                topic,
                partition,
                partitions,
            } => {
                body.insert("index".into(), json!(index));
                body.insert("topic".into(), json!(topic));
                body.insert("partition".into(), json!(partition));
                body.insert("partitions".into(), json!(partitions));
                body.insert(
                    "kafka_error".into(),
                    json!(kafka_error_name(RDKafkaErrorCode::UnknownPartition)),
                );
            }
            AppError::QueueFull {
                accepted,
                rejected,
                resend_from,
                ..
            } => {
                body.insert("accepted".into(), json!(accepted));
                body.insert("rejected".into(), json!(rejected));
                body.insert("resend_from".into(), json!(resend_from));
            }
            AppError::Delivery { code } => {
                body.insert("kafka_error".into(), json!(kafka_error_name(*code)));
                body.insert("retriable".into(), json!(is_retriable(*code)));
            }
            _ => {}
        }
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let status = self.status();
        let detail = match &self {
            AppError::Internal(e) => {
                tracing::error!(error = format!("{e:#}"), "internal error");
                "internal error (logged)".to_owned()
            }
            other => other.to_string(),
        };
        let mut body = Map::new();
        body.insert("error".into(), json!(self.code()));
        body.insert("detail".into(), json!(detail));
        self.extra(&mut body);
        json_response(status, Value::Object(body))
    }
}

/// A JSON response, with `Retry-After` on 503 and `WWW-Authenticate` on 401.
pub fn json_response(status: StatusCode, body: Value) -> Response {
    let mut response = (status, Json(body)).into_response();
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"chronik-ingestor\""),
        );
    }
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from_static(RETRY_AFTER_SECS),
        );
    }
    response
}

/// `MessageTimedOut (Local: Message timed out)`.
pub fn kafka_error_name(code: RDKafkaErrorCode) -> String {
    format!("{code:?}")
}

/// Whether sending the same message again may succeed without changing it.
pub fn is_retriable(code: RDKafkaErrorCode) -> bool {
    use RDKafkaErrorCode as C;
    matches!(
        code,
        C::MessageTimedOut
            | C::QueueFull
            | C::BrokerTransportFailure
            | C::AllBrokersDown
            | C::OperationTimedOut
            | C::TimedOutQueue
            | C::RequestTimedOut
            | C::NotLeaderForPartition
            | C::LeaderNotAvailable
            | C::BrokerNotAvailable
            | C::ReplicaNotAvailable
            | C::NotEnoughReplicas
            | C::NotEnoughReplicasAfterAppend
            | C::NetworkException
            | C::KafkaStorageError
            | C::PurgeQueue
            | C::PurgeInflight
            | C::BrokerDestroy
            | C::DestroyBroker
            | C::ThrottlingQuotaExceeded
            | C::FencedLeaderEpoch
            | C::UnknownLeaderEpoch
            | C::Retry
    )
}

/// The HTTP status that best describes a Kafka error for one message.
pub fn status_for(code: RDKafkaErrorCode) -> StatusCode {
    use RDKafkaErrorCode as C;
    match code {
        C::UnknownTopicOrPartition | C::UnknownTopic | C::UnknownPartition => StatusCode::NOT_FOUND,
        C::MessageSizeTooLarge | C::InvalidMessageSize | C::MessageBatchTooLarge => {
            StatusCode::PAYLOAD_TOO_LARGE
        }
        C::InvalidMessage
        | C::InvalidRecord
        | C::InvalidTopic
        | C::InvalidTimestamp
        | C::BadMessage => StatusCode::UNPROCESSABLE_ENTITY,
        C::TopicAuthorizationFailed
        | C::ClusterAuthorizationFailed
        | C::TransactionalIdAuthorizationFailed => StatusCode::FORBIDDEN,
        c if is_retriable(c) => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::BAD_GATEWAY,
    }
}

/// The status of a request some of whose messages failed: the shared 4xx when
/// every failure is the client's, else 503 when any failure is retriable, else 502.
pub fn status_for_failures(codes: impl IntoIterator<Item = RDKafkaErrorCode>) -> StatusCode {
    let mut client: Option<StatusCode> = None;
    let mut all_client = true;
    let mut any_retriable = false;
    let mut any = false;
    for code in codes {
        any = true;
        let status = status_for(code);
        any_retriable |= is_retriable(code);
        if status.is_client_error() {
            if client.is_some_and(|c| c != status) {
                client = Some(StatusCode::BAD_REQUEST);
            } else if client.is_none() {
                client = Some(status);
            }
        } else {
            all_client = false;
        }
    }
    match (any, all_client, client) {
        (false, _, _) => StatusCode::OK,
        (true, true, Some(status)) => status,
        _ if any_retriable => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::BAD_GATEWAY,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RDKafkaErrorCode as C;

    #[test]
    fn failure_sets_map_to_one_status() {
        let table: &[(&[RDKafkaErrorCode], StatusCode)] = &[
            (&[], StatusCode::OK),
            (&[C::MessageTimedOut], StatusCode::SERVICE_UNAVAILABLE),
            (
                &[C::UnknownTopicOrPartition, C::UnknownPartition],
                StatusCode::NOT_FOUND,
            ),
            (&[C::MessageSizeTooLarge], StatusCode::PAYLOAD_TOO_LARGE),
            (
                &[C::MessageSizeTooLarge, C::UnknownPartition],
                StatusCode::BAD_REQUEST,
            ),
            (
                &[C::UnknownPartition, C::MessageTimedOut],
                StatusCode::SERVICE_UNAVAILABLE,
            ),
            (&[C::InvalidRequiredAcks], StatusCode::BAD_GATEWAY),
            (
                &[C::InvalidRequiredAcks, C::QueueFull],
                StatusCode::SERVICE_UNAVAILABLE,
            ),
        ];
        for (codes, expected) in table {
            assert_eq!(
                status_for_failures(codes.iter().copied()),
                *expected,
                "{codes:?}"
            );
        }
    }

    #[test]
    fn every_error_is_json_with_error_and_detail() {
        let errors = [
            AppError::EmptyBatch,
            AppError::UnsupportedMediaType("text/plain".into()),
            AppError::PayloadTooLarge { limit: 10 },
            AppError::BodyTimeout(std::time::Duration::from_secs(30)),
            AppError::QueueFull {
                accepted: 3,
                rejected: 7,
                total: 10,
                resend_from: 3,
            },
            AppError::Delivery {
                code: C::MessageTimedOut,
            },
            AppError::Internal(anyhow::anyhow!("secret path /etc/x")),
        ];
        for e in errors {
            let code = e.code();
            let status = e.status();
            let response = e.into_response();
            assert_eq!(response.status(), status);
            assert_eq!(
                response.headers().get(header::RETRY_AFTER).is_some(),
                status == StatusCode::SERVICE_UNAVAILABLE,
                "{code}"
            );
            assert!(!code.is_empty());
        }
    }
}
