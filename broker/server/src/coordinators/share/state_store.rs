//! The share coordinator's store (Kafka's ShareCoordinator and
//! `__share_group_state`): the durable state of every share-partition, in
//! the internal topic `__share_group_state` (one partition; its leader is
//! the share coordinator of every share group, as `__consumer_offsets`-0's
//! leader is the group coordinator).
//!
//! Owns: the map (group, topic id, partition) → latest snapshot, rebuilt
//! by replaying the topic at start and on becoming its leader; writes
//! (acks=all: durable here and in every ISR member before the map changes
//! and the writer is answered, so acknowledged state survives a
//! coordinator failover); Kafka's fencing of writers — a write with an
//! older state epoch is FENCED_STATE_EPOCH, one from an older partition
//! leader epoch FENCED_LEADER_EPOCH. Must not: decide record states
//! (`chronik_coordinator_state::share_partition`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chronik_log::{LogManager, PartitionLog};
use chronik_protocol::records::{build_batch, SimpleRecord};
use kafka_protocol::error::ResponseError;
use prometheus_client::metrics::counter::Counter;

use super::records::{
    decode_key, decode_value, encode_key, encode_value, ShareKey, StoredShareState,
};
use crate::coordinators::groups::offset_store::now_ms;
use crate::coordinators::internal_topic::{replay_records, InternalPartition, Loaded};
use crate::replica::write::WritePath;

pub const SHARE_STATE_TOPIC: &str = "__share_group_state";

/// Most share-partitions one coordinator keeps state for (each is bounded
/// by `MAX_SNAPSHOT_OFFSETS`): writes past it answer
/// COORDINATOR_NOT_AVAILABLE rather than grow without end.
pub const MAX_SHARE_PARTITIONS: usize = 100_000;

pub struct ShareStateStore {
    partition: InternalPartition,
    states: Mutex<HashMap<ShareKey, StoredShareState>>,
    skipped: Counter,
    loaded: Loaded,
}

impl std::fmt::Debug for ShareStateStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShareStateStore").finish()
    }
}

impl ShareStateStore {
    pub fn open(
        log: &Arc<LogManager>,
        writes: &Arc<WritePath>,
        skipped: Counter,
    ) -> anyhow::Result<ShareStateStore> {
        let (partition, now) = InternalPartition::open(log, writes, SHARE_STATE_TOPIC)?;
        let states = replay(&now, &skipped)?;
        Ok(ShareStateStore {
            partition,
            states: Mutex::new(states),
            skipped,
            loaded: Loaded::new(SHARE_STATE_TOPIC),
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<ShareKey, StoredShareState>> {
        self.states.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Re-reads every share-partition's state (this broker just became the
    /// share coordinator, in `leader_epoch`).
    pub fn reload(&self, leader_epoch: i32) -> anyhow::Result<()> {
        let states = replay(&*self.partition.require()?, &self.skipped)?;
        tracing::info!(
            share_partitions = states.len(),
            leader_epoch,
            "loaded share-group state as the new share coordinator"
        );
        *self.lock() = states;
        self.loaded.set(leader_epoch);
        Ok(())
    }

    /// NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS unless this broker is
    /// the share coordinator with its state loaded.
    pub fn readable(&self) -> Result<(), ResponseError> {
        self.loaded.readable(self.partition.replicas()).map(drop)
    }

    pub fn read(&self, key: &ShareKey) -> Result<Option<StoredShareState>, ResponseError> {
        self.readable()?;
        Ok(self.lock().get(key).cloned())
    }

    /// Every share-partition of `group`: (topic id, partition, state).
    pub fn group(
        &self,
        group: &str,
    ) -> Result<Vec<([u8; 16], i32, StoredShareState)>, ResponseError> {
        self.readable()?;
        let mut out: Vec<_> = self
            .lock()
            .iter()
            .filter(|((g, _, _), _)| g == group)
            .map(|((_, t, p), s)| (*t, *p, s.clone()))
            .collect();
        out.sort_by_key(|(t, p, _)| (*t, *p));
        Ok(out)
    }

    /// Stores `state` for `key` after Kafka's fencing checks; `initialize`
    /// (InitializeShareGroupState, AlterShareGroupOffsets) may start a new
    /// state epoch, a plain write must be at the stored one.
    pub async fn write(
        &self,
        key: &ShareKey,
        state: StoredShareState,
        initialize: bool,
        timeout: Duration,
    ) -> Result<(), ResponseError> {
        self.readable()?;
        {
            let states = self.lock();
            match states.get(key) {
                Some(current) => {
                    let epoch = state.snapshot.state_epoch;
                    let stale = if initialize {
                        epoch < current.snapshot.state_epoch
                    } else {
                        epoch != current.snapshot.state_epoch
                    };
                    if stale {
                        return Err(ResponseError::FencedStateEpoch);
                    }
                    if !initialize && state.leader_epoch < current.leader_epoch {
                        return Err(ResponseError::FencedLeaderEpoch);
                    }
                }
                None if states.len() >= MAX_SHARE_PARTITIONS => {
                    return Err(ResponseError::CoordinatorNotAvailable)
                }
                None => {}
            }
        }
        self.append(key, Some(&state), timeout).await?;
        self.lock().insert(key.clone(), state);
        Ok(())
    }

    /// Forgets `key`'s state (DeleteShareGroupState).
    pub async fn delete(&self, key: &ShareKey, timeout: Duration) -> Result<(), ResponseError> {
        self.readable()?;
        if !self.lock().contains_key(key) {
            return Ok(());
        }
        self.append(key, None, timeout).await?;
        self.lock().remove(key);
        Ok(())
    }

    async fn append(
        &self,
        key: &ShareKey,
        state: Option<&StoredShareState>,
        timeout: Duration,
    ) -> Result<(), ResponseError> {
        let record = SimpleRecord {
            key: Some(encode_key(key)),
            value: state.map(encode_value),
            timestamp: now_ms(),
        };
        self.partition.append(build_batch(&[record]), timeout).await
    }
}

fn replay(
    partition: &PartitionLog,
    skipped: &Counter,
) -> anyhow::Result<HashMap<ShareKey, StoredShareState>> {
    let mut states = HashMap::new();
    replay_records(partition, skipped, |record| {
        let Some(key) = record.key.clone().and_then(decode_key) else {
            return false;
        };
        match record.value.clone() {
            None => {
                states.remove(&key);
                true
            }
            Some(value) => match decode_value(value) {
                Some(s) if states.len() < MAX_SHARE_PARTITIONS || states.contains_key(&key) => {
                    states.insert(key, s);
                    true
                }
                _ => false,
            },
        }
    })?;
    Ok(states)
}
