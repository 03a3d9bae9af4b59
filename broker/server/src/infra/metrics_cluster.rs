//! Replication and metadata-quorum metrics (`chronik_cluster_*`), refreshed
//! at scrape time from a `ReplicationSnapshot` (the replica manager builds
//! it) and the quorum's status. A broker started without
//! `--peers` is a quorum of one and exports the same metrics, so dashboards
//! and alerts work the same for one node and for many.
//!
//! Owns: these metrics' names and help texts. Must not: change state.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::infra::metric_labels::PartitionLabels;

/// One partition's replication gauges.
#[derive(Debug, Clone)]
pub struct PartitionGauges {
    pub topic: String,
    pub partition: i32,
    /// The ISR's size where this broker leads.
    pub isr_size: Option<usize>,
    /// Messages behind the leader where this broker follows.
    pub lag: Option<i64>,
}

/// The replication state the metrics show, read at scrape time.
#[derive(Debug, Clone, Default)]
pub struct ReplicationSnapshot {
    pub under_replicated: i64,
    pub offline: i64,
    pub log_dir_offline: bool,
    pub log_dir_failures: u64,
    pub partitions: Vec<PartitionGauges>,
    pub leader_changes: u64,
    pub isr_shrinks: u64,
    pub isr_expands: u64,
    pub records_replicated: u64,
}

#[derive(Debug, Default)]
pub struct ClusterMetrics {
    under_replicated_partitions: Gauge,
    offline_partitions: Gauge,
    offline_log_directory_count: Gauge,
    log_dir_failures: Counter,
    isr_size: Family<PartitionLabels, Gauge>,
    replica_lag_messages: Family<PartitionLabels, Gauge>,
    leader_changes: Counter,
    isr_shrinks: Counter,
    isr_expands: Counter,
    records_replicated: Counter,
    quorum: QuorumMetrics,
}

/// The metadata quorum as this node sees it: every node exports these,
/// a controller-only node (`controller_node`) nothing else.
#[derive(Debug, Default)]
pub struct QuorumMetrics {
    controller_active: Gauge,
    raft_term: Gauge,
    live_brokers: Gauge,
}

impl QuorumMetrics {
    /// Registers under `r` (the `cluster` sub-registry).
    pub fn register(&self, r: &mut Registry) {
        r.register(
            "controller_active",
            "1 if this node is the active controller (metadata quorum leader)",
            self.controller_active.clone(),
        );
        r.register(
            "raft_term",
            "Current term of the metadata quorum",
            self.raft_term.clone(),
        );
        r.register(
            "live_brokers",
            "Registered, unfenced brokers",
            self.live_brokers.clone(),
        );
    }

    pub fn refresh(&self, status: &chronik_metadata::ControllerStatus) {
        self.controller_active.set(i64::from(status.is_controller));
        self.raft_term
            .set(i64::try_from(status.raft_term).unwrap_or(i64::MAX));
        self.live_brokers
            .set(i64::try_from(status.live_brokers).unwrap_or(0));
    }
}

impl ClusterMetrics {
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("cluster");
        r.register(
            "under_replicated_partitions",
            "Partitions led here whose ISR is smaller than their replica set",
            self.under_replicated_partitions.clone(),
        );
        r.register(
            "offline_partitions",
            "Partitions without a leader (cluster-wide view)",
            self.offline_partitions.clone(),
        );
        r.register(
            "offline_log_directory_count",
            "1 while this broker's data directory is offline (a write or fsync failed; Kafka's OfflineLogDirectoryCount)",
            self.offline_log_directory_count.clone(),
        );
        r.register(
            "log_dir_failures",
            "Times this broker's data directory went offline since it started",
            self.log_dir_failures.clone(),
        );
        r.register(
            "isr_size",
            "In-sync replicas of each partition led here",
            self.isr_size.clone(),
        );
        r.register(
            "replica_lag_messages",
            "Messages a follower replica here is behind the leader's high watermark",
            self.replica_lag_messages.clone(),
        );
        r.register(
            "leader_changes",
            "Times this broker became a partition leader",
            self.leader_changes.clone(),
        );
        r.register(
            "isr_shrinks",
            "ISR shrinks committed for partitions led here",
            self.isr_shrinks.clone(),
        );
        r.register(
            "isr_expands",
            "ISR expansions committed for partitions led here",
            self.isr_expands.clone(),
        );
        r.register(
            "records_replicated",
            "Records appended here as a follower",
            self.records_replicated.clone(),
        );
        self.quorum.register(r);
    }

    pub fn refresh(
        &self,
        snapshot: &ReplicationSnapshot,
        status: &chronik_metadata::ControllerStatus,
    ) {
        self.isr_size.clear();
        self.replica_lag_messages.clear();
        self.under_replicated_partitions
            .set(snapshot.under_replicated);
        self.offline_partitions.set(snapshot.offline);
        self.offline_log_directory_count
            .set(i64::from(snapshot.log_dir_offline));
        catch_up(&self.log_dir_failures, snapshot.log_dir_failures);
        for p in &snapshot.partitions {
            let labels = PartitionLabels {
                topic: p.topic.clone(),
                partition: p.partition.to_string(),
            };
            if let Some(isr) = p.isr_size {
                self.isr_size
                    .get_or_create(&labels)
                    .set(i64::try_from(isr).unwrap_or(0));
            }
            if let Some(lag) = p.lag {
                self.replica_lag_messages.get_or_create(&labels).set(lag);
            }
        }
        catch_up(&self.leader_changes, snapshot.leader_changes);
        catch_up(&self.isr_shrinks, snapshot.isr_shrinks);
        catch_up(&self.isr_expands, snapshot.isr_expands);
        catch_up(&self.records_replicated, snapshot.records_replicated);
        self.quorum.refresh(status);
    }
}

/// Moves a counter up to `value` (counters mirror atomics kept elsewhere).
fn catch_up(counter: &Counter, value: u64) {
    let current = counter.get();
    if value > current {
        counter.inc_by(value - current);
    }
}
