//! Heartbeat: keeps a member alive and tells it when to rejoin.

use chronik_protocol::Response;
use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use super::Handled;
use crate::coordinators::groups::GroupManager;
use crate::requests::errors::group::code;

pub fn handle(groups: &GroupManager, _version: i16, request: HeartbeatRequest) -> Option<Handled> {
    let result = groups.heartbeat(
        &request.group_id.0,
        &request.member_id,
        request.generation_id,
    );
    let error = result.err();
    Handled::new(
        Response::Heartbeat(HeartbeatResponse::default().with_error_code(code(error))),
        error.is_some(),
    )
}
