//! DescribeTopicPartitions (API 75, v0; KIP-966's admin API, which Kafka
//! 4.x's `kafka-topics.sh --describe` uses when a broker advertises it):
//! every partition's leader, epoch, replicas, ISR, eligible leader replicas,
//! last known ELR and offline replicas, topics in name order, paged by
//! partitions with a cursor as Kafka pages them.
//!
//! An empty topic list means every topic (the authorizer has already
//! replaced it with the topics the session may describe, so a page and its
//! cursor never name another); a named topic that does not exist is
//! UNKNOWN_TOPIC_OR_PARTITION. A page holds at most
//! `response_partition_limit` partitions, bounded by Kafka's
//! `max.request.partition.size.limit` (2000); when a page fills, the
//! cursor names the next partition (partition 0 of the next topic when a
//! topic ends exactly there). A cursor starts at its topic (or the first
//! one after it by name, e.g. if it was deleted) and partition.
//!
//! Owns: paging and the answer. Must not: check ACLs (`authorize::topics`
//! does) or change anything.

use chronik_metadata::Cluster;
use chronik_metadata::{MetadataImage, PartitionImage, TopicImage};
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse,
};

use super::Handled;
use crate::requests::topics::lookup::{is_internal_topic, to_uuid, topic_name};

/// Kafka's `max.request.partition.size.limit` default: the most partitions
/// one response holds, whatever the request asks.
pub const MAX_RESPONSE_PARTITIONS: i32 = 2000;

pub fn handle(
    cluster: &Cluster,
    _version: i16,
    request: DescribeTopicPartitionsRequest,
) -> Option<Handled> {
    let image = cluster.image();
    let response = describe(&image, request);
    let has_error = response.topics.iter().any(|t| t.error_code != 0);
    Handled::new(Response::DescribeTopicPartitions(response), has_error)
}

fn describe(
    image: &MetadataImage,
    request: DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let mut names: Vec<String> = if request.topics.is_empty() {
        image.topics.keys().cloned().collect()
    } else {
        request
            .topics
            .iter()
            .map(|t| t.name.0.to_string())
            .collect()
    };
    names.sort_unstable();
    names.dedup();
    let (cursor_topic, cursor_partition) = match &request.cursor {
        Some(c) => (Some(c.topic_name.0.to_string()), c.partition_index.max(0)),
        None => (None, 0),
    };
    if let Some(start) = &cursor_topic {
        names.retain(|n| n >= start);
    }
    let mut budget = request
        .response_partition_limit
        .clamp(1, MAX_RESPONSE_PARTITIONS);
    let mut response = DescribeTopicPartitionsResponse::default();
    for (i, name) in names.iter().enumerate() {
        let Some(topic) = image.topics.get(name) else {
            response.topics.push(
                DescribeTopicPartitionsResponseTopic::default()
                    .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                    .with_name(Some(topic_name(name))),
            );
            continue;
        };
        if budget == 0 {
            // The page is full and this topic has partitions to give.
            response.next_cursor = Some(cursor(name, 0));
            break;
        }
        let first = if cursor_topic.as_deref() == Some(name.as_str()) {
            cursor_partition
        } else {
            0
        };
        let mut described = Vec::new();
        for p in topic.partitions.iter().filter(|p| p.partition >= first) {
            if budget == 0 {
                response.next_cursor = Some(cursor(name, p.partition));
                break;
            }
            described.push(partition(image, p));
            budget -= 1;
        }
        response.topics.push(describe_topic(topic, described));
        if response.next_cursor.is_some() {
            break;
        }
        // A topic that ended exactly at the limit: the next one with
        // partitions starts the next page.
        if budget == 0 {
            if let Some(next) = names[i + 1..].iter().find(|n| {
                image
                    .topics
                    .get(*n)
                    .is_some_and(|t| !t.partitions.is_empty())
            }) {
                response.next_cursor = Some(cursor(next, 0));
            }
            break;
        }
    }
    response
}

fn cursor(topic: &str, partition: i32) -> Cursor {
    Cursor::default()
        .with_topic_name(topic_name(topic))
        .with_partition_index(partition)
}

