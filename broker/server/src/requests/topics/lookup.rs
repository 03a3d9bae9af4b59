//! Resolving the topic a request names — by name, or by topic id in the
//! versions that carry ids — the conversions between the log's 16-byte
//! ids and the protocol's `Uuid`, and which topics are internal.

use std::sync::Arc;

use chronik_log::{LogManager, TopicLog};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

/// Topics the broker writes itself; clients may not produce to, delete or
/// repartition them.
pub const INTERNAL_TOPICS: &[&str] = &[
    crate::coordinators::groups::OFFSETS_TOPIC,
    crate::coordinators::txn::TXN_TOPIC,
    crate::coordinators::share::SHARE_STATE_TOPIC,
];

pub fn is_internal_topic(name: &str) -> bool {
    INTERNAL_TOPICS.contains(&name)
}

pub fn to_uuid(id: [u8; 16]) -> Uuid {
    Uuid::from_bytes(id)
}

pub fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

/// Finds a topic by id when `id` is set, else by name; the error is the one
/// Kafka returns for the form the client used.
pub fn resolve(log: &LogManager, name: &str, id: Uuid) -> Result<Arc<TopicLog>, ResponseError> {
    if !id.is_nil() {
        return log
            .topic_by_id(*id.as_bytes())
            .ok_or(ResponseError::UnknownTopicId);
    }
    log.topic(name)
        .ok_or(ResponseError::UnknownTopicOrPartition)
}
