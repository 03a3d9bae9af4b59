//! The bounds a client cannot push the broker past: connections, read
//! deadlines, fetch sizes, partitions and topics, record batches and their
//! decompressed size, producer-state lifetime.
//!
//! Owns: the clap flags for these bounds (flattened into `config::Args`, each
//! with a `CHRONIK_*` env var and, where Kafka has the setting, Kafka's name
//! in its help) and the plain `Limits` handlers read. Must not: enforce
//! anything itself — `connection`, `connection_limits` and the handlers do.
//!
//! Where Kafka's default is "unbounded" (`max.connections`,
//! `max.connections.per.ip`, partition counts), the default here is finite:
//! the point of these settings is that one client cannot exhaust the broker.
//! Connections that have not logged in on a SASL listener have caps of
//! their own (in total, per IP, and in time), so clients that never log in
//! cannot take the places of those that do.

use std::time::Duration;

use clap::Args as ClapArgs;

const MIB: u64 = 1024 * 1024;

#[derive(Debug, Clone, ClapArgs)]
pub struct LimitArgs {
    /// Kafka's `max.connections`: client connections open at once on the
    /// Kafka listener; more are closed as soon as they are accepted.
    #[arg(long, env = "CHRONIK_MAX_CONNECTIONS", default_value_t = 4096,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// Kafka's `max.connections.per.ip`.
    #[arg(long, env = "CHRONIK_MAX_CONNECTIONS_PER_IP", default_value_t = 1024,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections_per_ip: u32,
    /// Connections on SASL listeners that have not logged in yet, open at
    /// once (no Kafka equivalent); more are closed as soon as they are
    /// accepted. A connection stops counting once it has authenticated.
    #[arg(long, env = "CHRONIK_MAX_UNAUTHENTICATED_CONNECTIONS", default_value_t = 512,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_unauthenticated_connections: u32,
    /// Connections from one peer IP on SASL listeners that have not logged
    /// in yet (no Kafka equivalent).
    #[arg(long, env = "CHRONIK_MAX_UNAUTHENTICATED_CONNECTIONS_PER_IP", default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_unauthenticated_connections_per_ip: u32,
    /// A connection on a SASL listener that has not logged in this many ms
    /// after it was accepted (TLS handshake included) is closed. Kafka has
    /// no such bound (only `connections.max.idle.ms`, which any byte resets).
    #[arg(long, env = "CHRONIK_CONNECTIONS_MAX_UNAUTHENTICATED_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(100..))]
    pub connections_max_unauthenticated_ms: u64,
    /// Kafka's `connections.max.idle.ms`: a connection with no request in
    /// progress and no bytes received for this long is closed.
    #[arg(long, env = "CHRONIK_CONNECTIONS_MAX_IDLE_MS", default_value_t = 600_000,
          value_parser = clap::value_parser!(u64).range(100..))]
    pub connections_max_idle_ms: u64,
    /// Once a request's size prefix has arrived, its whole body must arrive
    /// within this many ms, else the connection is closed and the memory its
    /// bytes held is returned (no Kafka equivalent).
    #[arg(long, env = "CHRONIK_REQUEST_READ_TIMEOUT_MS", default_value_t = 30_000,
          value_parser = clap::value_parser!(u64).range(100..))]
    pub request_read_timeout_ms: u64,
    /// Kafka's broker-side `fetch.max.bytes` (55 MiB): the most record bytes
    /// one Fetch response carries (beyond the first batch, which is always
    /// returned whole); also caps each partition's `partition_max_bytes`.
    #[arg(long, env = "CHRONIK_FETCH_MAX_BYTES", default_value_t = 55 * MIB,
          value_parser = clap::value_parser!(u64).range(1024..=1024 * MIB))]
    pub fetch_max_bytes: u64,
    /// Partitions one request may name (Produce, Fetch, ListOffsets,
    /// OffsetCommit, CreateTopics, …); larger requests are refused with
    /// INVALID_REQUEST.
    #[arg(long, env = "CHRONIK_MAX_PARTITIONS_PER_REQUEST", default_value_t = 10_000,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_partitions_per_request: u32,
    /// KIP-578's `max.broker.partitions`: partitions this broker hosts; topic
    /// creation beyond it fails with POLICY_VIOLATION.
    #[arg(long, env = "CHRONIK_MAX_BROKER_PARTITIONS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_broker_partitions: u32,
    /// Topics this broker hosts (internal ones included).
    #[arg(long, env = "CHRONIK_MAX_TOPICS", default_value_t = 5_000,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_topics: u32,
    /// A compressed record batch may inflate to at most this many bytes;
    /// larger ones are refused with CORRUPT_MESSAGE on Produce and never
    /// inflated past the bound anywhere else.
    #[arg(long, env = "CHRONIK_MAX_DECOMPRESSED_BATCH_BYTES", default_value_t = 64 * MIB,
          value_parser = clap::value_parser!(u64).range(MIB..=1024 * MIB))]
    pub max_decompressed_batch_bytes: u64,
    /// Kafka's `producer.id.expiration.ms` (1 day): idempotent-producer state
    /// not used for this long is dropped.
    #[arg(long, env = "CHRONIK_PRODUCER_ID_EXPIRATION_MS", default_value_t = 86_400_000,
          value_parser = clap::value_parser!(u64).range(1_000..))]
    pub producer_id_expiration_ms: u64,
    /// Transactional ids the transaction coordinator keeps at once; an
    /// InitProducerId for a new id beyond it is refused (POLICY_VIOLATION).
    /// Ids idle for transactional.id.expiration.ms (7 days) are forgotten.
    #[arg(long, env = "CHRONIK_MAX_TRANSACTIONAL_IDS", default_value_t = 100_000,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_transactional_ids: u32,
    /// Incremental fetch sessions (KIP-227) cached at once (Kafka's
    /// max.incremental.fetch.session.cache.slots); 0 turns sessions off,
    /// so every Fetch is full.
    #[arg(
        long,
        env = "CHRONIK_MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS",
        default_value_t = 1000
    )]
    pub max_incremental_fetch_session_cache_slots: u32,
    // -- the metrics HTTP port (chronik_http::HttpLimits; its routes take
    //    no request body, so the body timeout keeps chronik-http's default)
    /// Connections open at once on the metrics HTTP port.
    #[arg(long, env = "CHRONIK_HTTP_MAX_CONNECTIONS", default_value_t = 256,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub http_max_connections: u32,
    /// An HTTP request's headers must arrive within this many ms (also
    /// closes keep-alive connections idle that long).
    #[arg(long, env = "CHRONIK_HTTP_HEADER_READ_TIMEOUT_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(100..))]
    pub http_header_read_timeout_ms: u64,
    /// A response write to a client that stopped reading is given up (and
    /// the connection closed) after making no progress for this many ms.
    #[arg(long, env = "CHRONIK_HTTP_WRITE_TIMEOUT_MS", default_value_t = 30_000,
          value_parser = clap::value_parser!(u64).range(100..))]
    pub http_write_timeout_ms: u64,
    // -- end of the metrics HTTP port
}

