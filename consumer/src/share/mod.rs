//! Share-group mode (`--share-group`, KIP-932 "queues for Kafka").
//! librdkafka has no share consumer, so this is a small, bounded
//! share-group client on kafka-protocol + tokio, and the at-least-once
//! verification on top of the shared verifier.
//!
//! Layout (one job per file):
//! - `conn`      — one broker connection: framing, frame size cap, call timeouts.
//! - `metadata`  — Metadata, FindCoordinator (GROUP key), group configs
//!   (IncrementalAlterConfigs on the GROUP resource).
//! - `heartbeat` — membership: the ShareGroupHeartbeat loop (join, assignment, leave).
//! - `fetch`     — one ShareFetch loop per partition leader: share session
//!   epochs, deliveries, piggybacked acknowledgements, the closing
//!   ShareAcknowledge.
//! - `acks`      — ACCEPT/GAP plans, acknowledgement batches, acknowledgements
//!   held until a checkpoint covers them.
//! - `state`     — what the tasks share; `deliver`, one record's delivery.
//! - `tally`     — the acceptance and delivery-count facts, merged exactly,
//!   and the share counts.
//! - `report`    — the report's `share` section, read back, and the verdict.
//! - `run`       — the manager: configs, tasks, checkpoints, live figures,
//!   shutdown order.

pub mod acks;
pub mod conn;
pub mod fetch;
pub mod heartbeat;
pub mod metadata;
pub mod report;
pub mod run;
pub mod state;
pub mod tally;
