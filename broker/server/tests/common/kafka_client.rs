//! A minimal blocking Kafka client over one TCP connection, built on
//! kafka-protocol's message types: send any request at any version and get
//! the decoded response. For tests that need exact versions or raw fields.
//! Beside it, the requests and readings several tests share: a new
//! producer's InitProducerId, one topic's Metadata, a RecordBatch, a
//! Produce, and the partition errors of AddPartitionsToTxn and ElectLeaders.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use super::broker::Broker;

pub struct Client {
    stream: TcpStream,
    correlation_id: i32,
    client_id: &'static str,
}

/// The client id requests carry unless `with_client_id` names another.
pub const CLIENT_ID: &str = "idempotence-test";

impl Client {
    pub fn connect(broker: &Broker) -> Result<Client> {
        Client::connect_to(broker.kafka_addr())
    }

    /// Connects to one listener of a broker started with `--listeners`.
    pub fn connect_to(addr: std::net::SocketAddr) -> Result<Client> {
        let stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(Duration::from_secs(20)))?;
        Ok(Client {
            stream,
            correlation_id: 0,
            client_id: CLIENT_ID,
        })
    }

    /// The client id the following requests carry (a client quota's
    /// entity, for instance).
    pub fn with_client_id(mut self, client_id: &'static str) -> Client {
        self.client_id = client_id;
        self
    }

    /// The connection (to read or write raw bytes beside the requests).
    pub fn stream(&mut self) -> &mut TcpStream {
        &mut self.stream
    }

    pub fn send<R: Request>(&mut self, request: &R, version: i16) -> Result<R::Response> {
        self.write_next(request, version)?;
        read_response::<R, _>(&mut self.stream, self.correlation_id, version)
    }

    /// Writes `request` under the next correlation id.
    fn write_next<R: Request>(&mut self, request: &R, version: i16) -> Result<()> {
        self.correlation_id += 1;
        write_request_as(
            &mut self.stream,
            (self.correlation_id, self.client_id),
            request,
            version,
        )
    }

    /// Sends every request before reading any response (pipelined, as
    /// clients send with max.in.flight > 1); the responses in order.
    pub fn send_pipelined<R: Request>(
        &mut self,
        requests: &[R],
        version: i16,
    ) -> Result<Vec<R::Response>> {
        let first = self.correlation_id + 1;
        for request in requests {
            self.write_next(request, version)?;
        }
        (first..=self.correlation_id)
            .map(|id| read_response::<R, _>(&mut self.stream, id, version))
            .collect()
    }

    pub fn create_topic(&mut self, name: &str) -> Result<()> {
        self.create_topic_with(name, &[])
    }

    /// Creates a 1-partition topic with Kafka-named config overrides.
    pub fn create_topic_with(&mut self, name: &str, configs: &[(&str, &str)]) -> Result<()> {
        self.create_topic_replicated(name, 1, 1, configs)
    }

    /// Creates a topic with `partitions` and `replication_factor`.
    pub fn create_topic_replicated(
        &mut self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: &[(&str, &str)],
    ) -> Result<()> {
        let configs = configs
            .iter()
            .map(|(k, v)| {
                create_topics_request::CreatableTopicConfig::default()
                    .with_name(StrBytes::from_string((*k).into()))
                    .with_value(Some(StrBytes::from_string((*v).into())))
            })
            .collect();
        let topic = create_topics_request::CreatableTopic::default()
            .with_configs(configs)
            .with_name(TopicName(StrBytes::from_string(name.into())))
            .with_num_partitions(partitions)
            .with_replication_factor(replication_factor);
        let response = self.send(
            &CreateTopicsRequest::default()
                .with_topics(vec![topic])
                .with_timeout_ms(5000),
            5,
        )?;
        ensure!(
            response.topics[0].error_code == 0,
            "create failed: {:?}",
            response.topics[0]
        );
        Ok(())
    }

    pub fn init_producer_id(&mut self) -> Result<(i64, i16)> {
        let response = self.send(&new_producer_request(None), 4)?;
        ensure!(
            response.error_code == 0,
            "InitProducerId error {}",
            response.error_code
        );
        Ok((response.producer_id.0, response.producer_epoch))
    }

    /// Produces one batch of `count` records (Produce v9); returns (error code, base offset).
    pub fn produce(
        &mut self,
        topic: &str,
        pid: i64,
        epoch: i16,
        base_sequence: i32,
        count: i32,
    ) -> Result<(i16, i64)> {
        self.produce_at(topic, pid, epoch, base_sequence, count, 9)
    }

    /// Produces one uncompressed batch holding `values` (Produce v9, acks=all,
    /// not idempotent); returns (error code, base offset).
    pub fn produce_values(&mut self, topic: &str, values: &[Bytes]) -> Result<(i16, i64)> {
        self.produce_values_acks(topic, values, -1)
    }

    /// `produce_values` with the given acks (-1 = all, 1 = leader).
    pub fn produce_values_acks(
        &mut self,
        topic: &str,
        values: &[Bytes],
        acks: i16,
    ) -> Result<(i16, i64)> {
        self.produce_values_within(topic, values, acks, 10_000)
    }

    /// `produce_values_acks` with the request's timeout_ms.
    pub fn produce_values_within(
        &mut self,
        topic: &str,
        values: &[Bytes],
        acks: i16,
        timeout_ms: i32,
    ) -> Result<(i16, i64)> {
        let records: Vec<Record> = values
            .iter()
            .enumerate()
            .map(|(i, v)| plain_record(i as i64, v.clone()))
            .collect();
        self.produce_records(topic, &records, (acks, timeout_ms), Compression::None)
    }

    /// Produces one batch of `(key, value)` records compressed with
    /// `compression` (Produce v9, acks=all); a None value is a tombstone.
    /// Returns (error code, base offset).
    pub fn produce_keyed(
        &mut self,
        topic: &str,
        records: &[(Option<&str>, Option<&str>)],
        compression: Compression,
    ) -> Result<(i16, i64)> {
        let bytes = |s: Option<&str>| s.map(|s| Bytes::from(s.to_string()));
        let records: Vec<Record> = records
            .iter()
            .enumerate()
            .map(|(i, (key, value))| Record {
                key: bytes(*key),
                value: bytes(*value),
                ..plain_record(i as i64, Bytes::new())
            })
            .collect();
        self.produce_records(topic, &records, (-1, 10_000), compression)
    }

    /// Produces `records` as one batch to partition 0.
    fn produce_records(
        &mut self,
        topic: &str,
        records: &[Record],
        acks_timeout: (i16, i32),
        compression: Compression,
    ) -> Result<(i16, i64)> {
        self.produce_records_to(topic, 0, records, acks_timeout, compression)
    }

    /// Produces `records` as one batch to `partition` (Produce v9) with
    /// (acks, timeout_ms); returns (error code, base offset).
    pub fn produce_records_to(
        &mut self,
        topic: &str,
        partition: i32,
        records: &[Record],
        acks_timeout: (i16, i32),
        compression: Compression,
    ) -> Result<(i16, i64)> {
        let request = produce_request(topic, partition, records, acks_timeout, compression)?;
        let response = self.send(&request, 9)?;
        let p = &response.responses[0].partition_responses[0];
        Ok((p.error_code, p.base_offset))
    }

    /// One Fetch (v12) of partition 0 of `topic` from `offset`: (error
    /// code, high watermark, the record batches).
    pub fn fetch_from(&mut self, topic: &str, offset: i64) -> Result<(i16, i64, Bytes)> {
        self.fetch_partition_from(topic, 0, offset)
    }

    /// `fetch_from` of any partition.
    pub fn fetch_partition_from(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<(i16, i64, Bytes)> {
        let partition = fetch_request::FetchPartition::default()
            .with_partition(partition)
            .with_fetch_offset(offset)
            .with_partition_max_bytes(1 << 20);
        let request = FetchRequest::default()
            .with_max_bytes(1 << 20)
            .with_max_wait_ms(0)
            .with_min_bytes(1)
            .with_topics(vec![fetch_request::FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.into())))
                .with_partitions(vec![partition])]);
        let response = self.send(&request, 12)?;
        let p = &response.responses[0].partitions[0];
        Ok((
            p.error_code,
            p.high_watermark,
            p.records.clone().unwrap_or_default(),
        ))
    }

    /// The topic id Metadata reports for `topic`.
    pub fn topic_id(&mut self, topic: &str) -> Result<uuid::Uuid> {
        let t = metadata_request::MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(topic.into()))));
        let response = self.send(&MetadataRequest::default().with_topics(Some(vec![t])), 12)?;
        Ok(response
            .topics
            .first()
            .map(|t| t.topic_id)
            .unwrap_or_default())
    }

    /// Like `produce`, at Produce `version`; `base_sequence < 0` means not idempotent.
    pub fn produce_at(
        &mut self,
        topic: &str,
        pid: i64,
        epoch: i16,
        base_sequence: i32,
        count: i32,
        version: i16,
    ) -> Result<(i16, i64)> {
        let records: Vec<Record> = (0..count)
            .map(|i| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: pid,
                producer_epoch: epoch,
                timestamp_type: TimestampType::Creation,
                offset: i64::from(i),
                sequence: if base_sequence < 0 {
                    i - 1
                } else {
                    base_sequence + i
                },
                timestamp: 1_700_000_000_000,
                key: None,
                value: Some(Bytes::from(format!("seq-{}", base_sequence + i))),
                headers: IndexMap::new(),
            })
            .collect();
        let mut batch = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut batch,
            &records,
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::None,
            },
        )?;
        let request = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(10_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(topic.into())))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch.freeze()))])]);
        let response = self.send(&request, version)?;
        let p = &response.responses[0].partition_responses[0];
        Ok((p.error_code, p.base_offset))
    }

    /// A simple (groupless, generation -1) commit of `offset` for partition
    /// 0 of `topic` by `group`; returns the partition's error code.
    pub fn commit_offset(&mut self, group: &str, topic: &str, offset: i64) -> Result<i16> {
        use offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
        let request = OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.into())))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.into())))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(offset)])]);
        Ok(self.send(&request, 8)?.topics[0].partitions[0].error_code)
    }

    /// `group`'s committed offset for partition 0 of `topic` (OffsetFetch v7);
    /// an error code is an error.
    pub fn committed_offset(&mut self, group: &str, topic: &str) -> Result<i64> {
        let request = OffsetFetchRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.into())))
            .with_topics(Some(vec![
                offset_fetch_request::OffsetFetchRequestTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.into())))
                    .with_partition_indexes(vec![0]),
            ]));
        let response = self.send(&request, 7)?;
        ensure!(
            response.error_code == 0,
            "OffsetFetch error {}",
            response.error_code
        );
        let p = &response
            .topics
            .first()
            .context("OffsetFetch without topics")?
            .partitions[0];
        ensure!(
            p.error_code == 0,
            "OffsetFetch partition error {}",
            p.error_code
        );
        Ok(p.committed_offset)
    }

    pub fn log_end_offset(&mut self, topic: &str) -> Result<i64> {
        self.list_offset(topic, -1)
    }

    /// ListOffsets earliest (-2) of partition 0 of `topic`.
    pub fn log_start_offset(&mut self, topic: &str) -> Result<i64> {
        self.list_offset(topic, -2)
    }

    fn list_offset(&mut self, topic: &str, timestamp: i64) -> Result<i64> {
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.into())))
                .with_partitions(vec![
                    list_offsets_request::ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(timestamp),
                ])]);
        let response = self.send(&request, 7)?;
        let p = &response.topics[0].partitions[0];
        ensure!(
            p.error_code == 0,
            "ListOffsets {topic}: error {}",
            p.error_code
        );
        Ok(p.offset)
    }
}

