//! The HTTP endpoints: `/metrics` (Prometheus text), `/summary` (JSON) and
//! `/health`. `app` builds the router so tests call it without a socket.
//!
//! Must not: compute anything (the poll thread publishes into `Live`).

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};

use crate::live::Live;

pub fn app(live: Arc<Live>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/summary", get(summary))
        .route("/health", get(|| async { "ok" }))
        .with_state(live)
}

async fn metrics(State(live): State<Arc<Live>>) -> Response {
    match live.metrics_text() {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(e) => {
            tracing::error!(error = %e, "encoding metrics failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

async fn summary(State(live): State<Arc<Live>>) -> Json<serde_json::Value> {
    Json(live.summary_json())
}
