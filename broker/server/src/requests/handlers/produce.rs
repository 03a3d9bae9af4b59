//! Produce: validates each partition's record batches as Kafka's log
//! validator does (magic v2, CRC-32C, one batch per partition from v3,
//! offset range vs record count, record framing, compressed records
//! inflated within a bound, no control batches from clients), refuses
//! internal topics, verifies with the transaction coordinator a
//! transactional batch that would open its producer's transaction in the
//! partition (KIP-890), appends them with offsets assigned in place, and — for acks=1 and
//! acks=all — answers only once the group-commit flusher has made them
//! durable. acks=0 gets no response at all, as in Kafka.
//!
//! Only the partition leader appends (else
//! NOT_LEADER_OR_FOLLOWER), batches carry its leader epoch, acks=all is
//! refused with NOT_ENOUGH_REPLICAS while the ISR is below
//! min.insync.replicas, and is answered once every ISR member has the
//! records (the high watermark covers them) as well as durable here.
//! The append and every wait go through the write path
//! (`replica::write`), all within one deadline: the request's timeout_ms
//! from its arrival (at most `purgatory::MAX_WAIT`) bounds the wait for the
//! connection's earlier Produce requests to append (the append turn), the
//! KIP-890 verification, the fsync and the ISR; past it, REQUEST_TIMED_OUT.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chronik_log::LogManager;
use chronik_protocol::record_batch::parse_batches;
use chronik_protocol::record_walk::{validate_produced, ProduceRules};
use chronik_protocol::{BatchError, BatchHeader, InvalidBatch, Response};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handled;
use crate::config::limits::Limits;
use crate::coordinators::txn::verify::verify_transaction;
use crate::coordinators::txn::TxnCoordinator;
use crate::infra::append_order::AppendTurn;
use crate::infra::metrics::Metrics;
use crate::replica::write::{Acks, AppendError, Appended, Write, WritePath};
use crate::replica::ReplicaManager;
use crate::requests::topics::lookup::{is_internal_topic, resolve};

/// What happened to one partition's records: appended, or an error code and message.
type Outcome = Result<Appended, AppendError>;

/// What a Produce writes through, lent by the dispatcher.
pub struct ProduceDeps<'a> {
    pub writes: &'a WritePath,
    /// Where KIP-890 verification finds the coordinator.
    pub replicas: &'a Arc<ReplicaManager>,
    pub cluster: &'a chronik_metadata::Cluster,
    pub log: &'a LogManager,
    pub txn: &'a Arc<TxnCoordinator>,
    pub limits: &'a Limits,
    pub metrics: &'a Metrics,
}

pub async fn handle(
    deps: &ProduceDeps<'_>,
    version: i16,
    request: ProduceRequest,
    mut turn: AppendTurn,
) -> Option<Handled> {
    let acks = request.acks;
    let valid_acks = (-1..=1).contains(&acks);
    // One deadline for the whole request: the turn, verification, appends
    // and waits.
    let timeout = Duration::from_millis(u64::try_from(request.timeout_ms.max(1)).unwrap_or(0));
    let write = deps.writes.begin(timeout);
    // Per topic, per partition: (partition index, outcome), in request order.
    let mut outcomes: Vec<Vec<(i32, Outcome)>> = Vec::new();
    // After the connection's earlier Produce requests have appended.
    let turn_taken = write.wait_turn(&mut turn).await;
    for topic in &request.topic_data {
        let found = resolve(deps.log, &topic.name.0, topic.topic_id);
        let mut partitions = Vec::new();
        for p in &topic.partition_data {
            let outcome = if let Err(timed_out) = &turn_taken {
                Err(timed_out.clone())
            } else if !valid_acks {
                Err((
                    ResponseError::InvalidRequiredAcks,
                    format!("acks must be 0, 1 or -1, got {acks}"),
                ))
            } else {
                match &found {
                    Err(e) => Err((*e, String::new())),
                    // Kafka: "Cannot append to internal topic".
                    Ok(t) if is_internal_topic(&t.name) => Err((
                        ResponseError::InvalidTopicException,
                        format!("cannot append to internal topic {}", t.name),
                    )),
                    Ok(t) if t.partition(p.index).is_none() => {
                        Err((ResponseError::UnknownTopicOrPartition, String::new()))
                    }
                    Ok(t) => {
                        let transactional_id =
                            request.transactional_id.as_ref().map(|id| id.0.as_str());
                        let acks = if acks == -1 { Acks::All } else { Acks::Leader };
                        produce_to(
                            deps,
                            &write,
                            (version, transactional_id),
                            (&t.name, p.index),
                            p.records.as_ref(),
                            acks,
                        )
                        .await
                    }
                }
            };
            partitions.push((p.index, outcome));
        }
        outcomes.push(partitions);
    }
    turn.appended();
    if acks == 0 {
        return None;
    }

    write
        .await_acks(
            outcomes.iter_mut().flatten().map(|(_, o)| o).collect(),
            if acks == -1 { Acks::All } else { Acks::Leader },
        )
        .await;

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
                                .with_error_message(
                                    (!message.is_empty()).then(|| StrBytes::from_string(message)),
                                )
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
    Handled::new(
        Response::Produce(ProduceResponse::default().with_responses(responses)),
        has_error,
    )
}

