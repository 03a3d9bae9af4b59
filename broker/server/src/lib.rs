//! `chronik-server`: a durable Kafka-compatible broker; every broker is a node of a metadata quorum (of one
//! without `--peers`), so one node and a replicated cluster run the same code.
//!
//! Rooms, each depending only on those below it:
//! - `startup/`      — flags and bounds (`config`, `limits`), a broker's start-up and ordered shutdown
//!   (`server`, `cluster_start`), a controller-only node, why a node that has not joined is not serving.
//! - `network/`      — connections (framing, pipelining, backpressure, deadlines, in-order responses), the
//!   connection caps, the bounded frame reader, the raft port's security, the HTTP endpoint.
//! - `requests/`     — `handlers/` (one file per Kafka API, and the dispatch), `authorize/` (the ACL each API
//!   needs), `errors/` (lower layers' failures as Kafka codes), `topics/`, `acl_wire`, `fetch_sessions`.
//! - `security/`     — listeners and their security protocols, TLS, SASL PLAIN/SCRAM, principals, the
//!   authorizer (`authorizer`: flags and `Authorizer::allows`), this broker's own client connections.
//! - `quotas/`       — client quotas (byte rates, request percentage, controller mutations, connection
//!   creation per IP) from the metadata image: who has which, measured how, what throttle it earns.
//! - `coordinators/` — consumer groups and committed offsets, transactions, the internal topics both write,
//!   producer ids.
//! - `replica/`      — replicas kept in step with the metadata quorum, the write path (`write`: append as
//!   leader, one deadline for the fsync and ISR waits), the purgatory, the high watermark, replica fetchers.
//! - `infra/`        — metrics, the global allocator, bounded CPU work off the async workers.
//! - `broker`        — `Broker`: the managers a request may reach, built once at start-up;
//!   the request dispatcher lends each handler the few it uses.
//!
//! Request flow: `network::connection` reads a frame (its bytes reserved from the produce-memory budget) →
//! `chronik_protocol` decodes it → `requests::authorize` → `requests::handlers::handle` →
//! `replica::write` appends as leader and waits (fsync, ISR) in the purgatory → `network::connection`
//! writes responses in request order.

pub mod broker;
pub mod coordinators;
pub mod infra;
pub mod network;
pub mod quotas;
pub mod replica;
pub mod requests;
pub mod security;
pub mod startup;