fn describe_topic(
    topic: &TopicImage,
    partitions: Vec<DescribeTopicPartitionsResponsePartition>,
) -> DescribeTopicPartitionsResponseTopic {
    DescribeTopicPartitionsResponseTopic::default()
        .with_name(Some(topic_name(&topic.name)))
        .with_topic_id(to_uuid(topic.topic_id))
        .with_is_internal(is_internal_topic(&topic.name))
        .with_partitions(partitions)
}

fn partition(
    image: &MetadataImage,
    p: &PartitionImage,
) -> DescribeTopicPartitionsResponsePartition {
    let ids = |ids: &[i32]| ids.iter().map(|&r| BrokerId(r)).collect::<Vec<_>>();
    let offline = image.offline_replicas(p);
    let error = if p.leader < 0 {
        ResponseError::LeaderNotAvailable.code()
    } else {
        0
    };
    DescribeTopicPartitionsResponsePartition::default()
        .with_error_code(error)
        .with_partition_index(p.partition)
        .with_leader_id(BrokerId(p.leader))
        .with_leader_epoch(p.leader_epoch)
        .with_replica_nodes(ids(&p.replicas))
        .with_isr_nodes(ids(&p.isr))
        .with_eligible_leader_replicas(Some(ids(&p.elr)))
        .with_last_known_elr(Some(ids(&p.last_known_elr)))
        .with_offline_replicas(ids(&offline))
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::describe_topic_partitions_request::{
        Cursor as RequestCursor, TopicRequest,
    };

    use super::*;

    fn image(topics: &[(&str, i32)]) -> MetadataImage {
        let mut image = MetadataImage::default();
        for (name, count) in topics {
            let partitions = (0..*count)
                .map(|p| PartitionImage::new(p, vec![1], vec![1], 1))
                .collect();
            let topic = TopicImage {
                name: name.to_string(),
                topic_id: [1; 16],
                configs: Default::default(),
                partitions,
            };
            image.topics.insert(name.to_string(), topic);
        }
        image
    }

    /// (topic, first partition, count) of each topic in a page, and its
    /// cursor (topic, partition).
    type Page = (Vec<(String, i32, usize)>, Option<(String, i32)>);

    fn page(image: &MetadataImage, limit: i32, from: Option<(&str, i32)>) -> Page {
        let cursor = from.map(|(t, p)| {
            RequestCursor::default()
                .with_topic_name(topic_name(t))
                .with_partition_index(p)
        });
        let request = DescribeTopicPartitionsRequest::default()
            .with_response_partition_limit(limit)
            .with_cursor(cursor);
        let response = describe(image, request);
        let topics = response
            .topics
            .iter()
            .map(|t| {
                let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
                let first = t.partitions.first().map_or(-1, |p| p.partition_index);
                (name, first, t.partitions.len())
            })
            .collect();
        let next = response
            .next_cursor
            .map(|c| (c.topic_name.0.to_string(), c.partition_index));
        (topics, next)
    }

    #[test]
    fn pages_cover_every_partition_once_in_name_order() {
        let image = image(&[("b", 3), ("a", 2), ("c", 1)]);
        let (topics, next) = page(&image, 3, None);
        assert_eq!(topics, vec![("a".into(), 0, 2), ("b".into(), 0, 1)]);
        assert_eq!(next, Some(("b".into(), 1)));
        let (topics, next) = page(&image, 2, Some(("b", 1)));
        assert_eq!(topics, vec![("b".into(), 1, 2)]);
        assert_eq!(next, Some(("c".into(), 0)), "b ended exactly at the limit");
        let (topics, next) = page(&image, 2, Some(("c", 0)));
        assert_eq!((topics, next), (vec![("c".into(), 0, 1)], None));
    }

    #[test]
    fn the_limit_is_bounded_and_unknown_topics_are_named() {
        let image = image(&[("big", 2500)]);
        let (topics, next) = page(&image, i32::MAX, None);
        assert_eq!(topics, vec![("big".into(), 0, 2000)]);
        assert_eq!(next, Some(("big".into(), 2000)));
        let (topics, _) = page(&image, -5, None);
        assert_eq!(topics, vec![("big".into(), 0, 1)], "at least one partition");
        let request = DescribeTopicPartitionsRequest::default()
            .with_topics(vec![TopicRequest::default().with_name(topic_name("nope"))]);
        let response = describe(&image, request);
        assert_eq!(
            response.topics[0].error_code,
            ResponseError::UnknownTopicOrPartition.code()
        );
    }
}
