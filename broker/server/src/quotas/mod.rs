//! Client quotas (Kafka's, with its names and semantics): byte rates for
//! producers and consumers, request time as a percentage of a thread,
//! KIP-599's controller mutation rate and KIP-612's connection creation
//! rate per IP, set through AlterClientQuotas into the metadata quorum and
//! enforced by every broker from its image.
//!
//! A client over its quota is answered at once with `throttle_time_ms`
//! (KIP-219) and its connection is muted for that long (the connection
//! reads nothing more from it), so a client that ignores the hint is held
//! all the same. A consumer's Fetch that would go over is answered empty,
//! its bytes not counted. Replication (followers' fetches) and the
//! brokers' own requests are never throttled.
//!
//! Layout: `rate` (Kafka's sampled rate, throttle time, token bucket),
//! `resolve` (which quota applies, by Kafka's precedence), `sensors` (the
//! bounded per-entity measures and their metrics), `poll_time` (a
//! request's time on the broker's threads). This file: `ClientQuotaManager`,
//! what the request path and the accept loop call. Must not: touch
//! sockets (the connection mutes) or build responses (the handlers).

mod poll_time;
mod rate;
mod resolve;
mod sensors;

use std::net::IpAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use chronik_metadata::quotas::{
    ClientQuotas, CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE, PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
};

pub use poll_time::PollTime;
pub use rate::{QuotaWindow, SampledRate, TokenBucket};
pub use resolve::{QuotaConfig, Resolved, SensorKey};
use sensors::{EntityMetrics, Sensors};

use crate::infra::metrics::Metrics;

/// The quota types measured per client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuotaType {
    /// producer_byte_rate: bytes of Produce requests.
    Produce,
    /// consumer_byte_rate: bytes of consumers' Fetch answers.
    Fetch,
    /// request_percentage: time on the broker's threads, in percent of one.
    Request,
}

impl QuotaType {
    pub fn key(self) -> &'static str {
        match self {
            QuotaType::Produce => PRODUCER_BYTE_RATE,
            QuotaType::Fetch => CONSUMER_BYTE_RATE,
            QuotaType::Request => REQUEST_PERCENTAGE,
        }
    }

    /// The metric label (Kafka's quota type names).
    pub fn label(self) -> &'static str {
        match self {
            QuotaType::Produce => "Produce",
            QuotaType::Fetch => "Fetch",
            QuotaType::Request => "Request",
        }
    }
}

/// Every quota this broker enforces, from the latest image.
pub struct ClientQuotaManager {
    window: QuotaWindow,
    config: RwLock<Arc<QuotaConfig>>,
    produce: Sensors<SampledRate>,
    fetch: Sensors<SampledRate>,
    request: Sensors<SampledRate>,
    mutation: Sensors<TokenBucket>,
    /// Connection creation per IP (keyed by the address as the user tag).
    connections: Mutex<std::collections::HashMap<IpAddr, SampledRate>>,
    started: Instant,
}

impl std::fmt::Debug for ClientQuotaManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientQuotaManager")
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

/// Connection sensors kept at most (IPs with a rate that connected lately).
const MAX_IP_SENSORS: usize = 10_000;

