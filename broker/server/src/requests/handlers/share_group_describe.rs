//! ShareGroupDescribe (KIP-932, kafka-share-groups.sh --describe): each
//! share group's state, epochs, assignor and members with their
//! assignments, from the group coordinator. GROUP_ID_NOT_FOUND for a group
//! that is not a share group here.

use chronik_metadata::Cluster;
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::share_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{ShareGroupDescribeRequest, ShareGroupDescribeResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::Handled;
use crate::coordinators::share::{self, ShareCoordinator};
use crate::requests::topics::lookup::to_uuid;

/// Kafka's authorized_operations value when not requested.
const NOT_REQUESTED: i32 = i32::MIN;

pub fn handle(
    cluster: &Cluster,
    share: &ShareCoordinator,
    request: ShareGroupDescribeRequest,
) -> Option<Handled> {
    let image = cluster.image();
    let name_of = |id: [u8; 16]| {
        image
            .topics
            .values()
            .find(|t| t.topic_id == id)
            .map(|t| t.name.clone())
            .unwrap_or_default()
    };
    let readable = if share::enabled(cluster) {
        share.groups.readable()
    } else {
        Err(ResponseError::UnsupportedVersion)
    };
    let groups = request
        .group_ids
        .into_iter()
        .map(|id| {
            let described = DescribedGroup::default()
                .with_group_id(id.clone())
                .with_authorized_operations(NOT_REQUESTED);
            if let Err(e) = readable {
                return described.with_error_code(e.code());
            }
            let Some(g) = share.groups.describe(&id.0) else {
                return described
                    .with_error_code(ResponseError::GroupIdNotFound.code())
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "Group {} not found.",
                        id.0
                    ))));
            };
            described
                .with_group_state(StrBytes::from_static_str(g.state))
                .with_group_epoch(g.group_epoch)
                .with_assignment_epoch(g.assignment_epoch)
                .with_assignor_name(StrBytes::from_static_str("simple"))
                .with_members(
                    g.members
                        .into_iter()
                        .map(|m| {
                            Member::default()
                                .with_member_id(StrBytes::from_string(m.member_id))
                                .with_rack_id(m.rack_id.map(StrBytes::from_string))
                                .with_member_epoch(m.member_epoch)
                                .with_client_id(StrBytes::from_string(m.client_id))
                                .with_client_host(StrBytes::from_string(m.client_host))
                                .with_subscribed_topic_names(
                                    m.subscribed_topic_names
                                        .into_iter()
                                        .map(|n| TopicName(StrBytes::from_string(n)))
                                        .collect(),
                                )
                                .with_assignment(
                                    Assignment::default().with_topic_partitions(
                                        m.assignment
                                            .into_iter()
                                            .map(|(t, ps)| {
                                                TopicPartitions::default()
                                                    .with_topic_id(to_uuid(t))
                                                    .with_topic_name(TopicName(
                                                        StrBytes::from_string(name_of(t)),
                                                    ))
                                                    .with_partitions(ps.into_iter().collect())
                                            })
                                            .collect(),
                                    ),
                                )
                        })
                        .collect(),
                )
        })
        .collect::<Vec<_>>();
    let has_error = groups.iter().any(|g| g.error_code != 0);
    Handled::new(
        Response::ShareGroupDescribe(ShareGroupDescribeResponse::default().with_groups(groups)),
        has_error,
    )
}
