//! What the HTTP endpoints serve while the consumer runs: the Prometheus
//! registry and the `/summary` snapshot.
//!
//! Owns: every metric and its name, the summary shape. The poll thread
//! publishes into it a few times a second ([`Live::publish`]); scrapes read
//! it. Must not: be touched per record (the hot path stays lock-free and
//! atomic-free; counts are stored, not incremented).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use chronik_harness::histogram::{
    merge_into, new_latency_histogram, LatencyHistogram, Percentiles,
};
use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use serde::Serialize;

use chronik_harness::verify::Counts;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct PartitionLabels {
    pub topic: String,
    pub partition: i32,
}

/// One assigned partition as `/summary` shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PartitionSummary {
    pub topic: String,
    pub partition: i32,
    /// Next offset after the highest consumed (None before the first record).
    pub position: Option<i64>,
    pub high_watermark: Option<i64>,
    pub lag: Option<i64>,
}

/// The `/summary` body, minus latency (added at request time).
#[derive(Debug, Clone, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// starting | running | stopping | stopped
    pub state: &'static str,
    pub group: String,
    pub client_id: String,
    pub topics: Vec<String>,
    pub uptime_secs: f64,
    pub counts: Counts,
    /// Sequence gaps as this replica alone sees them (partial for a replica
    /// that does not own every partition).
    pub gaps: u64,
    pub producers: u64,
    pub rebalances: u64,
    pub assigned: Vec<PartitionSummary>,
    /// Share mode (`--share-group`): acceptance and redelivery so far.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share: Option<serde_json::Value>,
}

/// End-to-end latency as a Prometheus histogram, computed from the
/// HdrHistogram at scrape time.
#[derive(Debug, Default, Clone)]
pub struct LatencyMetric {
    histogram: Arc<Mutex<Option<LatencyHistogram>>>,
}

/// Bucket upper bounds in seconds.
const LATENCY_BUCKETS_S: &[f64] = &[
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0,
];

impl LatencyMetric {
    fn add(&self, interval: &LatencyHistogram) {
        let mut guard = self.histogram.lock().unwrap_or_else(|p| p.into_inner());
        merge_into(guard.get_or_insert_with(new_latency_histogram), interval);
    }

    pub fn snapshot(&self) -> LatencyHistogram {
        let guard = self.histogram.lock().unwrap_or_else(|p| p.into_inner());
        guard.clone().unwrap_or_else(new_latency_histogram)
    }
}

impl EncodeMetric for LatencyMetric {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let h = self.snapshot();
        let mut buckets = Vec::with_capacity(LATENCY_BUCKETS_S.len() + 1);
        let mut below = 0u64;
        for &bound in LATENCY_BUCKETS_S {
            let cumulative = if h.is_empty() {
                0
            } else {
                h.count_between(0, (bound * 1e6) as u64)
            };
            buckets.push((bound, cumulative.saturating_sub(below)));
            below = cumulative.max(below);
        }
        buckets.push((f64::INFINITY, h.len().saturating_sub(below)));
        let sum_s = if h.is_empty() {
            0.0
        } else {
            h.mean() * h.len() as f64 / 1e6
        };
        encoder.encode_histogram::<NoLabelSet>(sum_s, h.len(), &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

pub struct Live {
    registry: Registry,
    consumed: Counter,
    verified: Counter,
    duplicates: Counter,
    reordered: Counter,
    corrupt: Counter,
    redeliveries: Counter,
    foreign: Counter,
    gaps: Gauge,
    producers: Gauge,
    rebalances: Counter,
    lag: Family<PartitionLabels, Gauge>,
    high_watermark: Family<PartitionLabels, Gauge>,
    latency: LatencyMetric,
    summary: Mutex<Summary>,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live").finish_non_exhaustive()
    }
}

impl Live {
    pub fn new(group: &str, client_id: &str, topics: &[String]) -> Live {
        let mut registry = Registry::with_prefix("chronik_consumer");
        let counter = |registry: &mut Registry, name: &str, help: &str| {
            let c = Counter::default();
            registry.register(name, help, c.clone());
            c
        };
        let consumed = counter(
            &mut registry,
            "consumed",
            "Records polled, redeliveries included",
        );
        let verified = counter(
            &mut registry,
            "verified",
            "Records with an envelope checked for the first time",
        );
        let duplicates = counter(
            &mut registry,
            "duplicates",
            "Verified records whose (producer, sequence) was seen at another offset",
        );
        let reordered = counter(
            &mut registry,
            "reordered",
            "Verified records below their producer's previous sequence in the partition",
        );
        let corrupt = counter(
            &mut registry,
            "corrupt",
            "Verified records whose value fails the envelope's CRC-32C",
        );
        let redeliveries = counter(
            &mut registry,
            "redeliveries",
            "Records at a (partition, offset) this replica had consumed before",
        );
        let foreign = counter(
            &mut registry,
            "foreign",
            "Records without a (decodable) chronik-env envelope",
        );
        let rebalances = counter(
            &mut registry,
            "rebalances",
            "Partition assignments and revocations",
        );
        let gaps = Gauge::default();
        registry.register(
            "gaps",
            "Sequences missing between each producer's lowest and highest seen by this replica",
            gaps.clone(),
        );
        let producers = Gauge::default();
        registry.register("producers", "Producer ids seen", producers.clone());
        let lag = Family::<PartitionLabels, Gauge>::default();
        registry.register(
            "lag",
            "High watermark minus the next offset to consume, per assigned partition",
            lag.clone(),
        );
        let high_watermark = Family::<PartitionLabels, Gauge>::default();
        registry.register(
            "high_watermark",
            "High watermark per assigned partition",
            high_watermark.clone(),
        );
        let latency = LatencyMetric::default();
        registry.register(
            "e2e_latency_seconds",
            "End-to-end latency: consume time minus the envelope's send time",
            latency.clone(),
        );
        let summary = Summary {
            state: "starting",
            group: group.to_string(),
            client_id: client_id.to_string(),
            topics: topics.to_vec(),
            ..Summary::default()
        };
        Live {
            registry,
            consumed,
            verified,
            duplicates,
            reordered,
            corrupt,
            redeliveries,
            foreign,
            gaps,
            producers,
            rebalances,
            lag,
            high_watermark,
            latency,
            summary: Mutex::new(summary),
        }
    }

