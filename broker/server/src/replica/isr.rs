//! A leader's side of replication beyond the append: what its state
//! machine asks for (an ISR proposal to the controller — AlterPartition —
//! or a purgatory wake-up when the high watermark or a follower's log start
//! moved), the follower-fetch record that moves them (the explicit wake-up
//! that ends acks=all and DeleteRecords waits), the periodic ISR-shrink
//! tick, and the replication counters and gauges the metrics read.
//!
//! Owns: those. Must not: decide membership (the `chronik_replication`
//! state machine does; the controller commits it).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chronik_metadata::AlterPartition;
use chronik_replication::LeaderAction;
use kafka_protocol::error::ResponseError;
use tracing::{info, warn};

use super::{Replica, ReplicaManager};
use crate::infra::metrics_cluster::{PartitionGauges, ReplicationSnapshot};

/// Replication counters exported as metrics.
#[derive(Debug, Default)]
pub struct ReplicationStats {
    pub leader_changes: AtomicU64,
    pub isr_shrinks: AtomicU64,
    pub isr_expands: AtomicU64,
    pub records_replicated: AtomicU64,
}

/// Where a follower says it is in one partition's Fetch: its fetch offset
/// and log start offset, and the leader epoch it fetches in.
#[derive(Debug, Clone, Copy)]
pub struct FollowerPosition {
    pub fetch_offset: i64,
    pub log_start_offset: i64,
    pub current_leader_epoch: i32,
}

impl ReplicaManager {
    /// Performs what a leader's state machine asked for.
    pub fn perform(self: &Arc<Self>, replica: &Arc<Replica>, actions: Vec<LeaderAction>) {
        for action in actions {
            match action {
                LeaderAction::HighWatermarkAdvanced(_)
                | LeaderAction::FollowerLogStartOffsetAdvanced(_) => {
                    self.purgatory.wake(&replica.log);
                }
                LeaderAction::IsrChanged {
                    leader_epoch,
                    isr,
                    version,
                } => {
                    self.propose_isr(replica.clone(), leader_epoch, isr, version);
                }
            }
        }
    }

    fn propose_isr(
        self: &Arc<Self>,
        replica: Arc<Replica>,
        leader_epoch: i32,
        isr: BTreeSet<i32>,
        version: i32,
    ) {
        let manager = self.clone();
        let before = replica.leader_isr().map_or(0, |(n, _)| n);
        tokio::spawn(async move {
            let request = AlterPartition {
                topic: replica.topic.clone(),
                partition: replica.partition,
                leader_id: manager.node_id,
                leader_epoch,
                partition_epoch: version,
                new_isr: isr.iter().copied().collect(),
            };
            match manager.cluster.alter_partition(request).await {
                Ok(image) => {
                    let counter = if image.isr.len() > before {
                        &manager.stats.isr_expands
                    } else {
                        &manager.stats.isr_shrinks
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                    info!(topic = replica.topic, partition = replica.partition, isr = ?image.isr, "ISR changed");
                    let config = manager
                        .cluster
                        .image()
                        .topics
                        .get(&replica.topic)
                        .map(|t| manager.config_for(t))
                        .unwrap_or_default();
                    let (_, actions) =
                        replica.apply(&image, manager.node_id, config, manager.now());
                    manager.perform(&replica, actions);
                }
                Err(e) => {
                    warn!(topic = replica.topic, partition = replica.partition, error = %e, "AlterPartition refused");
                    replica.isr_change_failed();
                }
            }
        });
    }

    /// A follower's Fetch arrived for `replica`: its position moves the
    /// leader's state (ISR membership, the high watermark, the followers'
    /// log starts) once, when the request arrives, and what that completes
    /// is woken here — an acks=all Produce or a DeleteRecords parked in the
    /// purgatory. The Fetch itself then only reads. Errors as Kafka's:
    /// NOT_LEADER_OR_FOLLOWER off the leader or for a replica it does not
    /// know, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for a stale epoch.
    pub fn record_follower_fetch(
        self: &Arc<Self>,
        replica: &Arc<Replica>,
        follower: i32,
        position: FollowerPosition,
    ) -> Result<(), ResponseError> {
        let actions = replica.follower_fetch(
            follower,
            (position.fetch_offset, position.log_start_offset),
            position.current_leader_epoch,
            self.now(),
        )?;
        self.perform(replica, actions);
        Ok(())
    }

    /// Every `replica.lag.time.max.ms / 2` (within 100 ms .. 1 s): each
    /// leader drops from its ISR the followers that stopped catching up.
    pub(super) fn spawn_isr_tick(self: &Arc<Self>) {
        let manager = self.clone();
        let period = Duration::from_millis((self.replica_lag_time_max_ms / 2).clamp(100, 1000));
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(period);
            loop {
                ticker.tick().await;
                let now = manager.now();
                for replica in manager.all_replicas() {
                    let actions = replica.tick(now);
                    manager.perform(&replica, actions);
                }
            }
        });
    }

    /// Partitions this broker leads whose ISR is smaller than their replica
    /// set, and partitions without a leader (from the quorum's image).
    pub fn under_replicated_and_offline(&self) -> (i64, i64) {
        let under = self
            .all_replicas()
            .iter()
            .filter_map(|r| r.leader_isr())
            .filter(|(isr, replicas)| isr < replicas)
            .count();
        let image = self.cluster.image();
        let offline = image
            .topics
            .values()
            .flat_map(|t| t.partitions.iter())
            .filter(|p| p.leader < 0)
            .count();
        (
            i64::try_from(under).unwrap_or(0),
            i64::try_from(offline).unwrap_or(0),
        )
    }

    /// What the replication metrics show now.
    pub fn metrics_snapshot(&self) -> ReplicationSnapshot {
        let (under_replicated, offline) = self.under_replicated_and_offline();
        let partitions = self
            .all_replicas()
            .iter()
            .map(|r| PartitionGauges {
                topic: r.topic.clone(),
                partition: r.partition,
                isr_size: r.leader_isr().map(|(isr, _)| isr),
                lag: r.follower_lag(),
            })
            .collect();
        let count = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ReplicationSnapshot {
            under_replicated,
            offline,
            log_dir_offline: self.log_dir_offline(),
            log_dir_failures: self.log_dir_failures(),
            partitions,
            leader_changes: count(&self.stats.leader_changes),
            isr_shrinks: count(&self.stats.isr_shrinks),
            isr_expands: count(&self.stats.isr_expands),
            records_replicated: count(&self.stats.records_replicated),
        }
    }
}
