//! The broker's Prometheus metrics (`prometheus-client`), served on
//! `--metrics-listen` at /metrics.
//!
//! Owns: every metric's name, help text and buckets, and the refresh of
//! per-partition gauges and the log cleaner's figures from the log at
//! scrape time. Must not: decide anything
//! about request handling — handlers only record into these.

use std::sync::Arc;

use chronik_log::LogManager;

use crate::infra::metrics_cluster::ClusterMetrics;
use crate::infra::metrics_cluster::ReplicationSnapshot;
use crate::infra::metrics_share::ShareMetrics;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiLabels {
    pub api: &'static str,
}

pub use crate::infra::metric_labels::{PartitionLabels, QuotaLabels, ReasonLabels, ServedByLabels};

fn latency_histogram() -> Histogram {
    // 50 µs .. ~52 s
    Histogram::new(exponential_buckets(0.000_05, 2.0, 21))
}

/// All broker metrics. Cheap to clone handles out of; shared behind Arc.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pub requests_total: Family<ApiLabels, Counter>,
    pub request_duration_seconds: Family<ApiLabels, Histogram, fn() -> Histogram>,
    pub request_errors_total: Family<ApiLabels, Counter>,
    pub bytes_in_total: Counter,
    pub bytes_out_total: Counter,
    pub records_in_total: Counter,
    pub batches_in_total: Counter,
    pub records_out_total: Counter,
    /// Record bytes returned to consumers, by the replica that served them.
    pub consumer_fetch_bytes_total: Family<ServedByLabels, Counter>,
    /// Per client quota measure (only clients with a quota): what it
    /// recorded (bytes for Produce and Fetch, percent-seconds of a thread
    /// for Request, partitions for ControllerMutation) ...
    pub client_quota_recorded_total:
        Family<QuotaLabels, Counter<f64, std::sync::atomic::AtomicU64>>,
    /// ... and the throttle time it was given.
    pub client_quota_throttle_time_ms_total: Family<QuotaLabels, Counter>,
    /// Connections held and closed for going over their IP's
    /// connection_creation_rate (KIP-612).
    pub connections_throttled_total: Counter,
    pub fsync_total: Counter,
    pub fsync_duration_seconds: Histogram,
    pub group_commit_bytes: Histogram,
    pub group_commit_partitions: Histogram,
    pub group_commit_duration_seconds: Histogram,
    pub connections_open: Gauge,
    pub connections_total: Counter,
    pub connections_closed_on_error_total: Family<ReasonLabels, Counter>,
    pub connections_refused_total: Family<ReasonLabels, Counter>,
    pub offsets_records_skipped_total: Counter,
    pub txn_records_skipped_total: Counter,
    pub requests_refused_total: Family<ReasonLabels, Counter>,
    pub produce_memory_in_use_bytes: Gauge,
    pub fetch_sessions: Gauge,
    pub produce_memory_limit_bytes: Gauge,
    pub produce_backpressure_total: Counter,
    pub log_end_offset: Family<PartitionLabels, Gauge>,
    pub high_watermark: Family<PartitionLabels, Gauge>,
    pub log_start_offset: Family<PartitionLabels, Gauge>,
    pub log_size_bytes: Family<PartitionLabels, Gauge>,
    pub log_cleaner_cleaned_bytes: Counter,
    pub log_cleaner_reclaimed_bytes: Counter,
    pub log_cleaner_runs: Counter,
    pub log_cleaner_last_run_timestamp_seconds: Gauge,
    pub cluster: ClusterMetrics,
    pub share: ShareMetrics,
}

