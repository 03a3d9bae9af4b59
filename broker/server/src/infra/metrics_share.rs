//! Share-group metrics (`chronik_share_*`, KIP-932): what partition leaders
//! did with share-partitions — records acquired, redelivered (acquired
//! again, delivery count above 1), released by an expired lock,
//! acknowledged by type — and the share sessions held.
//!
//! Owns: these metrics' names and help texts. Must not: change state (the
//! share-partition manager and the share handlers count).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// An acknowledgement's type: `accept`, `release`, `reject`, `gap`, `renew`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AckTypeLabels {
    pub ack_type: &'static str,
}

#[derive(Debug, Default, Clone)]
pub struct ShareMetrics {
    pub acquired_records: Counter,
    pub redelivered_records: Counter,
    pub lock_expired_records: Counter,
    pub acknowledged_records: Family<AckTypeLabels, Counter>,
    pub sessions: Gauge,
}

impl ShareMetrics {
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "share_acquired_records",
            "Records acquired by share-group members (ShareFetch), deliveries counted",
            self.acquired_records.clone(),
        );
        registry.register(
            "share_redelivered_records",
            "Records acquired again (delivery count above 1): after a release, an expired lock or a departed member",
            self.redelivered_records.clone(),
        );
        registry.register(
            "share_lock_expired_records",
            "Acquired records released because their acquisition lock (share.record.lock.duration.ms) ran out",
            self.lock_expired_records.clone(),
        );
        registry.register(
            "share_acknowledged_records",
            "Records acknowledged by share-group members, by acknowledge type (stored before answered)",
            self.acknowledged_records.clone(),
        );
        registry.register(
            "share_sessions",
            "Share sessions held (Kafka's group.share.max.share.sessions bounds them at 2000)",
            self.sessions.clone(),
        );
    }
}
