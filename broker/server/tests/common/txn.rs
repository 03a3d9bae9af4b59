//! A transaction opened by hand on a 3-node cluster, for the tests of what a
//! partition leader does with transactional batches (KIP-890 verification,
//! the append order): a topic whose partition is led by another broker than
//! the transaction coordinator, a producer id and epoch, the partition added
//! to the transaction, and transactional or plain one-record batches.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use bytes::Bytes;
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, ProduceRequest, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, Record, TimestampType};

use super::cluster::Cluster;
use super::kafka_client::{encode_batch, new_producer_request, Client};

/// Where a transaction's batches go: `partition` of the topic, led by
/// `leader`, which is not the transaction `coordinator`.
#[derive(Debug, Clone, Copy)]
pub struct Placement {
    pub coordinator: i32,
    pub partition: i32,
    pub leader: i32,
}

/// Creates `topic` (3 partitions, RF 1) and picks a partition led by another
/// broker than `__transaction_state`'s leader.
pub fn partition_apart_from_coordinator(cluster: &mut Cluster, topic: &str) -> Result<Placement> {
    let coordinator = cluster.wait_for(
        "__transaction_state",
        Duration::from_secs(30),
        "a coordinator",
        |v| v.first().is_some_and(|p| p.leader > 0),
    )?[0]
        .leader;
    Client::connect(cluster.node(1))?.create_topic_replicated(topic, 3, 1, &[])?;
    let views = cluster.wait_for(topic, Duration::from_secs(30), "leaders", |v| {
        v.len() == 3 && v.iter().all(|p| p.leader > 0)
    })?;
    let (partition, leader) = views
        .iter()
        .enumerate()
        .find(|(_, p)| p.leader != coordinator)
        .map(|(i, p)| (i32::try_from(i).unwrap_or(0), p.leader))
        .context("every partition is led by the coordinator")?;
    Ok(Placement {
        coordinator,
        partition,
        leader,
    })
}

/// `partition_apart_from_coordinator` and `begin` through a client of the
/// coordinator: where the transaction's batches go, and its producer.
pub fn open(
    cluster: &mut Cluster,
    topic: &'static str,
    txn_id: &'static str,
) -> Result<(Placement, (i64, i16))> {
    let placement = partition_apart_from_coordinator(cluster, topic)?;
    let mut coordinator = Client::connect(cluster.node(placement.coordinator))?;
    let producer = begin(&mut coordinator, txn_id, topic, placement.partition)?;
    Ok((placement, producer))
}

fn transactional_id(id: &'static str) -> TransactionalId {
    TransactionalId(StrBytes::from_static_str(id))
}

/// InitProducerId for `txn_id` and AddPartitionsToTxn of `topic`-`partition`,
/// through `coordinator` (a client of the coordinator): the producer (id,
/// epoch) whose transaction holds the partition.
pub fn begin(
    coordinator: &mut Client,
    txn_id: &'static str,
    topic: &'static str,
    partition: i32,
) -> Result<(i64, i16)> {
    let init = coordinator.send(&new_producer_request(Some(transactional_id(txn_id))), 4)?;
    ensure!(init.error_code == 0, "InitProducerId: {}", init.error_code);
    let producer = (init.producer_id.0, init.producer_epoch);
    let added = coordinator.send(
        &AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(transactional_id(txn_id))
            .with_v3_and_below_producer_id(ProducerId(producer.0))
            .with_v3_and_below_producer_epoch(producer.1)
            .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(TopicName(StrBytes::from_static_str(topic)))
                .with_partitions(vec![partition])]),
        3,
    )?;
    let add_error =
        added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code;
    ensure!(add_error == 0, "AddPartitionsToTxn: {add_error}");
    Ok(producer)
}

/// A batch of one record holding `value`: transactional for (producer id,
/// epoch, sequence), or plain (no producer) with `None`.
pub fn one_record(producer: Option<(i64, i16, i32)>, value: Bytes) -> Result<Bytes> {
    let (producer_id, producer_epoch, sequence) = producer.unwrap_or((-1, -1, -1));
    let record = Record {
        transactional: producer.is_some(),
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id,
        producer_epoch,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence,
        timestamp: 1_700_000_000_000,
        key: None,
        value: Some(value),
        headers: IndexMap::new(),
    };
    encode_batch(&[record], Compression::None)
}

/// An acks=all Produce of `records` to `topic`-`partition`, as `txn_id`'s
/// producer when given.
pub fn produce(
    (topic, partition): (&'static str, i32),
    records: Bytes,
    txn_id: Option<&'static str>,
    timeout_ms: i32,
) -> ProduceRequest {
    ProduceRequest::default()
        .with_transactional_id(txn_id.map(transactional_id))
        .with_acks(-1)
        .with_timeout_ms(timeout_ms)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str(topic)))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])])
}
