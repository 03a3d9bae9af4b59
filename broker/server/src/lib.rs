//! `chronik-server`: a durable Kafka-compatible broker; every broker is a node of a metadata quorum (of one
//! without `--peers`), so one node and a replicated cluster run the same code.
//!
//! Rooms, top first, each importing only its own and those below it (`scripts/module_cycles.py` checks
//! the order):
//! - `startup/`      — a broker's start-up and ordered shutdown (`server`, `cluster_start`), a
//!   controller-only node, why a node that has not joined is not serving, `meta.properties`.
//! - `network/`      — connections (framing, pipelining, backpressure, deadlines, in-order responses), the
//!   connection caps, the bounded frame reader, the HTTP endpoint.
//! - `broker/`       — `Broker`: the managers a request may reach, built once at start-up; `dispatch`, which
//!   takes it apart and lends each handler the few it uses, behind the authorizer and the client quotas.
//! - `requests/`     — `handlers/` (one file per Kafka API), `authorize/` (the ACL each API needs),
//!   `errors/` (lower layers' failures as Kafka codes), `topics/`, `acl_wire`, `fetch_sessions`, `quota_gate`.
//! - `config/`       — flags and `Config`, and the slices handlers are lent (`limits`, `slices`).
//! - `coordinators/` — consumer groups and committed offsets, transactions, the internal topics both write,
//!   producer ids.
//! - `quotas/`       — client quotas (byte rates, request percentage, controller mutations, connection
//!   creation per IP) from the metadata image: who has which, measured how, what throttle it earns.
//! - `replica/`      — replicas kept in step with the metadata quorum (`image_sync`), the write path
//!   (`write`: `WritePath`, one deadline over the append turn, verification, the fsync and ISR waits), ISR
//!   proposals and the follower-fetch record (`isr`), the purgatory, the high watermark, replica fetchers.
//! - `security/`     — listeners and their security protocols, TLS, SASL PLAIN/SCRAM, principals, the
//!   authorizer, the raft port's protocol (`controller_listener`), this broker's own client connections.
//! - `infra/`        — metrics, the global allocator, bounded CPU work off the async workers, the
//!   connection's append order.
//!
//! Request flow: `network::connection` reads a frame (its bytes reserved from the produce-memory budget) →
//! `chronik_protocol` decodes it → `broker::dispatch::handle` → `requests::authorize` → the API's handler →
//! `replica::write` appends as leader and waits (fsync, ISR) in the purgatory → `network::connection`
//! writes responses in request order.

pub mod broker;
pub mod config;
pub mod coordinators;
pub mod infra;
pub mod network;
pub mod quotas;
pub mod replica;
pub mod requests;
pub mod security;
pub mod startup;
