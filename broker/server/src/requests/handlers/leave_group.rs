//! LeaveGroup: one member (v0–2) or a batch of members (v3+) leave at once,
//! starting a rebalance among those who stay.

use chronik_protocol::Response;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};

use super::Handled;
use crate::coordinators::groups::GroupManager;
use crate::requests::errors::group::code;

pub fn handle(groups: &GroupManager, version: i16, request: LeaveGroupRequest) -> Option<Handled> {
    let group_id = request.group_id.0.to_string();
    if version < 3 {
        let error = groups.leave(&group_id, &request.member_id).err();
        return Handled::new(
            Response::LeaveGroup(LeaveGroupResponse::default().with_error_code(code(error))),
            error.is_some(),
        );
    }
    let members: Vec<MemberResponse> = request
        .members
        .into_iter()
        .map(|m| {
            let error = groups.leave(&group_id, &m.member_id).err();
            MemberResponse::default()
                .with_member_id(m.member_id)
                .with_group_instance_id(m.group_instance_id)
                .with_error_code(code(error))
        })
        .collect();
    let has_error = members.iter().any(|m| m.error_code != 0);
    Handled::new(
        Response::LeaveGroup(LeaveGroupResponse::default().with_members(members)),
        has_error,
    )
}
