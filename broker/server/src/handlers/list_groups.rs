//! ListGroups: live groups plus groups known only by their committed
//! offsets (reported Empty), filtered by state (v4+) and type (v5+).

use std::sync::Arc;

use chronik_protocol::Response;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handled;
use crate::broker::Broker;

pub fn handle(broker: &Arc<Broker>, _version: i16, request: ListGroupsRequest) -> Option<Handled> {
    let mut listed: Vec<(String, String, &'static str)> = broker
        .groups
        .list()
        .into_iter()
        .map(|g| (g.group_id, g.protocol_type, g.state.kafka_name()))
        .collect();
    for group in broker.offsets.groups() {
        if !listed.iter().any(|(g, _, _)| *g == group) {
            listed.push((group, "consumer".to_string(), "Empty"));
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
        .filter(|(_, _, state)| states.is_empty() || states.contains(&state.to_lowercase()))
        .filter(|_| types.is_empty() || types.iter().any(|t| t == "classic"))
        .map(|(group_id, protocol_type, state)| {
            ListedGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(group_id)))
                .with_protocol_type(StrBytes::from_string(protocol_type))
                .with_group_state(StrBytes::from_static_str(state))
                .with_group_type(StrBytes::from_static_str("classic"))
        })
        .collect();
    Handled::new(
        Response::ListGroups(ListGroupsResponse::default().with_groups(groups)),
        false,
    )
}
