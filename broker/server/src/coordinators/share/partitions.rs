//! The share-partition manager (Kafka's SharePartitionManager): on the
//! leader of a topic partition, every share group's `SharePartition` of it
//! — loaded from the share coordinator when first used in a leader epoch,
//! fed the batches read from the log, and written back through the
//! persister.
//!
//! Owns: the share-partitions this broker leads, keyed (group, topic,
//! partition); loading (the stored snapshot, else a new state at the log
//! start or the high watermark as `share.auto.offset.reset` says, written
//! at once so "latest" does not slide); acquiring for a ShareFetch (read
//! from the first acquirable offset up to the high watermark — the last
//! stable offset for `read_committed` — within the request's bytes);
//! acknowledgements, durable before they are answered (applied to a copy
//! that replaces the state only once the coordinator has stored it); lock
//! expiry and releasing a departed member's records, written back by the
//! ticker. Must not: keep state for a partition it no longer leads (a
//! share-partition is reloaded when the leader epoch changes).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use chronik_coordinator_state::share_partition::{
    AckBatch, AcquireMode, Acquired, SharePartition, ShareSnapshot,
};
use chronik_coordinator_state::Millis;
use chronik_metadata::Cluster;
use chronik_protocol::record_batch::parse_batches;
use kafka_protocol::error::ResponseError;
use tracing::{debug, warn};

use super::config::{settings_of, AutoOffsetReset};
use super::persister::SharePersister;
use crate::coordinators::groups::offset_store::now_ms;
use crate::infra::metrics_share::{AckTypeLabels, ShareMetrics};
use crate::replica::high_watermark::{consumer_high_watermark, last_stable_offset};
use crate::replica::{Replica, ReplicaManager};

/// (group id, topic, partition).
pub type SpKey = (String, String, i32);

/// How often locks are checked for expiry and released records written.
const TICK: Duration = Duration::from_millis(200);
/// Most share-partitions one broker keeps (each bounded by its lock
/// window): past it a ShareFetch for a new one is refused.
const MAX_SHARE_PARTITIONS: usize = 100_000;

struct Slot {
    /// The leader epoch `state` was loaded in.
    leader_epoch: i32,
    topic_id: [u8; 16],
    state: SharePartition,
    /// Changed in memory since last written (lock expiry, a departed
    /// member's release).
    dirty: bool,
}

/// What a fetch from one share-partition produced.
#[derive(Debug, Default)]
pub struct Fetched {
    pub records: Bytes,
    pub acquired: Vec<Acquired>,
}

pub struct SharePartitions {
    persister: Arc<SharePersister>,
    metrics: ShareMetrics,
    replicas: Arc<ReplicaManager>,
    cluster: Arc<Cluster>,
    slots: Mutex<HashMap<SpKey, Arc<tokio::sync::Mutex<Option<Slot>>>>>,
}

impl std::fmt::Debug for SharePartitions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharePartitions").finish()
    }
}

impl SharePartitions {
    pub fn new(
        persister: Arc<SharePersister>,
        (replicas, cluster): (Arc<ReplicaManager>, Arc<Cluster>),
        metrics: ShareMetrics,
    ) -> Arc<SharePartitions> {
        Arc::new(SharePartitions {
            persister,
            metrics,
            replicas,
            cluster,
            slots: Mutex::new(HashMap::new()),
        })
    }

    pub fn persister(&self) -> &Arc<SharePersister> {
        &self.persister
    }

