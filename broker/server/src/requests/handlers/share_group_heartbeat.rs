//! ShareGroupHeartbeat (KIP-932): members of a share group join (epoch 0,
//! with their subscription), heartbeat and leave (-1) on the group
//! coordinator, which answers with the member's epoch and, when it is new
//! to the member, its assignment. UNSUPPORTED_VERSION while `share.version`
//! is 0, as Kafka answers; NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS
//! as for consumer groups; GROUP_ID_NOT_FOUND for a classic or consumer
//! group's id.

use chronik_coordinator_state::share_group::ShareHeartbeat;
use chronik_metadata::Cluster;
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse};
use kafka_protocol::protocol::StrBytes;

use super::consumer_group_heartbeat::subscribable_topics;
use super::{Handled, RequestContext};
use crate::coordinators::groups::offset_store::MAX_GROUP_ID_BYTES;
use crate::coordinators::groups::GroupManager;
use crate::coordinators::share::{self, ShareCoordinator};
use crate::requests::errors::group::response_error;
use crate::requests::topics::lookup::to_uuid;

pub fn handle(
    (cluster, groups): (&Cluster, &GroupManager),
    share: &ShareCoordinator,
    request: ShareGroupHeartbeatRequest,
    client_id: &str,
    context: &RequestContext,
) -> Option<Handled> {
    let response = match heartbeat((cluster, groups), share, request, client_id, context) {
        Ok(reply) => ShareGroupHeartbeatResponse::default()
            .with_member_id(Some(StrBytes::from_string(reply.member_id)))
            .with_member_epoch(reply.member_epoch)
            .with_heartbeat_interval_ms(reply.heartbeat_interval_ms)
            .with_assignment(reply.assignment.map(|a| {
                Assignment::default().with_topic_partitions(
                    a.into_iter()
                        .map(|(id, ps)| {
                            TopicPartitions::default()
                                .with_topic_id(to_uuid(id))
                                .with_partitions(ps.into_iter().collect())
                        })
                        .collect(),
                )
            })),
        Err((error, message)) => ShareGroupHeartbeatResponse::default()
            .with_error_code(error.code())
            .with_error_message(message.map(StrBytes::from_string))
            .with_member_epoch(-1),
    };
    let has_error = response.error_code != 0;
    Handled::new(Response::ShareGroupHeartbeat(response), has_error)
}

type Failure = (ResponseError, Option<String>);

fn heartbeat(
    (cluster, groups): (&Cluster, &GroupManager),
    share: &ShareCoordinator,
    request: ShareGroupHeartbeatRequest,
    client_id: &str,
    context: &RequestContext,
) -> Result<chronik_coordinator_state::share_group::ShareHeartbeatReply, Failure> {
    if !share::enabled(cluster) {
        return Err((
            ResponseError::UnsupportedVersion,
            Some("Share groups are not enabled: share.version is 0.".to_string()),
        ));
    }
    share.groups.readable().map_err(|e| (e, None))?;
    let group_id = request.group_id.0.to_string();
    if group_id.is_empty() || group_id.len() > MAX_GROUP_ID_BYTES {
        return Err((
            ResponseError::InvalidRequest,
            Some("GroupId can't be empty.".to_string()),
        ));
    }
    let heartbeat = ShareHeartbeat {
        member_id: request.member_id.to_string(),
        member_epoch: request.member_epoch,
        rack_id: request.rack_id.map(|s| s.to_string()),
        subscribed_topic_names: request
            .subscribed_topic_names
            .map(|names| names.into_iter().map(|n| n.0.to_string()).collect()),
        client_id: client_id.to_string(),
        client_host: format!("/{}", context.peer.ip()),
    };
    let topics = subscribable_topics(cluster, groups);
    share
        .groups
        .heartbeat(&group_id, heartbeat, &topics)
        .map_err(|e| {
            let error = response_error(e);
            let message = match error {
                ResponseError::GroupIdNotFound => {
                    Some(format!("Group {group_id} is not a share group."))
                }
                ResponseError::InvalidRequest => {
                    Some("MemberId and SubscribedTopicNames (on joining) are required.".to_string())
                }
                _ => None,
            };
            (error, message)
        })
}
