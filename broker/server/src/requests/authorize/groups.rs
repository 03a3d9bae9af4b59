//! The group APIs: READ on the group to join, sync, heartbeat, leave and
//! commit (GROUP_AUTHORIZATION_FAILED for the whole request), READ on each
//! topic whose offsets are committed (TOPIC_AUTHORIZATION_FAILED per
//! topic), DESCRIBE on every topic a KIP-848 member subscribes to by name
//! (else the heartbeat is refused with TOPIC_AUTHORIZATION_FAILED); DESCRIBE on the group to fetch its offsets, describe it, list it
//! or find its coordinator (refused groups answer the group error, listings
//! leave them out; ListGroups shows everything with DESCRIBE on the
//! cluster), and for ConsumerGroupDescribe DESCRIBE on every topic in its
//! members' assignments and target assignments (else that group answers
//! TOPIC_AUTHORIZATION_FAILED and nothing else); DELETE to delete a group
//! or its offsets.

use chronik_metadata::acl::operation;
use chronik_protocol::{Request, Response};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::offset_commit_request::OffsetCommitRequestTopic;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_request::OffsetDeleteRequestTopic;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatResponse, GroupId, HeartbeatResponse, JoinGroupResponse,
    LeaveGroupResponse, OffsetCommitResponse, OffsetDeleteResponse, SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::{split, Admission, After, Gate, Routed};

const GROUP_DENIED: ResponseError = ResponseError::GroupAuthorizationFailed;
const TOPIC_DENIED: ResponseError = ResponseError::TopicAuthorizationFailed;
/// FindCoordinator key types.
const KEY_GROUP: i8 = 0;
const KEY_TRANSACTION: i8 = 1;

pub enum Denied {
    OffsetCommit(Vec<OffsetCommitRequestTopic>),
    OffsetDelete(Vec<OffsetDeleteRequestTopic>),
    DeleteGroups(Vec<GroupId>),
    /// Answers to filter: the listing and description APIs.
    Describe,
    /// OffsetFetch; v0–7 name one group here.
    OffsetFetch(GroupId),
    /// The key type, and v0–3's one key (its answer is in top-level fields).
    FindCoordinator(i8, Option<String>),
}

fn refused(response: Response) -> Routed {
    Routed::Governed(Admission::Refused(response))
}

fn message(text: &str) -> Option<StrBytes> {
    Some(StrBytes::from_string(text.to_string()))
}