    fn slot(&self, key: &SpKey) -> Result<Arc<tokio::sync::Mutex<Option<Slot>>>, ResponseError> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = slots.get(key) {
            return Ok(s.clone());
        }
        if slots.len() >= MAX_SHARE_PARTITIONS {
            return Err(ResponseError::CoordinatorNotAvailable);
        }
        let s = Arc::new(tokio::sync::Mutex::new(None));
        slots.insert(key.clone(), s.clone());
        Ok(s)
    }

    /// The partition's replica and leader epoch, if this broker leads it.
    fn leading(&self, topic: &str, partition: i32) -> Result<(Arc<Replica>, i32), ResponseError> {
        let replica = self
            .replicas
            .replica(topic, partition)
            .ok_or(ResponseError::NotLeaderOrFollower)?;
        let epoch = replica
            .leader_epoch()
            .ok_or(ResponseError::NotLeaderOrFollower)?;
        Ok((replica, epoch))
    }

    /// Makes `slot` hold the share-partition for the current leader epoch.
    async fn ensure_loaded(
        &self,
        key: &SpKey,
        slot: &mut Option<Slot>,
        replica: &Replica,
        leader_epoch: i32,
    ) -> Result<(), ResponseError> {
        let image = self.cluster.image();
        let settings = settings_of(&image, &key.0);
        if let Some(s) = slot.as_mut() {
            if s.leader_epoch == leader_epoch {
                s.state.set_config(settings.partition);
                s.state.follow_log_start(replica.log.log_start_offset());
                return Ok(());
            }
        }
        let topic_id = image
            .topics
            .get(&key.1)
            .map(|t| t.topic_id)
            .ok_or(ResponseError::UnknownTopicOrPartition)?;
        let stored = self
            .persister
            .read(&key.0, topic_id, key.2, leader_epoch)
            .await?;
        let state = match stored {
            Some(snapshot) => SharePartition::from_snapshot(&snapshot, settings.partition).unwrap_or_else(|| {
                warn!(group = %key.0, topic = %key.1, partition = key.2, "stored share-partition state is not valid; starting at its start offset");
                SharePartition::new(snapshot.start_offset, snapshot.state_epoch, settings.partition)
            }),
            None => {
                let start = match settings.auto_offset_reset {
                    AutoOffsetReset::Earliest => replica.log.log_start_offset(),
                    AutoOffsetReset::Latest => consumer_high_watermark(replica)?,
                };
                let fresh = SharePartition::new(start, 0, settings.partition);
                self.persister
                    .write(&key.0, topic_id, key.2, leader_epoch, &fresh.snapshot())
                    .await?;
                fresh
            }
        };
        let mut state = state;
        state.follow_log_start(replica.log.log_start_offset());
        debug!(group = %key.0, topic = %key.1, partition = key.2, start = state.start_offset(), "share-partition loaded");
        *slot = Some(Slot {
            leader_epoch,
            topic_id,
            state,
            dirty: false,
        });
        Ok(())
    }

    /// Whether `member` could acquire something in this share-partition
    /// now (a parked ShareFetch's wake-up check). Never loads.
    pub fn has_acquirable(&self, key: &SpKey) -> bool {
        let Ok((replica, epoch)) = self.leading(&key.1, key.2) else {
            return true;
        };
        let slot = {
            let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            slots.get(key).cloned()
        };
        let Some(slot) = slot else {
            return true;
        };
        let Ok(guard) = slot.try_lock() else {
            return false;
        };
        match guard.as_ref() {
            Some(s) if s.leader_epoch == epoch => {
                let bound = consumer_high_watermark(&replica).unwrap_or(0);
                s.state.can_acquire(bound)
            }
            _ => true,
        }
    }

    /// Acquires records for `member` from one share-partition.
    pub async fn fetch(
        &self,
        key: &SpKey,
        member: &str,
        max_bytes: usize,
        (max_records, mode): (usize, AcquireMode),
    ) -> Result<Fetched, ResponseError> {
        let (replica, epoch) = self.leading(&key.1, key.2)?;
        let slot = self.slot(key)?;
        let mut guard = slot.lock().await;
        self.ensure_loaded(key, &mut guard, &replica, epoch).await?;
        let Some(s) = guard.as_mut() else {
            return Err(ResponseError::UnknownServerError);
        };
        let now = now_ms_u();
        let expired = s.state.expire_locks(now);
        if expired > 0 {
            s.dirty = true;
            self.metrics.lock_expired_records.inc_by(expired as u64);
        }
        let settings = settings_of(&self.cluster.image(), &key.0);
        let hw = consumer_high_watermark(&replica)?;
        let bound = if settings.read_committed {
            last_stable_offset(&replica.log, hw)
        } else {
            hw
        };
        if !s.state.can_acquire(bound) || max_bytes == 0 {
            return Ok(Fetched::default());
        }
        let from = s.state.next_fetch_offset();
        let records = match replica.log.read(from, max_bytes.max(1), bound) {
            Ok(bytes) => bytes,
            Err(chronik_log::Error::OffsetOutOfRange { .. }) => {
                s.state.follow_log_start(replica.log.log_start_offset());
                return Ok(Fetched::default());
            }
            Err(e) => {
                warn!(topic = %key.1, partition = key.2, error = %e, "share fetch read failed");
                return Err(ResponseError::KafkaStorageError);
            }
        };
        let batches: Vec<(i64, i64)> = parse_batches(&records)
            .map_err(|_| ResponseError::CorruptMessage)?
            .iter()
            .map(|b| (b.base_offset, b.last_offset()))
            .collect();
        // Acquisitions are not written (as in Kafka): their delivery counts
        // reach the coordinator with the next acknowledgement, release or
        // lock expiry of the share-partition.
        let acquired = s
            .state
            .acquire(member, &batches, bound, (max_records, mode), now);
        for run in &acquired {
            let n = u64::try_from(run.last_offset - run.first_offset + 1).unwrap_or(0);
            self.metrics.acquired_records.inc_by(n);
            if run.delivery_count > 1 {
                self.metrics.redelivered_records.inc_by(n);
            }
        }
        Ok(Fetched { records, acquired })
    }

    /// Applies `member`'s acknowledgements; answered only once the new
    /// state is stored by the share coordinator.
    pub async fn acknowledge(
        &self,
        key: &SpKey,
        member: &str,
        batches: &[AckBatch],
    ) -> Result<(), ResponseError> {
        let (replica, epoch) = self.leading(&key.1, key.2)?;
        let slot = self.slot(key)?;
        let mut guard = slot.lock().await;
        self.ensure_loaded(key, &mut guard, &replica, epoch).await?;
        let Some(s) = guard.as_mut() else {
            return Err(ResponseError::UnknownServerError);
        };
        let mut next = s.state.clone();
        let changed = next
            .acknowledge(member, batches, now_ms_u())
            .map_err(|e| match e {
                chronik_coordinator_state::share_partition::AckError::InvalidRequest(_) => {
                    ResponseError::InvalidRequest
                }
                chronik_coordinator_state::share_partition::AckError::InvalidRecordState(_) => {
                    ResponseError::InvalidRecordState
                }
            })?;
        if changed {
            self.persister
                .write(&key.0, s.topic_id, key.2, epoch, &next.snapshot())
                .await?;
        }
        s.state = next;
        count_acknowledged(&self.metrics, batches);
        Ok(())
    }

    /// Releases what `member` holds in these share-partitions (its share
    /// session closed, was replaced or evicted).
    pub async fn release_member(&self, group: &str, member: &str, partitions: &[(String, i32)]) {
        for (topic, partition) in partitions {
            let key = (group.to_string(), topic.clone(), *partition);
            let slot = {
                let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
                slots.get(&key).cloned()
            };
            if let Some(slot) = slot {
                if let Some(s) = slot.lock().await.as_mut() {
                    if s.state.release_member(member) > 0 {
                        s.dirty = true;
                    }
                }
            }
        }
    }

    /// The state of a loaded share-partition here (describe, tests).
    pub async fn snapshot(&self, key: &SpKey) -> Option<ShareSnapshot> {
        let slot = {
            let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            slots.get(key).cloned()
        }?;
        let guard = slot.lock().await;
        guard.as_ref().map(|s| s.state.snapshot())
    }

    /// Drops every loaded share-partition of `group` on `topic` (its
    /// offsets were reset or deleted: the next use reloads).
    pub fn forget(&self, group: &str, topic: &str) {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.retain(|(g, t, _), _| !(g == group && t == topic));
    }

    /// One pass of the ticker: expires locks, writes back what changed,
    /// drops share-partitions no longer led here.
    async fn tick(&self) {
        let all: Vec<(SpKey, Arc<tokio::sync::Mutex<Option<Slot>>>)> = {
            let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            slots.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
        };
        let now = now_ms_u();
        for (key, slot) in all {
            let leading = self.leading(&key.1, key.2).ok().map(|(_, e)| e);
            let mut guard = slot.lock().await;
            let Some(s) = guard.as_mut() else {
                continue;
            };
            if leading != Some(s.leader_epoch) {
                *guard = None;
                drop(guard);
                let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
                if slots.get(&key).is_some_and(|v| Arc::ptr_eq(v, &slot)) {
                    slots.remove(&key);
                }
                continue;
            }
            let expired = s.state.expire_locks(now);
            if expired > 0 {
                s.dirty = true;
                self.metrics.lock_expired_records.inc_by(expired as u64);
            }
            if s.dirty {
                match self
                    .persister
                    .write(
                        &key.0,
                        s.topic_id,
                        key.2,
                        s.leader_epoch,
                        &s.state.snapshot(),
                    )
                    .await
                {
                    Ok(()) => s.dirty = false,
                    Err(e) => {
                        debug!(group = %key.0, topic = %key.1, partition = key.2, error = %e, "writing share-partition state failed; retried at the next tick")
                    }
                }
            }
        }
    }

    pub fn spawn_ticker(self: &Arc<Self>) {
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(TICK);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                interval.tick().await;
                let Some(me) = me.upgrade() else {
                    return;
                };
                me.tick().await;
            }
        });
    }
}

fn now_ms_u() -> Millis {
    Millis::try_from(now_ms()).unwrap_or(0)
}

/// Counts acknowledged records by type (once stored).
fn count_acknowledged(metrics: &ShareMetrics, batches: &[AckBatch]) {
    use chronik_coordinator_state::share_partition::AckType;
    for b in batches {
        let len = u64::try_from(b.last_offset - b.first_offset + 1).unwrap_or(0);
        let per_type: Vec<(AckType, u64)> = if b.types.len() == 1 {
            vec![(b.types[0], len)]
        } else {
            b.types.iter().map(|t| (*t, 1)).collect()
        };
        for (t, n) in per_type {
            let ack_type = match t {
                AckType::Gap => "gap",
                AckType::Accept => "accept",
                AckType::Release => "release",
                AckType::Reject => "reject",
                AckType::Renew => "renew",
            };
            metrics
                .acknowledged_records
                .get_or_create(&AckTypeLabels { ack_type })
                .inc_by(n);
        }
    }
}
