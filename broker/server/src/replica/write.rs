//! The write path: the one way records enter a partition this broker leads
//! — client Produce, offset commits, transaction state and transaction
//! markers alike.
//!
//! Owns: appending as leader (the replica looked up once and its log the
//! only handle; leadership, leader epoch, min.insync.replicas and the log
//! write done together under the partition's lock; batches stamped with
//! the epoch), the log's errors as Kafka's codes, and the wait that follows
//! an append — durable here (group-commit fsync), then in every ISR member
//! (acks=all) — under one deadline, a failed fsync answered
//! KAFKA_STORAGE_ERROR and a passed deadline REQUEST_TIMED_OUT, each in one
//! place. Must not: decode or validate client batches (Produce does that
//! first), or wait past the deadline it is given.

use std::sync::Arc;
use std::time::Duration;

use chronik_log::{AppendInfo, Error as LogError, FlushPolicy, PartitionLog};
use chronik_protocol::record_batch::{parse_batches, set_partition_leader_epoch};
use chronik_protocol::BatchHeader;
use kafka_protocol::error::ResponseError;
use tokio::time::Instant;
use tracing::warn;

use super::{Replica, ReplicaManager};

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

impl ReplicaManager {
    /// The replica of `topic`/`partition` that records are written to here:
    /// NOT_LEADER_OR_FOLLOWER until this broker has been assigned it.
    pub fn replica_to_write(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<Arc<Replica>, AppendError> {
        self.replica(topic, partition).ok_or((
            ResponseError::NotLeaderOrFollower,
            "partition not yet assigned here".into(),
        ))
    }

    /// Appends `batch` (whose batches `headers` describe) to `replica`'s log
    /// as its leader: NOT_LEADER_OR_FOLLOWER unless this broker leads it,
    /// and with `Acks::All` NOT_ENOUGH_REPLICAS while its ISR is below
    /// min.insync.replicas. Every batch is stamped with the leader epoch.
    pub fn append_as_leader(
        self: &Arc<Self>,
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
        let (info, actions) = replica.append_as_leader(acks == Acks::All, self.now(), write)?;
        self.perform(replica, actions);
        // Wake followers parked in Fetch on it (and, without fsync, waiting acks).
        self.purgatory.wake(log);
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
    /// at `deadline`. Never waits past `deadline`.
    pub async fn await_acks(
        &self,
        mut outcomes: Vec<&mut Result<Appended, AppendError>>,
        acks: Acks,
        deadline: Instant,
    ) {
        if !matches!(self.log.flush_policy(), FlushPolicy::Never) {
            self.await_durable(&mut outcomes, deadline).await;
        }
        if acks == Acks::All {
            self.await_isr(&mut outcomes, deadline).await;
        }
    }

    /// The group-commit flusher has made each partition durable past its
    /// append (or one went offline: its data never will be).
    async fn await_durable(
        &self,
        outcomes: &mut [&mut Result<Appended, AppendError>],
        deadline: Instant,
    ) {
        let pending: Vec<(Arc<PartitionLog>, i64)> = outcomes
            .iter()
            .filter_map(|o| o.as_ref().ok())
            .map(|a| (a.replica.log.clone(), a.info.log_end_offset))
            .collect();
        let short = |(log, end): &(Arc<PartitionLog>, i64)| log.durable_offset() < *end;
        self.purgatory
            .park_until(
                deadline,
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
    async fn await_isr(
        &self,
        outcomes: &mut [&mut Result<Appended, AppendError>],
        deadline: Instant,
    ) {
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
            .purgatory
            .park_until(deadline, || logs, &mut check)
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

    /// The broker's own acks=all write of `batch` (built here, not by a
    /// client) to `topic`/`partition`: answered once it is durable here and
    /// in every ISR member, within `timeout`.
    pub async fn write(
        self: &Arc<Self>,
        topic: &str,
        partition: i32,
        mut batch: Vec<u8>,
        timeout: Duration,
    ) -> Result<AppendInfo, AppendError> {
        let deadline = Instant::now() + timeout;
        let headers = parse_batches(&batch).map_err(|e| {
            tracing::error!(error = %e, "encoding an internal batch");
            (ResponseError::UnknownServerError, e.to_string())
        })?;
        let replica = self.replica_to_write(topic, partition)?;
        let mut outcome = self.append_as_leader(&replica, &mut batch, &headers, Acks::All);
        self.await_acks(vec![&mut outcome], Acks::All, deadline)
            .await;
        outcome.map(|a| a.info)
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
