//! Prometheus metrics of the ingestor (prometheus-client).
//!
//! Owns: the registry and every metric in it. HTTP requests are counted by
//! route and status and timed per route by the middleware in `app`; message
//! counters are bumped by the producer and its delivery callback.
//! Invariant (at rest): accepted = delivered + failed + in_flight.
//! Must not: block; everything on the hot path is an atomic or a short lock.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct RouteStatus {
    pub route: &'static str,
    pub status: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct RouteLabel {
    pub route: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ErrorLabel {
    pub error: ErrorName,
}

/// A Kafka / librdkafka error code name, e.g. `MessageTimedOut`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ErrorName(pub String);

impl EncodeLabelValue for ErrorName {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelValueEncoder,
    ) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&self.0.as_str(), encoder)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ReasonLabel {
    pub reason: &'static str,
}

fn latency_histogram() -> Histogram {
    // 100 µs .. ~52 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 20))
}

pub struct Metrics {
    registry: Registry,
    pub http_requests: Family<RouteStatus, Counter>,
    pub http_request_duration: Family<RouteLabel, Histogram, fn() -> Histogram>,
    pub http_requests_in_flight: Gauge,
    /// Messages handed to the Kafka producer (each got a sequence number).
    pub messages_accepted: Counter,
    pub messages_delivered: Counter,
    pub messages_failed: Counter,
    pub messages_failed_by_error: Family<ErrorLabel, Counter>,
    /// Valid messages never handed to Kafka (queue full, enqueue error).
    pub messages_rejected: Family<ReasonLabel, Counter>,
    pub messages_in_flight: Gauge,
    pub producer_queue_depth: Gauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("ingestor");
        let m = Metrics {
            http_requests: Family::default(),
            http_request_duration: Family::new_with_constructor(
                latency_histogram as fn() -> Histogram,
            ),
            http_requests_in_flight: Gauge::default(),
            messages_accepted: Counter::default(),
            messages_delivered: Counter::default(),
            messages_failed: Counter::default(),
            messages_failed_by_error: Family::default(),
            messages_rejected: Family::default(),
            messages_in_flight: Gauge::default(),
            producer_queue_depth: Gauge::default(),
            registry: Registry::default(),
        };
        registry.register(
            "http_requests",
            "HTTP requests by route and status",
            m.http_requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "HTTP request latency by route (receipt of headers to response)",
            m.http_request_duration.clone(),
        );
        registry.register(
            "http_requests_in_flight",
            "HTTP requests being served",
            m.http_requests_in_flight.clone(),
        );
        registry.register(
            "messages_accepted",
            "Messages handed to the Kafka producer (each stamped with a sequence number)",
            m.messages_accepted.clone(),
        );
        registry.register(
            "messages_delivered",
            "Messages acknowledged by Kafka",
            m.messages_delivered.clone(),
        );
        registry.register(
            "messages_failed",
            "Accepted messages whose delivery failed",
            m.messages_failed.clone(),
        );
        registry.register(
            "messages_failed_by_error",
            "Accepted messages whose delivery failed, by Kafka error",
            m.messages_failed_by_error.clone(),
        );
        registry.register(
            "messages_rejected",
            "Valid messages not handed to Kafka, by reason (never silently dropped: the client was told)",
            m.messages_rejected.clone(),
        );
        registry.register(
            "messages_in_flight",
            "Accepted messages without a delivery outcome yet",
            m.messages_in_flight.clone(),
        );
        registry.register(
            "producer_queue_depth",
            "Messages queued or in flight in the producer (native: messages; librdkafka: messages and requests, rd_kafka_outq_len)",
            m.producer_queue_depth.clone(),
        );
        Metrics { registry, ..m }
    }

    /// Prometheus text exposition (OpenMetrics).
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
