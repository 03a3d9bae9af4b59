//! chronik-consumer: a verifying Kafka consumer-group member.
//!
//! Every record's `chronik-env` envelope (chronik-harness) is checked for
//! duplicates, order within a partition and value corruption, its
//! end-to-end latency recorded, and the sequences seen per producer kept as
//! interval sets, so that replica reports merge exactly and reconcile
//! against the producers' ledgers (loss = acknowledged but never consumed).
//!
//! Layout:
//! - `config`    — clap `Args` (flags + env) and the plain `Config`s.
//! - `ledger`    — loading producer ledgers from files and plain HTTP.
//! - `report`    — the report JSON, merging, coverage, the verdict.
//!
//! The verifier (`Verifier`), the mergeable `Tally`, the reconciliation
//! with ledgers and every count's definition are chronik-harness's
//! (`verify`, `tally`, `reconcile`, `assess`), shared with chronik-bench.
//! - `live`      — what `/metrics` and `/summary` serve while running.
//! - `http`      — the axum router over `live`.
//! - `consume`   — the rdkafka poll loop on its own thread.
//! - `run`       — one replica's run end to end, and the `merge` command.
//! - `share`     — share-group mode (`--share-group`, KIP-932): a small
//!   share-group client on kafka-protocol + tokio, and at-least-once
//!   verification (each record accepted exactly once, redeliveries
//!   counted and explained, never faults).
//! - `error`     — this crate's `Error`.

pub mod config;
pub mod consume;
pub mod error;
pub mod http;
pub mod ledger;
pub mod live;
pub mod report;
pub mod run;
pub mod share;

pub use error::Error;

/// Exit status: no failure found.
pub const EXIT_CLEAN: u8 = 0;
/// Exit status: loss, gaps, duplicates, reordering or corruption found.
pub const EXIT_FAILED: u8 = 1;
/// Exit status: the run itself failed (Kafka, I/O, bad arguments).
pub const EXIT_ERROR: u8 = 2;
/// Exit status of `merge`: no failure found, but the reports do not cover
/// every offset, so loss and gaps could not be decided.
pub const EXIT_INCONCLUSIVE: u8 = 3;
