//! Writes the seed corpora of the fuzz targets (`fuzz/`, `make fuzz`):
//! request frames as a client sends them for every API and version the
//! broker advertises (the request-decoding target's input is the frame
//! without its size prefix), record batches (uncompressed, and every
//! codec), populated ShareFetch/ShareAcknowledge v2 requests, and
//! compressed payloads. Usage: `fuzz_seeds DIR`.

use std::fs;
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use chronik_protocol::records::{build_batch, SimpleRecord};
use chronik_protocol::{
    Request, ShareAcknowledgeRequestWire, ShareFetchRequestWire, SUPPORTED_APIS,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch as AckBatch,
};
use kafka_protocol::messages::share_fetch_request::{
    AcknowledgementBatch as FetchAckBatch, FetchPartition, FetchTopic, ForgottenTopic,
};
use kafka_protocol::messages::{
    GroupId, ProduceRequest, ShareAcknowledgeRequest, ShareFetchRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    fs::create_dir_all(dir).expect("create corpus dir");
    fs::write(dir.join(name), bytes).expect("write seed");
}

fn records(compression: Compression) -> Bytes {
    let records: Vec<Record> = (0..3)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: 7,
            producer_epoch: 0,
            timestamp_type: TimestampType::Creation,
            offset: i,
            sequence: i as i32,
            timestamp: 1_700_000_000_000 + i,
            key: Some(Bytes::from("key")),
            value: Some(Bytes::from(format!("value-{i}"))),
            headers: [(StrBytes::from_static_str("h"), Some(Bytes::from("v")))]
                .into_iter()
                .collect(),
        })
        .collect();
    let mut out = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut out,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .expect("encode batch");
    out.freeze()
}

/// ShareFetch/ShareAcknowledge v2 requests with topics, acknowledgement
/// batches and the v2-only fields set (their defaults carry none of these).
fn share_seeds(dir: &Path) {
    let mut topic = FetchTopic::default();
    topic.topic_id = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
        .parse()
        .expect("uuid parses");
    let topic_id = topic.topic_id;
    let fetch = ShareFetchRequest::default()
        .with_group_id(Some(GroupId(StrBytes::from_static_str("share-g"))))
        .with_member_id(Some(StrBytes::from_static_str("member-1")))
        .with_max_wait_ms(500)
        .with_max_records(500)
        .with_batch_size(100)
        .with_topics(vec![topic.with_partitions(vec![FetchPartition::default()
            .with_partition_index(0)
            .with_acknowledgement_batches(vec![FetchAckBatch::default()
                .with_first_offset(0)
                .with_last_offset(2)
                .with_acknowledge_types(vec![1, 4, 2])])])])
        .with_forgotten_topics_data(vec![ForgottenTopic::default()
            .with_topic_id(topic_id)
            .with_partitions(vec![1])]);
    let fetch = Request::ShareFetch(ShareFetchRequestWire {
        body: fetch,
        share_acquire_mode: 1,
        is_renew_ack: true,
    });
    let ack = ShareAcknowledgeRequest::default()
        .with_group_id(Some(GroupId(StrBytes::from_static_str("share-g"))))
        .with_member_id(Some(StrBytes::from_static_str("member-1")))
        .with_share_session_epoch(1)
        .with_topics(vec![AcknowledgeTopic::default()
            .with_topic_id(topic_id)
            .with_partitions(vec![AcknowledgePartition::default()
                .with_partition_index(0)
                .with_acknowledgement_batches(vec![AckBatch::default()
                    .with_first_offset(0)
                    .with_last_offset(0)
                    .with_acknowledge_types(vec![4])])])]);
    let ack = Request::ShareAcknowledge(ShareAcknowledgeRequestWire {
        body: ack,
        is_renew_ack: true,
    });
    for (name, request) in [("ShareFetch-acks", fetch), ("ShareAcknowledge-renew", ack)] {
        let frame = request.encode_frame(2, 3).expect("encode share request");
        write(dir, &format!("{name}-v2"), &frame);
    }
}

fn main() {
    let root = PathBuf::from(std::env::args().nth(1).expect("usage: fuzz_seeds DIR"));
    let requests = root.join("request_decode");
    for &(key, min, max) in SUPPORTED_APIS {
        let request = Request::default_for(key).expect("every supported API has a default");
        for version in min..=max {
            let frame = request
                .encode_frame(version, 1)
                .expect("encode default request");
            write(&requests, &format!("{key:?}-v{version}"), &frame);
        }
    }
    share_seeds(&requests);
    let codecs = [
        ("none", Compression::None),
        ("gzip", Compression::Gzip),
        ("snappy", Compression::Snappy),
        ("lz4", Compression::Lz4),
        ("zstd", Compression::Zstd),
    ];
    for (name, codec) in codecs {
        let batch = records(codec);
        let produce = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(1000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch.clone()))])]);
        for version in [3, 9, 12] {
            let frame = Request::Produce(produce.clone())
                .encode_frame(version, 2)
                .expect("encode produce");
            write(&requests, &format!("Produce-{name}-v{version}"), &frame);
        }
        write(&root.join("record_batch"), name, &batch);
        // The decompress target: codec id byte, then the records section.
        let mut payload = vec![batch[22] & 0x07];
        payload.extend_from_slice(&batch[61..]);
        write(&root.join("decompress"), name, &payload);
    }
    let simple: Vec<SimpleRecord> = (0..4)
        .map(|i| SimpleRecord {
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from("v")),
            timestamp: i,
        })
        .collect();
    write(
        &root.join("record_batch"),
        "broker-written",
        &build_batch(&simple),
    );
}
