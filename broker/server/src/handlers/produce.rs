//! Produce: validates each partition's record batches (magic v2, CRC-32C,
//! size), appends them with offsets assigned in place, and — for acks=1 and
//! acks=all — answers only once the group-commit flusher has made them
//! durable. acks=0 gets no response at all, as in Kafka.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chronik_log::{AppendInfo, Error as LogError, PartitionLog};
use chronik_protocol::record_batch::{parse_batches, set_partition_leader_epoch};
use chronik_protocol::{BatchError, Response};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use tracing::warn;

use super::topic_lookup::resolve;
use super::Handled;
use crate::broker::Broker;
use crate::durability::wait_until_durable;

/// A partition's outcome before durability is known.
struct Appended {
    log: Arc<PartitionLog>,
    info: AppendInfo,
}

/// What happened to one partition's records: appended, or an error code and message.
type Outcome = Result<Appended, (ResponseError, String)>;

/// The only leader epoch a single-node broker has; stamped into every
/// appended batch so consumers can validate positions against it.
const LEADER_EPOCH: i32 = 0;

pub async fn handle(broker: &Arc<Broker>, _version: i16, request: ProduceRequest) -> Option<Handled> {
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
                    Ok(t) => match t.partition(p.index) {
                        None => Err((ResponseError::UnknownTopicOrPartition, String::new())),
                        Some(log) => append(broker, log, p.records.as_ref()).map(|info| Appended { log: log.clone(), info }),
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

/// Validates and appends one partition's records.
fn append(broker: &Broker, log: &PartitionLog, records: Option<&Bytes>) -> Result<AppendInfo, (ResponseError, String)> {
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
    let mut owned = records.to_vec();
    for batch in &batches {
        set_partition_leader_epoch(&mut owned, batch.position, LEADER_EPOCH);
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
