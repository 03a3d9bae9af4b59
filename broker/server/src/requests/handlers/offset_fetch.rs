//! OffsetFetch: committed offsets of one group (v1–7) or several (v8+);
//! a null topic list means every partition the group committed. Only the
//! coordinator whose offsets are loaded for its leadership answers; any
//! other broker says NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS
//! (a follower's map is stale: answering from it would hand a consumer -1
//! for an offset that was committed). With require_stable (v7+, what
//! read_committed consumers send) a partition with a transactional commit
//! still pending answers UNSTABLE_OFFSET_COMMIT, and the consumer retries.
//! v9 carries a KIP-848 member's id and epoch: an unknown member is
//! UNKNOWN_MEMBER_ID, an old epoch STALE_MEMBER_EPOCH (for the group).

use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{GroupId, OffsetFetchRequest, OffsetFetchResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handled;
use crate::coordinators::groups::{CommittedOffset, GroupManager, OffsetStore};
use crate::requests::errors::group::response_error;
use crate::requests::topics::lookup::topic_name;

/// One partition's answer: (partition, offset, leader epoch, metadata,
/// error code).
type Answer = (i32, i64, i32, Option<String>, i16);

/// The committed offsets `lookup` answered, as response topics of the
/// version's types (v8+ nests them in groups under other type names).
macro_rules! answered {
    ($answers:expr, $topic:ident, $partition:ident) => {
        $answers
            .into_iter()
            .map(|(topic, answers)| {
                $topic::default()
                    .with_name(topic_name(&topic))
                    .with_partitions(
                        answers
                            .into_iter()
                            .map(|(p, offset, epoch, metadata, error)| {
                                $partition::default()
                                    .with_partition_index(p)
                                    .with_error_code(error)
                                    .with_committed_offset(offset)
                                    .with_committed_leader_epoch(epoch)
                                    .with_metadata(Some(StrBytes::from_string(
                                        metadata.unwrap_or_default(),
                                    )))
                            })
                            .collect(),
                    )
            })
            .collect()
    };
}

pub fn handle(
    groups: &GroupManager,
    offsets: &OffsetStore,
    version: i16,
    request: OffsetFetchRequest,
) -> Option<Handled> {
    if let Err(error) = offsets.readable() {
        return Handled::new(
            Response::OffsetFetch(refused(version, request, error)),
            false,
        );
    }
    if version >= 8 {
        let groups = request
            .groups
            .into_iter()
            .map(|g| {
                // v9: a KIP-848 member must fetch with its current epoch.
                if let Err(e) =
                    groups.check_fetch(&g.group_id.0, g.member_id.as_deref(), g.member_epoch)
                {
                    return OffsetFetchResponseGroup::default()
                        .with_group_id(g.group_id)
                        .with_error_code(response_error(e).code());
                }
                let wanted = g.topics.map(|ts| {
                    ts.into_iter()
                        .map(|t| (t.name.0.to_string(), t.partition_indexes))
                        .collect()
                });
                let topics = answered!(
                    lookup(offsets, &g.group_id.0, wanted, request.require_stable),
                    OffsetFetchResponseTopics,
                    OffsetFetchResponsePartitions
                );
                OffsetFetchResponseGroup::default()
                    .with_group_id(GroupId(g.group_id.0))
                    .with_topics(topics)
            })
            .collect();
        return Handled::new(
            Response::OffsetFetch(OffsetFetchResponse::default().with_groups(groups)),
            false,
        );
    }
    let wanted = request.topics.map(|ts| {
        ts.into_iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes))
            .collect()
    });
    let topics = answered!(
        lookup(offsets, &request.group_id.0, wanted, request.require_stable),
        OffsetFetchResponseTopic,
        OffsetFetchResponsePartition
    );
    Handled::new(
        Response::OffsetFetch(OffsetFetchResponse::default().with_topics(topics)),
        false,
    )
}

/// Committed offsets by topic; partitions without a commit get offset -1.
fn lookup(
    offsets: &OffsetStore,
    group: &str,
    wanted: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
) -> Vec<(String, Vec<Answer>)> {
    let answer = |topic: &str, p: i32, committed: Option<CommittedOffset>| -> Answer {
        if require_stable && offsets.has_pending(group, topic, p) {
            return (p, -1, -1, None, ResponseError::UnstableOffsetCommit.code());
        }
        match committed {
            Some(c) => (p, c.offset, c.leader_epoch, c.metadata, 0),
            None => (p, -1, -1, None, 0),
        }
    };
    match wanted {
        Some(topics) => topics
            .into_iter()
            .map(|(topic, partitions)| {
                let answers = partitions
                    .into_iter()
                    .map(|p| answer(&topic, p, offsets.fetch(group, &topic, p)))
                    .collect();
                (topic, answers)
            })
            .collect(),
        None => {
            let mut by_topic: Vec<(String, Vec<Answer>)> = Vec::new();
            for (topic, p, c) in offsets.fetch_all(group) {
                let answer = answer(&topic, p, Some(c));
                match by_topic.iter_mut().find(|(t, _)| *t == topic) {
                    Some((_, answers)) => answers.push(answer),
                    None => by_topic.push((topic, vec![answer])),
                }
            }
            by_topic
        }
    }
}

/// The whole request refused with `error`: per group (v8+), else at the top
/// level (v2+) and on every partition named (v0–1 carry it only there).
fn refused(version: i16, request: OffsetFetchRequest, error: ResponseError) -> OffsetFetchResponse {
    let code = error.code();
    if version >= 8 {
        let groups = request
            .groups
            .into_iter()
            .map(|g| {
                OffsetFetchResponseGroup::default()
                    .with_group_id(g.group_id)
                    .with_error_code(code)
            })
            .collect();
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let topics = request
        .topics
        .unwrap_or_default()
        .into_iter()
        .map(|t| {
            OffsetFetchResponseTopic::default()
                .with_name(t.name)
                .with_partitions(
                    t.partition_indexes
                        .into_iter()
                        .map(|p| {
                            OffsetFetchResponsePartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(-1)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetFetchResponse::default()
        .with_topics(topics)
        .with_error_code(code)
}
