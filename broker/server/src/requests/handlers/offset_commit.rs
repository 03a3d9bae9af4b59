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
    let (commits, errors) = validate_all(cluster, &request.topics, group_error);
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

/// One partition of an OffsetCommit or TxnOffsetCommit.
pub(super) struct Asked<'a> {
    pub index: i32,
    /// (committed offset, committed leader epoch)
    pub offset: (i64, i32),
    pub metadata: Option<&'a str>,
}

/// A topic of an OffsetCommit or TxnOffsetCommit: both requests' topics and
/// partitions carry the same fields.
pub(super) trait CommitTopic {
    fn name(&self) -> &str;
    fn asked(&self) -> Vec<Asked<'_>>;
}

macro_rules! commit_topic {
    ($($topic:ty),*) => {$(
        impl CommitTopic for $topic {
            fn name(&self) -> &str {
                &self.name.0
            }
            fn asked(&self) -> Vec<Asked<'_>> {
                let partitions = self.partitions.iter();
                partitions
                    .map(|p| Asked {
                        index: p.partition_index,
                        offset: (p.committed_offset, p.committed_leader_epoch),
                        metadata: p.committed_metadata.as_deref(),
                    })
                    .collect()
            }
        }
    )*};
}
commit_topic!(
    kafka_protocol::messages::offset_commit_request::OffsetCommitRequestTopic,
    kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestTopic
);

/// Each topic's partitions' errors in request order (None: valid, and its
/// commit among those returned): `group_error` for every one when the group
/// refused the commit, else `validate_commit`'s verdict.
#[allow(clippy::type_complexity)]
pub(super) fn validate_all(
    cluster: &Cluster,
    topics: &[impl CommitTopic],
    group_error: Option<ResponseError>,
) -> (
    Vec<(String, i32, CommittedOffset)>,
    Vec<Vec<(i32, Option<ResponseError>)>>,
) {
    let now = now_ms();
    let mut commits = Vec::new();
    let errors = topics
        .iter()
        .map(|topic| {
            topic
                .asked()
                .into_iter()
                .map(|p| {
                    let error = group_error.or_else(|| {
                        validate_commit(cluster, topic.name(), p.index, p.offset, p.metadata, now)
                            .map(|c| commits.push(c))
                            .err()
                    });
                    (p.index, error)
                })
                .collect()
        })
        .collect();
    (commits, errors)
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