    /// Publishes the poll thread's current state. `assigned` replaces the
    /// per-partition gauges (partitions no longer assigned disappear).
    pub fn publish(
        &self,
        counts: Counts,
        gaps: u64,
        producers: u64,
        rebalances: u64,
        assigned: Vec<PartitionSummary>,
        uptime_secs: f64,
    ) {
        let store = |c: &Counter, v: u64| c.inner().store(v, Ordering::Relaxed);
        store(&self.consumed, counts.consumed);
        store(&self.verified, counts.verified);
        store(&self.duplicates, counts.duplicates);
        store(&self.reordered, counts.reordered);
        store(&self.corrupt, counts.corrupt);
        store(&self.redeliveries, counts.redeliveries);
        store(&self.foreign, counts.foreign);
        store(&self.rebalances, rebalances);
        self.gaps.set(i64::try_from(gaps).unwrap_or(i64::MAX));
        self.producers
            .set(i64::try_from(producers).unwrap_or(i64::MAX));
        self.lag.clear();
        self.high_watermark.clear();
        for p in &assigned {
            let labels = PartitionLabels {
                topic: p.topic.clone(),
                partition: p.partition,
            };
            if let Some(lag) = p.lag {
                self.lag.get_or_create(&labels).set(lag);
            }
            if let Some(hw) = p.high_watermark {
                self.high_watermark.get_or_create(&labels).set(hw);
            }
        }
        let mut s = self.summary.lock().unwrap_or_else(|p| p.into_inner());
        s.counts = counts;
        s.gaps = gaps;
        s.producers = producers;
        s.rebalances = rebalances;
        s.assigned = assigned;
        s.uptime_secs = uptime_secs;
        if s.state == "starting" {
            s.state = "running";
        }
    }

    /// Publishes a share-mode member's acceptance figures (`/summary`'s `share`).
    pub fn set_share(&self, share: serde_json::Value) {
        self.summary.lock().unwrap_or_else(|p| p.into_inner()).share = Some(share);
    }

    pub fn set_state(&self, state: &'static str) {
        self.summary.lock().unwrap_or_else(|p| p.into_inner()).state = state;
    }

    /// Folds one latency interval into the live histogram.
    pub fn add_latency(&self, interval: &LatencyHistogram) {
        self.latency.add(interval);
    }

    /// The `/summary` document.
    pub fn summary_json(&self) -> serde_json::Value {
        let summary = self
            .summary
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut value = serde_json::to_value(summary).unwrap_or_default();
        value["latency"] =
            serde_json::to_value(Percentiles::of(&self.latency.snapshot())).unwrap_or_default();
        value
    }

    /// The `/metrics` text (OpenMetrics).
    pub fn metrics_text(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_and_summary_show_what_was_published() {
        let live = Live::new("g", "c", &["t".to_string()]);
        let counts = Counts {
            consumed: 10,
            verified: 9,
            redeliveries: 1,
            ..Counts::default()
        };
        let assigned = vec![PartitionSummary {
            topic: "t".into(),
            partition: 2,
            position: Some(5),
            high_watermark: Some(7),
            lag: Some(2),
        }];
        live.publish(counts, 3, 1, 1, assigned, 1.5);
        let mut h = new_latency_histogram();
        for v in [800, 1_500, 3_000_000] {
            h.record(v).expect("in range");
        }
        live.add_latency(&h);
        let text = live.metrics_text().expect("encodes");
        for line in [
            "chronik_consumer_consumed_total 10",
            "chronik_consumer_verified_total 9",
            "chronik_consumer_redeliveries_total 1",
            "chronik_consumer_gaps 3",
            "chronik_consumer_lag{topic=\"t\",partition=\"2\"} 2",
            "chronik_consumer_e2e_latency_seconds_count 3",
            "chronik_consumer_e2e_latency_seconds_bucket{le=\"0.001\"} 1",
            "chronik_consumer_e2e_latency_seconds_bucket{le=\"0.002\"} 2",
            "chronik_consumer_e2e_latency_seconds_bucket{le=\"5.0\"} 3",
            "chronik_consumer_e2e_latency_seconds_bucket{le=\"+Inf\"} 3",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        let s = live.summary_json();
        assert_eq!(s["state"], "running");
        assert_eq!(s["counts"]["verified"], 9);
        assert_eq!(s["assigned"][0]["lag"], 2);
        assert_eq!(s["latency"]["count"], 3);
    }
}
