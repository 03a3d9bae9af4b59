//! ConsumerGroupDescribe (KIP-848): each consumer group's state, epochs,
//! assignor and members with their current and target assignments; v1
//! tells classic-protocol members (MemberType 0) from consumer ones (1). A group
//! id that is not a KIP-848 group is GROUP_ID_NOT_FOUND; a broker that is not
//! the coordinator answers as ConsumerGroupHeartbeat does.

use chronik_coordinator_state::Assignment;
use chronik_metadata::MetadataImage;
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment as WireAssignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handled;
use crate::coordinators::groups::{GroupManager, OffsetStore};
use crate::requests::topics::lookup::{to_uuid, topic_name};
use chronik_metadata::Cluster;

/// KIP-1099's MemberType of a member that uses ConsumerGroupHeartbeat.
const CONSUMER_MEMBER: i8 = 1;
/// ... and of a member that still speaks the classic protocol.
const CLASSIC_MEMBER: i8 = 0;

pub fn handle(
    cluster: &Cluster,
    groups: &GroupManager,
    offsets: &OffsetStore,
    _version: i16,
    request: ConsumerGroupDescribeRequest,
) -> Option<Handled> {
    let coordinator = offsets.readable();
    let image = cluster.image();
    let groups: Vec<DescribedGroup> = request
        .group_ids
        .into_iter()
        .map(|group_id| {
            let described = DescribedGroup::default().with_group_id(group_id.clone());
            if let Err(error) = coordinator {
                return described.with_error_code(error.code());
            }
            let Some(g) = groups.consumer_describe(&group_id.0) else {
                return described.with_error_code(ResponseError::GroupIdNotFound.code());
            };
            let members = g
                .members
                .into_iter()
                .map(|(m, target)| {
                    let member_type = match m.classic {
                        Some(_) => CLASSIC_MEMBER,
                        None => CONSUMER_MEMBER,
                    };
                    Member::default()
                        .with_member_id(StrBytes::from_string(m.member_id))
                        .with_instance_id(m.instance_id.map(StrBytes::from_string))
                        .with_rack_id(m.rack_id.map(StrBytes::from_string))
                        .with_member_epoch(m.member_epoch)
                        .with_client_id(StrBytes::from_string(m.client_id))
                        .with_client_host(StrBytes::from_string(m.client_host))
                        .with_subscribed_topic_names(
                            m.subscribed_topic_names
                                .iter()
                                .map(|n| topic_name(n))
                                .collect(),
                        )
                        .with_subscribed_topic_regex(
                            m.subscribed_topic_regex.map(StrBytes::from_string),
                        )
                        .with_assignment(wire_assignment(&image, m.assigned))
                        .with_target_assignment(wire_assignment(&image, target))
                        .with_member_type(member_type)
                })
                .collect();
            described
                .with_group_state(StrBytes::from_static_str(g.state.kafka_name()))
                .with_group_epoch(g.group_epoch)
                .with_assignment_epoch(g.assignment_epoch)
                .with_assignor_name(StrBytes::from_static_str(g.assignor))
                .with_members(members)
        })
        .collect();
    let has_error = groups.iter().any(|g| g.error_code != 0);
    Handled::new(
        Response::ConsumerGroupDescribe(
            ConsumerGroupDescribeResponse::default().with_groups(groups),
        ),
        has_error,
    )
}

fn wire_assignment(image: &MetadataImage, assignment: Assignment) -> WireAssignment {
    WireAssignment::default().with_topic_partitions(
        assignment
            .into_iter()
            .map(|(id, ps)| {
                let name = image.topic_by_id(id).map_or("", |t| t.name.as_str());
                TopicPartitions::default()
                    .with_topic_id(to_uuid(id))
                    .with_topic_name(topic_name(name))
                    .with_partitions(ps.into_iter().collect())
            })
            .collect(),
    )
}
