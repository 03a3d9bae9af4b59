//! `chronik-ingestor`: HTTP JSON batches in, Kafka records out, and an exact
//! account of what happened to every message.
//!
//! Layout:
//! - `config`    — clap args (every flag also an env var), the plain `Config`, librdkafka properties.
//! - `server`    — bind, `LISTENING` line, graceful shutdown, final flush and counts.
//! - `app`       — `AppState`, `app(state) -> Router`, request-metrics middleware, the `--metrics-listen` router.
//! - `auth`      — bearer-token authentication (`--auth-token-file`).
//! - `routes/`   — handlers: `produce` (wait for delivery), `fire` (202, track in background), `status`.
//! - `message`   — the JSON wire format, parsing with positions, per-message validation.
//! - `topics`    — topic/partition metadata cache (unknown topic → 404 before anything is sent).
//! - `producer`  — rdkafka `ThreadedProducer`, sequencing + envelope stamping, delivery routing.
//! - `ledger`    — interval sets of acknowledged / failed sequence numbers.
//! - `metrics`   — Prometheus registry.
//! - `error`     — `AppError` and the Kafka error → HTTP status mapping.
//!
//! Request flow: handler → `read_json_body` (415/413) → `message::parse_*`
//! (400/422) → `routes::prepare_all` (422, then `topics` 404/503) →
//! `producer::send_run` (sequence + `chronik-env` header, under one lock) →
//! librdkafka → delivery callback → ledger + metrics + the request's
//! `BatchWaiter` → response.

pub mod app;
pub mod auth;
pub mod config;
pub mod error;
pub mod ledger;
pub mod message;
pub mod metrics;
pub mod producer;
pub mod routes;
pub mod server;
pub mod topics;

pub use app::{app, AppState};
pub use config::Config;
