//! Prometheus metrics of the ingestor (prometheus-client).
//!
//! Owns: the registry and every metric in it. HTTP requests are counted by
//! route and status and timed per route by the middleware in `app`; message
//! counters are bumped by the producer and its delivery callback, and the
//! brokers' throttle time (KIP-219) by the native producer.
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
    /// Sum of the Produce answers' `throttle_time_ms` (native producer).
    pub produce_throttle_time_ms: Counter,
    /// Produce answers with `throttle_time_ms` > 0 (native producer).
    pub produce_throttled_responses: Counter,
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
            produce_throttle_time_ms: Counter::default(),
            produce_throttled_responses: Counter::default(),
            registry: Registry::default(),
        };
        registry.register(
            "produce_throttle_time_ms",
            "Sum of throttle_time_ms in the brokers' Produce answers (KIP-219: the client holds its next request to that broker for as long)",
            m.produce_throttle_time_ms.clone(),
        );
        registry.register(
            "produce_throttled_responses",
            "Produce answers with throttle_time_ms > 0 (the client was over a broker quota)",
            m.produce_throttled_responses.clone(),
        );
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

    /// Counts one Produce answer's `throttle_time_ms`.
    pub fn record_produce_throttle(&self, throttle_time_ms: i32) {
        if let Ok(ms @ 1..) = u64::try_from(throttle_time_ms) {
            self.produce_throttle_time_ms.inc_by(ms);
            self.produce_throttled_responses.inc();
        }
    }

    /// Prometheus text exposition (OpenMetrics).
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(text: &str, name: &str) -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
    }

    #[test]
    fn throttle_counters_add_up_positive_answers_only() {
        let m = Metrics::new();
        for ms in [0, 120, -5, 30, 0] {
            m.record_produce_throttle(ms);
        }
        let text = m.render();
        assert_eq!(
            value(&text, "ingestor_produce_throttle_time_ms_total"),
            Some(150.0)
        );
        assert_eq!(
            value(&text, "ingestor_produce_throttled_responses_total"),
            Some(2.0)
        );
        // The ingestor's own metrics are still there, and the exposition ends once.
        assert!(value(&text, "ingestor_messages_delivered_total").is_some());
        assert_eq!(text.matches("# EOF").count(), 1);
        assert!(text.trim_end().ends_with("# EOF"));
    }
}
