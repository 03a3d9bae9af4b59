//! TxnOffsetCommit: offsets committed inside a producer's transaction
//! (consume-transform-produce). The group coordinator checks the member and
//! generation as for OffsetCommit when the request names them (v3+; v0-2
//! cannot, and Kafka then checks nothing: the producer epoch fences
//! zombies), then stores them pending under the
//! producer id; the transaction's marker for `__consumer_offsets` makes them
//! committed (COMMIT) or drops them (ABORT). OffsetFetch with
//! require_stable answers UNSTABLE_OFFSET_COMMIT while one is pending.

use chronik_metadata::Cluster;
use chronik_protocol::Response;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use super::offset_commit::{validate_all, COMMIT_TIMEOUT};
use super::Handled;
use crate::coordinators::groups::{GroupManager, OffsetStore};
use crate::requests::errors::group::response_error;
use crate::requests::errors::txn::for_version;
use chronik_coordinator_state::CommitCheck;

const PRODUCER_FENCED_SINCE: i16 = 3;

/// A transactional commit that names no group member: no member id, no
/// generation, no group instance id.
fn unnamed_member(request: &TxnOffsetCommitRequest) -> bool {
    request.member_id.is_empty() && request.generation_id < 0 && request.group_instance_id.is_none()
}

pub async fn handle(
    cluster: &Cluster,
    groups: &GroupManager,
    offsets: &OffsetStore,
    version: i16,
    request: TxnOffsetCommitRequest,
) -> Option<Handled> {
    let group_id = request.group_id.0.to_string();
    let group_error = match offsets.readable() {
        Err(e) => Some(e),
        // TxnOffsetCommit v0-2 carry no member id or generation (the
        // fields default to "" and -1): Kafka validates membership only
        // when a transactional commit names it, whatever the group's state
        // (kafkajs and aiokafka send only v0/v1).
        Ok(()) if unnamed_member(&request) => None,
        Ok(()) => match groups.check_commit(&group_id, &request.member_id, request.generation_id) {
            CommitCheck::Ok => None,
            CommitCheck::Rejected(e) => Some(response_error(e)),
        },
    };
    let (commits, errors) = validate_all(cluster, &request.topics, group_error);
    let stored = offsets
        .commit_transactional(
            &group_id,
            (request.producer_id.0, request.producer_epoch),
            commits,
            COMMIT_TIMEOUT,
        )
        .await
        .map_err(|e| for_version(e, version, PRODUCER_FENCED_SINCE))
        .err();
    let mut has_error = false;
    let topics = request
        .topics
        .iter()
        .zip(errors)
        .map(|(topic, partitions)| {
            TxnOffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(
                    partitions
                        .into_iter()
                        .map(|(index, error)| {
                            let error = error.or(stored);
                            has_error |= error.is_some();
                            TxnOffsetCommitResponsePartition::default()
                                .with_partition_index(index)
                                .with_error_code(error.map_or(0, |e| e.code()))
                        })
                        .collect(),
                )
        })
        .collect();
    Handled::new(
        Response::TxnOffsetCommit(TxnOffsetCommitResponse::default().with_topics(topics)),
        has_error,
    )
}
