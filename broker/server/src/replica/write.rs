//! The write path: the one way records enter a partition this broker leads
//! — client Produce, offset commits, transaction state and transaction
//! markers alike — and the one way its log start moves (DeleteRecords).
//!
//! Owns: `WritePath` and a request's `Write` under it, with one deadline
//! (the request's timeout from its arrival, at most `purgatory::MAX_WAIT`)
//! over everything the request waits for: the connection's append turn,
//! KIP-890 verification with the transaction coordinator, then — after the
//! append as leader (the replica looked up once and its log the only
//! handle; leadership, leader epoch, min.insync.replicas and the log write
//! done together under the partition's lock; batches stamped with the
//! epoch) — durability here (the group-commit fsync, whose `on_flush`
//! wake-up is registered here) and every ISR member's copy (acks=all, woken
//! by the follower-fetch record in `isr`). A passed deadline answers
//! REQUEST_TIMED_OUT and a failed fsync KAFKA_STORAGE_ERROR, each in one
//! place; the log's errors become Kafka's codes here. Must not: decode or
//! validate client batches (Produce does that first), or wait past the
//! deadline it is given.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use chronik_log::{AppendInfo, Error as LogError, FlushPolicy, LogManager, OnFlush, PartitionLog};
use chronik_protocol::record_batch::{parse_batches, set_partition_leader_epoch};
use chronik_protocol::BatchHeader;
use kafka_protocol::error::ResponseError;
use tokio::time::Instant;
use tracing::warn;

use super::purgatory::{Purgatory, MAX_WAIT};
use super::{Replica, ReplicaManager};
use crate::infra::append_order::AppendTurn;

/// A Kafka error code and the message sent with it.
pub type AppendError = (ResponseError, String);

/// Records appended as leader, not yet known durable or replicated.
pub struct Appended {
    /// The partition written, as this broker leads it.
    pub replica: Arc<Replica>,
    pub info: AppendInfo,
}

/// What an append must reach before it is answered (Produce's acks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// acks=1: this broker's log (durable, when fsync is on).
    Leader,
    /// acks=all: also every member of the ISR.
    All,
}

/// What the group-commit flusher calls with the partitions it made durable:
/// the requests parked on them (acks waiting for the fsync) are woken. The
/// log is opened with it, before the write path exists.
pub fn on_flush(purgatory: &Arc<Purgatory>) -> OnFlush {
    let purgatory = purgatory.clone();
    Arc::new(move |progressed: &[Arc<PartitionLog>]| {
        for log in progressed {
            purgatory.wake(log);
        }
    })
}

/// Appends as leader and waits for what acks ask, for every writer.
pub struct WritePath {
    replicas: Arc<ReplicaManager>,
    purgatory: Arc<Purgatory>,
    /// Whether an append waits for the group-commit fsync.
    fsync: bool,
}

impl std::fmt::Debug for WritePath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WritePath")
            .field("fsync", &self.fsync)
            .finish()
    }
}

/// One request's writes: everything it waits for ends at `deadline`.
pub struct Write<'a> {
    path: &'a WritePath,
    deadline: Instant,
}

impl WritePath {
    pub fn new(
        replicas: Arc<ReplicaManager>,
        purgatory: Arc<Purgatory>,
        log: &LogManager,
    ) -> WritePath {
        WritePath {
            replicas,
            purgatory,
            fsync: !matches!(log.flush_policy(), FlushPolicy::Never),
        }
    }

    /// The replicas written through.
    pub fn replicas(&self) -> &Arc<ReplicaManager> {
        &self.replicas
    }