/// InitProducerId for a new producer (no id, no epoch yet), transactional
/// when `transactional_id` is given, with a 60 s transaction timeout (chain
/// `with_transaction_timeout_ms` for another): what a client sends first.
pub fn new_producer_request(transactional_id: Option<TransactionalId>) -> InitProducerIdRequest {
    InitProducerIdRequest::default()
        .with_transactional_id(transactional_id)
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1)
}

/// Metadata for the one topic `topic`, which the broker creates if missing
/// only when `auto_create`.
pub fn topic_metadata_request(topic: &str, auto_create: bool) -> MetadataRequest {
    MetadataRequest::default()
        .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
        )
        .with_name(Some(TopicName(StrBytes::from_string(topic.into()))))]))
        .with_allow_auto_topic_creation(auto_create)
}

/// The partition error codes of an AddPartitionsToTxn (v3 and below)
/// response, topic by topic.
pub fn added_partition_codes(response: &AddPartitionsToTxnResponse) -> Vec<i16> {
    response
        .results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| {
            t.results_by_partition
                .iter()
                .map(|p| p.partition_error_code)
        })
        .collect()
}

/// The partition error codes of an ElectLeaders response, topic by topic.
pub fn election_codes(response: &ElectLeadersResponse) -> Vec<i16> {
    response
        .replica_election_results
        .iter()
        .flat_map(|t| t.partition_result.iter().map(|p| p.error_code))
        .collect()
}

