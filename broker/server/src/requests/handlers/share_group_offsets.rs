//! DescribeShareGroupOffsets, AlterShareGroupOffsets and
//! DeleteShareGroupOffsets (KIP-932, kafka-share-groups.sh --describe
//! --offsets, --reset-offsets, --delete-offsets), and deleting a share
//! group's state (DeleteGroups), on the group coordinator, through the
//! share coordinator's persister.
//!
//! Owns: Kafka's rules — altering or deleting needs a group without
//! members (NON_EMPTY_GROUP), altering starts a new state epoch at the
//! given offset (the leaders' loaded state is then fenced and reloaded),
//! an unknown topic is UNKNOWN_TOPIC_OR_PARTITION, a group that is not a
//! share group GROUP_ID_NOT_FOUND. Describing every topic (`topics` null)
//! covers the topics the members subscribe to, and, when this broker is
//! also the share coordinator, every share-partition it stores.

use std::collections::BTreeSet;

use chronik_metadata::Cluster;
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_share_group_offsets_response::{
    AlterShareGroupOffsetsResponsePartition, AlterShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic;
use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup, DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse, DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::Handled;
use crate::replica::ReplicaManager;
use chronik_coordinator_state::share_partition::{RecordState, ShareSnapshot};
use chronik_protocol::share_wire::DescribeShareGroupOffsetsResponseWire;

const UNKNOWN_LAG: i64 = DescribeShareGroupOffsetsResponseWire::UNKNOWN_LAG;
use crate::coordinators::share::{self, ShareCoordinator};
use crate::requests::errors::group::response_error;
use crate::requests::topics::lookup::to_uuid;

/// Most partitions one request may reset or describe.
const MAX_PARTITIONS: usize = 10_000;

fn usable(cluster: &Cluster, share: &ShareCoordinator) -> Result<(), ResponseError> {
    if !share::enabled(cluster) {
        return Err(ResponseError::UnsupportedVersion);
    }
    share.groups.readable()
}

pub async fn describe(
    (replicas, cluster): (&ReplicaManager, &Cluster),
    share: &ShareCoordinator,
    request: DescribeShareGroupOffsetsRequest,
) -> Option<Handled> {
    let image = cluster.image();
    let mut groups = Vec::new();
    // v1's Lag of each partition, in the response's nesting.
    let mut lags: Vec<Vec<Vec<i64>>> = Vec::new();
    for g in request.groups {
        let group = g.group_id.0.to_string();
        let mut out =
            DescribeShareGroupOffsetsResponseGroup::default().with_group_id(g.group_id.clone());
        if let Err(e) = usable(cluster, share) {
            groups.push(out.with_error_code(e.code()));
            continue;
        }
        let wanted: Vec<(String, Vec<i32>)> = match g.topics {
            Some(topics) => topics
                .into_iter()
                .map(|t| (t.topic_name.0.to_string(), t.partitions))
                .collect(),
            None => {
                let Some(described) = share.groups.describe(&group) else {
                    groups.push(out.with_error_code(ResponseError::GroupIdNotFound.code()));
                    continue;
                };
                let mut names: BTreeSet<String> = described
                    .members
                    .iter()
                    .flat_map(|m| m.subscribed_topic_names.iter().cloned())
                    .collect();
                if let Ok(stored) = share.persister.store().group(&group) {
                    for (id, _, _) in stored {
                        if let Some(t) = image.topics.values().find(|t| t.topic_id == id) {
                            names.insert(t.name.clone());
                        }
                    }
                }
                names
                    .into_iter()
                    .filter_map(|n| {
                        image.topics.get(&n).map(|t| {
                            (
                                n.clone(),
                                (0..i32::try_from(t.partitions.len()).unwrap_or(0)).collect(),
                            )
                        })
                    })
                    .collect()
            }
        };
        let mut budget = MAX_PARTITIONS;
        let mut group_lags = Vec::new();
        for (name, partitions) in wanted {
            let topic = image.topics.get(&name);
            let id = topic.map(|t| t.topic_id).unwrap_or([0; 16]);
            let mut parts = Vec::new();
            let mut topic_lags = Vec::new();
            for p in partitions {
                let answer = match topic {
                    None => Err(ResponseError::UnknownTopicOrPartition),
                    Some(_) if budget == 0 => Err(ResponseError::InvalidRequest),
                    Some(t) if usize::try_from(p).map_or(true, |p| p >= t.partitions.len()) => {
                        Err(ResponseError::UnknownTopicOrPartition)
                    }
                    Some(_) => share.persister.read(&group, id, p, -1).await,
                };
                budget = budget.saturating_sub(1);
                let part = DescribeShareGroupOffsetsResponsePartition::default()
                    .with_partition_index(p)
                    .with_leader_epoch(-1);
                topic_lags.push(match &answer {
                    Ok(Some(s)) => lag(replicas, (&name, p), s),
                    _ => UNKNOWN_LAG,
                });
                parts.push(match answer {
                    Ok(Some(s)) => part.with_start_offset(s.start_offset),
                    Ok(None) => part.with_start_offset(-1),
                    Err(e) => part.with_start_offset(-1).with_error_code(e.code()),
                });
            }
            group_lags.push(topic_lags);
            out.topics.push(
                DescribeShareGroupOffsetsResponseTopic::default()
                    .with_topic_name(TopicName(StrBytes::from_string(name)))
                    .with_topic_id(to_uuid(id))
                    .with_partitions(parts),
            );
        }
        groups.push(out);
        lags.push(group_lags);
    }
    let has_error = groups.iter().any(|g| g.error_code != 0);
    let mut wire = DescribeShareGroupOffsetsResponseWire::from(
        DescribeShareGroupOffsetsResponse::default().with_groups(groups),
    );
    wire.lags = lags;
    Handled::new(Response::DescribeShareGroupOffsets(wire), has_error)
}

/// KIP-1226's lag of a share-partition: the records below the high
/// watermark not yet done (acknowledged or archived) — from the replica
/// this broker holds (leader or follower); unknown (-1) without one.
fn lag(replicas: &ReplicaManager, (topic, partition): (&str, i32), state: &ShareSnapshot) -> i64 {
    let Some(replica) = replicas.replica(topic, partition) else {
        return UNKNOWN_LAG;
    };
    let Ok(hw) = replica.consumer_read_bound(-1, true) else {
        return UNKNOWN_LAG;
    };
    let hw = hw.min(replica.log.durable_offset());
    let done: i64 = state
        .batches
        .iter()
        .filter(|b| matches!(b.state, RecordState::Acknowledged | RecordState::Archived))
        .map(|b| b.last_offset.min(hw - 1) - b.first_offset.max(state.start_offset) + 1)
        .filter(|n| *n > 0)
        .sum();
    (hw - state.start_offset - done).max(0)
}

/// The group must be a share group (or unknown: created empty) without members.
fn check_empty(share: &ShareCoordinator, group: &str) -> Result<(), ResponseError> {
    share.groups.ensure(group).map_err(response_error)?;
    match share.groups.describe(group) {
        Some(g) if !g.members.is_empty() => Err(ResponseError::NonEmptyGroup),
        _ => Ok(()),
    }
}

pub async fn alter(
    cluster: &Cluster,
    share: &ShareCoordinator,
    request: AlterShareGroupOffsetsRequest,
) -> Option<Handled> {
    let group = request.group_id.0.to_string();
    let image = cluster.image();
    let checked = usable(cluster, share).and_then(|()| check_empty(share, &group));
    let mut responses = Vec::new();
    let count: usize = request.topics.iter().map(|t| t.partitions.len()).sum();
    if checked.is_ok() && count <= MAX_PARTITIONS {
        for t in request.topics {
            let name = t.topic_name.0.to_string();
            let topic = image.topics.get(&name);
            let id = topic.map(|t| t.topic_id).unwrap_or([0; 16]);
            let mut parts = Vec::new();
            for p in t.partitions {
                let answer = match topic {
                    None => Err(ResponseError::UnknownTopicOrPartition),
                    Some(t)
                        if usize::try_from(p.partition_index)
                            .map_or(true, |i| i >= t.partitions.len()) =>
                    {
                        Err(ResponseError::UnknownTopicOrPartition)
                    }
                    Some(_) if p.start_offset < 0 => Err(ResponseError::InvalidRequest),
                    Some(_) => reset(share, &group, id, p.partition_index, p.start_offset).await,
                };
                let mut part = AlterShareGroupOffsetsResponsePartition::default()
                    .with_partition_index(p.partition_index);
                if let Err(e) = answer {
                    part.error_code = e.code();
                }
                parts.push(part);
            }
            share.partitions.forget(&group, &name);
            responses.push(
                AlterShareGroupOffsetsResponseTopic::default()
                    .with_topic_name(t.topic_name)
                    .with_topic_id(to_uuid(id))
                    .with_partitions(parts),
            );
        }
    }
    let top = match checked {
        Err(e) => Some(e),
        Ok(()) if count > MAX_PARTITIONS => Some(ResponseError::InvalidRequest),
        Ok(()) => None,
    };
    let has_error = top.is_some()
        || responses
            .iter()
            .flat_map(|t| &t.partitions)
            .any(|p| p.error_code != 0);
    Handled::new(
        Response::AlterShareGroupOffsets(
            AlterShareGroupOffsetsResponse::default()
                .with_error_code(top.map_or(0, |e| e.code()))
                .with_responses(responses),
        ),
        has_error,
    )
}

async fn reset(
    share: &ShareCoordinator,
    group: &str,
    topic_id: [u8; 16],
    partition: i32,
    start: i64,
) -> Result<(), ResponseError> {
    let current = share.persister.read(group, topic_id, partition, -1).await?;
    let epoch = current.map_or(0, |s| s.state_epoch.saturating_add(1));
    share
        .persister
        .initialize(group, &[(topic_id, partition, epoch, start)])
        .await?
        .into_iter()
        .next()
        .unwrap_or(Err(ResponseError::UnknownServerError))
}

pub async fn delete(
    cluster: &Cluster,
    share: &ShareCoordinator,
    request: DeleteShareGroupOffsetsRequest,
) -> Option<Handled> {
    let group = request.group_id.0.to_string();
    let image = cluster.image();
    let checked = usable(cluster, share).and_then(|()| {
        if share.groups.exists(&group) {
            check_empty(share, &group)
        } else {
            Err(ResponseError::GroupIdNotFound)
        }
    });
    let mut responses = Vec::new();
    if checked.is_ok() {
        for t in request.topics {
            let name = t.topic_name.0.to_string();
            let answer = match image.topics.get(&name) {
                None => Err(ResponseError::UnknownTopicOrPartition),
                Some(topic) => {
                    let all: Vec<([u8; 16], i32)> = (0..i32::try_from(topic.partitions.len())
                        .unwrap_or(0))
                        .map(|p| (topic.topic_id, p))
                        .collect();
                    share.persister.delete(&group, &all).await
                }
            };
            share.partitions.forget(&group, &name);
            let id = image
                .topics
                .get(&name)
                .map(|t| t.topic_id)
                .unwrap_or([0; 16]);
            let mut out = DeleteShareGroupOffsetsResponseTopic::default()
                .with_topic_name(t.topic_name)
                .with_topic_id(to_uuid(id));
            if let Err(e) = answer {
                out.error_code = e.code();
            }
            responses.push(out);
        }
    }
    let has_error = checked.is_err() || responses.iter().any(|t| t.error_code != 0);
    Handled::new(
        Response::DeleteShareGroupOffsets(
            DeleteShareGroupOffsetsResponse::default()
                .with_error_code(checked.err().map_or(0, |e| e.code()))
                .with_responses(responses),
        ),
        has_error,
    )
}

/// DeleteGroups of a share group: refused while it has members; its
/// stored share-partition state (what this coordinator can enumerate and
/// what its members subscribed to) is deleted with it.
pub async fn delete_share_group(
    share: &ShareCoordinator,
    group: &str,
) -> Result<(), ResponseError> {
    share.groups.readable()?;
    match share.groups.describe(group) {
        Some(g) if !g.members.is_empty() => return Err(ResponseError::NonEmptyGroup),
        None => return Err(ResponseError::GroupIdNotFound),
        Some(_) => {}
    }
    if let Ok(stored) = share.persister.store().group(group) {
        let keys: Vec<([u8; 16], i32)> = stored.into_iter().map(|(t, p, _)| (t, p)).collect();
        if !keys.is_empty() {
            share.persister.delete(group, &keys).await?;
        }
    }
    share.groups.delete(group).map_err(response_error)?;
    Ok(())
}