impl ClientQuotaManager {
    pub fn new(window: QuotaWindow, metrics: Option<&Metrics>) -> ClientQuotaManager {
        let entity = |quota_type: &'static str| {
            metrics.map(|m| EntityMetrics {
                quota_type,
                recorded: m.client_quota_recorded_total.clone(),
                throttle_time_ms: m.client_quota_throttle_time_ms_total.clone(),
            })
        };
        ClientQuotaManager {
            window,
            config: RwLock::new(Arc::new(QuotaConfig::default())),
            produce: Sensors::new(entity("Produce")),
            fetch: Sensors::new(entity("Fetch")),
            request: Sensors::new(entity("Request")),
            mutation: Sensors::new(entity("ControllerMutation")),
            connections: Mutex::new(std::collections::HashMap::new()),
            started: Instant::now(),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Takes the quotas of a new image.
    pub fn replace(&self, quotas: &ClientQuotas) {
        let config = Arc::new(QuotaConfig::from_image(quotas));
        *self.config.write().unwrap_or_else(|e| e.into_inner()) = config;
    }

    pub fn config(&self) -> Arc<QuotaConfig> {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn sensors(&self, quota_type: QuotaType) -> &Sensors<SampledRate> {
        match quota_type {
            QuotaType::Produce => &self.produce,
            QuotaType::Fetch => &self.fetch,
            QuotaType::Request => &self.request,
        }
    }

    /// Whether `user` and `client_id` have a byte-rate or request quota
    /// (then their requests take turns on each connection).
    pub fn applies_to(&self, user: &str, client_id: &str) -> bool {
        let config = self.config();
        [QuotaType::Produce, QuotaType::Fetch, QuotaType::Request]
            .iter()
            .any(|t| config.resolve(t.key(), user, client_id).is_some())
    }

    /// Counts `value` for the client against its quota of `quota_type`, if
    /// it has one; the throttle it earns, in ms (0 without a quota).
    pub fn record(&self, quota_type: QuotaType, user: &str, client_id: &str, value: f64) -> u64 {
        let config = self.config();
        let Some(quota) = config.resolve(quota_type.key(), user, client_id) else {
            return 0;
        };
        let now = self.now_ms();
        let sensors = self.sensors(quota_type);
        let throttle = sensors.with(&quota.sensor, now, |rate| {
            rate.record(self.window, value, now);
            rate.throttle_ms(self.window, quota.bound, now)
        });
        sensors.count(&quota.sensor, value, throttle);
        throttle
    }

    /// Takes back `value` recorded by `record` (a Fetch answered empty).
    pub fn unrecord(&self, quota_type: QuotaType, user: &str, client_id: &str, value: f64) {
        let config = self.config();
        let Some(quota) = config.resolve(quota_type.key(), user, client_id) else {
            return;
        };
        let now = self.now_ms();
        self.sensors(quota_type).with(&quota.sensor, now, |rate| {
            rate.record(self.window, -value, now)
        });
    }

    /// The controller mutation quota of a client for one request (`strict`:
    /// Kafka's CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+,
    /// which refuse topics with THROTTLING_QUOTA_EXCEEDED once it is
    /// spent; older versions are only throttled).
    pub fn mutations(&self, user: &str, client_id: &str, strict: bool) -> MutationQuota<'_> {
        let quota = self
            .config()
            .resolve(CONTROLLER_MUTATION_RATE, user, client_id);
        MutationQuota {
            manager: self,
            quota,
            strict,
        }
    }

    /// KIP-612: how long a new connection from `ip` is held before it is
    /// closed, for going over its connection_creation_rate (0: serve it).
    pub fn connection_throttle_ms(&self, ip: IpAddr) -> u64 {
        let config = self.config();
        if !config.has_connection_rates() {
            return 0;
        }
        let Some(bound) = config.connection_rate(ip) else {
            return 0;
        };
        let now = self.now_ms();
        let mut map = self.connections.lock().unwrap_or_else(|e| e.into_inner());
        if !map.contains_key(&ip) && map.len() >= MAX_IP_SENSORS {
            map.retain(|_, r| {
                r.last_window_ms()
                    .is_some_and(|t| now.saturating_sub(t) < self.window.span_ms())
            });
            if map.len() >= MAX_IP_SENSORS {
                return self.window.span_ms(); // a flood of addresses: hold it
            }
        }
        let rate = map.entry(ip).or_default();
        rate.record(self.window, 1.0, now);
        rate.throttle_ms(self.window, bound, now)
    }
}

/// One request's controller mutation quota (see `ClientQuotaManager::mutations`).
pub struct MutationQuota<'a> {
    manager: &'a ClientQuotaManager,
    quota: Option<Resolved>,
    strict: bool,
}