    /// A request's writes, under one deadline `timeout` from now (at most
    /// `MAX_WAIT`).
    pub fn begin(&self, timeout: Duration) -> Write<'_> {
        Write {
            path: self,
            deadline: Instant::now() + timeout.min(MAX_WAIT),
        }
    }

    /// The replica of `topic`/`partition` that records are written to here:
    /// NOT_LEADER_OR_FOLLOWER until this broker has been assigned it.
    pub fn replica_to_write(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<Arc<Replica>, AppendError> {
        self.replicas.replica(topic, partition).ok_or((
            ResponseError::NotLeaderOrFollower,
            "partition not yet assigned here".into(),
        ))
    }

    /// The broker's own acks=all write of `batch` (built here, not by a
    /// client) to `topic`/`partition`: answered once it is durable here and
    /// in every ISR member, within `timeout`.
    pub async fn write_internal(
        &self,
        topic: &str,
        partition: i32,
        mut batch: Vec<u8>,
        timeout: Duration,
    ) -> Result<AppendInfo, AppendError> {
        let write = self.begin(timeout);
        let headers = parse_batches(&batch).map_err(|e| {
            tracing::error!(error = %e, "encoding an internal batch");
            (ResponseError::UnknownServerError, e.to_string())
        })?;
        let replica = self.replica_to_write(topic, partition)?;
        let mut outcome = write.append(&replica, &mut batch, &headers, Acks::All);
        write.await_acks(vec![&mut outcome], Acks::All).await;
        outcome.map(|a| a.info)
    }

    /// DeleteRecords on a partition led here: moves `replica`'s log start
    /// to `offset` (off the async workers), then wakes what waits on it —
    /// followers parked in Fetch learn the new log start, and the request's
    /// own wait for the replicas' low watermark re-checks.
    pub async fn delete_records_before(
        &self,
        replica: &Arc<Replica>,
        offset: i64,
    ) -> Result<(), ResponseError> {
        let log = replica.log.clone();
        let moved = tokio::task::spawn_blocking(move || log.delete_records_before(offset))
            .await
            .map_err(|_| ResponseError::UnknownServerError)?;
        moved.map_err(|e| {
            warn!(topic = replica.topic, partition = replica.partition, error = %e, "DeleteRecords failed");
            match e {
                LogError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
                LogError::UnknownTopic(_) => ResponseError::UnknownTopicOrPartition,
                _ => ResponseError::KafkaStorageError,
            }
        })?;
        self.purgatory.wake(&replica.log);
        Ok(())
    }
}