/// Validates one partition's records, verifies a transactional batch that
/// would open its producer's transaction here with the coordinator
/// (KIP-890), then appends them as its leader (`replica::write`), counting
/// what was new.
async fn produce_to(
    deps: &ProduceDeps<'_>,
    write: &Write<'_>,
    (version, transactional_id): (i16, Option<&str>),
    (topic, partition): (&str, i32),
    records: Option<&Bytes>,
    acks: Acks,
) -> Outcome {
    // The replica is looked up once; its log is the only handle written.
    let replica = deps.writes.replica_to_write(topic, partition)?;
    let log = &replica.log;
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
    validate(deps, version, records, &batches, log.config().compact)?;
    if let Some(h) = batches.iter().find(|h| h.is_transactional()) {
        // Kafka: transactional records need a transactional id (the one
        // the producer's WRITE on it would be authorised for).
        let id = transactional_id.ok_or((
            ResponseError::TransactionalIdAuthorizationFailed,
            "transactional records without a transactional id".to_string(),
        ))?;
        if !log.has_open_transaction(h.producer_id) {
            write
                .verify(verify_transaction(
                    (deps.replicas, deps.cluster),
                    deps.txn,
                    id,
                    (h.producer_id, h.producer_epoch),
                    (log.topic(), log.partition()),
                    write.deadline(),
                ))
                .await
                .map_err(|e| {
                    let message = match e {
                        ResponseError::RequestTimedOut => {
                            "the transaction coordinator did not verify the partition within the request's timeout".to_string()
                        }
                        _ => format!(
                            "partition not in an open transaction of producer {}",
                            h.producer_id
                        ),
                    };
                    (e, message)
                })?;
        }
    }
    let mut owned = records.to_vec();
    let appended = write.append(&replica, &mut owned, &batches, acks)?;
    if !appended.info.duplicate {
        // A retried batch already in the log is acknowledged with its
        // original offsets and counted once.
        let records_in: i64 = batches.iter().map(|b| i64::from(b.records_count)).sum();
        deps.metrics
            .records_in_total
            .inc_by(u64::try_from(records_in).unwrap_or(0));
        deps.metrics.batches_in_total.inc_by(batches.len() as u64);
    }
    Ok(appended)
}

/// Kafka's log validator on client batches: one batch per partition from
/// Produce v3 on, then each batch's offset range, record framing and (for
/// compressed batches, inflated off the async worker and never past
/// `--max-decompressed-batch-bytes`) its records, which in a compacted
/// topic must all have keys (Kafka answers INVALID_RECORD otherwise).
fn validate(
    deps: &ProduceDeps<'_>,
    version: i16,
    records: &[u8],
    batches: &[BatchHeader],
    compacted: bool,
) -> Result<(), (ResponseError, String)> {
    if version >= 3 && batches.len() != 1 {
        return Err((
            ResponseError::InvalidRecord,
            format!("produce requests from version 3 on carry exactly one record batch per partition, got {}", batches.len()),
        ));
    }
    if batches.iter().any(BatchHeader::is_control) {
        // Markers are the transaction coordinator's (WriteTxnMarkers).
        return Err((
            ResponseError::InvalidRecord,
            "clients may not write control batches".into(),
        ));
    }
    let rules = ProduceRules {
        max_decompressed: deps.limits.max_decompressed_batch_bytes,
        require_keys: compacted,
    };
    let check = || -> Result<(), (ResponseError, String)> {
        for b in batches {
            validate_produced(&records[b.position..b.position + b.size], b, rules).map_err(
                |e| {
                    let code = match e {
                        InvalidBatch::Compression(_) => ResponseError::CorruptMessage,
                        _ => ResponseError::InvalidRecord,
                    };
                    (code, e.to_string())
                },
            )?;
        }
        Ok(())
    };
    if batches.iter().any(|b| b.compression_codec() != 0) {
        crate::infra::blocking::off_worker(check)
    } else {
        check()
    }
}