impl MutationQuota<'_> {
    /// Whether the next topic must be refused with THROTTLING_QUOTA_EXCEEDED.
    pub fn refuses(&self) -> bool {
        let Some(quota) = self.quota.as_ref().filter(|_| self.strict) else {
            return false;
        };
        let now = self.manager.now_ms();
        let window = self.manager.window;
        self.manager.mutation.with(&quota.sensor, now, |bucket| {
            bucket.exceeded(window, quota.bound, now)
        })
    }

    /// Spends `partitions` mutations (partitions created or deleted).
    pub fn record(&self, partitions: usize) {
        let Some(quota) = &self.quota else {
            return;
        };
        let now = self.manager.now_ms();
        let window = self.manager.window;
        self.manager.mutation.with(&quota.sensor, now, |bucket| {
            bucket.spend(window, quota.bound, partitions as f64, now)
        });
        self.manager
            .mutation
            .count(&quota.sensor, partitions as f64, 0);
    }

    /// The throttle the request earned.
    pub fn throttle_ms(&self) -> u64 {
        let Some(quota) = &self.quota else {
            return 0;
        };
        let now = self.manager.now_ms();
        let window = self.manager.window;
        let throttle = self.manager.mutation.with(&quota.sensor, now, |bucket| {
            bucket.throttle_ms(window, quota.bound, now)
        });
        self.manager.mutation.count(&quota.sensor, 0.0, throttle);
        throttle
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chronik_metadata::quotas::{QuotaEntity, QuotaValue, CLIENT_ID, IP};

    fn manager(entries: &[(QuotaEntity, &str, f64)]) -> ClientQuotaManager {
        let m = ClientQuotaManager::new(QuotaWindow::default(), None);
        let mut quotas = ClientQuotas::new();
        for (entity, key, value) in entries {
            quotas
                .entry(entity.clone())
                .or_default()
                .insert(key.to_string(), QuotaValue(*value));
        }
        m.replace(&quotas);
        m
    }

    fn client(name: &str) -> QuotaEntity {
        QuotaEntity::new(vec![(CLIENT_ID.into(), Some(name.into()))])
    }

    #[test]
    fn clients_without_a_quota_are_never_measured() {
        let m = manager(&[(client("noisy"), PRODUCER_BYTE_RATE, 1000.0)]);
        assert_eq!(m.record(QuotaType::Produce, "ANONYMOUS", "calm", 1e9), 0);
        assert_eq!(m.produce.len(), 0);
        assert!(m.record(QuotaType::Produce, "ANONYMOUS", "noisy", 1e6) > 0);
        assert_eq!(m.produce.len(), 1);
    }

    #[test]
    fn strict_mutations_are_refused_once_spent() {
        let m = manager(&[(client("admin"), CONTROLLER_MUTATION_RATE, 1.0)]);
        let strict = m.mutations("ANONYMOUS", "admin", true);
        assert!(!strict.refuses());
        strict.record(50);
        assert!(strict.refuses());
        assert!(strict.throttle_ms() > 0);
        let old = m.mutations("ANONYMOUS", "admin", false);
        assert!(!old.refuses());
    }

    #[test]
    fn connections_over_their_ip_rate_are_held() {
        let entity = QuotaEntity::new(vec![(IP.into(), Some("127.0.0.9".into()))]);
        let m = manager(&[(entity, "connection_creation_rate", 1.0)]);
        let ip: IpAddr = "127.0.0.9".parse().expect("an address");
        let other: IpAddr = "127.0.0.8".parse().expect("an address");
        let held = (0..30).filter(|_| m.connection_throttle_ms(ip) > 0).count();
        assert!(held >= 15, "{held}");
        assert_eq!(m.connection_throttle_ms(other), 0);
    }
}
