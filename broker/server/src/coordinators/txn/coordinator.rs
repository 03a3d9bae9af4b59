//! The transaction coordinator's driver around `chronik_coordinator_state::txn`:
//! runs each request's transition against the stored state, persists the
//! result before answering, and finishes prepared transactions.
//!
//! Owns: one async lock per transactional id (a request reads, decides and
//! persists under it, so two requests for one id never interleave), the
//! mapping of `TxnError`s to Kafka error codes, completing transactions
//! (markers to every partition, retried until written, then
//! CompleteCommit/CompleteAbort persisted; at most one task per id), and
//! the clock: every second it aborts transactions older than their
//! timeout, forgets ids idle past transactional.id.expiration.ms, and
//! resumes prepared transactions a previous coordinator left (after a
//! failover). Must not: encode records (`store`) or send markers itself
//! (`markers`).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use chronik_coordinator_state::txn::{
    EndOutcome, InitOutcome, TopicPartition, TxnError, TxnMetadata, TxnState,
};
use kafka_protocol::error::ResponseError;
use tokio::sync::OwnedMutexGuard;
use tracing::{info, warn};

use super::markers::{write_all, Marker};
use super::store::TxnStore;
use crate::coordinators::groups::offset_store::now_ms;
use crate::coordinators::groups::OffsetStore;
use crate::coordinators::producer_ids::ProducerIdAllocator;
use crate::replica::write::WritePath;
use crate::replica::ReplicaManager;

/// How long a state write may take (Kafka's transaction state topic
/// writes use request.timeout.ms).
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Kafka's transaction.abort.timed.out.transaction.cleanup.interval.ms is
/// 10 s; one second keeps aborts close to the producer's timeout.
const TICK: Duration = Duration::from_secs(1);
/// Kafka's transactional.id.expiration.ms default (7 days).
const TRANSACTIONAL_ID_EXPIRATION_MS: i64 = 7 * 24 * 3600 * 1000;
/// Between attempts at markers that could not be written.
const MARKER_RETRY_BACKOFF: Duration = Duration::from_millis(200);

/// Kafka's error for a refused transition.
pub fn txn_error(e: TxnError) -> ResponseError {
    match e {
        TxnError::ConcurrentTransactions => ResponseError::ConcurrentTransactions,
        TxnError::ProducerFenced => ResponseError::ProducerFenced,
        TxnError::InvalidProducerIdMapping => ResponseError::InvalidProducerIdMapping,
        TxnError::InvalidTxnState => ResponseError::InvalidTxnState,
        TxnError::InvalidTransactionTimeout => ResponseError::InvalidTransactionTimeout,
    }
}

/// What the coordinator works through: the replicas its markers and state
/// are written with, the committed offsets a marker on `__consumer_offsets`
/// completes, and the producer ids it hands out.
pub struct TxnDependencies {
    pub replicas: Arc<ReplicaManager>,
    /// Where each marker's partition leader is found.
    pub cluster: Arc<chronik_metadata::Cluster>,
    /// How markers are written to partitions led here.
    pub writes: Arc<WritePath>,
    pub offsets: Arc<OffsetStore>,
    pub producer_ids: Arc<ProducerIdAllocator>,
    /// `--max-transactional-ids`.
    pub max_transactional_ids: usize,
}

impl std::fmt::Debug for TxnDependencies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxnDependencies")
            .field("max_transactional_ids", &self.max_transactional_ids)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
pub struct TxnCoordinator {
    pub store: TxnStore,
    uses: TxnDependencies,
    /// Per transactional id, held while a request decides and persists.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Ids whose markers a task is writing.
    completing: Mutex<HashSet<String>>,
}

impl TxnCoordinator {
    pub fn new(store: TxnStore, uses: TxnDependencies) -> TxnCoordinator {
        TxnCoordinator {
            store,
            uses,
            locks: Mutex::new(HashMap::new()),
            completing: Mutex::new(HashSet::new()),
        }
    }

