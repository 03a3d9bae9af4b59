//! Produce: validates each partition's record batches as Kafka's log
//! validator does (magic v2, CRC-32C, one batch per partition from v3,
//! offset range vs record count, record framing, compressed records
//! inflated within a bound), refuses internal topics, appends them with offsets assigned in place, and — for acks=1 and
//! acks=all — answers only once the group-commit flusher has made them
//! durable. acks=0 gets no response at all, as in Kafka.
//!
//! In cluster mode only the partition leader appends (else
//! NOT_LEADER_OR_FOLLOWER), batches carry its leader epoch, acks=all is
//! refused with NOT_ENOUGH_REPLICAS while the ISR is below
//! min.insync.replicas, and is answered once every ISR member has the
//! records (the high watermark covers them) as well as durable here.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chronik_log::{AppendInfo, Error as LogError, PartitionLog};
use chronik_protocol::record_batch::{parse_batches, set_partition_leader_epoch};
use chronik_protocol::record_walk::validate_produced;
use chronik_protocol::{BatchError, BatchHeader, InvalidBatch, Response};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use tracing::warn;

use super::topic_lookup::{is_internal_topic, resolve};
use super::Handled;
use crate::broker::Broker;
use crate::durability::wait_until_durable;
use crate::replica::Replica;

/// A partition's outcome before durability is known.
struct Appended {
    log: Arc<PartitionLog>,
    info: AppendInfo,
    /// Cluster mode: the leader replica that must see the ISR catch up.
    replica: Option<Arc<Replica>>,
}

/// What happened to one partition's records: appended, or an error code and message.
type Outcome = Result<Appended, (ResponseError, String)>;

/// The only leader epoch a standalone broker has; stamped into every
/// appended batch so consumers can validate positions against it.
const STANDALONE_LEADER_EPOCH: i32 = 0;

pub async fn handle(broker: &Arc<Broker>, version: i16, request: ProduceRequest) -> Option<Handled> {
    let acks = request.acks;
    let valid_acks = (-1..=1).contains(&acks);
    // Per topic, per partition: (partition index, outcome), in request order.
    let mut outcomes: Vec<Vec<(i32, Outcome)>> = Vec::new();
    for topic in &request.topic_data {
        let found = resolve(broker, &topic.name.0, topic.topic_id);
        let mut partitions = Vec::new();
        for p in &topic.partition_data {
            let outcome = if !valid_acks {
                Err((ResponseError::InvalidRequiredAcks, format!("acks must be 0, 1 or -1, got {acks}")))
            } else {
                match &found {
                    Err(e) => Err((*e, String::new())),
                    // Kafka: "Cannot append to internal topic".
                    Ok(t) if is_internal_topic(&t.name) => Err((
                        ResponseError::InvalidTopicException,
                        format!("cannot append to internal topic {}", t.name),
                    )),
                    Ok(t) => match t.partition(p.index) {
                        None => Err((ResponseError::UnknownTopicOrPartition, String::new())),
                        Some(log) => append_as_leader(broker, version, &t.name, log, p.records.as_ref(), acks == -1),
                    },
                }
            };
            partitions.push((p.index, outcome));
        }
        outcomes.push(partitions);
    }
    if acks == 0 {
        return None;
    }

    if broker.fsync_enabled() {
        let pending: Vec<(Arc<PartitionLog>, i64)> = outcomes
            .iter()
            .flatten()
            .filter_map(|(_, o)| o.as_ref().ok().map(|a| (a.log.clone(), a.info.log_end_offset)))
            .collect();
        let timeout = Duration::from_millis(u64::try_from(request.timeout_ms.max(1)).unwrap_or(30_000));
        if !wait_until_durable(broker, &pending, timeout).await {
            for (_, outcome) in outcomes.iter_mut().flatten() {
                if let Ok(a) = outcome {
                    if a.log.durable_offset() < a.info.log_end_offset {
                        *outcome = Err(if a.log.is_offline() {
                            (ResponseError::KafkaStorageError, "fsync failed: partition offline".into())
                        } else {
                            (ResponseError::RequestTimedOut, "not durable within timeout_ms".into())
                        });
                    }
                }
            }
        }
    }

    if acks == -1 && broker.replicas.is_some() {
        let timeout = Duration::from_millis(u64::try_from(request.timeout_ms.max(1)).unwrap_or(30_000));
        wait_for_isr(broker, &mut outcomes, timeout).await;
    }

    let mut has_error = false;
    let responses = request
        .topic_data
        .iter()
        .zip(outcomes)
        .map(|(topic, partitions)| {
            let partition_responses = partitions
                .into_iter()
                .map(|(index, outcome)| {
                    let r = PartitionProduceResponse::default().with_index(index);
                    match outcome {
                        Ok(a) => r
                            .with_base_offset(a.info.base_offset)
                            .with_log_append_time_ms(-1)
                            .with_log_start_offset(a.info.log_start_offset),
                        Err((error, message)) => {
                            has_error = true;
                            r.with_error_code(error.code())
                                .with_base_offset(-1)
                                .with_log_append_time_ms(-1)
                                .with_log_start_offset(-1)
                                .with_error_message((!message.is_empty()).then(|| StrBytes::from_string(message)))
                        }
                    }
                })
                .collect();
            TopicProduceResponse::default()
                .with_name(topic.name.clone())
                .with_topic_id(topic.topic_id)
                .with_partition_responses(partition_responses)
        })
        .collect();
    Handled::new(Response::Produce(ProduceResponse::default().with_responses(responses)), has_error)
}