/// A record without producer id, key or headers at `offset` in its batch.
/// Its sequence keeps kafka-protocol's encoder to one batch (base sequence
/// -1, Kafka's "none"), as Produce v3+ requires.
pub fn plain_record(offset: i64, value: Bytes) -> Record {
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset,
        sequence: i32::try_from(offset).unwrap_or(i32::MAX) - 1,
        timestamp: 1_700_000_000_000,
        key: None,
        value: Some(value),
        headers: IndexMap::new(),
    }
}

/// A Produce of `records` as one batch to `topic`-`partition` with
/// (acks, timeout_ms).
pub fn produce_request(
    topic: &str,
    partition: i32,
    records: &[Record],
    (acks, timeout_ms): (i16, i32),
    compression: Compression,
) -> Result<ProduceRequest> {
    let batch = encode_batch(records, compression)?;
    Ok(ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(timeout_ms)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(batch))])]))
}

/// `records` as one RecordBatch v2, the form every Produce since v3 carries.
pub fn encode_batch(records: &[Record], compression: Compression) -> Result<Bytes> {
    let mut batch = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut batch,
        records,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )?;
    Ok(batch.freeze())
}

/// Sends one request on any byte stream (TCP or TLS) and reads its
/// response, checking the correlation id.
pub fn round_trip<R: Request, S: Read + Write>(
    stream: &mut S,
    correlation_id: i32,
    request: &R,
    version: i16,
) -> Result<R::Response> {
    write_request(stream, correlation_id, request, version)?;
    read_response::<R, S>(stream, correlation_id, version)
}

