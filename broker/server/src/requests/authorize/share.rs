//! ACLs of the share-group APIs (KIP-932), as Kafka checks them: READ on
//! the group for ShareGroupHeartbeat, ShareFetch, ShareAcknowledge and
//! AlterShareGroupOffsets; DESCRIBE on the group for ShareGroupDescribe
//! and DescribeShareGroupOffsets; DELETE on it for
//! DeleteShareGroupOffsets; DESCRIBE on subscribed topics (heartbeat) and
//! READ on fetched, acknowledged or reset topics; CLUSTER_ACTION for the
//! share-group state RPCs between brokers.
//!
//! A refused group or topic refuses the whole request here
//! (GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED,
//! CLUSTER_AUTHORIZATION_FAILED), where Kafka answers the other parts: a
//! client is told what it may not do, never given it.

use chronik_metadata::acl::operation;
use chronik_protocol::share_wire::{ShareAcknowledgeResponseWire, ShareFetchResponseWire};
use chronik_protocol::{Request, Response};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_share_group_offsets_response::DescribeShareGroupOffsetsResponseGroup;
use kafka_protocol::messages::share_group_describe_response::DescribedGroup;
use kafka_protocol::messages::*;

use super::{Admission, After, Gate, Routed};

const GROUP: ResponseError = ResponseError::GroupAuthorizationFailed;
const TOPIC: ResponseError = ResponseError::TopicAuthorizationFailed;

fn refused(response: Response) -> Routed {
    Routed::Governed(Admission::Refused(response))
}

fn admitted(request: Request) -> Routed {
    Routed::Governed(Admission::Admitted(request, After::Nothing))
}

/// Whether every topic id names a topic the session may READ (unknown ids
/// pass: the handler answers UNKNOWN_TOPIC_ID).
fn read_topic_ids<'a>(gate: &Gate<'_>, ids: impl Iterator<Item = &'a uuid::Uuid>) -> bool {
    let image = gate.cluster.image();
    ids.filter_map(|id| image.topics.values().find(|t| t.topic_id == *id.as_bytes()))
        .all(|t| gate.topic(operation::READ, &t.name))
}

pub fn admit(gate: &Gate<'_>, _version: i16, request: Request) -> Routed {
    match request {
        Request::ShareGroupHeartbeat(r) => {
            let error =
                if !gate.group(operation::READ, &r.group_id.0) {
                    Some(GROUP)
                } else if r.subscribed_topic_names.as_ref().is_some_and(|names| {
                    names.iter().any(|t| !gate.topic(operation::DESCRIBE, &t.0))
                }) {
                    Some(TOPIC)
                } else {
                    None
                };
            match error {
                Some(e) => refused(Response::ShareGroupHeartbeat(
                    ShareGroupHeartbeatResponse::default()
                        .with_error_code(e.code())
                        .with_member_epoch(-1),
                )),
                None => admitted(Request::ShareGroupHeartbeat(r)),
            }
        }
        Request::ShareGroupDescribe(r) => {
            if r.group_ids
                .iter()
                .all(|g| gate.group(operation::DESCRIBE, &g.0))
            {
                return admitted(Request::ShareGroupDescribe(r));
            }
            let groups = r
                .group_ids
                .into_iter()
                .map(|g| {
                    DescribedGroup::default()
                        .with_group_id(g)
                        .with_error_code(GROUP.code())
                })
                .collect();
            refused(Response::ShareGroupDescribe(
                ShareGroupDescribeResponse::default().with_groups(groups),
            ))
        }
        Request::ShareFetch(r) => {
            let group_ok = r
                .body
                .group_id
                .as_ref()
                .is_some_and(|g| gate.group(operation::READ, &g.0));
            let error = if !group_ok {
                Some(GROUP)
            } else if !read_topic_ids(gate, r.body.topics.iter().map(|t| &t.topic_id)) {
                Some(TOPIC)
            } else {
                None
            };
            match error {
                Some(e) => refused(Response::ShareFetch(ShareFetchResponseWire(
                    ShareFetchResponse::default().with_error_code(e.code()),
                ))),
                None => admitted(Request::ShareFetch(r)),
            }
        }
        Request::ShareAcknowledge(r) => {
            let group_ok = r
                .body
                .group_id
                .as_ref()
                .is_some_and(|g| gate.group(operation::READ, &g.0));
            let error = if !group_ok {
                Some(GROUP)
            } else if !read_topic_ids(gate, r.body.topics.iter().map(|t| &t.topic_id)) {
                Some(TOPIC)
            } else {
                None
            };
            match error {
                Some(e) => refused(Response::ShareAcknowledge(ShareAcknowledgeResponseWire {
                    body: ShareAcknowledgeResponse::default().with_error_code(e.code()),
                    acquisition_lock_timeout_ms: 0,
                })),
                None => admitted(Request::ShareAcknowledge(r)),
            }
        }
        r @ (Request::InitializeShareGroupState(_)
        | Request::ReadShareGroupState(_)
        | Request::WriteShareGroupState(_)
        | Request::DeleteShareGroupState(_)
        | Request::ReadShareGroupStateSummary(_)) => {
            if gate.cluster(operation::CLUSTER_ACTION) {
                return admitted(r);
            }
            refused(state_rpc_refused(r))
        }
        Request::DescribeShareGroupOffsets(r) => {
            if r.0
                .groups
                .iter()
                .all(|g| gate.group(operation::DESCRIBE, &g.group_id.0))
            {
                return admitted(Request::DescribeShareGroupOffsets(r));
            }
            let groups =
                r.0.groups
                    .into_iter()
                    .map(|g| {
                        DescribeShareGroupOffsetsResponseGroup::default()
                            .with_group_id(g.group_id)
                            .with_error_code(GROUP.code())
                    })
                    .collect();
            refused(Response::DescribeShareGroupOffsets(
                DescribeShareGroupOffsetsResponse::default()
                    .with_groups(groups)
                    .into(),
            ))
        }
        Request::AlterShareGroupOffsets(r) => {
            let error = if !gate.group(operation::READ, &r.group_id.0) {
                Some(GROUP)
            } else if r
                .topics
                .iter()
                .any(|t| !gate.topic(operation::READ, &t.topic_name.0))
            {
                Some(TOPIC)
            } else {
                None
            };
            match error {
                Some(e) => refused(Response::AlterShareGroupOffsets(
                    AlterShareGroupOffsetsResponse::default().with_error_code(e.code()),
                )),
                None => admitted(Request::AlterShareGroupOffsets(r)),
            }
        }
        Request::DeleteShareGroupOffsets(r) => {
            let error = if !gate.group(operation::DELETE, &r.group_id.0) {
                Some(GROUP)
            } else if r
                .topics
                .iter()
                .any(|t| !gate.topic(operation::READ, &t.topic_name.0))
            {
                Some(TOPIC)
            } else {
                None
            };
            match error {
                Some(e) => refused(Response::DeleteShareGroupOffsets(
                    DeleteShareGroupOffsetsResponse::default().with_error_code(e.code()),
                )),
                None => admitted(Request::DeleteShareGroupOffsets(r)),
            }
        }
        other => Routed::NotMine(other),
    }
}

