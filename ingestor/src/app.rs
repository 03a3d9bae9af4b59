//! The HTTP application: shared state, the router, and the request-metrics
//! middleware.
//!
//! `app(state)` builds the whole router so tests can drive it with
//! `tower::ServiceExt::oneshot` without a socket.
//! Must not: bind sockets or handle signals (that is `server`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use tower_http::trace::{DefaultOnFailure, TraceLayer};
use tracing::Level;

use crate::config::Config;
use crate::error::AppError;
use crate::metrics::{Metrics, RouteLabel, RouteStatus};
use crate::producer::KafkaProducer;
use crate::routes;
use crate::topics::TopicCache;

/// Everything a handler needs; cheap to clone.
#[derive(Clone, Debug)]
pub struct AppState(Arc<Inner>);

#[derive(Debug)]
pub struct Inner {
    pub config: Config,
    pub producer: Arc<KafkaProducer>,
    pub topics: TopicCache,
    pub metrics: Arc<Metrics>,
    shutting_down: AtomicBool,
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl AppState {
    /// Creates the producer with a fresh random `producer_id`. Does not
    /// contact the broker (librdkafka connects lazily; `/ready` tells).
    pub fn new(config: Config) -> anyhow::Result<AppState> {
        let producer_id = uuid::Uuid::new_v4().as_u64_pair().0;
        let metrics = Arc::new(Metrics::new());
        let producer = Arc::new(KafkaProducer::new(&config, producer_id, metrics.clone())?);
        Ok(AppState(Arc::new(Inner {
            config,
            producer,
            topics: TopicCache::default(),
            metrics,
            shutting_down: AtomicBool::new(false),
        })))
    }

    /// From now on produce routes answer 503 `shutting_down`.
    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::Release);
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    pub fn check_accepting(&self) -> Result<(), AppError> {
        if self.is_shutting_down() {
            return Err(AppError::ShuttingDown);
        }
        Ok(())
    }
}

/// The router with every route, the metrics middleware and a `TraceLayer`.
pub fn app(state: AppState) -> Router {
    Router::new()
        .route("/produce", post(routes::produce::single))
        .route("/produce/batch", post(routes::produce::batch))
        .route("/produce/fire/batch", post(routes::fire::batch))
        .route("/health", get(routes::status::health))
        .route("/ready", get(routes::status::ready))
        .route("/metrics", get(routes::status::metrics))
        .route("/ledger", get(routes::status::ledger))
        .fallback(routes::status::not_found)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::auth::require_bearer,
        ))
        .layer(middleware::from_fn_with_state(state.clone(), track_request))
        // 5xx answers are expected outcomes here (broker down, queue full) and
        // are counted in metrics; logging each at ERROR would flood the log.
        .layer(TraceLayer::new_for_http().on_failure(DefaultOnFailure::new().level(Level::DEBUG)))
        .with_state(state)
}

/// The `--metrics-listen` router: /metrics, /health and /ready, no token.
pub fn status_app(state: AppState) -> Router {
    Router::new()
        .route("/health", get(routes::status::health))
        .route("/ready", get(routes::status::ready))
        .route("/metrics", get(routes::status::metrics))
        .fallback(routes::status::not_found)
        .with_state(state)
}

/// Route label for metrics: the matched route, never the raw path (bounded cardinality).
fn route_label(matched: Option<&MatchedPath>) -> &'static str {
    match matched.map(MatchedPath::as_str) {
        Some("/produce") => "/produce",
        Some("/produce/batch") => "/produce/batch",
        Some("/produce/fire/batch") => "/produce/fire/batch",
        Some("/health") => "/health",
        Some("/ready") => "/ready",
        Some("/metrics") => "/metrics",
        Some("/ledger") => "/ledger",
        _ => "unmatched",
    }
}

/// Decrements the in-flight gauge even when the client goes away mid-request.
struct InFlight<'a>(&'a Metrics);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.http_requests_in_flight.dec();
    }
}

async fn track_request(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let route = route_label(request.extensions().get::<MatchedPath>());
    let started = Instant::now();
    state.metrics.http_requests_in_flight.inc();
    let _in_flight = InFlight(&state.metrics);
    let response = next.run(request).await.into_response();
    let status = response.status().as_u16();
    state
        .metrics
        .http_requests
        .get_or_create(&RouteStatus { route, status })
        .inc();
    state
        .metrics
        .http_request_duration
        .get_or_create(&RouteLabel { route })
        .observe(started.elapsed().as_secs_f64());
    response
}
