//! Requests the secured-cluster tests build: a record (optionally the
//! first of a transaction) to one partition, a Fetch as a given replica,
//! and what Metadata says of a partition. Builders only: nothing is sent.

use anyhow::Result;
use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    BrokerId, FetchRequest, MetadataResponse, ProduceRequest, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use crate::common::txn::one_record;

/// Partition 0 of `topic` in `metadata`: (leader, ISR size).
pub fn partition_state(metadata: &MetadataResponse, topic: &str) -> Option<(i32, usize)> {
    metadata
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))
        .and_then(|t| t.partitions.first())
        .map(|p| (p.leader_id.0, p.isr_nodes.len()))
}

/// One record of `value` to `partition`, acks=all; `txn` = (transactional id,
/// producer id, epoch) makes it the first batch of that transaction.
pub fn produce_request(
    topic: &str,
    partition: i32,
    value: &'static str,
    txn: Option<(&'static str, i64, i16)>,
) -> Result<ProduceRequest> {
    let batch = one_record(
        txn.map(|(_, producer_id, epoch)| (producer_id, epoch, 0)),
        Bytes::from_static(value.as_bytes()),
    )?;
    Ok(ProduceRequest::default()
        .with_transactional_id(txn.map(|(id, _, _)| txn_id(id)))
        .with_acks(-1)
        .with_timeout_ms(15_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(batch))])]))
}

pub fn txn_id(id: &'static str) -> TransactionalId {
    TransactionalId(StrBytes::from_static_str(id))
}

/// A Fetch v12 of `partition` of `topic` from offset 0 as `replica_id`.
pub fn fetch_request(topic: &str, partition: i32, replica_id: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(replica_id))
        .with_max_bytes(1 << 20)
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])])
}
