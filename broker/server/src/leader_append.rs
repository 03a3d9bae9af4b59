//! Append as leader: the one way records enter a partition this broker
//! leads — client Produce and the offset store's commits alike.
//!
//! Owns: the append itself (leadership, leader epoch, min.insync.replicas
//! and the log write done together under the partition's lock, batches
//! stamped with the epoch), the log's error codes as Kafka names them, the
//! acks=all wait for the ISR, and `append_replicated`: the whole acks=all
//! write (append, durable here, in every ISR member) that the broker's own
//! writers use — offset commits, transaction state, transaction markers.
//! Must not: decode or validate client batches (Produce does that first).

use std::sync::Arc;
use std::time::Duration;

use chronik_log::{AppendInfo, Error as LogError, PartitionLog};
use chronik_protocol::record_batch::set_partition_leader_epoch;
use chronik_protocol::BatchHeader;
use kafka_protocol::error::ResponseError;
use tracing::warn;

use crate::broker::Broker;
use crate::durability::wait_until_durable;
use crate::replica::Replica;

/// A Kafka error code and the message sent with it.
pub type AppendError = (ResponseError, String);

/// Records appended as leader, not yet known durable or replicated.
pub struct Appended {
    pub log: Arc<PartitionLog>,
    pub info: AppendInfo,
    /// The leader replica whose ISR must catch up (acks=all); `None` once
    /// it has.
    pub replica: Option<Arc<Replica>>,
}

/// Appends `batch` (whose batches `headers` describe) to `log` as its
/// leader: NOT_LEADER_OR_FOLLOWER unless this broker leads it, and with
/// `acks_all` NOT_ENOUGH_REPLICAS while its ISR is below
/// min.insync.replicas. Every batch is stamped with the leader epoch.
pub fn append_as_leader(
    broker: &Broker,
    log: &Arc<PartitionLog>,
    batch: &mut [u8],
    headers: &[BatchHeader],
    acks_all: bool,
) -> Result<Appended, AppendError> {
    let write = |epoch: i32| -> Result<AppendInfo, AppendError> {
        for h in headers {
            set_partition_leader_epoch(batch, h.position, epoch);
        }
        log.append(batch, headers).map_err(|e| log_error(log, e))
    };
    let manager = &broker.replicas;
    let replica = manager.replica(log.topic(), log.partition()).ok_or((
        ResponseError::NotLeaderOrFollower,
        "partition not yet assigned here".into(),
    ))?;
    let (info, actions) = replica.append_as_leader(acks_all, manager.now(), write)?;
    manager.perform(&replica, actions);
    // Wake followers parked in Fetch on it (and, without fsync, waiting acks).
    broker.purgatory.wake(log);
    Ok(Appended {
        log: log.clone(),
        info,
        replica: Some(replica),
    })
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
        other => {
            warn!(topic = log.topic(), partition = log.partition(), error = %other, "append failed");
            (ResponseError::KafkaStorageError, other.to_string())
        }
    }
}

/// acks=all: waits until every ISR member has each appended partition's
/// records, or fails the partition with the leader's reason
/// (NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER) or
/// REQUEST_TIMED_OUT.
pub async fn wait_for_isr(
    broker: &Broker,
    mut outcomes: Vec<&mut Result<Appended, AppendError>>,
    timeout: Duration,
) {
    let deadline = tokio::time::Instant::now() + timeout;
    let logs: Vec<Arc<PartitionLog>> = outcomes
        .iter()
        .filter_map(|o| {
            o.as_ref()
                .ok()
                .filter(|a| a.replica.is_some())
                .map(|a| a.log.clone())
        })
        .collect();
    let watch = broker.purgatory.watch(logs.iter().map(|l| &**l));
    loop {
        let mut waiting = false;
        for outcome in outcomes.iter_mut() {
            let Ok(a) = &mut **outcome else { continue };
            let Some(replica) = &a.replica else { continue };
            match replica.acks_all_satisfied(a.info.log_end_offset) {
                Ok(true) => a.replica = None,
                Ok(false) => waiting = true,
                Err(e) => **outcome = Err(e),
            }
        }
        if !waiting {
            return;
        }
        tokio::select! {
            () = watch.progressed() => {}
            _ = tokio::time::sleep_until(deadline) => {
                for outcome in outcomes.iter_mut() {
                    if matches!(&**outcome, Ok(a) if a.replica.is_some()) {
                        **outcome = Err((ResponseError::RequestTimedOut, "the ISR did not replicate within timeout_ms".into()));
                    }
                }
                return;
            }
        }
    }
}

/// Appends `batch` (built by the broker itself, not a client) as the
/// leader of `log` with acks=all: answered once it is durable here and in
/// every ISR member, within `timeout`.
pub async fn append_replicated(
    broker: &Broker,
    log: &Arc<PartitionLog>,
    mut batch: Vec<u8>,
    timeout: Duration,
) -> Result<AppendInfo, AppendError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let headers = chronik_protocol::record_batch::parse_batches(&batch).map_err(|e| {
        tracing::error!(error = %e, "encoding an internal batch");
        (ResponseError::UnknownServerError, e.to_string())
    })?;
    let mut outcome = append_as_leader(broker, log, &mut batch, &headers, true);
    if let Ok(appended) = &outcome {
        if broker.fsync_enabled()
            && !wait_until_durable(
                broker,
                &[(log.clone(), appended.info.log_end_offset)],
                timeout,
            )
            .await
        {
            outcome = Err(if log.is_offline() {
                (
                    ResponseError::KafkaStorageError,
                    "fsync failed: partition offline".into(),
                )
            } else {
                (
                    ResponseError::RequestTimedOut,
                    "not durable within the timeout".into(),
                )
            });
        }
    }
    let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
    wait_for_isr(broker, vec![&mut outcome], remaining).await;
    outcome.map(|a| a.info)
}