    async fn lock_id(&self, transactional_id: &str) -> OwnedMutexGuard<()> {
        let lock = self
            .locks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(transactional_id.to_string())
            .or_default()
            .clone();
        lock.lock_owned().await
    }

    /// InitProducerId with a transactional id: (producer id, epoch).
    pub async fn init_producer_id(
        self: &Arc<Self>,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
    ) -> Result<(i64, i16), ResponseError> {
        let _guard = self.lock_id(transactional_id).await;
        self.store.readable()?;
        let now = now_ms();
        let mut allocation_failed = false;
        let mut allocate = || {
            self.uses.producer_ids.allocate().unwrap_or_else(|e| {
                warn!(error = %e, "cannot allocate a producer id");
                allocation_failed = true;
                -1
            })
        };
        let outcome = match self.store.get(transactional_id) {
            None if self.store.len() >= self.uses.max_transactional_ids => {
                warn!(
                    transactional_id,
                    limit = self.uses.max_transactional_ids,
                    "a new transactional id refused: the coordinator holds --max-transactional-ids"
                );
                return Err(ResponseError::PolicyViolation);
            }
            None => TxnMetadata::new(allocate(), timeout_ms, now).map(InitOutcome::Ready),
            Some(m) => m.init_producer_id(timeout_ms, expected, now, &mut allocate),
        }
        .map_err(txn_error)?;
        if allocation_failed {
            return Err(ResponseError::KafkaStorageError);
        }
        match outcome {
            InitOutcome::Ready(m) => {
                let ids = (m.producer_id, m.producer_epoch);
                self.store
                    .put(transactional_id, Some(m), WRITE_TIMEOUT)
                    .await?;
                Ok(ids)
            }
            InitOutcome::AbortFirst(m) => {
                info!(
                    transactional_id,
                    producer_id = m.producer_id,
                    "aborting the open transaction of a re-initialised producer"
                );
                self.store
                    .put(transactional_id, Some(m), WRITE_TIMEOUT)
                    .await?;
                self.spawn_completion(transactional_id);
                Err(ResponseError::ConcurrentTransactions)
            }
        }
    }

    /// The stored state of `transactional_id` while this broker
    /// coordinates (the store's error otherwise), or
    /// INVALID_PRODUCER_ID_MAPPING when it has none.
    fn stored(&self, transactional_id: &str) -> Result<TxnMetadata, ResponseError> {
        self.store.readable()?;
        self.store
            .get(transactional_id)
            .ok_or(ResponseError::InvalidProducerIdMapping)
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn.
    pub async fn add_partitions(
        self: &Arc<Self>,
        transactional_id: &str,
        (producer_id, producer_epoch): (i64, i16),
        partitions: &[TopicPartition],
    ) -> Result<(), ResponseError> {
        let _guard = self.lock_id(transactional_id).await;
        let next = self
            .stored(transactional_id)?
            .add_partitions(producer_id, producer_epoch, partitions, now_ms())
            .map_err(txn_error)?;
        match next {
            Some(m) => {
                self.store
                    .put(transactional_id, Some(m), WRITE_TIMEOUT)
                    .await
            }
            None => Ok(()),
        }
    }

    /// KIP-890: whether `partition` is in the producer's open transaction.
    pub fn verify_partition(
        &self,
        transactional_id: &str,
        (producer_id, producer_epoch): (i64, i16),
        partition: &TopicPartition,
    ) -> Result<(), ResponseError> {
        self.stored(transactional_id)?
            .verify_partition(producer_id, producer_epoch, partition)
            .map_err(txn_error)
    }

    /// EndTxn: answered once the decision is durable; the markers follow.
    pub async fn end_txn(
        self: &Arc<Self>,
        transactional_id: &str,
        (producer_id, producer_epoch): (i64, i16),
        commit: bool,
    ) -> Result<(), ResponseError> {
        let _guard = self.lock_id(transactional_id).await;
        match self
            .stored(transactional_id)?
            .end(producer_id, producer_epoch, commit, now_ms())
            .map_err(txn_error)?
        {
            EndOutcome::AlreadyComplete => Ok(()),
            EndOutcome::Prepare(m) => {
                self.store
                    .put(transactional_id, Some(m), WRITE_TIMEOUT)
                    .await?;
                self.spawn_completion(transactional_id);
                Ok(())
            }
        }
    }

    /// Writes the markers of a prepared transaction (one task per id).
    fn spawn_completion(self: &Arc<Self>, transactional_id: &str) {
        if !self
            .completing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(transactional_id.to_string())
        {
            return;
        }
        let coordinator = self.clone();
        let id = transactional_id.to_string();
        tokio::spawn(async move {
            if let Err(e) = coordinator.complete(&id).await {
                warn!(transactional_id = %id, error = ?e, "transaction not completed here; a later tick or the next coordinator resumes it");
            }
            coordinator
                .completing
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id);
        });
    }