impl Write<'_> {
    /// When this request's waits end.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Waits for the connection's earlier Produce requests to append. At
    /// the deadline: REQUEST_TIMED_OUT, and the turn is handed on (the
    /// next request still appends after the earlier ones, never before).
    pub async fn wait_turn(&self, turn: &mut AppendTurn) -> Result<(), AppendError> {
        if tokio::time::timeout_at(self.deadline, turn.wait())
            .await
            .is_ok()
        {
            return Ok(());
        }
        std::mem::take(turn).hand_on();
        Err((
            ResponseError::RequestTimedOut,
            "the connection's earlier requests did not append within this request's timeout".into(),
        ))
    }

    /// Runs KIP-890's verification `check` within the deadline:
    /// REQUEST_TIMED_OUT when the coordinator has not answered by then.
    pub async fn verify(
        &self,
        check: impl Future<Output = Result<(), ResponseError>>,
    ) -> Result<(), ResponseError> {
        tokio::time::timeout_at(self.deadline, check)
            .await
            .unwrap_or(Err(ResponseError::RequestTimedOut))
    }

    /// Appends `batch` (whose batches `headers` describe) to `replica`'s log
    /// as its leader: NOT_LEADER_OR_FOLLOWER unless this broker leads it,
    /// and with `Acks::All` NOT_ENOUGH_REPLICAS while its ISR is below
    /// min.insync.replicas. Every batch is stamped with the leader epoch.
    pub fn append(
        &self,
        replica: &Arc<Replica>,
        batch: &mut [u8],
        headers: &[BatchHeader],
        acks: Acks,
    ) -> Result<Appended, AppendError> {
        let log = &replica.log;
        let write = |epoch: i32| -> Result<AppendInfo, AppendError> {
            for h in headers {
                set_partition_leader_epoch(batch, h.position, epoch);
            }
            log.append(batch, headers).map_err(|e| log_error(log, e))
        };
        let replicas = &self.path.replicas;
        let (info, actions) = replica.append_if_leader(acks == Acks::All, replicas.now(), write)?;
        replicas.perform(replica, actions);
        // Wake followers parked in Fetch on it (and, without fsync, waiting acks).
        self.path.purgatory.wake(log);
        Ok(Appended {
            replica: replica.clone(),
            info,
        })
    }

    /// Waits, for every appended partition, until what `acks` asks of it
    /// holds — durable here when fsync is on, then (`Acks::All`) in every
    /// ISR member — or fails it with the reason: KAFKA_STORAGE_ERROR (fsync
    /// failed, the partition went offline), NOT_ENOUGH_REPLICAS_AFTER_APPEND
    /// or NOT_LEADER_OR_FOLLOWER (the leader's verdict), REQUEST_TIMED_OUT
    /// at the deadline. Never waits past it.
    pub async fn await_acks(
        &self,
        mut outcomes: Vec<&mut Result<Appended, AppendError>>,
        acks: Acks,
    ) {
        if self.path.fsync {
            self.await_durable(&mut outcomes).await;
        }
        if acks == Acks::All {
            self.await_isr(&mut outcomes).await;
        }
    }

    /// The group-commit flusher has made each partition durable past its
    /// append (or one went offline: its data never will be).
    async fn await_durable(&self, outcomes: &mut [&mut Result<Appended, AppendError>]) {
        let pending: Vec<(Arc<PartitionLog>, i64)> = outcomes
            .iter()
            .filter_map(|o| o.as_ref().ok())
            .map(|a| (a.replica.log.clone(), a.info.log_end_offset))
            .collect();
        let short = |(log, end): &(Arc<PartitionLog>, i64)| log.durable_offset() < *end;
        self.path
            .purgatory
            .park_until(
                self.deadline,
                || pending.iter().map(|(log, _)| log.clone()).collect(),
                || {
                    !pending.iter().any(short)
                        || pending.iter().any(|p| short(p) && p.0.is_offline())
                },
            )
            .await;
        for outcome in outcomes.iter_mut() {
            let Ok(a) = &**outcome else { continue };
            if a.replica.log.durable_offset() < a.info.log_end_offset {
                **outcome = Err(if a.replica.log.is_offline() {
                    (
                        ResponseError::KafkaStorageError,
                        "fsync failed: partition offline".into(),
                    )
                } else {
                    (
                        ResponseError::RequestTimedOut,
                        "not durable within the request's timeout".into(),
                    )
                });
            }
        }
    }

    /// acks=all: every ISR member has each partition's records.
    async fn await_isr(&self, outcomes: &mut [&mut Result<Appended, AppendError>]) {
        let logs: Vec<Arc<PartitionLog>> = outcomes
            .iter()
            .filter_map(|o| o.as_ref().ok())
            .map(|a| a.replica.log.clone())
            .collect();
        let mut caught_up = vec![false; outcomes.len()];
        let mut check = || {
            let mut waiting = false;
            for (outcome, done) in outcomes.iter_mut().zip(caught_up.iter_mut()) {
                let Ok(a) = &**outcome else { continue };
                if *done {
                    continue;
                }
                match a.replica.acks_all_satisfied(a.info.log_end_offset) {
                    Ok(true) => *done = true,
                    Ok(false) => waiting = true,
                    Err(e) => **outcome = Err(e),
                }
            }
            !waiting
        };
        if self
            .path
            .purgatory
            .park_until(self.deadline, || logs, &mut check)
            .await
        {
            return;
        }
        for (outcome, done) in outcomes.iter_mut().zip(caught_up) {
            if !done && outcome.is_ok() {
                **outcome = Err((
                    ResponseError::RequestTimedOut,
                    "the ISR did not replicate within the request's timeout".into(),
                ));
            }
        }
    }
}

fn log_error(log: &PartitionLog, e: LogError) -> AppendError {
    match e {
        LogError::RecordTooLarge { .. } => (ResponseError::MessageTooLarge, e.to_string()),
        LogError::OutOfOrderSequence { .. } => {
            (ResponseError::OutOfOrderSequenceNumber, e.to_string())
        }
        LogError::InvalidProducerEpoch { .. } => {
            (ResponseError::InvalidProducerEpoch, e.to_string())
        }
        LogError::InvalidRecords(_) => (ResponseError::InvalidRecord, e.to_string()),
        LogError::InvalidTxnState { .. } => (ResponseError::InvalidTxnState, e.to_string()),
        // Logged once by the directory's health; clients move to the new
        // leader the controller elects.
        LogError::LogDirOffline { .. } => (ResponseError::KafkaStorageError, e.to_string()),
        other => {
            warn!(topic = log.topic(), partition = log.partition(), error = %other, "append failed");
            (ResponseError::KafkaStorageError, other.to_string())
        }
    }
}
