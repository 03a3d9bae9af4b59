//! DeleteRecords (kafka-delete-records.sh, Admin.deleteRecords, v0–2): moves
//! each partition's log start offset up to the requested offset on its
//! leader (-1: the high watermark); the answer's low watermark is the new
//! log start offset. Kafka's errors: NOT_LEADER_OR_FOLLOWER off the
//! leader, OFFSET_OUT_OF_RANGE above the high watermark.
//!
//! The leader answers once its own log start offset has moved (durably);
//! followers move theirs from the leader's in their next fetch response
//! rather than the leader waiting for them as Kafka's purgatory does.
//! Internal topics are refused (POLICY_VIOLATION): their state is rebuilt
//! by replaying them from the start.

use std::sync::Arc;

use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use tracing::warn;
use uuid::Uuid;

use super::high_watermark::consumer_high_watermark;
use super::topic_lookup::{resolve, INTERNAL_TOPICS};
use super::Handled;
use crate::broker::Broker;

/// The offset meaning "the high watermark".
const HIGH_WATERMARK: i64 = -1;

pub async fn handle(
    broker: &Arc<Broker>,
    _version: i16,
    request: DeleteRecordsRequest,
) -> Option<Handled> {
    let mut has_error = false;
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in topic.partitions {
            let result =
                DeleteRecordsPartitionResult::default().with_partition_index(p.partition_index);
            partitions.push(
                match delete(broker, &name, p.partition_index, p.offset).await {
                    Ok(low_watermark) => result.with_low_watermark(low_watermark),
                    Err(error) => {
                        has_error = true;
                        result.with_low_watermark(-1).with_error_code(error.code())
                    }
                },
            );
        }
        topics.push(
            DeleteRecordsTopicResult::default()
                .with_name(topic.name)
                .with_partitions(partitions),
        );
    }
    Handled::new(
        Response::DeleteRecords(DeleteRecordsResponse::default().with_topics(topics)),
        has_error,
    )
}

async fn delete(
    broker: &Arc<Broker>,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<i64, ResponseError> {
    if INTERNAL_TOPICS.contains(&topic) {
        return Err(ResponseError::PolicyViolation);
    }
    let log = resolve(broker, topic, Uuid::nil())?
        .partition(partition)
        .cloned()
        .ok_or(ResponseError::UnknownTopicOrPartition)?;
    let high_watermark = consumer_high_watermark(broker, &log)?;
    let target = match offset {
        HIGH_WATERMARK => high_watermark,
        o if (0..=high_watermark).contains(&o) => o,
        _ => return Err(ResponseError::OffsetOutOfRange),
    };
    let moved = tokio::task::spawn_blocking(move || log.delete_records_before(target))
        .await
        .map_err(|_| ResponseError::UnknownServerError)?;
    moved.map_err(|e| {
        warn!(topic, partition, error = %e, "DeleteRecords failed");
        match e {
            chronik_log::Error::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
            chronik_log::Error::UnknownTopic(_) => ResponseError::UnknownTopicOrPartition,
            _ => ResponseError::KafkaStorageError,
        }
    })
}
