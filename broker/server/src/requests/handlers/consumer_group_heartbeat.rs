//! ConsumerGroupHeartbeat (KIP-848): joins, heartbeats and leaves of a
//! consumer group with server-side assignment. Coordinator ownership is
//! decided as for OffsetFetch (`OffsetStore::readable`: NOT_COORDINATOR
//! unless this broker leads `__consumer_offsets`, COORDINATOR_LOAD_IN_PROGRESS
//! until loaded); the group itself is `chronik_coordinator_state::ConsumerGroup`
//! behind the group manager, which stores a heartbeat's change in
//! `__consumer_offsets` before it is answered. v0: the broker names a
//! member that joins without an id; v1: the client does, and may subscribe
//! by regex.

use chronik_metadata::Cluster;
use std::collections::BTreeSet;
use std::sync::Arc;

use chronik_metadata::acl::{operation, resource};

use chronik_coordinator_state::{Assignment, HeartbeatReply, HeartbeatRequest, TopicMetadata};
use chronik_metadata::MetadataImage;
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_heartbeat_response::{
    Assignment as WireAssignment, TopicPartitions,
};
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};
use kafka_protocol::protocol::StrBytes;

use super::{Handled, RequestContext};
use crate::coordinators::groups::offset_store::MAX_GROUP_ID_BYTES;
use crate::coordinators::groups::{GroupManager, OffsetStore};
use crate::requests::errors::group::response_error;
use crate::requests::topics::lookup::to_uuid;
use crate::security::authorizer::Authorizer;

/// What a ConsumerGroupHeartbeat reaches, lent by the dispatcher.
pub struct HeartbeatDeps<'a> {
    pub cluster: &'a Cluster,
    pub groups: &'a GroupManager,
    pub offsets: &'a OffsetStore,
    pub authorizer: &'a Authorizer,
}

pub async fn handle(
    deps: &HeartbeatDeps<'_>,
    version: i16,
    request: ConsumerGroupHeartbeatRequest,
    client_id: &str,
    context: &RequestContext,
) -> Option<Handled> {
    let response = match heartbeat(deps, version, request, client_id, context).await {
        Ok(reply) => ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(StrBytes::from_string(reply.member_id)))
            .with_member_epoch(reply.member_epoch)
            .with_heartbeat_interval_ms(reply.heartbeat_interval_ms)
            .with_assignment(reply.assignment.map(|a| {
                WireAssignment::default().with_topic_partitions(
                    a.into_iter()
                        .map(|(id, ps)| {
                            TopicPartitions::default()
                                .with_topic_id(to_uuid(id))
                                .with_partitions(ps.into_iter().collect())
                        })
                        .collect(),
                )
            })),
        Err(error) => ConsumerGroupHeartbeatResponse::default()
            .with_error_code(error.code())
            .with_member_epoch(-1),
    };
    let has_error = response.error_code != 0;
    Handled::new(Response::ConsumerGroupHeartbeat(response), has_error)
}

async fn heartbeat(
    deps: &HeartbeatDeps<'_>,
    version: i16,
    request: ConsumerGroupHeartbeatRequest,
    client_id: &str,
    context: &RequestContext,
) -> Result<HeartbeatReply, ResponseError> {
    let peer = context.peer;
    deps.offsets.readable()?;
    let group_id = request.group_id.0.to_string();
    if group_id.is_empty() {
        return Err(ResponseError::InvalidRequest);
    }
    if group_id.len() > MAX_GROUP_ID_BYTES {
        return Err(ResponseError::InvalidGroupId);
    }
    let owned = request.topic_partitions.map(|tps| {
        let mut owned = Assignment::new();
        for tp in tps {
            owned
                .entry(*tp.topic_id.as_bytes())
                .or_default()
                .extend(tp.partitions);
        }
        owned
    });
    let heartbeat = HeartbeatRequest {
        member_id: request.member_id.to_string(),
        member_epoch: request.member_epoch,
        instance_id: request.instance_id.map(|s| s.to_string()),
        rack_id: request.rack_id.map(|s| s.to_string()),
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        subscribed_topic_names: request
            .subscribed_topic_names
            .map(|names| names.into_iter().map(|n| n.0.to_string()).collect()),
        subscribed_topic_regex: request.subscribed_topic_regex.map(|s| s.to_string()),
        server_assignor: request.server_assignor.map(|s| s.to_string()),
        owned,
        client_id: client_id.to_string(),
        client_host: format!("/{}", peer.ip()),
        client_member_id: version >= 1,
        regex_topics_allowed: describable_topics(deps.cluster, deps.authorizer, context),
    };
    let topics = subscribable_topics(deps.cluster, deps.groups);
    let (result, write) = deps
        .groups
        .consumer_heartbeat(&group_id, heartbeat, &topics);
    // Answered once the change is stored: a coordinator failover then
    // finds the member at the epoch this answer gives it.
    deps.groups.store(write).await?;
    result.map_err(response_error)
}

/// The topics `context`'s principal may DESCRIBE, which a regex
/// subscription may resolve to (Kafka's rule); None without an authorizer.
fn describable_topics(
    cluster: &Cluster,
    authorizer: &Authorizer,
    context: &RequestContext,
) -> Option<Arc<BTreeSet<String>>> {
    if !authorizer.enabled() {
        return None;
    }
    let acls = authorizer.snapshot();
    let image = cluster.image();
    Some(Arc::new(
        image
            .topics
            .keys()
            .filter(|name| {
                authorizer.allows(&acls, context, operation::DESCRIBE, resource::TOPIC, name)
            })
            .cloned()
            .collect(),
    ))
}

/// The topics group members may subscribe to, as of the current metadata
/// image (cached by the group manager per image version).
pub(crate) fn subscribable_topics(cluster: &Cluster, groups: &GroupManager) -> Arc<TopicMetadata> {
    let image = cluster.image();
    groups.topic_metadata(image.applied_index, || topic_metadata(&image))
}

/// The topics members may subscribe to: every topic, the internal ones
/// included, as Kafka's coordinator resolves names and regular expressions
/// (a client that wants them left out says so: `exclude.internal.topics`).
fn topic_metadata(image: &MetadataImage) -> TopicMetadata {
    TopicMetadata {
        version: image.applied_index,
        topics: image
            .topics
            .values()
            .map(|t| {
                let partitions = i32::try_from(t.partitions.len()).unwrap_or(i32::MAX);
                (t.name.clone(), (t.topic_id, partitions))
            })
            .collect(),
    }
}
