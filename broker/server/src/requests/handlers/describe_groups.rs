//! DescribeGroups: state, protocol and members with their subscriptions and
//! assignments. Unknown groups are "Dead" (v6+: with GROUP_ID_NOT_FOUND);
//! so are KIP-848 consumer groups, which are not classic groups — also a
//! classic group upgraded to one, classic members included (Kafka 4.x
//! answers the same; ConsumerGroupDescribe describes them).

use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handled;
use crate::coordinators::groups::{GroupManager, OffsetStore};

pub fn handle(
    groups: &GroupManager,
    offsets: &OffsetStore,
    version: i16,
    request: DescribeGroupsRequest,
) -> Option<Handled> {
    let mut has_error = false;
    let mut unknown = |described: DescribedGroup| {
        let described = described.with_group_state(StrBytes::from_static_str("Dead"));
        if version >= 6 {
            has_error = true;
            described.with_error_code(ResponseError::GroupIdNotFound.code())
        } else {
            described
        }
    };
    let groups = request
        .groups
        .into_iter()
        .map(|group_id| {
            let described = DescribedGroup::default()
                .with_group_id(group_id.clone())
                .with_authorized_operations(i32::MIN);
            match groups.describe(&group_id.0) {
                Some(g) => {
                    let members = g
                        .members
                        .iter()
                        .map(|m| {
                            DescribedGroupMember::default()
                                .with_member_id(StrBytes::from_string(m.member_id.clone()))
                                .with_group_instance_id(
                                    m.group_instance_id.clone().map(StrBytes::from_string),
                                )
                                .with_client_id(StrBytes::from_string(m.client_id.clone()))
                                .with_client_host(StrBytes::from_string(m.client_host.clone()))
                                .with_member_metadata(m.metadata_for(&g.protocol_name))
                                .with_member_assignment(m.assignment.clone())
                        })
                        .collect();
                    described
                        .with_group_state(StrBytes::from_static_str(g.state.kafka_name()))
                        .with_protocol_type(StrBytes::from_string(g.protocol_type))
                        .with_protocol_data(StrBytes::from_string(g.protocol_name))
                        .with_members(members)
                }
                None if groups.exists(&group_id.0) => unknown(described),
                None if !offsets.fetch_all(&group_id.0).is_empty() => described
                    .with_group_state(StrBytes::from_static_str("Empty"))
                    .with_protocol_type(StrBytes::from_static_str("consumer")),
                None => unknown(described),
            }
        })
        .collect();
    Handled::new(
        Response::DescribeGroups(DescribeGroupsResponse::default().with_groups(groups)),
        has_error,
    )
}