/// Writes one request frame.
pub fn write_request<R: Request, S: Write>(
    stream: &mut S,
    correlation_id: i32,
    request: &R,
    version: i16,
) -> Result<()> {
    write_request_as(stream, (correlation_id, CLIENT_ID), request, version)
}

/// Writes one request frame with this (correlation id, client id).
pub fn write_request_as<R: Request, S: Write>(
    stream: &mut S,
    (correlation_id, client_id): (i32, &'static str),
    request: &R,
    version: i16,
) -> Result<()> {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str(client_id)));
    let mut body = BytesMut::new();
    header.encode(&mut body, R::header_version(version))?;
    request.encode(&mut body, version)?;
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    stream.write_all(&frame)?;
    stream.flush()?;
    Ok(())
}

/// Reads the response to the request sent with `correlation_id`.
pub fn read_response<R: Request, S: Read>(
    stream: &mut S,
    correlation_id: i32,
    version: i16,
) -> Result<R::Response> {
    let mut size = [0u8; 4];
    stream.read_exact(&mut size)?;
    let len = usize::try_from(i32::from_be_bytes(size))?;
    ensure!(len < 256 << 20, "a response of {len} bytes");
    let mut response = vec![0u8; len];
    stream.read_exact(&mut response)?;
    let mut response = Bytes::from(response);
    let header = ResponseHeader::decode(
        &mut response,
        <R::Response as HeaderVersion>::header_version(version),
    )?;
    ensure!(
        header.correlation_id == correlation_id,
        "correlation id mismatch"
    );
    R::Response::decode(&mut response, version)
}