fn commit_errors(
    topics: Vec<OffsetCommitRequestTopic>,
    code: i16,
) -> Vec<OffsetCommitResponseTopic> {
    topics
        .into_iter()
        .map(|t| {
            OffsetCommitResponseTopic::default()
                .with_name(t.name)
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect()
}

pub fn admit(gate: &Gate<'_>, version: i16, request: Request) -> Routed {
    let code = GROUP_DENIED.code();
    match request {
        Request::JoinGroup(r) if !gate.group(operation::READ, &r.group_id.0) => {
            refused(Response::JoinGroup(
                JoinGroupResponse::default()
                    .with_error_code(code)
                    .with_generation_id(-1)
                    .with_member_id(r.member_id),
            ))
        }
        Request::SyncGroup(r) if !gate.group(operation::READ, &r.group_id.0) => refused(
            Response::SyncGroup(SyncGroupResponse::default().with_error_code(code)),
        ),
        Request::Heartbeat(r) if !gate.group(operation::READ, &r.group_id.0) => refused(
            Response::Heartbeat(HeartbeatResponse::default().with_error_code(code)),
        ),
        Request::LeaveGroup(r) if !gate.group(operation::READ, &r.group_id.0) => refused(
            Response::LeaveGroup(LeaveGroupResponse::default().with_error_code(code)),
        ),
        Request::ConsumerGroupHeartbeat(r) if !gate.group(operation::READ, &r.group_id.0) => {
            refused(Response::ConsumerGroupHeartbeat(
                ConsumerGroupHeartbeatResponse::default()
                    .with_error_code(code)
                    .with_error_message(message("not authorized to READ the group")),
            ))
        }
        // Kafka 4.0 (KAFKA-18813): a member may subscribe by name only to
        // topics it may DESCRIBE; one refused name refuses the heartbeat
        Request::ConsumerGroupHeartbeat(r)
            if r.subscribed_topic_names.as_ref().is_some_and(|names| {
                names.iter().any(|t| !gate.topic(operation::DESCRIBE, &t.0))
            }) =>
        {
            refused(Response::ConsumerGroupHeartbeat(
                ConsumerGroupHeartbeatResponse::default().with_error_code(TOPIC_DENIED.code()),
            ))
        }
        Request::OffsetCommit(r) if !gate.group(operation::READ, &r.group_id.0) => {
            refused(Response::OffsetCommit(
                OffsetCommitResponse::default().with_topics(commit_errors(r.topics, code)),
            ))
        }
        Request::OffsetCommit(mut r) => {
            let (ok, denied) = split(std::mem::take(&mut r.topics), |t| {
                gate.topic(operation::READ, &t.name.0)
            });
            r.topics = ok;
            Routed::Governed(Admission::Admitted(
                Request::OffsetCommit(r),
                After::Groups(Denied::OffsetCommit(denied)),
            ))
        }
        Request::OffsetDelete(r) if !gate.group(operation::DELETE, &r.group_id.0) => refused(
            Response::OffsetDelete(OffsetDeleteResponse::default().with_error_code(code)),
        ),
        Request::OffsetDelete(mut r) => {
            let (ok, denied) = split(std::mem::take(&mut r.topics), |t| {
                gate.topic(operation::READ, &t.name.0)
            });
            r.topics = ok;
            Routed::Governed(Admission::Admitted(
                Request::OffsetDelete(r),
                After::Groups(Denied::OffsetDelete(denied)),
            ))
        }
        Request::DeleteGroups(mut r) => {
            let (ok, denied) = split(std::mem::take(&mut r.groups_names), |g| {
                gate.group(operation::DELETE, &g.0)
            });
            r.groups_names = ok;
            Routed::Governed(Admission::Admitted(
                Request::DeleteGroups(r),
                After::Groups(Denied::DeleteGroups(denied)),
            ))
        }
        Request::FindCoordinator(r) => {
            let key_type = r.key_type;
            let key = (version < 4).then(|| r.key.to_string());
            Routed::Governed(Admission::Admitted(
                Request::FindCoordinator(r),
                After::Groups(Denied::FindCoordinator(key_type, key)),
            ))
        }
        Request::OffsetFetch(r) => {
            let group = r.group_id.clone();
            Routed::Governed(Admission::Admitted(
                Request::OffsetFetch(r),
                After::Groups(Denied::OffsetFetch(group)),
            ))
        }
        r @ (Request::DescribeGroups(_)
        | Request::ListGroups(_)
        | Request::ConsumerGroupDescribe(_)) => {
            Routed::Governed(Admission::Admitted(r, After::Groups(Denied::Describe)))
        }
        r @ (Request::JoinGroup(_)
        | Request::SyncGroup(_)
        | Request::Heartbeat(_)
        | Request::LeaveGroup(_)
        | Request::ConsumerGroupHeartbeat(_)) => {
            Routed::Governed(Admission::Admitted(r, After::Nothing))
        }
        other => Routed::NotMine(other),
    }
}

impl Denied {
    pub fn apply(self, gate: &Gate<'_>, version: i16, response: &mut Response) -> bool {
        let code = GROUP_DENIED.code();
        let describe = |g: &GroupId| gate.group(operation::DESCRIBE, &g.0);
        match (self, response) {
            (Denied::OffsetCommit(denied), Response::OffsetCommit(resp)) => {
                let any = !denied.is_empty();
                resp.topics
                    .extend(commit_errors(denied, TOPIC_DENIED.code()));
                any
            }
            (Denied::OffsetDelete(denied), Response::OffsetDelete(resp)) => {
                let any = !denied.is_empty();
                resp.topics.extend(denied.into_iter().map(|t| {
                    OffsetDeleteResponseTopic::default()
                        .with_name(t.name)
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    OffsetDeleteResponsePartition::default()
                                        .with_partition_index(p.partition_index)
                                        .with_error_code(TOPIC_DENIED.code())
                                })
                                .collect(),
                        )
                }));
                any
            }
            (Denied::DeleteGroups(denied), Response::DeleteGroups(resp)) => {
                let any = !denied.is_empty();
                resp.results.extend(denied.into_iter().map(|g| {
                    DeletableGroupResult::default()
                        .with_group_id(g)
                        .with_error_code(code)
                }));
                any
            }
            (Denied::FindCoordinator(key_type, key), Response::FindCoordinator(resp)) => {
                let allowed = |key: &str| match key_type {
                    KEY_GROUP => gate.group(operation::DESCRIBE, key),
                    KEY_TRANSACTION => gate.transactional_id(operation::DESCRIBE, key),
                    _ => true,
                };
                let denied_code = match key_type {
                    KEY_TRANSACTION => ResponseError::TransactionalIdAuthorizationFailed.code(),
                    _ => code,
                };
                // v0–3: one key, answered in the top-level fields (Node.noNode)
                if key.as_deref().is_some_and(|k| !allowed(k)) {
                    resp.error_code = denied_code;
                    resp.error_message = None;
                    resp.node_id = (-1).into();
                    resp.host = StrBytes::default();
                    resp.port = -1;
                    return true;
                }
                let mut any = false;
                for c in resp.coordinators.iter_mut().filter(|c| !allowed(&c.key)) {
                    *c = c
                        .clone()
                        .with_error_code(denied_code)
                        .with_node_id((-1).into())
                        .with_host(StrBytes::default())
                        .with_port(-1);
                    any = true;
                }
                any
            }
            (Denied::OffsetFetch(group), Response::OffsetFetch(resp)) => {
                let mut any = false;
                if version < 8 && !describe(&group) {
                    if version >= 2 {
                        resp.topics.clear();
                        resp.error_code = code;
                    } else {
                        // v0-1 answer per partition: the error and no offset
                        // (Kafka's INVALID_OFFSET, empty metadata), never the
                        // group's committed position
                        for p in resp.topics.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
                            p.error_code = code;
                            p.committed_offset = -1;
                            p.committed_leader_epoch = -1;
                            p.metadata = Some(StrBytes::default());
                        }
                    }
                    return true;
                }
                if version >= 8 {
                    for g in resp.groups.iter_mut().filter(|g| !describe(&g.group_id)) {
                        g.topics.clear();
                        g.error_code = code;
                        any = true;
                    }
                    for g in &mut resp.groups {
                        let before = g.topics.len();
                        g.topics
                            .retain(|t| gate.topic(operation::DESCRIBE, &t.name.0));
                        any |= g.topics.len() != before;
                    }
                } else {
                    let before = resp.topics.len();
                    resp.topics
                        .retain(|t| gate.topic(operation::DESCRIBE, &t.name.0));
                    any |= resp.topics.len() != before;
                }
                any
            }
            (Denied::Describe, Response::DescribeGroups(resp)) => {
                let mut any = false;
                for g in resp.groups.iter_mut().filter(|g| !describe(&g.group_id)) {
                    *g = kafka_protocol::messages::describe_groups_response::DescribedGroup::default()
                        .with_group_id(g.group_id.clone())
                        .with_error_code(code)
                        .with_authorized_operations(i32::MIN);
                    any = true;
                }
                any
            }
            (Denied::Describe, Response::ConsumerGroupDescribe(resp)) => {
                use kafka_protocol::messages::consumer_group_describe_response::DescribedGroup;
                let mut any = false;
                for g in resp.groups.iter_mut() {
                    // Kafka 4.0 (KAFKA-18813): a described group whose
                    // members' assignments or target assignments name a
                    // topic the caller may not DESCRIBE is answered whole
                    // with TOPIC_AUTHORIZATION_FAILED, nothing else of it
                    let (error, text) = if !describe(&g.group_id) {
                        (code, None)
                    } else if g.members.iter().any(|m| {
                        [&m.assignment, &m.target_assignment]
                            .into_iter()
                            .flat_map(|a| &a.topic_partitions)
                            .any(|t| !gate.topic(operation::DESCRIBE, &t.topic_name.0))
                    }) {
                        (
                            TOPIC_DENIED.code(),
                            message("the group's members are assigned topics the caller may not DESCRIBE"),
                        )
                    } else {
                        continue;
                    };
                    *g = DescribedGroup::default()
                        .with_group_id(g.group_id.clone())
                        .with_error_code(error)
                        .with_error_message(text)
                        .with_authorized_operations(i32::MIN);
                    any = true;
                }
                any
            }
            (Denied::Describe, Response::ListGroups(resp)) => {
                if !gate.cluster(operation::DESCRIBE) {
                    resp.groups.retain(|g| describe(&g.group_id));
                }
                false
            }
            _ => false,
        }
    }
}