impl Metrics {
    pub fn new() -> Arc<Metrics> {
        let mut registry = Registry::with_prefix("chronik");
        let m = Metrics {
            requests_total: Family::default(),
            request_duration_seconds: Family::new_with_constructor(latency_histogram),
            request_errors_total: Family::default(),
            bytes_in_total: Counter::default(),
            bytes_out_total: Counter::default(),
            records_in_total: Counter::default(),
            batches_in_total: Counter::default(),
            records_out_total: Counter::default(),
            consumer_fetch_bytes_total: Family::default(),
            client_quota_recorded_total: Family::default(),
            client_quota_throttle_time_ms_total: Family::default(),
            connections_throttled_total: Counter::default(),
            fsync_total: Counter::default(),
            fsync_duration_seconds: latency_histogram(),
            group_commit_bytes: Histogram::new(exponential_buckets(1024.0, 4.0, 12)),
            group_commit_partitions: Histogram::new(exponential_buckets(1.0, 2.0, 12)),
            group_commit_duration_seconds: latency_histogram(),
            connections_open: Gauge::default(),
            connections_total: Counter::default(),
            connections_closed_on_error_total: Family::default(),
            connections_refused_total: Family::default(),
            offsets_records_skipped_total: Counter::default(),
            txn_records_skipped_total: Counter::default(),
            requests_refused_total: Family::default(),
            produce_memory_in_use_bytes: Gauge::default(),
            fetch_sessions: Gauge::default(),
            produce_memory_limit_bytes: Gauge::default(),
            produce_backpressure_total: Counter::default(),
            log_end_offset: Family::default(),
            high_watermark: Family::default(),
            log_start_offset: Family::default(),
            log_size_bytes: Family::default(),
            log_cleaner_cleaned_bytes: Counter::default(),
            log_cleaner_reclaimed_bytes: Counter::default(),
            log_cleaner_runs: Counter::default(),
            log_cleaner_last_run_timestamp_seconds: Gauge::default(),
            cluster: ClusterMetrics::default(),
            share: ShareMetrics::default(),
            registry: Registry::default(),
        };
        registry.register(
            "requests",
            "Kafka requests handled, by API",
            m.requests_total.clone(),
        );
        registry.register(
            "request_duration_seconds",
            "Time from a request being decoded to its response being ready, by API",
            m.request_duration_seconds.clone(),
        );
        registry.register(
            "request_errors",
            "Responses carrying at least one non-zero error code, by API",
            m.request_errors_total.clone(),
        );
        registry.register(
            "network_bytes_in",
            "Request bytes read from clients",
            m.bytes_in_total.clone(),
        );
        registry.register(
            "network_bytes_out",
            "Response bytes written to clients",
            m.bytes_out_total.clone(),
        );
        registry.register(
            "records_in",
            "Records appended by Produce",
            m.records_in_total.clone(),
        );
        registry.register(
            "batches_in",
            "Record batches appended by Produce",
            m.batches_in_total.clone(),
        );
        registry.register(
            "records_out",
            "Records returned by Fetch",
            m.records_out_total.clone(),
        );
        registry.register(
            "consumer_fetch_bytes",
            "Record bytes Fetch returned to consumers, by the replica that served them (leader, or follower: KIP-392)",
            m.consumer_fetch_bytes_total.clone(),
        );
        registry.register(
            "client_quota_recorded",
            "What clients with a quota recorded against it: bytes (Produce, Fetch), percent-seconds of a thread (Request), partitions (ControllerMutation); by quota type, user and client id",
            m.client_quota_recorded_total.clone(),
        );
        registry.register(
            "client_quota_throttle_time_ms",
            "Throttle time given to clients over their quota (throttle_time_ms, and their connection muted as long), by quota type, user and client id",
            m.client_quota_throttle_time_ms_total.clone(),
        );
        registry.register(
            "connections_throttled",
            "Connections held and then closed for going over their IP address's connection_creation_rate (KIP-612)",
            m.connections_throttled_total.clone(),
        );
        registry.register(
            "fsync",
            "fdatasync calls made by the group-commit flusher",
            m.fsync_total.clone(),
        );
        registry.register(
            "fsync_duration_seconds",
            "Duration of one fdatasync",
            m.fsync_duration_seconds.clone(),
        );
        registry.register(
            "group_commit_bytes",
            "Bytes made durable by one group-commit round",
            m.group_commit_bytes.clone(),
        );
        registry.register(
            "group_commit_partitions",
            "Partitions synced by one group-commit round",
            m.group_commit_partitions.clone(),
        );
        registry.register(
            "group_commit_duration_seconds",
            "Duration of one group-commit round (all its fsyncs)",
            m.group_commit_duration_seconds.clone(),
        );
        registry.register(
            "connections_open",
            "Client connections currently open",
            m.connections_open.clone(),
        );
        registry.register(
            "connections",
            "Client connections accepted",
            m.connections_total.clone(),
        );
        registry.register(
            "connections_closed_on_error",
            "Connections closed because of a protocol or I/O error, by reason",
            m.connections_closed_on_error_total.clone(),
        );
        registry.register(
            "connections_refused",
            "Connections closed at accept because a cap was reached (max.connections, max.connections.per.ip, or the unauthenticated caps), by reason",
            m.connections_refused_total.clone(),
        );
        registry.register(
            "requests_refused",
            "Requests refused before any handler ran (the connection is closed), by reason",
            m.requests_refused_total.clone(),
        );
        registry.register(
            "offsets_records_skipped",
            "__consumer_offsets records passed over at replay because they could not be read",
            m.offsets_records_skipped_total.clone(),
        );
        registry.register(
            "transaction_state_records_skipped",
            "__transaction_state records passed over at load because they could not be read",
            m.txn_records_skipped_total.clone(),
        );
        registry.register(
            "fetch_sessions",
            "Incremental fetch sessions cached (Kafka's NumIncrementalFetchSessions)",
            m.fetch_sessions.clone(),
        );
        registry.register(
            "produce_memory_in_use_bytes",
            "Request bytes currently held in memory (bounded by the produce profile)",
            m.produce_memory_in_use_bytes.clone(),
        );
        registry.register(
            "produce_memory_limit_bytes",
            "The produce profile's in-flight memory bound",
            m.produce_memory_limit_bytes.clone(),
        );
        registry.register(
            "produce_backpressure",
            "Times a connection stopped reading because in-flight memory was exhausted",
            m.produce_backpressure_total.clone(),
        );
        registry.register(
            "log_end_offset",
            "Next offset to be assigned, per partition",
            m.log_end_offset.clone(),
        );
        registry.register(
            "high_watermark",
            "Offset up to which data is durable and visible to consumers, per partition",
            m.high_watermark.clone(),
        );
        registry.register(
            "log_start_offset",
            "First retained offset, per partition",
            m.log_start_offset.clone(),
        );
        registry.register(
            "log_size_bytes",
            "Bytes on disk in segments, per partition",
            m.log_size_bytes.clone(),
        );
        registry.register(
            "log_cleaner_cleaned_bytes",
            "Bytes of segments the log cleaner rewrote (compacted topics)",
            m.log_cleaner_cleaned_bytes.clone(),
        );
        registry.register(
            "log_cleaner_reclaimed_bytes",
            "Bytes the log cleaner removed from compacted topics",
            m.log_cleaner_reclaimed_bytes.clone(),
        );
        registry.register(
            "log_cleaner_runs",
            "Cleanings of one partition the log cleaner completed",
            m.log_cleaner_runs.clone(),
        );
        registry.register(
            "log_cleaner_last_run_timestamp_seconds",
            "Unix time the log cleaner last completed a cleaning (0: never)",
            m.log_cleaner_last_run_timestamp_seconds.clone(),
        );
        m.cluster.register(&mut registry);
        m.share.register(&mut registry);
        Arc::new(Metrics { registry, ..m })
    }