/// The bounds in force, as handlers and connections read them.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    pub max_connections_per_ip: usize,
    pub max_unauthenticated_connections: usize,
    pub max_unauthenticated_connections_per_ip: usize,
    pub connections_max_unauthenticated: Duration,
    pub connections_max_idle: Duration,
    pub request_read_timeout: Duration,
    pub fetch_max_bytes: usize,
    pub max_partitions_per_request: usize,
    pub max_broker_partitions: usize,
    pub max_topics: usize,
    pub max_decompressed_batch_bytes: usize,
    pub producer_id_expiration: Duration,
    pub max_transactional_ids: usize,
    pub max_incremental_fetch_session_cache_slots: usize,
    pub http: chronik_http::HttpLimits,
}

impl From<&LimitArgs> for Limits {
    fn from(a: &LimitArgs) -> Limits {
        let size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        Limits {
            max_connections: size(u64::from(a.max_connections)),
            max_connections_per_ip: size(u64::from(a.max_connections_per_ip)),
            max_unauthenticated_connections: size(u64::from(a.max_unauthenticated_connections)),
            max_unauthenticated_connections_per_ip: size(u64::from(
                a.max_unauthenticated_connections_per_ip,
            )),
            connections_max_unauthenticated: Duration::from_millis(
                a.connections_max_unauthenticated_ms,
            ),
            connections_max_idle: Duration::from_millis(a.connections_max_idle_ms),
            request_read_timeout: Duration::from_millis(a.request_read_timeout_ms),
            fetch_max_bytes: size(a.fetch_max_bytes),
            max_partitions_per_request: size(u64::from(a.max_partitions_per_request)),
            max_broker_partitions: size(u64::from(a.max_broker_partitions)),
            max_topics: size(u64::from(a.max_topics)),
            max_decompressed_batch_bytes: size(a.max_decompressed_batch_bytes),
            producer_id_expiration: Duration::from_millis(a.producer_id_expiration_ms),
            max_transactional_ids: size(u64::from(a.max_transactional_ids)),
            max_incremental_fetch_session_cache_slots: size(u64::from(
                a.max_incremental_fetch_session_cache_slots,
            )),
            http: chronik_http::HttpLimits {
                max_connections: size(u64::from(a.http_max_connections)),
                header_read_timeout: Duration::from_millis(a.http_header_read_timeout_ms),
                write_timeout: Duration::from_millis(a.http_write_timeout_ms),
                ..chronik_http::HttpLimits::default()
            },
        }
    }
}
