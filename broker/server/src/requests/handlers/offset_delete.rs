//! OffsetDelete (kafka-consumer-groups.sh --delete-offsets): removes a
//! group's committed offsets for the named partitions, with Kafka's rules —
//! refused per partition (GROUP_SUBSCRIBED_TO_TOPIC) while a member of the
//! group (classic or KIP-848) subscribes to the topic, refused for the whole group
//! (NON_EMPTY_GROUP) when it has members of a protocol other than
//! "consumer" (their subscriptions cannot be read), GROUP_ID_NOT_FOUND for
//! a group that neither exists nor has offsets.

use std::collections::BTreeSet;

use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};
use tracing::warn;

use super::Handled;
use crate::coordinators::groups::consumer_protocol::decode_subscription;
use crate::coordinators::groups::{GroupManager, GroupSnapshot, OffsetStore};

/// Which topics a group's members subscribe to.
enum Subscribed {
    Topics(BTreeSet<String>),
    /// Some member's subscription could not be read: assume every topic.
    Unknown,
}

pub async fn handle(
    groups: &GroupManager,
    offsets: &OffsetStore,
    _version: i16,
    request: OffsetDeleteRequest,
) -> Option<Handled> {
    let group = request.group_id.0.to_string();
    let top_level = |error: ResponseError| {
        Handled::new(
            Response::OffsetDelete(OffsetDeleteResponse::default().with_error_code(error.code())),
            true,
        )
    };
    if let Err(error) = offsets.readable() {
        return top_level(error);
    }
    let snapshot = groups.describe(&group);
    let consumer_group = groups.consumer_describe(&group);
    if snapshot.is_none() && consumer_group.is_none() && offsets.fetch_all(&group).is_empty() {
        return top_level(ResponseError::GroupIdNotFound);
    }
    let subscribed = match (&snapshot, &consumer_group) {
        (Some(g), _) if !g.members.is_empty() && g.protocol_type != "consumer" => {
            return top_level(ResponseError::NonEmptyGroup)
        }
        (Some(g), _) => subscriptions(g),
        (None, _) => Subscribed::Topics(BTreeSet::new()),
    };
    let refused = |topic: &str| {
        let classic = match &subscribed {
            Subscribed::Topics(topics) => topics.contains(topic),
            Subscribed::Unknown => true,
        };
        classic
            || consumer_group
                .as_ref()
                .is_some_and(|g| g.members.iter().any(|(m, _)| m.subscribes_to(topic)))
    };
    let mut doomed = BTreeSet::new();
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let name = topic.name.0.to_string();
        let error = if refused(&name) {
            ResponseError::GroupSubscribedToTopic.code()
        } else {
            0
        };
        let partitions = topic
            .partitions
            .iter()
            .map(|p| {
                if error == 0 {
                    doomed.insert((name.clone(), p.partition_index));
                }
                OffsetDeleteResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(error)
            })
            .collect();
        topics.push(
            OffsetDeleteResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions),
        );
    }
    let deleted = offsets
        .delete_offsets(&group, |t, p| doomed.contains(&(t.to_string(), p)))
        .await;
    if let Err(e) = deleted {
        warn!(group, error = %e, "deleting committed offsets failed");
        return top_level(ResponseError::KafkaStorageError);
    }
    let has_error = topics
        .iter()
        .any(|t| t.partitions.iter().any(|p| p.error_code != 0));
    Handled::new(
        Response::OffsetDelete(OffsetDeleteResponse::default().with_topics(topics)),
        has_error,
    )
}

/// The union of the topics every member's every protocol subscribes to.
fn subscriptions(group: &GroupSnapshot) -> Subscribed {
    let mut topics = BTreeSet::new();
    for member in &group.members {
        for (_, metadata) in &member.protocols {
            match decode_subscription(metadata.clone()) {
                Some(subscription) => topics.extend(subscription.topics),
                None => return Subscribed::Unknown,
            }
        }
    }
    Subscribed::Topics(topics)
}
