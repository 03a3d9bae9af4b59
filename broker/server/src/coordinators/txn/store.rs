//! Transaction state, durable in the internal topic `__transaction_state`
//! (one partition; its leader is every transactional id's coordinator).
//!
//! Owns: the in-memory map transactional id -> `TxnMetadata`, rebuilt by
//! replaying the topic at start and on becoming its leader, and writing a
//! new state for an id (acks=all: durable here and in every ISR member
//! before the map changes, so an answered request survives a coordinator
//! failover). Must not: decide transitions (`chronik_coordinator_state::txn`) or
//! write markers (`markers`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chronik_coordinator_state::txn::TxnMetadata;
use chronik_log::{LogManager, PartitionLog};
use chronik_protocol::records::{build_batch, SimpleRecord};
use kafka_protocol::error::ResponseError;
use prometheus_client::metrics::counter::Counter;

use super::records::{decode_key, decode_value, encode_key, encode_value};
use crate::coordinators::groups::offset_store::now_ms;
use crate::coordinators::internal_topic::{replay_records, InternalPartition, Loaded};
use crate::replica::write::WritePath;

pub const TXN_TOPIC: &str = "__transaction_state";

/// What the coordinator's clock must do (`TxnStore::due`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Due {
    pub preparing: Vec<String>,
    pub timed_out: Vec<String>,
    pub expired: Vec<String>,
}

pub struct TxnStore {
    partition: InternalPartition,
    txns: Mutex<HashMap<String, TxnMetadata>>,
    skipped: Counter,
    loaded: Loaded,
}

impl std::fmt::Debug for TxnStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxnStore")
            .field("topic", &TXN_TOPIC)
            .finish()
    }
}

impl TxnStore {
    pub fn open(
        log: &Arc<LogManager>,
        writes: &Arc<WritePath>,
        skipped: Counter,
    ) -> anyhow::Result<TxnStore> {
        let (partition, now) = InternalPartition::open(log, writes, TXN_TOPIC)?;
        let txns = replay(&now, &skipped)?;
        Ok(TxnStore {
            partition,
            txns: Mutex::new(txns),
            skipped,
            loaded: Loaded::new(TXN_TOPIC),
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, TxnMetadata>> {
        self.txns.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Re-reads every transactional id's state (this broker just became
    /// the coordinator, in `leader_epoch`).
    pub fn reload(&self, leader_epoch: i32) -> anyhow::Result<()> {
        let txns = replay(&*self.partition.require()?, &self.skipped)?;
        tracing::info!(
            transactional_ids = txns.len(),
            leader_epoch,
            "loaded transaction state as the new transaction coordinator"
        );
        *self.lock() = txns;
        self.loaded.set(leader_epoch);
        Ok(())
    }

    /// The coordinator epoch (the leader epoch of `__transaction_state`-0)
    /// when this broker coordinates transactions with its state loaded:
    /// NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS otherwise.
    pub fn readable(&self) -> Result<i32, ResponseError> {
        self.loaded.readable(self.partition.replicas())
    }

    /// How many transactional ids are held.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    pub fn get(&self, transactional_id: &str) -> Option<TxnMetadata> {
        self.lock().get(transactional_id).cloned()
    }

    /// The ids the coordinator's clock must act on at `now`, found under
    /// the lock without copying anyone's state: prepared (markers to
    /// write), open past their timeout, idle past `expiration_ms`.
    pub fn due(&self, now: i64, expiration_ms: i64) -> Due {
        let mut due = Due::default();
        for (id, m) in self.lock().iter() {
            if m.state.is_preparing() {
                due.preparing.push(id.clone());
            } else if m.timed_out(now) {
                due.timed_out.push(id.clone());
            } else if m.expired(now, expiration_ms) {
                due.expired.push(id.clone());
            }
        }
        due
    }

    /// Every id's state (DescribeTransactions, ListTransactions).
    pub fn all(&self) -> Vec<(String, TxnMetadata)> {
        self.lock()
            .iter()
            .map(|(id, m)| (id.clone(), m.clone()))
            .collect()
    }

    /// Stores `state` for the id (`None`: forget it); the map changes only
    /// once the record is durable and replicated.
    pub async fn put(
        &self,
        transactional_id: &str,
        state: Option<TxnMetadata>,
        timeout: Duration,
    ) -> Result<(), ResponseError> {
        let record = SimpleRecord {
            key: Some(encode_key(transactional_id)),
            value: state.as_ref().map(encode_value),
            timestamp: now_ms(),
        };
        self.partition
            .append(build_batch(&[record]), timeout)
            .await?;
        let mut txns = self.lock();
        match state {
            Some(m) => txns.insert(transactional_id.to_string(), m),
            None => txns.remove(transactional_id),
        };
        Ok(())
    }
}

fn replay(
    partition: &PartitionLog,
    skipped: &Counter,
) -> anyhow::Result<HashMap<String, TxnMetadata>> {
    let mut txns = HashMap::new();
    replay_records(partition, skipped, |record| {
        let Some(id) = record.key.clone().and_then(decode_key) else {
            return false;
        };
        match record.value.clone() {
            None => {
                txns.remove(&id);
                true
            }
            Some(value) => match decode_value(value) {
                Some(m) => {
                    txns.insert(id, m);
                    true
                }
                None => false,
            },
        }
    })?;
    Ok(txns)
}