/// A state RPC refused CLUSTER_ACTION: every partition it names answers
/// CLUSTER_AUTHORIZATION_FAILED (these responses have no top-level code).
fn state_rpc_refused(request: Request) -> Response {
    let code = ResponseError::ClusterAuthorizationFailed.code();
    match request {
        Request::InitializeShareGroupState(r) => {
            use kafka_protocol::messages::initialize_share_group_state_response::{
                InitializeStateResult, PartitionResult,
            };
            Response::InitializeShareGroupState(
                InitializeShareGroupStateResponse::default().with_results(
                    r.topics
                        .iter()
                        .map(|t| {
                            InitializeStateResult::default()
                                .with_topic_id(t.topic_id)
                                .with_partitions(
                                    t.partitions
                                        .iter()
                                        .map(|p| {
                                            PartitionResult::default()
                                                .with_partition(p.partition)
                                                .with_error_code(code)
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                ),
            )
        }
        Request::ReadShareGroupState(r) => {
            use kafka_protocol::messages::read_share_group_state_response::{
                PartitionResult, ReadStateResult,
            };
            Response::ReadShareGroupState(
                ReadShareGroupStateResponse::default().with_results(
                    r.topics
                        .iter()
                        .map(|t| {
                            ReadStateResult::default()
                                .with_topic_id(t.topic_id)
                                .with_partitions(
                                    t.partitions
                                        .iter()
                                        .map(|p| {
                                            PartitionResult::default()
                                                .with_partition(p.partition)
                                                .with_error_code(code)
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                ),
            )
        }
        Request::WriteShareGroupState(r) => {
            use kafka_protocol::messages::write_share_group_state_response::{
                PartitionResult, WriteStateResult,
            };
            Response::WriteShareGroupState(
                WriteShareGroupStateResponse::default().with_results(
                    r.topics
                        .iter()
                        .map(|t| {
                            WriteStateResult::default()
                                .with_topic_id(t.topic_id)
                                .with_partitions(
                                    t.partitions
                                        .iter()
                                        .map(|p| {
                                            PartitionResult::default()
                                                .with_partition(p.partition)
                                                .with_error_code(code)
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                ),
            )
        }
        Request::DeleteShareGroupState(r) => {
            use kafka_protocol::messages::delete_share_group_state_response::{
                DeleteStateResult, PartitionResult,
            };
            Response::DeleteShareGroupState(
                DeleteShareGroupStateResponse::default().with_results(
                    r.topics
                        .iter()
                        .map(|t| {
                            DeleteStateResult::default()
                                .with_topic_id(t.topic_id)
                                .with_partitions(
                                    t.partitions
                                        .iter()
                                        .map(|p| {
                                            PartitionResult::default()
                                                .with_partition(p.partition)
                                                .with_error_code(code)
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                ),
            )
        }
        other => {
            use kafka_protocol::messages::read_share_group_state_summary_response::{
                PartitionResult, ReadStateSummaryResult,
            };
            let topics = match other {
                Request::ReadShareGroupStateSummary(r) => r.topics,
                _ => Vec::new(),
            };
            Response::ReadShareGroupStateSummary(
                ReadShareGroupStateSummaryResponse::default().with_results(
                    topics
                        .iter()
                        .map(|t| {
                            ReadStateSummaryResult::default()
                                .with_topic_id(t.topic_id)
                                .with_partitions(
                                    t.partitions
                                        .iter()
                                        .map(|p| {
                                            PartitionResult::default()
                                                .with_partition(p.partition)
                                                .with_error_code(code)
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                ),
            )
        }
    }
}
