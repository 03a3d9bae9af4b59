//! What ShareFetch and ShareAcknowledge share (KIP-932): resolving topic
//! ids, reading a partition's acknowledgement batches, applying them on the
//! share-partition manager, the member's share session, and the
//! partition's current leader for a refused partition.
//!
//! Owns: those steps, once for both APIs. Must not: decide record states
//! (`coordinators::share::partitions`) or session rules (`::sessions`).

use chronik_coordinator_state::share_partition::{AckBatch, AckType};
use chronik_metadata::MetadataImage;
use kafka_protocol::error::ResponseError;

use crate::coordinators::share::sessions::SessionPartition;
use crate::coordinators::share::ShareCoordinator;

/// Most acknowledgement batches (and types) one partition may carry in one
/// request; more is INVALID_REQUEST.
const MAX_ACK_BATCHES: usize = 10_000;

/// The topic named by `id`, or UNKNOWN_TOPIC_ID.
pub fn topic_name(image: &MetadataImage, id: uuid::Uuid) -> Result<String, ResponseError> {
    image
        .topics
        .values()
        .find(|t| t.topic_id == *id.as_bytes())
        .map(|t| t.name.clone())
        .ok_or(ResponseError::UnknownTopicId)
}

/// (leader id, leader epoch) of a partition in the image, (-1, -1) if unknown.
pub fn current_leader(image: &MetadataImage, topic: &str, partition: i32) -> (i32, i32) {
    image
        .partition(topic, partition)
        .map_or((-1, -1), |p| (p.leader, p.leader_epoch))
}

/// One partition's acknowledgement batches, as the wire gives them
/// (first, last, types), checked for shape: unknown types and types other
/// than Renew's where `renew_allowed` is false are INVALID_REQUEST.
pub fn ack_batches(
    wire: impl Iterator<Item = (i64, i64, Vec<i8>)>,
    renew_allowed: bool,
) -> Result<Vec<AckBatch>, ResponseError> {
    let mut out = Vec::new();
    let mut types_seen = 0usize;
    for (first, last, types) in wire {
        types_seen = types_seen.saturating_add(types.len());
        if out.len() >= MAX_ACK_BATCHES || types_seen > MAX_ACK_BATCHES * 16 {
            return Err(ResponseError::InvalidRequest);
        }
        let types = types
            .into_iter()
            .map(|t| match AckType::from_wire(t) {
                Some(AckType::Renew) if !renew_allowed => None,
                other => other,
            })
            .collect::<Option<Vec<_>>>()
            .ok_or(ResponseError::InvalidRequest)?;
        out.push(AckBatch {
            first_offset: first,
            last_offset: last,
            types,
        });
    }
    Ok(out)
}

/// Applies one partition's acknowledgements for `member` of `group`.
pub async fn acknowledge(
    share: &ShareCoordinator,
    (group, member): (&str, &str),
    (topic, partition): (&str, i32),
    batches: Vec<AckBatch>,
) -> Result<(), ResponseError> {
    if batches.is_empty() {
        return Ok(());
    }
    let key = (group.to_string(), topic.to_string(), partition);
    share.partitions.acknowledge(&key, member, &batches).await
}

/// Releases what `member` held in `partitions` (its session ended).
pub async fn release(
    share: &ShareCoordinator,
    (group, member): (&str, &str),
    partitions: &[SessionPartition],
) {
    if !partitions.is_empty() {
        share
            .partitions
            .release_member(group, member, partitions)
            .await;
    }
}

/// The (group id, member id) of a share request: both required.
pub fn member_of(
    group: Option<&str>,
    member: Option<&str>,
) -> Result<(String, String), ResponseError> {
    match (group, member) {
        (Some(g), Some(m))
            if !g.is_empty() && !m.is_empty() && g.len() <= 1024 && m.len() <= 1024 =>
        {
            Ok((g.to_string(), m.to_string()))
        }
        _ => Err(ResponseError::InvalidRequest),
    }
}
