//! OffsetCommit: checks the member and generation (v9, KIP-848 groups: the
//! member epoch; a stale one is STALE_MEMBER_EPOCH) with the group manager,
//! then stores the offsets (durable, and in every ISR member of
//! `__consumer_offsets`) before answering. Owns the per-partition check
//! TxnOffsetCommit shares (`validate_commit`).

use chronik_metadata::Cluster;
use std::time::Duration;

use chronik_coordinator_state::CommitCheck;
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};

use super::Handled;
use crate::coordinators::groups::offset_store::{now_ms, MAX_GROUP_ID_BYTES};
use crate::coordinators::groups::{CommittedOffset, GroupManager, OffsetStore};
use crate::requests::errors::group::response_error;
use crate::requests::errors::txn::partition_exists;

/// Kafka's offset.metadata.max.bytes.
const MAX_METADATA_BYTES: usize = 4096;
/// Kafka's offsets.commit.timeout.ms.
pub(super) const COMMIT_TIMEOUT: Duration = Duration::from_secs(5);

pub async fn handle(
    cluster: &Cluster,
    groups: &GroupManager,
    offsets: &OffsetStore,
    _version: i16,
    request: OffsetCommitRequest,
) -> Option<Handled> {
    let group_id = request.group_id.0.to_string();
    let check = groups.check_commit(
        &group_id,
        &request.member_id,
        request.generation_id_or_member_epoch,
    );
    let group_error = match check {
        // The stored key holds the group id with a 16-bit length.
        _ if group_id.len() > MAX_GROUP_ID_BYTES => Some(ResponseError::InvalidGroupId),
        CommitCheck::Ok => None,
        CommitCheck::Rejected(e) => Some(response_error(e)),
    };
    let now = now_ms();
    let mut commits = Vec::new();
    // (topic index, partition index, error) in request order
    let mut errors: Vec<Vec<(i32, Option<ResponseError>)>> = Vec::new();
    for topic in &request.topics {
        let mut partitions = Vec::new();
        for p in &topic.partitions {
            let error = match group_error {
                Some(e) => Some(e),
                None => match validate_commit(
                    cluster,
                    &topic.name.0,
                    p.partition_index,
                    (p.committed_offset, p.committed_leader_epoch),
                    p.committed_metadata.as_deref(),
                    now,
                ) {
                    Ok(commit) => {
                        commits.push(commit);
                        None
                    }
                    Err(e) => Some(e),
                },
            };
            partitions.push((p.partition_index, error));
        }
        errors.push(partitions);
    }
    let stored = offsets.commit(&group_id, commits, COMMIT_TIMEOUT).await;
    let storage_error = stored.err();
    let mut has_error = false;
    let topics = request
        .topics
        .iter()
        .zip(errors)
        .map(|(topic, partitions)| {
            let partitions = partitions
                .into_iter()
                .map(|(index, error)| {
                    let error = error.or(storage_error);
                    has_error |= error.is_some();
                    OffsetCommitResponsePartition::default()
                        .with_partition_index(index)
                        .with_error_code(error.map(|e| e.code()).unwrap_or(0))
                })
                .collect();
            OffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_topic_id(topic.topic_id)
                .with_partitions(partitions)
        })
        .collect();
    Handled::new(
        Response::OffsetCommit(OffsetCommitResponse::default().with_topics(topics)),
        has_error,
    )
}

/// One partition of an offset commit (OffsetCommit, TxnOffsetCommit) as
/// the coordinator checks it: the partition must exist in the cluster and
/// the metadata fit offset.metadata.max.bytes; else the partition's error.
pub(super) fn validate_commit(
    cluster: &Cluster,
    topic: &str,
    partition: i32,
    (offset, leader_epoch): (i64, i32),
    metadata: Option<&str>,
    now: i64,
) -> Result<(String, i32, CommittedOffset), ResponseError> {
    if !partition_exists(cluster, topic, partition) {
        return Err(ResponseError::UnknownTopicOrPartition);
    }
    if metadata.is_some_and(|m| m.len() > MAX_METADATA_BYTES) {
        return Err(ResponseError::OffsetMetadataTooLarge);
    }
    Ok((
        topic.to_string(),
        partition,
        CommittedOffset {
            offset,
            leader_epoch,
            metadata: metadata.map(str::to_string),
            commit_timestamp: now,
        },
    ))
}
