//! `chronik-server`: a durable Kafka-compatible broker; every broker is a node of a metadata quorum (of one
//! without `--peers`), so one node and a replicated cluster run the same code.
//!
//! Layout:
//! - `config`      — clap args (every flag also `CHRONIK_*`), WAL and produce profiles.
//! - `server`      — start-up (log recovery, listeners) and ordered shutdown.
//! - `cluster_start` — start-up: join the metadata quorum, agree on the cluster id, adopt a quorum-less data dir,
//!   create `__consumer_offsets` and `__transaction_state`, first sync.
//! - `controller_listener` — what the raft port speaks: PLAINTEXT or SSL (mutual TLS), its flag and default.
//! - `join_diagnosis` — while start-up has not joined: why the node is not serving (peers' handshakes probed).
//! - `connection`  — per-connection framing, pipelining, backpressure, read deadlines, in-order responses.
//! - `security/`   — listeners and their security protocols, TLS (rustls), SASL PLAIN/SCRAM, KIP-368, principals,
//!   and the inter-broker protocol of this broker's own connections to other brokers.
//! - `connection_limits` — `max.connections` and `max.connections.per.ip` at accept time, and the
//!   caps on SASL connections not yet logged in.
//! - `limits`      — every bound a client cannot push the broker past (flags and values).
//! - `handlers/`   — one file per Kafka API; client-facing Kafka error codes (log append errors: `replica::write`).
//! - `fetch_sessions` — KIP-227 incremental fetch sessions: the bounded cache, id/epoch rules, trimmed answers.
//! - `purgatory`   — delayed operations keyed by partition (Kafka's purgatory): `park_until`, waiters woken per partition.
//! - `groups/`     — consumer-group driver around `chronik_coordinator_state`, committed offsets in `__consumer_offsets`.
//! - `txn/`        — the transaction coordinator: state in `__transaction_state`, markers, timeouts.
//! - `internal_topic` — what both coordinators' topics share: load by replay, acks=all writes, loaded epoch.
//! - `producer_ids` — durable producer id allocation for InitProducerId.
//! - `replica/`    — replicas kept in step with the metadata quorum, the write path (`write`: append as leader, one deadline for the fsync and ISR waits), replica fetchers, ISR proposals.
//! - `broker`      — shared state handed to handlers.
//! - `controller_node` — a node with the controller role only (no Kafka listener).
//! - `authorization` — the authorizer flags and `Authorizer::allows` (ACLs from the metadata quorum).
//! - `blocking`    — bounded CPU work (decompression) kept in request order, off the async workers.
//! - `metrics`, `http` — Prometheus metrics and the /metrics, /health, /ready endpoint.
//! - `alloc_guard` — the global allocator that keeps wire-claimed capacities from aborting the process.
//!
//! Request flow: `server` accepts (within the connection caps) → `connection`
//! reads a frame (its bytes reserved from the produce-memory budget as they arrive) → `chronik_protocol` decodes it →
//! `handlers::handle` → `chronik_log` appends/reads → (acks≥1) `durability`
//! waits for the flusher → `connection` writes responses in request order.

pub mod alloc_guard;
pub mod authorization;
pub mod blocking;
pub mod broker;
pub mod cluster_start;
pub mod config;
pub mod connection;
pub mod connection_limits;
pub mod controller_listener;
pub mod controller_node;
pub mod fetch_sessions;
pub mod groups;
pub mod handlers;
pub mod http;
pub mod internal_topic;
pub mod join_diagnosis;
pub mod limits;
pub mod metrics;
pub mod metrics_cluster;
pub mod producer_ids;
pub mod purgatory;
pub mod replica;
pub mod security;
pub mod server;
pub mod txn;
