//! ListPartitionReassignments (KIP-455, v0; `kafka-reassign-partitions.sh
//! --verify`, `kafka-topics.sh --describe`): the partitions whose
//! reassignment is under way, from this broker's metadata image, with
//! their full, adding and removing replica lists. Null topics: all.
//!
//! Owns: reading the image for that answer. Must not: change anything.

use chronik_metadata::Cluster;
use chronik_metadata::PartitionImage;
use chronik_protocol::Response;
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::Handled;

pub fn handle(
    cluster: &Cluster,
    _version: i16,
    request: ListPartitionReassignmentsRequest,
) -> Option<Handled> {
    let image = cluster.image();
    let wanted: Vec<(String, Option<Vec<i32>>)> = match &request.topics {
        None => image.topics.keys().map(|n| (n.clone(), None)).collect(),
        Some(topics) => topics
            .iter()
            .map(|t| (t.name.0.to_string(), Some(t.partition_indexes.clone())))
            .collect(),
    };
    let mut topics = Vec::new();
    for (name, indexes) in wanted {
        let Some(topic) = image.topics.get(&name) else {
            continue;
        };
        let ongoing: Vec<OngoingPartitionReassignment> = topic
            .partitions
            .iter()
            .filter(|p| p.is_reassigning())
            .filter(|p| indexes.as_ref().is_none_or(|i| i.contains(&p.partition)))
            .map(ongoing)
            .collect();
        if !ongoing.is_empty() {
            topics.push(
                OngoingTopicReassignment::default()
                    .with_name(StrBytes::from_string(name).into())
                    .with_partitions(ongoing),
            );
        }
    }
    Handled::new(
        Response::ListPartitionReassignments(
            ListPartitionReassignmentsResponse::default().with_topics(topics),
        ),
        false,
    )
}

fn ongoing(p: &PartitionImage) -> OngoingPartitionReassignment {
    let ids = |v: &[i32]| v.iter().copied().map(BrokerId).collect::<Vec<_>>();
    OngoingPartitionReassignment::default()
        .with_partition_index(p.partition)
        .with_replicas(ids(&p.replicas))
        .with_adding_replicas(ids(&p.adding_replicas))
        .with_removing_replicas(ids(&p.removing_replicas))
}
