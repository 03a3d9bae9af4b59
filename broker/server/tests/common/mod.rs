//! Shared harness for the broker's integration tests.
//!
//! Every test binary under `tests/` includes this module with `mod common;`
//! and uses only part of it, hence the `dead_code` allowance.
//!
//! Layout:
//! - `broker`  — the real `chronik-server` child process (`chronik_testkit::server`,
//!   shared with the harness crates' tests).
//! - `http`    — a minimal blocking HTTP client (`chronik_testkit::http`).
//! - `prom`    — parsing of the Prometheus text exposition served at /metrics.
//! - `cluster` — a real 3-node cluster on 127.0.0.1-3 (same ports per node) and Metadata views.
//! - `clients` — rdkafka producer / consumer / admin helpers (consumers `assign`).
//! - `kafka_client` — a blocking client on kafka-protocol types: any request at any version.
//! - `group_members` — real librdkafka group members counting rebalance callbacks and
//!   records read, for the coordinator-failover tests.
//! - `kip848`  — a model KIP-848 consumer (ConsumerGroupHeartbeat) that owns what it is assigned.
//! - `paced`   — a paced idempotent acks=all producer and the exactly-once read-back.
//! - `netns`   — nodes in their own network namespaces, and real partitions between them.
//! - `wire`    — hand-encoded Kafka requests and RecordBatch v2 for raw-socket tests.
//! - `txn`     — a transaction opened by hand (a partition apart from its coordinator), one-record batches.
//! - `error_codes` — Kafka's error codes by name, for the tests that check one.
//! - `share`   — a model share-group member (KIP-932): heartbeat, ShareFetch, ShareAcknowledge.
//!
//! Nothing here asserts on broker behaviour: helpers return what they saw and
//! the tests decide.
#![allow(dead_code, unused_imports)]

pub mod clients;
pub mod cluster;
pub mod error_codes;
pub mod group_members;
pub mod kafka_client;
pub mod kip848;
pub mod netns;
pub mod paced;
pub mod prom;
pub mod quorum;
pub mod share;
pub mod txn;
pub mod wire;

pub use chronik_testkit::server as broker;
pub use chronik_testkit::{http, Broker};
