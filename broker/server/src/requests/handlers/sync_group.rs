//! SyncGroup: the leader's assignments go to every member; v5 responses
//! carry protocol_type and protocol_name, errors included. A classic member
//! of a KIP-848 group gets its partitions as a ConsumerProtocolAssignment.

use chronik_coordinator_state::SyncRequest;
use chronik_metadata::Cluster;
use chronik_protocol::Response;
use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};
use kafka_protocol::protocol::StrBytes;

use super::consumer_group_heartbeat::subscribable_topics;
use super::Handled;
use crate::coordinators::groups::GroupManager;
use crate::requests::errors::group::code;

pub async fn handle(
    cluster: &Cluster,
    groups: &GroupManager,
    _version: i16,
    request: SyncGroupRequest,
) -> Option<Handled> {
    let sync = SyncRequest {
        member_id: request.member_id.to_string(),
        generation_id: request.generation_id,
        protocol_type: request.protocol_type.map(|s| s.to_string()),
        protocol_name: request.protocol_name.map(|s| s.to_string()),
        assignments: request
            .assignments
            .into_iter()
            .map(|a| (a.member_id.to_string(), a.assignment))
            .collect(),
    };
    let topics = subscribable_topics(cluster, groups);
    let reply = groups.sync(&request.group_id.0, sync, &topics).await;
    let response = SyncGroupResponse::default()
        .with_error_code(code(reply.error))
        .with_protocol_type(reply.protocol_type.map(StrBytes::from_string))
        .with_protocol_name(reply.protocol_name.map(StrBytes::from_string))
        .with_assignment(reply.assignment);
    Handled::new(Response::SyncGroup(response), reply.error.is_some())
}
