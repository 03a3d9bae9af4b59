//! ListOffsets: earliest (-2, -4), latest (-1), max timestamp (-3) and
//! by-timestamp lookups, bounded by the high watermark as Kafka bounds them.

use chronik_log::{LogManager, PartitionLog};
use chronik_protocol::records::find_record_by_timestamp;
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use uuid::Uuid;

use super::Handled;
use crate::config::limits::Limits;
use crate::replica::high_watermark::{consumer_high_watermark, last_stable_offset};
use crate::replica::ReplicaManager;
use crate::requests::topics::lookup::resolve;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;

pub fn handle(
    replicas: &ReplicaManager,
    log: &LogManager,
    limits: &Limits,
    version: i16,
    request: ListOffsetsRequest,
) -> Option<Handled> {
    let mut has_error = false;
    // READ_COMMITTED (v2+) sees only below the last stable offset.
    let read_committed = request.isolation_level == 1;
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let found = resolve(log, &topic.name.0, Uuid::nil());
            let partitions = topic
                .partitions
                .into_iter()
                .map(|p| {
                    let response = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index);
                    let partition = match &found {
                        Ok(t) => t
                            .partition(p.partition_index)
                            .ok_or(ResponseError::UnknownTopicOrPartition),
                        Err(e) => Err(*e),
                    };
                    // The replica, looked up once for the epoch and the bound.
                    let replica = partition
                        .as_ref()
                        .ok()
                        .and_then(|log| replicas.replica(log.topic(), log.partition()));
                    let leader_epoch = replica.as_ref().and_then(|r| r.leader_epoch()).unwrap_or(0);
                    match partition.and_then(|log| {
                        let replica = replica.as_ref().ok_or(ResponseError::NotLeaderOrFollower)?;
                        let hw = consumer_high_watermark(replica)?;
                        lookup(
                            log,
                            if read_committed {
                                last_stable_offset(log, hw)
                            } else {
                                hw
                            },
                            p.timestamp,
                            limits.max_decompressed_batch_bytes,
                        )
                    }) {
                        Ok((offset, timestamp)) => response
                            .with_offset(offset)
                            .with_timestamp(timestamp)
                            // leader_epoch exists from v4 on; earlier versions must leave it unset.
                            .with_leader_epoch(if offset >= 0 && version >= 4 {
                                leader_epoch
                            } else {
                                -1
                            }),
                        Err(error) => {
                            has_error = true;
                            response
                                .with_error_code(error.code())
                                .with_offset(-1)
                                .with_timestamp(-1)
                        }
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    Handled::new(
        Response::ListOffsets(ListOffsetsResponse::default().with_topics(topics)),
        has_error,
    )
}

/// (offset, timestamp) for one partition; -1/-1 when nothing matches.
fn lookup(
    log: &PartitionLog,
    high_watermark: i64,
    timestamp: i64,
    max_decompressed: usize,
) -> Result<(i64, i64), ResponseError> {
    match timestamp {
        LATEST => Ok((high_watermark, -1)),
        EARLIEST | EARLIEST_LOCAL => Ok((log.log_start_offset(), -1)),
        LATEST_TIERED => Ok((-1, -1)),
        MAX_TIMESTAMP => match log.max_timestamp_offset() {
            Ok(Some((offset, ts))) if offset < high_watermark => {
                Ok(
                    exact_record(log, offset, None, high_watermark, max_decompressed)
                        .unwrap_or((offset, ts)),
                )
            }
            Ok(_) => Ok((-1, -1)),
            Err(_) => Err(ResponseError::KafkaStorageError),
        },
        ts if ts >= 0 => match log.offset_for_timestamp(ts) {
            Ok(Some((offset, found_ts))) if offset < high_watermark => {
                Ok(
                    exact_record(log, offset, Some(ts), high_watermark, max_decompressed)
                        .unwrap_or((offset, found_ts)),
                )
            }
            Ok(_) => Ok((-1, -1)),
            Err(_) => Err(ResponseError::KafkaStorageError),
        },
        _ => Err(ResponseError::InvalidRequest),
    }
}

/// The log's time index answers per batch; Kafka answers per record. Reads
/// the batch holding `offset` and finds the exact record inside it; a
/// compressed batch is inflated at most to `--max-decompressed-batch-bytes`
/// (a bigger one answers with the batch's own offset and timestamp).
fn exact_record(
    log: &PartitionLog,
    offset: i64,
    timestamp: Option<i64>,
    high_watermark: i64,
    max_decompressed: usize,
) -> Option<(i64, i64)> {
    let batch = log.read(offset, 1, high_watermark).ok()?;
    crate::infra::blocking::off_worker(|| {
        find_record_by_timestamp(&batch, timestamp, max_decompressed)
    })
}
