//! A connection's Produce requests append in the order they arrived, also
//! when one waits before appending. A transactional producer's first batches
//! on a partition are verified with its transaction coordinator first
//! (KIP-890); when the coordinator is another broker that is a round trip,
//! and the requests pipelined behind (clients send up to
//! max.in.flight.requests.per.connection = 5) must not append before it:
//! they would be refused OUT_OF_ORDER_SEQUENCE_NUMBER, as franz-go's
//! TestTxnEtl was on a 3-node cluster. Apache Kafka reads a connection's next
//! request only after answering the last, so its order never breaks.

mod common;

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use bytes::{Bytes, BytesMut};
use common::cluster::Cluster;
use common::kafka_client::Client;
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, InitProducerIdRequest, ProduceRequest, ProducerId, TopicName,
    TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

const TOPIC: &str = "ordered";
const TXN_ID: &str = "produce-order";
/// Produce requests pipelined on one connection.
const PIPELINED: i32 = 20;

/// One transactional batch of one record with sequence `sequence`.
fn produce(partition: i32, (pid, epoch): (i64, i16), sequence: i32) -> Result<ProduceRequest> {
    let record = Record {
        transactional: true,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: pid,
        producer_epoch: epoch,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence,
        timestamp: 1_700_000_000_000,
        key: None,
        value: Some(Bytes::from(format!("seq-{sequence}"))),
        headers: IndexMap::new(),
    };
    let mut batch = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut batch,
        &[record],
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )?;
    Ok(ProduceRequest::default()
        .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str(TXN_ID))))
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(batch.freeze()))])]))
}

#[test]
fn pipelined_transactional_produces_append_in_arrival_order_while_one_is_verified_remotely(
) -> Result<()> {
    let mut cluster = Cluster::start(3, &[])?;
    let coordinator = cluster.wait_for(
        "__transaction_state",
        Duration::from_secs(30),
        "a coordinator",
        |v| v.first().is_some_and(|p| p.leader > 0),
    )?[0]
        .leader;
    Client::connect(cluster.node(1))?.create_topic_replicated(TOPIC, 3, 1, &[])?;
    let views = cluster.wait_for(TOPIC, Duration::from_secs(30), "leaders", |v| {
        v.len() == 3 && v.iter().all(|p| p.leader > 0)
    })?;
    // A partition led by another broker than the transaction coordinator.
    let (partition, leader) = views
        .iter()
        .enumerate()
        .find(|(_, p)| p.leader != coordinator)
        .map(|(i, p)| (i32::try_from(i).unwrap_or(0), p.leader))
        .context("every partition is led by the coordinator")?;

    let mut txn = Client::connect(cluster.node(coordinator))?;
    let init = txn.send(
        &InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str(TXN_ID))))
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
        4,
    )?;
    ensure!(init.error_code == 0, "InitProducerId: {}", init.error_code);
    let producer = (init.producer_id.0, init.producer_epoch);
    let added = txn.send(
        &AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(StrBytes::from_static_str(TXN_ID)))
            .with_v3_and_below_producer_id(ProducerId(producer.0))
            .with_v3_and_below_producer_epoch(producer.1)
            .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
                .with_partitions(vec![partition])]),
        3,
    )?;
    let add_error =
        added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code;
    ensure!(add_error == 0, "AddPartitionsToTxn: {add_error}");

    let requests = (0..PIPELINED)
        .map(|sequence| produce(partition, producer, sequence))
        .collect::<Result<Vec<_>>>()?;
    let responses = Client::connect(cluster.node(leader))?.send_pipelined(&requests, 9)?;
    let answers: Vec<(i16, i64)> = responses
        .iter()
        .map(|r| {
            let p = &r.responses[0].partition_responses[0];
            (p.error_code, p.base_offset)
        })
        .collect();
    let expected: Vec<(i16, i64)> = (0..i64::from(PIPELINED)).map(|o| (0, o)).collect();
    ensure!(
        answers == expected,
        "{PIPELINED} pipelined batches (sequence 0..) of a transactional producer on partition \
         {partition} (leader {leader}, coordinator {coordinator}): want each appended in order \
         at offsets 0.., got (error, base offset) {answers:?}"
    );
    Ok(())
}