    /// Copies per-partition offsets from the log (and replication state) into gauges, then renders
    /// the Prometheus text exposition.
    pub fn render(
        &self,
        log: &LogManager,
        replication: &ReplicationSnapshot,
        quorum: &chronik_metadata::ControllerStatus,
    ) -> String {
        self.cluster.refresh(replication, quorum);
        self.log_end_offset.clear();
        self.high_watermark.clear();
        self.log_start_offset.clear();
        self.log_size_bytes.clear();
        for topic in log.topics() {
            for partition in topic.partitions() {
                let labels = PartitionLabels {
                    topic: topic.name.clone(),
                    partition: partition.partition().to_string(),
                };
                self.log_end_offset
                    .get_or_create(&labels)
                    .set(partition.log_end_offset());
                self.high_watermark
                    .get_or_create(&labels)
                    .set(partition.durable_offset());
                self.log_start_offset
                    .get_or_create(&labels)
                    .set(partition.log_start_offset());
                self.log_size_bytes
                    .get_or_create(&labels)
                    .set(i64::try_from(partition.size_bytes()).unwrap_or(i64::MAX));
            }
        }
        let stats = log.stats();
        for (counter, total) in [
            (
                &self.log_cleaner_cleaned_bytes,
                stats.cleaner_cleaned_bytes_total,
            ),
            (
                &self.log_cleaner_reclaimed_bytes,
                stats.cleaner_reclaimed_bytes_total,
            ),
            (&self.log_cleaner_runs, stats.cleaner_runs_total),
        ] {
            counter.inc_by(total.saturating_sub(counter.get()));
        }
        self.log_cleaner_last_run_timestamp_seconds
            .set(i64::try_from(stats.cleaner_last_run_ms / 1000).unwrap_or(i64::MAX));
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// Feeds the log's group-commit flusher events into the metrics.
#[derive(Debug)]
pub struct FlushMetrics(pub Arc<Metrics>);

impl chronik_log::FlushObserver for FlushMetrics {
    fn fsync_done(&self, seconds: f64) {
        self.0.fsync_total.inc();
        self.0.fsync_duration_seconds.observe(seconds);
    }

    fn group_commit_done(&self, partitions: usize, bytes: u64, seconds: f64) {
        self.0.group_commit_partitions.observe(partitions as f64);
        self.0.group_commit_bytes.observe(bytes as f64);
        self.0.group_commit_duration_seconds.observe(seconds);
    }
}
