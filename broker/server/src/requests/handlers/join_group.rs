//! JoinGroup: hands the request to the group manager and waits — possibly
//! for a whole rebalance — for its reply. A KIP-848 group answers a
//! classic member at once (`chronik_coordinator_state::classic_member`).

use chronik_coordinator_state::JoinRequest;
use chronik_metadata::Cluster;
use chronik_protocol::Response;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};
use kafka_protocol::protocol::StrBytes;

use super::consumer_group_heartbeat::subscribable_topics;
use super::Handled;
use crate::coordinators::groups::GroupManager;
use crate::requests::errors::group::code;

pub async fn handle(
    cluster: &Cluster,
    groups: &GroupManager,
    version: i16,
    client_id: &str,
    request: JoinGroupRequest,
) -> Option<Handled> {
    let session_timeout_ms = u64::try_from(request.session_timeout_ms.max(0)).unwrap_or(0);
    // v0 has no rebalance timeout; Kafka uses the session timeout.
    let rebalance_timeout_ms = if version >= 1 {
        u64::try_from(request.rebalance_timeout_ms.max(0)).unwrap_or(0)
    } else {
        session_timeout_ms
    };
    let join = JoinRequest {
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.map(|s| s.to_string()),
        client_id: client_id.to_string(),
        client_host: String::new(),
        session_timeout_ms,
        rebalance_timeout_ms,
        protocol_type: request.protocol_type.to_string(),
        protocols: request
            .protocols
            .into_iter()
            .map(|p| (p.name.to_string(), p.metadata))
            .collect(),
        require_known_member_id: version >= 4,
    };
    let topics = subscribable_topics(cluster, groups);
    let reply = groups.join(&request.group_id.0, join, &topics).await;
    let members = reply
        .members
        .into_iter()
        .map(|m| {
            JoinGroupResponseMember::default()
                .with_member_id(StrBytes::from_string(m.member_id))
                .with_group_instance_id(m.group_instance_id.map(StrBytes::from_string))
                .with_metadata(m.metadata)
        })
        .collect();
    let response = JoinGroupResponse::default()
        .with_error_code(code(reply.error))
        .with_generation_id(reply.generation_id)
        .with_protocol_type(reply.protocol_type.map(StrBytes::from_string))
        .with_protocol_name(Some(StrBytes::from_string(
            reply.protocol_name.unwrap_or_default(),
        )))
        .with_leader(StrBytes::from_string(reply.leader))
        .with_member_id(StrBytes::from_string(reply.member_id))
        .with_members(members);
    Handled::new(Response::JoinGroup(response), reply.error.is_some())
}