/// Appends to one partition as its leader: in cluster mode checks leadership
/// (and min.insync.replicas for acks=all) first and tells the replica about
/// the new log end afterwards.
fn append_as_leader(
    broker: &Broker,
    version: i16,
    topic: &str,
    log: &Arc<PartitionLog>,
    records: Option<&Bytes>,
    acks_all: bool,
) -> Outcome {
    let Some(manager) = &broker.replicas else {
        return append(broker, version, log, records, STANDALONE_LEADER_EPOCH)
            .map(|info| Appended { log: log.clone(), info, replica: None });
    };
    let replica = manager
        .replica(topic, log.partition())
        .ok_or((ResponseError::NotLeaderOrFollower, "partition not yet assigned here".into()))?;
    let leader_epoch = replica.check_produce(acks_all, manager.now())?;
    let info = append(broker, version, log, records, leader_epoch)?;
    let actions = replica.appended(info.log_end_offset);
    manager.perform(&replica, actions);
    // Wake followers parked in Fetch.
    broker.notify_data_changed();
    Ok(Appended { log: log.clone(), info, replica: Some(replica) })
}

/// acks=all in cluster mode: waits until every ISR member has each
/// partition's records, or fails the partition with the leader's reason
/// (NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER) or
/// REQUEST_TIMED_OUT.
async fn wait_for_isr(broker: &Broker, outcomes: &mut [Vec<(i32, Outcome)>], timeout: Duration) {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut changed = broker.data_changed.subscribe();
    loop {
        let mut waiting = false;
        for (_, outcome) in outcomes.iter_mut().flatten() {
            let Ok(a) = outcome else { continue };
            let Some(replica) = &a.replica else { continue };
            match replica.acks_all_satisfied(a.info.log_end_offset) {
                Ok(true) => a.replica = None,
                Ok(false) => waiting = true,
                Err(e) => *outcome = Err(e),
            }
        }
        if !waiting {
            return;
        }
        tokio::select! {
            result = changed.changed() => if result.is_err() { return },
            _ = tokio::time::sleep_until(deadline) => {
                for (_, outcome) in outcomes.iter_mut().flatten() {
                    if matches!(outcome, Ok(a) if a.replica.is_some()) {
                        *outcome = Err((ResponseError::RequestTimedOut, "the ISR did not replicate within timeout_ms".into()));
                    }
                }
                return;
            }
        }
    }
}

/// Validates and appends one partition's records, stamped with `leader_epoch`.
fn append(
    broker: &Broker,
    version: i16,
    log: &PartitionLog,
    records: Option<&Bytes>,
    leader_epoch: i32,
) -> Result<AppendInfo, (ResponseError, String)> {
    let records = match records {
        Some(r) if !r.is_empty() => r,
        _ => return Err((ResponseError::InvalidRecord, "no record batches".into())),
    };
    let batches = parse_batches(records).map_err(|e| {
        let code = match e {
            BatchError::UnsupportedMagic { .. } => ResponseError::UnsupportedForMessageFormat,
            _ => ResponseError::CorruptMessage,
        };
        (code, e.to_string())
    })?;
    validate(broker, version, records, &batches)?;
    let mut owned = records.to_vec();
    for batch in &batches {
        set_partition_leader_epoch(&mut owned, batch.position, leader_epoch);
    }
    let info = log.append(&mut owned, &batches).map_err(|e| match e {
        LogError::RecordTooLarge { .. } => (ResponseError::MessageTooLarge, e.to_string()),
        LogError::OutOfOrderSequence { .. } => (ResponseError::OutOfOrderSequenceNumber, e.to_string()),
        LogError::InvalidProducerEpoch { .. } => (ResponseError::InvalidProducerEpoch, e.to_string()),
        LogError::InvalidRecords(_) => (ResponseError::InvalidRecord, e.to_string()),
        other => {
            warn!(topic = log.topic(), partition = log.partition(), error = %other, "append failed");
            (ResponseError::KafkaStorageError, other.to_string())
        }
    })?;
    if info.duplicate {
        // A retried batch already in the log: acknowledged with its original
        // offsets, counted once.
        return Ok(info);
    }
    let records_in: i64 = batches.iter().map(|b| i64::from(b.records_count)).sum();
    broker.metrics.records_in_total.inc_by(u64::try_from(records_in).unwrap_or(0));
    broker.metrics.batches_in_total.inc_by(batches.len() as u64);
    if !broker.fsync_enabled() {
        broker.notify_data_changed();
    }
    Ok(info)
}

/// Kafka's log validator on client batches: one batch per partition from
/// Produce v3 on, then each batch's offset range, record framing and (for
/// compressed batches, inflated off the async worker and never past
/// `--max-decompressed-batch-bytes`) its records.
fn validate(broker: &Broker, version: i16, records: &[u8], batches: &[BatchHeader]) -> Result<(), (ResponseError, String)> {
    if version >= 3 && batches.len() != 1 {
        return Err((
            ResponseError::InvalidRecord,
            format!("produce requests from version 3 on carry exactly one record batch per partition, got {}", batches.len()),
        ));
    }
    let limit = broker.config.limits.max_decompressed_batch_bytes;
    let check = || -> Result<(), (ResponseError, String)> {
        for b in batches {
            validate_produced(&records[b.position..b.position + b.size], b, limit).map_err(|e| {
                let code = match e {
                    InvalidBatch::Compression(_) => ResponseError::CorruptMessage,
                    _ => ResponseError::InvalidRecord,
                };
                (code, e.to_string())
            })?;
        }
        Ok(())
    };
    if batches.iter().any(|b| b.compression_codec() != 0) {
        crate::blocking::off_worker(check)
    } else {
        check()
    }
}
