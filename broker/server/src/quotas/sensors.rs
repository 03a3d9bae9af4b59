//! The measures of clients that have a quota: one per quota type and
//! sensor (see `resolve`), created when a client first counts against a
//! quota and dropped after an hour without traffic (Kafka's inactive
//! sensor expiry), at most `MAX_SENSORS` per type so clients inventing
//! client ids cannot grow them without end (the longest idle goes first).
//!
//! Owns: those maps, and the per-entity metrics that live and die with
//! them. Must not: decide which quota applies (`resolve`) or how a
//! throttle is applied (`ClientQuotaManager`, the connection).

use std::collections::HashMap;
use std::sync::Mutex;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::resolve::SensorKey;
use crate::infra::metric_labels::QuotaLabels;

/// Sensors kept at most per quota type.
pub const MAX_SENSORS: usize = 10_000;
/// A sensor idle this long is dropped (Kafka's 3600 s).
const INACTIVE_MS: u64 = 3_600_000;

/// A measure with a last-use time.
pub trait Measure: Default {
    fn last_ms(&self) -> Option<u64>;
}

impl Measure for super::rate::SampledRate {
    fn last_ms(&self) -> Option<u64> {
        self.last_window_ms()
    }
}

impl Measure for super::rate::TokenBucket {
    fn last_ms(&self) -> Option<u64> {
        super::rate::TokenBucket::last_ms(self)
    }
}

/// The per-entity counters of one quota type.
pub struct EntityMetrics {
    pub quota_type: &'static str,
    /// What the entity recorded (bytes, percent-seconds, mutations).
    pub recorded: Family<QuotaLabels, Counter<f64, std::sync::atomic::AtomicU64>>,
    pub throttle_time_ms: Family<QuotaLabels, Counter>,
}

impl EntityMetrics {
    pub fn labels(&self, sensor: &SensorKey) -> QuotaLabels {
        QuotaLabels {
            quota_type: self.quota_type,
            user: sensor.0.clone(),
            client_id: sensor.1.clone(),
        }
    }
}

/// One quota type's sensors.
pub struct Sensors<M: Measure> {
    map: Mutex<HashMap<SensorKey, M>>,
    pub metrics: Option<EntityMetrics>,
}

impl<M: Measure> Sensors<M> {
    pub fn new(metrics: Option<EntityMetrics>) -> Sensors<M> {
        Sensors {
            map: Mutex::new(HashMap::new()),
            metrics,
        }
    }

    /// Runs `f` on `sensor`'s measure, creating it (and making room) first.
    pub fn with<T>(&self, sensor: &SensorKey, now_ms: u64, f: impl FnOnce(&mut M) -> T) -> T {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if !map.contains_key(sensor) {
            self.make_room(&mut map, now_ms);
            map.insert(sensor.clone(), M::default());
        }
        f(map.get_mut(sensor).expect("inserted above"))
    }

    /// Drops idle sensors; at the cap, also the longest idle.
    fn make_room(&self, map: &mut HashMap<SensorKey, M>, now_ms: u64) {
        let idle = |m: &M| m.last_ms().map_or(0, |t| now_ms.saturating_sub(t));
        let expired: Vec<SensorKey> = map
            .iter()
            .filter(|(_, m)| idle(m) > INACTIVE_MS)
            .map(|(k, _)| k.clone())
            .collect();
        for key in expired {
            self.drop_sensor(map, &key);
        }
        if map.len() >= MAX_SENSORS {
            if let Some(key) = map
                .iter()
                .max_by_key(|(_, m)| idle(m))
                .map(|(k, _)| k.clone())
            {
                self.drop_sensor(map, &key);
            }
        }
    }

    fn drop_sensor(&self, map: &mut HashMap<SensorKey, M>, key: &SensorKey) {
        map.remove(key);
        if let Some(metrics) = &self.metrics {
            let labels = metrics.labels(key);
            metrics.recorded.remove(&labels);
            metrics.throttle_time_ms.remove(&labels);
        }
    }

    /// Counts `value` and `throttle_ms` in the entity's metrics.
    pub fn count(&self, sensor: &SensorKey, value: f64, throttle_ms: u64) {
        if let Some(metrics) = &self.metrics {
            let labels = metrics.labels(sensor);
            if value > 0.0 {
                metrics.recorded.get_or_create(&labels).inc_by(value);
            }
            if throttle_ms > 0 {
                metrics
                    .throttle_time_ms
                    .get_or_create(&labels)
                    .inc_by(throttle_ms);
            }
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}