    async fn complete(self: &Arc<Self>, id: &str) -> Result<(), ResponseError> {
        let coordinator_epoch = self.store.readable()?;
        let Some(prepared) = self.store.get(id).filter(|m| m.state.is_preparing()) else {
            return Ok(());
        };
        let marker = Marker {
            producer_id: prepared.producer_id,
            producer_epoch: prepared.producer_epoch,
            commit: prepared.state == TxnState::PrepareCommit,
            coordinator_epoch,
        };
        let mut remaining = prepared.partitions.clone();
        loop {
            remaining = write_all(
                &self.uses.cluster,
                &self.uses.writes,
                &self.uses.offsets,
                &marker,
                &remaining,
            )
            .await;
            if remaining.is_empty() {
                break;
            }
            // Stop when this broker stops coordinating: the next
            // coordinator resumes from the stored PrepareCommit/Abort.
            if self.store.readable()? != coordinator_epoch {
                return Err(ResponseError::NotCoordinator);
            }
            tokio::time::sleep(MARKER_RETRY_BACKOFF).await;
        }
        let _guard = self.lock_id(id).await;
        self.store.readable()?;
        let Some(current) = self.store.get(id).filter(|m| *m == prepared) else {
            return Ok(());
        };
        match current.complete(now_ms()) {
            Some(done) => self.store.put(id, Some(done), WRITE_TIMEOUT).await,
            None => Ok(()),
        }
    }

    /// One tick of the clock (see the module docs).
    async fn tick(self: &Arc<Self>) {
        if self.store.readable().is_err() {
            return;
        }
        let due = self.store.due(now_ms(), TRANSACTIONAL_ID_EXPIRATION_MS);
        for id in &due.preparing {
            self.spawn_completion(id);
        }
        for id in &due.timed_out {
            let guard = self.lock_id(id).await;
            let Some(current) = self.store.get(id).filter(|c| c.timed_out(now_ms())) else {
                continue;
            };
            info!(transactional_id = %id, producer_id = current.producer_id, timeout_ms = current.timeout_ms, "aborting a transaction past its timeout");
            let aborting = current.fence_and_abort(now_ms());
            if self
                .store
                .put(id, Some(aborting), WRITE_TIMEOUT)
                .await
                .is_ok()
            {
                drop(guard);
                self.spawn_completion(id);
            }
        }
        for id in &due.expired {
            let _guard = self.lock_id(id).await;
            // Still idle now that the lock is held: forget it.
            if self
                .store
                .get(id)
                .is_some_and(|c| c.expired(now_ms(), TRANSACTIONAL_ID_EXPIRATION_MS))
            {
                let _ = self.store.put(id, None, WRITE_TIMEOUT).await;
            }
        }
        // Locks nobody holds or waits for.
        self.locks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|_, lock| Arc::strong_count(lock) > 1);
    }
}

/// Runs the coordinator's clock until the coordinator is dropped.
pub fn spawn_ticker(coordinator: &Arc<TxnCoordinator>) {
    let weak: Weak<TxnCoordinator> = Arc::downgrade(coordinator);
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(TICK);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            interval.tick().await;
            let Some(coordinator) = weak.upgrade() else {
                return;
            };
            coordinator.tick().await;
        }
    });
}
