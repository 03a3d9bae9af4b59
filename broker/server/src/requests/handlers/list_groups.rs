//! ListGroups: live groups — classic ones and KIP-848 consumer groups
//! (protocol type and group type "consumer") — plus groups known only by
//! their committed offsets (reported Empty, classic), filtered by state
//! (v4+) and type (v5+). Share groups (KIP-932) are listed with protocol
//! type "share" and group type "share".

use chronik_protocol::Response;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handled;
use crate::coordinators::groups::{GroupManager, OffsetStore};
use crate::coordinators::share::groups::ShareGroups;

pub fn handle(
    (groups, share_groups): (&GroupManager, &ShareGroups),
    offsets: &OffsetStore,
    _version: i16,
    request: ListGroupsRequest,
) -> Option<Handled> {
    let mut listed = groups.list();
    for (group, state) in share_groups.list() {
        listed.push((group, "share".to_string(), state, "share"));
    }
    for group in offsets.groups() {
        if !listed.iter().any(|(g, _, _, _)| *g == group) {
            listed.push((group, "consumer".to_string(), "Empty", "classic"));
        }
    }
    let states: Vec<String> = request
        .states_filter
        .iter()
        .map(|s| s.to_lowercase())
        .collect();
    let types: Vec<String> = request
        .types_filter
        .iter()
        .map(|s| s.to_lowercase())
        .collect();
    let groups = listed
        .into_iter()
        .filter(|(_, _, state, _)| states.is_empty() || states.contains(&state.to_lowercase()))
        .filter(|(_, _, _, kind)| types.is_empty() || types.iter().any(|t| t == kind))
        .map(|(group_id, protocol_type, state, kind)| {
            ListedGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(group_id)))
                .with_protocol_type(StrBytes::from_string(protocol_type))
                .with_group_state(StrBytes::from_static_str(state))
                .with_group_type(StrBytes::from_static_str(kind))
        })
        .collect();
    Handled::new(
        Response::ListGroups(ListGroupsResponse::default().with_groups(groups)),
        false,
    )
}
