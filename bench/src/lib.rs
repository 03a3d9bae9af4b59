//! `chronik-bench`: the native Kafka benchmark of the Chronik project.
//!
//! Measures any Kafka-compatible broker over the Kafka protocol (rdkafka):
//! produce (closed or open loop), consume, round-trip (produce and consume
//! at once, every message verified through the `chronik-env` envelope) and
//! metadata load. Results: the seed tool's box table and periodic line, a
//! CSV row, OpenMessaging-Benchmark-style JSON with a `meta` block, and raw
//! `.hlog` interval logs.
//!
//! Layout (one layer per file):
//! - `config`    — clap `Args` (every flag an env var) → validated `Config`.
//! - `app`       — one invocation: topic, broker identity, run or sweep, outputs, exit code.
//! - `run`       — one run: tasks, warmup, window, stop, drain, verification.
//! - `produce`   — producer tasks (sender + delivery-report poller): the hot path.
//! - `consume`   — consumer tasks: read, verify (chronik-harness's verifier), end-to-end latency.
//! - `metadata`  — metadata-mode requesters.
//! - `start`     — a task's thread and its side of the start barrier (ready, then go).
//! - `schedule`  — the run clock and the open-loop schedule.
//! - `payload`   — pre-generated values and keys.
//! - `metrics`   — interval recording (per task, lock-free) and the reporter (merge, lines, .hlog).
//! - `client`    — librdkafka settings, topic admin, cluster id, raw ApiVersions.
//! - `resources` — CPU and RSS from /proc (this process and `--broker-pid`s).
//! - `sweep`     — the rate sweep and its knee.
//! - `result`    — `RunResult`, what every output reads; `Verification` (harness counts, bench names).
//! - `report`    — box table and periodic line, CSV, OMB JSON.
//!
//! Shared with the ingestor and consumer through `chronik-harness`: the
//! envelope, the histogram shape and `.hlog` files, the `meta` block, and
//! with the consumer the verifier, the ledger and what lost, gaps and
//! duplicates mean (`verify`, `ledger`, `assess`).

pub mod app;
pub mod client;
pub mod config;
pub mod consume;
pub mod metadata;
pub mod metrics;
pub mod payload;
pub mod produce;
pub mod report;
pub mod resources;
pub mod result;
pub mod run;
pub mod schedule;
pub mod start;
pub mod sweep;
