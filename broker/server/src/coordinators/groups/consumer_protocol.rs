//! The consumer's embedded protocol inside classic group messages: the
//! ConsumerProtocolSubscription a member joins with (JoinGroup metadata)
//! and the ConsumerProtocolAssignment it is given (SyncGroup assignment),
//! each a version (i16) followed by the message.
//!
//! Owns: decoding both (None for bytes that are not one) and encoding an
//! assignment. Must not: keep state. Used by OffsetDelete (which topics a
//! classic group subscribes to) and by online migration between classic
//! and KIP-848 groups (the group manager).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use chronik_coordinator_state::{Assignment, ClassicSubscription, NamedPartitions, TopicMetadata};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// The newest ConsumerProtocolSubscription version this broker decodes;
/// newer ones are read as it (their extra fields are tagged or trailing).
const MAX_SUBSCRIPTION_VERSION: i16 = 3;
/// Likewise for ConsumerProtocolAssignment.
const MAX_ASSIGNMENT_VERSION: i16 = 3;
/// The version assignments are encoded at: every client reads v0, and the
/// later versions add nothing a broker-made assignment carries.
const ASSIGNMENT_VERSION: i16 = 0;

/// A member's subscription, or None when the bytes are not one.
pub fn decode_subscription(mut bytes: Bytes) -> Option<ClassicSubscription> {
    let version = read_version(&mut bytes)?;
    let subscription =
        ConsumerProtocolSubscription::decode(&mut bytes, version.min(MAX_SUBSCRIPTION_VERSION))
            .ok()?;
    let owned = subscription.owned_partitions.into_iter();
    Some(ClassicSubscription {
        topics: subscription.topics.iter().map(|t| t.to_string()).collect(),
        owned_partitions: by_name(owned.map(|tp| (tp.topic, tp.partitions))),
    })
}

/// The partitions of an assignment, or None when the bytes are not one or
/// carry user data (a custom client-side assignor's state, which Kafka
/// refuses to carry into a consumer group).
pub fn decode_assignment(mut bytes: Bytes) -> Option<NamedPartitions> {
    if bytes.is_empty() {
        // A member of a Stable group that was given nothing.
        return Some(NamedPartitions::new());
    }
    let version = read_version(&mut bytes)?;
    let assignment =
        ConsumerProtocolAssignment::decode(&mut bytes, version.min(MAX_ASSIGNMENT_VERSION)).ok()?;
    if assignment.user_data.as_ref().is_some_and(|d| !d.is_empty()) {
        return None;
    }
    let assigned = assignment.assigned_partitions.into_iter();
    Some(by_name(assigned.map(|tp| (tp.topic, tp.partitions))))
}

/// Topic-partition lists (a topic may repeat) as partitions by topic name.
fn by_name(list: impl Iterator<Item = (TopicName, Vec<i32>)>) -> NamedPartitions {
    let mut out = NamedPartitions::new();
    for (topic, partitions) in list {
        out.entry(topic.to_string()).or_default().extend(partitions);
    }
    out
}

/// `assignment` as a ConsumerProtocolAssignment, topics named by
/// `metadata` (a topic it no longer knows is left out).
pub fn encode_assignment(assignment: &Assignment, metadata: &TopicMetadata) -> Bytes {
    let assigned_partitions = metadata
        .topics
        .iter()
        .filter_map(|(name, (id, _))| {
            let partitions = assignment.get(id)?;
            Some(
                TopicPartition::default()
                    .with_topic(TopicName(StrBytes::from_string(name.clone())))
                    .with_partitions(partitions.iter().copied().collect()),
            )
        })
        .collect();
    let message = ConsumerProtocolAssignment::default()
        .with_assigned_partitions(assigned_partitions)
        .with_user_data(None);
    let mut buf = BytesMut::new();
    buf.put_i16(ASSIGNMENT_VERSION);
    // Encoding a message built here into a growable buffer cannot fail.
    let _ = message.encode(&mut buf, ASSIGNMENT_VERSION);
    buf.freeze()
}

fn read_version(bytes: &mut Bytes) -> Option<i16> {
    if bytes.remaining() < 2 {
        return None;
    }
    Some(bytes.get_i16()).filter(|v| *v >= 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition as OwnedPartition;

    fn subscription_bytes(version: i16) -> Bytes {
        let message = ConsumerProtocolSubscription::default()
            .with_topics(vec![StrBytes::from_static_str("t")])
            .with_owned_partitions(vec![OwnedPartition::default()
                .with_topic(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(vec![1, 2])]);
        let mut buf = BytesMut::new();
        buf.put_i16(version);
        message.encode(&mut buf, version).expect("encodes");
        buf.freeze()
    }

    #[test]
    fn subscriptions_decode_with_their_owned_partitions() {
        let decoded = decode_subscription(subscription_bytes(1)).expect("decodes");
        assert_eq!(decoded.topics, ["t"]);
        assert_eq!(decoded.owned_partitions["t"], [1, 2].into());
        let v0 = decode_subscription(subscription_bytes(0)).expect("decodes");
        assert!(v0.owned_partitions.is_empty(), "v0 has no owned partitions");
        assert_eq!(decode_subscription(Bytes::from_static(b"\x00")), None);
        assert_eq!(
            decode_subscription(Bytes::from_static(b"\xff\xff\x00")),
            None
        );
    }

    #[test]
    fn assignments_round_trip_and_user_data_is_refused() {
        let id = [7u8; 16];
        let metadata = TopicMetadata {
            version: 1,
            topics: [("t".to_string(), (id, 4))].into_iter().collect(),
        };
        let assignment: Assignment = [(id, [0, 3].into())].into_iter().collect();
        let bytes = encode_assignment(&assignment, &metadata);
        let decoded = decode_assignment(bytes).expect("decodes");
        assert_eq!(decoded["t"], [0, 3].into());
        assert_eq!(
            decode_assignment(Bytes::new()),
            Some(NamedPartitions::new())
        );
        let mut with_user_data = BytesMut::new();
        with_user_data.put_i16(0);
        ConsumerProtocolAssignment::default()
            .with_user_data(Some(Bytes::from_static(b"sticky")))
            .encode(&mut with_user_data, 0)
            .expect("encodes");
        assert_eq!(decode_assignment(with_user_data.freeze()), None);
        assert_eq!(decode_assignment(Bytes::from_static(b"\x00\x00\x7f")), None);
    }
}
