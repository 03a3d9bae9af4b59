//! The HTTP side of the broker on `--metrics-listen`: `/metrics`
//! (Prometheus text), `/health` (process is up) and `/ready` (log recovered
//! and the Kafka listener accepting).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use crate::broker::Broker;

#[derive(Clone)]
pub struct HttpState {
    pub broker: Arc<Broker>,
    pub ready: Arc<AtomicBool>,
}

pub fn app(state: HttpState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/health", get(health))
        .route("/ready", get(ready))
        .with_state(state)
}

async fn metrics(State(state): State<HttpState>) -> impl IntoResponse {
    let broker = state.broker.clone();
    broker
        .metrics
        .produce_memory_in_use_bytes
        .set(i64::try_from(broker.produce_memory_in_use()).unwrap_or(i64::MAX));
    let body = tokio::task::spawn_blocking(move || {
        let replication = broker.replicas.metrics_snapshot();
        broker
            .metrics
            .render(&broker.log, &replication, &broker.cluster.status())
    })
    .await
    .unwrap_or_default();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
}

async fn health() -> &'static str {
    "ok\n"
}

async fn ready(State(state): State<HttpState>) -> (StatusCode, &'static str) {
    if state.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ready\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "starting\n")
    }
}
