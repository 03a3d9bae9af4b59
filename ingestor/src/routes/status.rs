//! `GET /health`, `/ready`, `/metrics`, `/ledger`, and the JSON 404.

use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::app::AppState;
use crate::error::json_response;

/// The longest `/ready` waits for the broker's metadata.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// The process is up and serving HTTP.
pub async fn health(State(state): State<AppState>) -> Response {
    Json(json!({
        "status": "ok",
        "ingestor_id": state.config.ingestor_id,
        "producer_id": state.producer.producer_id(),
    }))
    .into_response()
}

/// 200 when a broker answered a Metadata request, 503 otherwise (or while shutting down).
pub async fn ready(State(state): State<AppState>) -> Response {
    if state.is_shutting_down() {
        return json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({ "error": "shutting_down", "detail": "the ingestor is shutting down" }),
        );
    }
    let timeout = READY_TIMEOUT.min(state.config.message_timeout);
    match state.producer.probe(timeout).await {
        Ok((brokers, topics)) => Json(json!({
            "status": "ready",
            "brokers": brokers,
            "topics": topics,
        }))
        .into_response(),
        Err(e) => json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({ "error": "broker_unavailable", "detail": format!("metadata request failed: {e:#}") }),
        ),
    }
}

/// Prometheus / OpenMetrics text.
pub async fn metrics(State(state): State<AppState>) -> Response {
    let m = &state.metrics;
    let (accepted, delivered, failed) = state.producer.counts();
    m.messages_in_flight
        .set(i64::try_from(accepted.saturating_sub(delivered + failed)).unwrap_or(i64::MAX));
    m.producer_queue_depth.set(state.producer.queue_depth());
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        m.render(),
    )
        .into_response()
}

/// The ledger of acknowledged and failed sequence numbers.
pub async fn ledger(State(state): State<AppState>) -> Response {
    Json(state.producer.ledger_snapshot(&state.config.ingestor_id)).into_response()
}

pub async fn not_found(uri: Uri) -> Response {
    json_response(
        StatusCode::NOT_FOUND,
        json!({ "error": "not_found", "detail": format!("no route for {}", uri.path()) }),
    )
}
