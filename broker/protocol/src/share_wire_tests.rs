//! Tests of `share_wire` (ShareFetch/ShareAcknowledge v1..=2,
//! DescribeShareGroupOffsets v0..=1) and of the share-group entries of the
//! API table: round trips, bytes written by hand from Kafka's JSON specs,
//! truncated and hostile input, and whole request/response frames at each
//! entry's min and max version.

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::describe_share_group_offsets_request::{
    DescribeShareGroupOffsetsRequestGroup, DescribeShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup, DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch as AckRequestBatch,
};
use kafka_protocol::messages::share_acknowledge_response::{
    self as ack_response, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::messages::share_fetch_request::{
    AcknowledgementBatch as FetchAckBatch, FetchPartition, FetchTopic, ForgottenTopic,
};
use kafka_protocol::messages::share_fetch_response::{
    self as fetch_response, AcquiredRecords, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::{
    ApiKey, DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, GroupId,
    ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse,
    TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use crate::api::{api_name, encode_response, Request, Response, SUPPORTED_APIS};
use crate::error::RequestError;
use crate::header::decode_request;
use crate::share_wire::{
    DescribeShareGroupOffsetsRequestWire, DescribeShareGroupOffsetsResponseWire,
    ShareAcknowledgeRequestWire, ShareAcknowledgeResponseWire, ShareFetchRequestWire,
    ShareFetchResponseWire,
};

// ---------------------------------------------------------------------------
// Hand encoding of Kafka's primitive types (independent of the codecs under test)
// ---------------------------------------------------------------------------

#[derive(Default)]
struct Hand(Vec<u8>);

impl Hand {
    fn uvarint(mut self, mut v: u32) -> Self {
        while v >= 0x80 {
            self.0.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
        self
    }
    fn raw(mut self, bytes: &[u8]) -> Self {
        self.0.extend_from_slice(bytes);
        self
    }
    fn i8(self, v: i8) -> Self {
        self.raw(&v.to_be_bytes())
    }
    fn i16(self, v: i16) -> Self {
        self.raw(&v.to_be_bytes())
    }
    fn i32(self, v: i32) -> Self {
        self.raw(&v.to_be_bytes())
    }
    fn i64(self, v: i64) -> Self {
        self.raw(&v.to_be_bytes())
    }
    /// COMPACT_NULLABLE_STRING / COMPACT_STRING.
    fn string(self, s: Option<&str>) -> Self {
        match s {
            None => self.uvarint(0),
            Some(s) => self.uvarint(s.len() as u32 + 1).raw(s.as_bytes()),
        }
    }
    /// COMPACT_ARRAY length (count + 1).
    fn array(self, count: u32) -> Self {
        self.uvarint(count + 1)
    }
    /// Empty tagged-field section.
    fn no_tags(self) -> Self {
        self.uvarint(0)
    }
    fn bytes(self) -> Bytes {
        Bytes::from(self.0)
    }
}

const TOPIC_A: [u8; 16] = [
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
];
const TOPIC_B: [u8; 16] = [
    0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd, 0xfe, 0xff,
];

/// A ShareFetchRequest v2 written field by field from ShareFetchRequest.json.
/// Returns the v2 bytes and the offset of the v2-only fields (2 bytes).
fn hand_share_fetch_v2(acquire_mode: i8, renew_ack: u8) -> (Bytes, usize) {
    let head = Hand::default()
        .string(Some("grp")) // GroupId
        .string(Some("m-1")) // MemberId
        .i32(7) // ShareSessionEpoch
        .i32(500) // MaxWaitMs
        .i32(1) // MinBytes
        .i32(1 << 20) // MaxBytes
        .i32(200) // MaxRecords
        .i32(100); // BatchSize
    let at = head.0.len();
    let bytes = head
        .i8(acquire_mode) // ShareAcquireMode (v2+)
        .raw(&[renew_ack]) // IsRenewAck (v2+)
        .array(1) // Topics
        .raw(&TOPIC_A) //   TopicId
        .array(1) //   Partitions
        .i32(3) //     PartitionIndex
        .array(1) //     AcknowledgementBatches
        .i64(10) //       FirstOffset
        .i64(12) //       LastOffset
        .array(2) //       AcknowledgeTypes
        .i8(1)
        .i8(4)
        .no_tags() //     batch tags
        .no_tags() //   partition tags
        .no_tags() // topic tags
        .array(1) // ForgottenTopicsData
        .raw(&TOPIC_B) //   TopicId
        .array(2) //   Partitions
        .i32(1)
        .i32(2)
        .no_tags()
        .uvarint(1) // one unknown tagged field
        .uvarint(5) //   tag
        .uvarint(2) //   size
        .raw(&[0xab, 0xcd])
        .bytes();
    (bytes, at)
}

fn check_hand_share_fetch(wire: &ShareFetchRequestWire) {
    let b = &wire.body;
    assert_eq!(b.group_id.as_ref().map(|g| g.as_str()), Some("grp"));
    assert_eq!(b.member_id.as_ref().map(|m| m.as_str()), Some("m-1"));
    assert_eq!(b.share_session_epoch, 7);
    assert_eq!(b.max_wait_ms, 500);
    assert_eq!(b.min_bytes, 1);
    assert_eq!(b.max_bytes, 1 << 20);
    assert_eq!(b.max_records, 200);
    assert_eq!(b.batch_size, 100);
    assert_eq!(b.topics.len(), 1);
    assert_eq!(b.topics[0].topic_id.as_bytes(), &TOPIC_A);
    assert_eq!(b.topics[0].partitions.len(), 1);
    let p = &b.topics[0].partitions[0];
    assert_eq!(p.partition_index, 3);
    assert_eq!(p.acknowledgement_batches.len(), 1);
    assert_eq!(p.acknowledgement_batches[0].first_offset, 10);
    assert_eq!(p.acknowledgement_batches[0].last_offset, 12);
    assert_eq!(p.acknowledgement_batches[0].acknowledge_types, vec![1, 4]);
    assert_eq!(b.forgotten_topics_data.len(), 1);
    assert_eq!(b.forgotten_topics_data[0].topic_id.as_bytes(), &TOPIC_B);
    assert_eq!(b.forgotten_topics_data[0].partitions, vec![1, 2]);
    assert_eq!(
        b.unknown_tagged_fields.get(&5).map(|v| &v[..]),
        Some(&[0xab, 0xcd][..])
    );
}

/// A ShareAcknowledgeRequest v2 from ShareAcknowledgeRequest.json.
fn hand_share_ack_v2(renew_ack: u8) -> (Bytes, usize) {
    let head = Hand::default()
        .string(None) // GroupId (null)
        .string(Some("m")) // MemberId
        .i32(3); // ShareSessionEpoch
    let at = head.0.len();
    let bytes = head
        .raw(&[renew_ack]) // IsRenewAck (v2+)
        .array(1) // Topics
        .raw(&TOPIC_A)
        .array(1) //   Partitions
        .i32(0) //     PartitionIndex
        .array(1) //     AcknowledgementBatches
        .i64(5)
        .i64(6)
        .array(1)
        .i8(4) //       Renew
        .no_tags()
        .no_tags()
        .no_tags()
        .no_tags() // request tags
        .bytes();
    (bytes, at)
}

/// A ShareAcknowledgeResponse v2 from ShareAcknowledgeResponse.json.
fn hand_share_ack_response_v2() -> (Bytes, usize) {
    let head = Hand::default()
        .i32(0) // ThrottleTimeMs
        .i16(0) // ErrorCode
        .string(Some("fine")); // ErrorMessage
    let at = head.0.len();
    let bytes = head
        .i32(30_000) // AcquisitionLockTimeoutMs (v2+)
        .array(1) // Responses
        .raw(&TOPIC_B)
        .array(1) //   Partitions
        .i32(9) //     PartitionIndex
        .i16(0) //     ErrorCode
        .string(None) //     ErrorMessage
        .i32(1) //     CurrentLeader.LeaderId
        .i32(4) //     CurrentLeader.LeaderEpoch
        .no_tags() //     leader tags
        .no_tags() //   partition tags
        .no_tags() // topic tags
        .array(1) // NodeEndpoints
        .i32(1) //   NodeId
        .string(Some("localhost")) //   Host
        .i32(9092) //   Port
        .string(None) //   Rack
        .no_tags()
        .no_tags() // response tags
        .bytes();
    (bytes, at)
}

/// The same bytes without the `len` v2-only bytes at `at`: the v1 layout.
fn without(bytes: &Bytes, at: usize, len: usize) -> Bytes {
    let mut out = BytesMut::from(&bytes[..at]);
    out.extend_from_slice(&bytes[at + len..]);
    out.freeze()
}

fn encode<E: Encodable>(value: &E, version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    value.encode(&mut buf, version).expect("encodes");
    assert_eq!(
        value.compute_size(version).expect("sizes"),
        buf.len(),
        "compute_size matches the encoding at v{version}"
    );
    buf.freeze()
}

fn decode<D: Decodable>(bytes: &Bytes, version: i16) -> D {
    let mut buf = bytes.clone();
    let value = D::decode(&mut buf, version).expect("decodes");
    assert_eq!(
        buf.remaining(),
        0,
        "v{version} decoding consumes the message"
    );
    value
}

// ---------------------------------------------------------------------------
// Sample values
// ---------------------------------------------------------------------------

fn sample_topic() -> FetchTopic {
    let mut t = FetchTopic::default();
    t.topic_id = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
        .parse()
        .expect("uuid parses");
    t
}

fn sample_fetch_request() -> ShareFetchRequestWire {
    let topic = sample_topic().with_partitions(vec![FetchPartition::default()
        .with_partition_index(2)
        .with_acknowledgement_batches(vec![FetchAckBatch::default()
            .with_first_offset(100)
            .with_last_offset(104)
            .with_acknowledge_types(vec![1, 2, 3])])]);
    let forgotten = ForgottenTopic::default()
        .with_topic_id(topic.topic_id)
        .with_partitions(vec![0, 5]);
    ShareFetchRequestWire {
        body: ShareFetchRequest::default()
            .with_group_id(Some(GroupId(StrBytes::from_static_str("share-g"))))
            .with_member_id(Some(StrBytes::from_static_str("member-é")))
            .with_share_session_epoch(4)
            .with_max_wait_ms(250)
            .with_min_bytes(1)
            .with_max_records(500)
            .with_batch_size(50)
            .with_topics(vec![topic])
            .with_forgotten_topics_data(vec![forgotten]),
        share_acquire_mode: 1,
        is_renew_ack: true,
    }
}

fn sample_ack_request() -> ShareAcknowledgeRequestWire {
    let topic_id = sample_topic().topic_id;
    ShareAcknowledgeRequestWire {
        body: ShareAcknowledgeRequest::default()
            .with_group_id(Some(GroupId(StrBytes::from_static_str("share-g"))))
            .with_member_id(Some(StrBytes::from_static_str("member-1")))
            .with_share_session_epoch(9)
            .with_topics(vec![AcknowledgeTopic::default()
                .with_topic_id(topic_id)
                .with_partitions(vec![AcknowledgePartition::default()
                    .with_partition_index(1)
                    .with_acknowledgement_batches(vec![AckRequestBatch::default(
                    )
                    .with_first_offset(7)
                    .with_last_offset(9)
                    .with_acknowledge_types(vec![4])])])]),
        is_renew_ack: true,
    }
}

fn sample_fetch_response() -> ShareFetchResponseWire {
    let topic_id = sample_topic().topic_id;
    ShareFetchResponseWire(
        ShareFetchResponse::default()
            .with_throttle_time_ms(3)
            .with_acquisition_lock_timeout_ms(30_000)
            .with_responses(vec![ShareFetchableTopicResponse::default()
                .with_topic_id(topic_id)
                .with_partitions(vec![fetch_response::PartitionData::default()
                    .with_partition_index(2)
                    .with_current_leader(
                        fetch_response::LeaderIdAndEpoch::default()
                            .with_leader_id(1)
                            .with_leader_epoch(5),
                    )
                    .with_records(Some(Bytes::from_static(b"not-really-a-batch")))
                    .with_acquired_records(vec![AcquiredRecords::default()
                        .with_first_offset(100)
                        .with_last_offset(104)
                        .with_delivery_count(1)])])])
            .with_node_endpoints(vec![fetch_response::NodeEndpoint::default()
                .with_node_id(1.into())
                .with_host(StrBytes::from_static_str("broker-1"))
                .with_port(9092)]),
    )
}

fn sample_ack_response() -> ShareAcknowledgeResponseWire {
    let topic_id = sample_topic().topic_id;
    ShareAcknowledgeResponseWire {
        body: ShareAcknowledgeResponse::default()
            .with_error_message(Some(StrBytes::from_static_str("partial")))
            .with_responses(vec![ShareAcknowledgeTopicResponse::default()
                .with_topic_id(topic_id)
                .with_partitions(vec![ack_response::PartitionData::default()
                    .with_partition_index(1)
                    .with_error_code(62)
                    .with_current_leader(
                        ack_response::LeaderIdAndEpoch::default()
                            .with_leader_id(2)
                            .with_leader_epoch(3),
                    )])])
            .with_node_endpoints(vec![ack_response::NodeEndpoint::default()
                .with_node_id(2.into())
                .with_host(StrBytes::from_static_str("broker-2"))
                .with_port(9093)
                .with_rack(Some(StrBytes::from_static_str("r1")))]),
        acquisition_lock_timeout_ms: 15_000,
    }
}

// ---------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------

#[test]
fn share_fetch_request_round_trips_at_v1_and_v2() {
    let full = sample_fetch_request();
    let v2: ShareFetchRequestWire = decode(&encode(&full, 2), 2);
    assert_eq!(v2, full);

    // v1 cannot carry IsRenewAck = true; ShareAcquireMode is ignorable and dropped.
    let mut v1_value = full.clone();
    v1_value.is_renew_ack = false;
    let v1_bytes = encode(&v1_value, 1);
    let v1: ShareFetchRequestWire = decode(&v1_bytes, 1);
    assert_eq!(v1.body, full.body);
    assert_eq!((v1.share_acquire_mode, v1.is_renew_ack), (0, false));
    // v1 bytes are kafka-protocol's own v1 encoding.
    assert_eq!(v1_bytes, encode(&full.body, 1));

    let defaults: ShareFetchRequestWire = decode(&encode(&ShareFetchRequestWire::default(), 2), 2);
    assert_eq!(defaults, ShareFetchRequestWire::default());
}

#[test]
fn share_acknowledge_request_round_trips_at_v1_and_v2() {
    let full = sample_ack_request();
    let v2: ShareAcknowledgeRequestWire = decode(&encode(&full, 2), 2);
    assert_eq!(v2, full);

    let mut v1_value = full.clone();
    v1_value.is_renew_ack = false;
    let v1_bytes = encode(&v1_value, 1);
    assert_eq!(v1_bytes, encode(&full.body, 1));
    let v1: ShareAcknowledgeRequestWire = decode(&v1_bytes, 1);
    assert_eq!(v1, v1_value);
}

#[test]
fn share_fetch_response_round_trips_at_v1_and_v2_with_one_layout() {
    let full = sample_fetch_response();
    let v1_bytes = encode(&full, 1);
    let v2_bytes = encode(&full, 2);
    assert_eq!(
        v1_bytes, v2_bytes,
        "ShareFetchResponse v2 is laid out as v1"
    );
    assert_eq!(v1_bytes, encode(&full.0, 1));
    assert_eq!(decode::<ShareFetchResponseWire>(&v1_bytes, 1), full);
    assert_eq!(decode::<ShareFetchResponseWire>(&v2_bytes, 2), full);
}

#[test]
fn share_acknowledge_response_round_trips_at_v1_and_v2() {
    let full = sample_ack_response();
    let v2: ShareAcknowledgeResponseWire = decode(&encode(&full, 2), 2);
    assert_eq!(v2, full);

    // AcquisitionLockTimeoutMs is ignorable: dropped at v1, 0 when read back.
    let v1_bytes = encode(&full, 1);
    assert_eq!(v1_bytes, encode(&full.body, 1));
    let v1: ShareAcknowledgeResponseWire = decode(&v1_bytes, 1);
    assert_eq!(v1.body, full.body);
    assert_eq!(v1.acquisition_lock_timeout_ms, 0);
}

#[test]
fn v1_refuses_is_renew_ack_and_other_versions_are_refused() {
    let fetch = sample_fetch_request();
    let mut buf = BytesMut::new();
    let err = fetch.encode(&mut buf, 1).expect_err("IsRenewAck needs v2");
    assert!(err.to_string().contains("IsRenewAck"), "{err}");
    assert!(fetch.compute_size(1).is_err());
    let ack = sample_ack_request();
    assert!(ack.encode(&mut BytesMut::new(), 1).is_err());
    assert!(ack.compute_size(1).is_err());

    for version in [0, 3, -1] {
        assert!(fetch.encode(&mut BytesMut::new(), version).is_err());
        assert!(ack.encode(&mut BytesMut::new(), version).is_err());
        assert!(sample_fetch_response()
            .encode(&mut BytesMut::new(), version)
            .is_err());
        assert!(sample_ack_response()
            .encode(&mut BytesMut::new(), version)
            .is_err());
        let bytes = encode(&fetch, 2);
        let err = ShareFetchRequestWire::decode(&mut bytes.clone(), version)
            .expect_err("unsupported version");
        assert!(err.to_string().contains("not supported"), "{err}");
        assert!(ShareAcknowledgeRequestWire::decode(&mut bytes.clone(), version).is_err());
        assert!(ShareFetchResponseWire::decode(&mut bytes.clone(), version).is_err());
        assert!(ShareAcknowledgeResponseWire::decode(&mut bytes.clone(), version).is_err());
    }
}

// ---------------------------------------------------------------------------
// Bytes written by hand from the JSON specs
// ---------------------------------------------------------------------------

#[test]
fn hand_encoded_share_fetch_v2_decodes_to_its_fields() {
    let (bytes, at) = hand_share_fetch_v2(1, 1);
    let wire: ShareFetchRequestWire = decode(&bytes, 2);
    check_hand_share_fetch(&wire);
    assert_eq!(wire.share_acquire_mode, 1);
    assert!(wire.is_renew_ack);
    // The encoder writes exactly the spec's bytes back.
    assert_eq!(encode(&wire, 2), bytes);
    // Without the two v2 fields the bytes are a v1 request with the same body.
    let v1 = without(&bytes, at, 2);
    let body: ShareFetchRequest = decode(&v1, 1);
    assert_eq!(body, wire.body);
    let v1_wire: ShareFetchRequestWire = decode(&v1, 1);
    check_hand_share_fetch(&v1_wire);

    let (bytes, _) = hand_share_fetch_v2(0, 0);
    let wire: ShareFetchRequestWire = decode(&bytes, 2);
    assert_eq!((wire.share_acquire_mode, wire.is_renew_ack), (0, false));
}

#[test]
fn hand_encoded_share_acknowledge_v2_decodes_to_its_fields() {
    let (bytes, at) = hand_share_ack_v2(1);
    let wire: ShareAcknowledgeRequestWire = decode(&bytes, 2);
    assert!(wire.is_renew_ack);
    assert_eq!(wire.body.group_id, None);
    assert_eq!(wire.body.member_id.as_ref().map(|m| m.as_str()), Some("m"));
    assert_eq!(wire.body.share_session_epoch, 3);
    assert_eq!(wire.body.topics.len(), 1);
    assert_eq!(wire.body.topics[0].topic_id.as_bytes(), &TOPIC_A);
    let batch = &wire.body.topics[0].partitions[0].acknowledgement_batches[0];
    assert_eq!(
        (
            batch.first_offset,
            batch.last_offset,
            batch.acknowledge_types.clone()
        ),
        (5, 6, vec![4])
    );
    assert_eq!(encode(&wire, 2), bytes);
    let body: ShareAcknowledgeRequest = decode(&without(&bytes, at, 1), 1);
    assert_eq!(body, wire.body);
}

#[test]
fn hand_encoded_share_acknowledge_response_v2_decodes_to_its_fields() {
    let (bytes, at) = hand_share_ack_response_v2();
    let wire: ShareAcknowledgeResponseWire = decode(&bytes, 2);
    assert_eq!(wire.acquisition_lock_timeout_ms, 30_000);
    assert_eq!(
        wire.body.error_message.as_ref().map(|m| m.as_str()),
        Some("fine")
    );
    let p = &wire.body.responses[0].partitions[0];
    assert_eq!(
        (
            p.partition_index,
            p.current_leader.leader_id,
            p.current_leader.leader_epoch
        ),
        (9, 1, 4)
    );
    assert_eq!(wire.body.node_endpoints[0].host.as_str(), "localhost");
    assert_eq!(encode(&wire, 2), bytes);
    let body: ShareAcknowledgeResponse = decode(&without(&bytes, at, 4), 1);
    assert_eq!(body, wire.body);
}

#[test]
fn a_bool_byte_other_than_0_or_1_reads_as_true_like_kafka_protocol() {
    let (bytes, _) = hand_share_fetch_v2(0, 2);
    let wire: ShareFetchRequestWire = decode(&bytes, 2);
    assert!(wire.is_renew_ack);
    let (bytes, _) = hand_share_ack_v2(0xff);
    let wire: ShareAcknowledgeRequestWire = decode(&bytes, 2);
    assert!(wire.is_renew_ack);
}

#[test]
fn decoding_leaves_trailing_bytes_and_works_on_any_byte_buf() {
    let (bytes, _) = hand_share_fetch_v2(1, 0);
    let mut with_tail = BytesMut::from(&bytes[..]);
    with_tail.extend_from_slice(b"TAIL");
    let mut buf = with_tail.freeze();
    let wire = ShareFetchRequestWire::decode(&mut buf, 2).expect("decodes");
    check_hand_share_fetch(&wire);
    assert_eq!(&buf[..], b"TAIL");

    // The same through a BytesMut and a byte slice (copying ByteBufs).
    let mut buf = BytesMut::from(&bytes[..]);
    check_hand_share_fetch(&ShareFetchRequestWire::decode(&mut buf, 2).expect("BytesMut"));
    assert!(buf.is_empty());
    let mut slice: &[u8] = &bytes;
    check_hand_share_fetch(&ShareFetchRequestWire::decode(&mut slice, 2).expect("slice"));
    assert!(slice.is_empty());
    let (bytes, _) = hand_share_ack_response_v2();
    let mut slice: &[u8] = &bytes;
    let wire = ShareAcknowledgeResponseWire::decode(&mut slice, 2).expect("slice");
    assert_eq!(wire.acquisition_lock_timeout_ms, 30_000);
}

// ---------------------------------------------------------------------------
// Truncated and hostile input
// ---------------------------------------------------------------------------

fn every_prefix_fails<D: Decodable>(bytes: &Bytes, version: i16) {
    for len in 0..bytes.len() {
        let mut cut = bytes.slice(..len);
        assert!(
            D::decode(&mut cut, version).is_err(),
            "a {len}-byte prefix of {} bytes decodes at v{version}",
            bytes.len()
        );
    }
}

#[test]
fn truncated_inputs_are_errors_never_panics() {
    let (fetch, _) = hand_share_fetch_v2(1, 1);
    every_prefix_fails::<ShareFetchRequestWire>(&fetch, 2);
    every_prefix_fails::<ShareFetchRequestWire>(&encode(&sample_fetch_request(), 2), 2);
    every_prefix_fails::<ShareFetchRequestWire>(&encode(&sample_fetch_request().body, 1), 1);
    let (ack, _) = hand_share_ack_v2(1);
    every_prefix_fails::<ShareAcknowledgeRequestWire>(&ack, 2);
    every_prefix_fails::<ShareAcknowledgeRequestWire>(&encode(&sample_ack_request(), 2), 2);
    every_prefix_fails::<ShareAcknowledgeRequestWire>(&encode(&sample_ack_request().body, 1), 1);
    let (ack_response, _) = hand_share_ack_response_v2();
    every_prefix_fails::<ShareAcknowledgeResponseWire>(&ack_response, 2);
    every_prefix_fails::<ShareAcknowledgeResponseWire>(&encode(&sample_ack_response(), 1), 1);
    every_prefix_fails::<ShareFetchResponseWire>(&encode(&sample_fetch_response(), 2), 2);
}

#[test]
fn truncation_errors_name_the_field() {
    let (bytes, at) = hand_share_fetch_v2(1, 1);
    let err = ShareFetchRequestWire::decode(&mut bytes.slice(..at), 2).expect_err("cut");
    assert!(err.to_string().contains("ShareAcquireMode"), "{err}");
    let err = ShareFetchRequestWire::decode(&mut bytes.slice(..at + 1), 2).expect_err("cut");
    assert!(err.to_string().contains("IsRenewAck"), "{err}");
    let err = ShareFetchRequestWire::decode(&mut bytes.slice(..6), 2).expect_err("cut");
    assert!(err.to_string().contains("MemberId"), "{err}");
    let err = ShareFetchRequestWire::decode(&mut bytes.slice(..10), 2).expect_err("cut");
    assert!(err.to_string().contains("BatchSize"), "{err}");
    let (bytes, at) = hand_share_ack_response_v2();
    let err = ShareAcknowledgeResponseWire::decode(&mut bytes.slice(..at + 2), 2).expect_err("cut");
    assert!(
        err.to_string().contains("AcquisitionLockTimeoutMs"),
        "{err}"
    );
}

#[test]
fn hostile_prefix_lengths_are_errors_without_allocating() {
    // GroupId announcing u32::MAX - 1 bytes.
    let bytes = Hand::default()
        .raw(&[0xff, 0xff, 0xff, 0xff, 0x0f])
        .raw(&[0; 64])
        .bytes();
    let err = ShareFetchRequestWire::decode(&mut bytes.clone(), 2).expect_err("huge GroupId");
    assert!(err.to_string().contains("GroupId"), "{err}");
    assert!(ShareAcknowledgeRequestWire::decode(&mut bytes.clone(), 2).is_err());
    // A varint whose five bytes all carry the continuation bit: read as
    // kafka-protocol reads it (five bytes), then the string is too long.
    let bytes = Hand::default().raw(&[0xff; 5]).raw(&[0; 40]).bytes();
    assert!(ShareFetchRequestWire::decode(&mut bytes.clone(), 2).is_err());
    assert!(ShareAcknowledgeRequestWire::decode(&mut bytes.clone(), 2).is_err());
    // ErrorMessage of the ack response announcing more than is there.
    let bytes = Hand::default()
        .i32(0)
        .i16(0)
        .uvarint(1000)
        .raw(b"short")
        .bytes();
    let err = ShareAcknowledgeResponseWire::decode(&mut bytes.clone(), 2).expect_err("long");
    assert!(err.to_string().contains("ErrorMessage"), "{err}");
    // Invalid UTF-8 in MemberId: kafka-protocol's v1 decoder still checks it.
    let (good, _) = hand_share_ack_v2(0);
    let mut bad = BytesMut::from(&good[..]);
    bad[2] = 0xff; // the single MemberId byte ("m")
    assert!(ShareAcknowledgeRequestWire::decode(&mut bad.freeze(), 2).is_err());
}

#[test]
fn truncated_v2_frames_are_malformed_requests() {
    for request in [
        Request::ShareFetch(sample_fetch_request()),
        Request::ShareAcknowledge(sample_ack_request()),
    ] {
        let frame = request.encode_frame(2, 11).expect("encodes");
        // The header alone (api key, version, correlation id, client id, tags).
        let header_len = 2 + 2 + 4 + 2 + "chronik-seed".len() + 1;
        for len in header_len..frame.len() {
            match decode_request(frame.slice(..len)) {
                Err(RequestError::Malformed { api, version, .. }) => {
                    assert_eq!(api, api_name(request.api_key()));
                    assert_eq!(version, 2);
                }
                other => panic!("{len}-byte prefix: {other:?}"),
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The API table
// ---------------------------------------------------------------------------

const SHARE_APIS: [(ApiKey, i16, i16); 12] = [
    (ApiKey::ShareGroupHeartbeat, 1, 1),
    (ApiKey::ShareGroupDescribe, 1, 1),
    (ApiKey::ShareFetch, 1, 2),
    (ApiKey::ShareAcknowledge, 1, 2),
    (ApiKey::InitializeShareGroupState, 0, 0),
    (ApiKey::ReadShareGroupState, 0, 0),
    (ApiKey::WriteShareGroupState, 0, 0),
    (ApiKey::DeleteShareGroupState, 0, 0),
    (ApiKey::ReadShareGroupStateSummary, 0, 0),
    (ApiKey::DescribeShareGroupOffsets, 0, 1),
    (ApiKey::AlterShareGroupOffsets, 0, 0),
    (ApiKey::DeleteShareGroupOffsets, 0, 0),
];

#[test]
fn the_table_serves_the_share_apis_at_their_versions() {
    for (key, min, max) in SHARE_APIS {
        assert!(
            SUPPORTED_APIS.contains(&(key, min, max)),
            "{key:?} {min}..={max} missing"
        );
        assert_eq!(api_name(key), format!("{key:?}"));
    }
    // Every supported API has a name and no key is listed twice.
    for (i, (key, _, _)) in SUPPORTED_APIS.iter().enumerate() {
        assert_ne!(api_name(*key), "Other", "{key:?} has no name");
        assert!(
            !SUPPORTED_APIS[i + 1..].iter().any(|(k, _, _)| k == key),
            "{key:?} listed twice"
        );
    }
    let advertised = crate::api::api_versions_response(0);
    for (key, min, max) in SHARE_APIS {
        assert!(advertised
            .api_keys
            .iter()
            .any(|v| v.api_key == key as i16 && v.min_version == min && v.max_version == max));
    }
}

fn same_request(a: &Request, b: &Request) -> bool {
    match (a, b) {
        (Request::ShareFetch(x), Request::ShareFetch(y)) => x == y,
        (Request::ShareAcknowledge(x), Request::ShareAcknowledge(y)) => x == y,
        (Request::DescribeShareGroupOffsets(x), Request::DescribeShareGroupOffsets(y)) => x == y,
        // The kafka-protocol bodies compare by their Debug form.
        _ => format!("{a:?}") == format!("{b:?}"),
    }
}

#[test]
fn share_request_frames_round_trip_at_min_and_max_versions() {
    // Populated requests, each at the versions it can be sent at.
    let populated = [
        (Request::ShareFetch(sample_fetch_request()), vec![2]),
        (Request::ShareAcknowledge(sample_ack_request()), vec![2]),
        (
            Request::DescribeShareGroupOffsets(sample_offsets_request()),
            vec![0, 1],
        ),
    ];
    for (key, min, max) in SHARE_APIS {
        let default = Request::default_for(key).expect("supported API has a default");
        for version in [min, max] {
            let mut requests = vec![default.clone()];
            requests.extend(
                populated
                    .iter()
                    .filter(|(r, versions)| r.api_key() == key && versions.contains(&version))
                    .map(|(r, _)| r.clone()),
            );
            for request in requests {
                let frame = request.encode_frame(version, 21).expect("encodes");
                let decoded = decode_request(frame).expect("decodes");
                assert_eq!(decoded.api_key, key);
                assert_eq!(decoded.version(), version);
                assert_eq!(decoded.correlation_id(), 21);
                assert!(
                    same_request(&decoded.body, &request),
                    "{key:?} v{version}: {:?} != {request:?}",
                    decoded.body
                );
            }
        }
        // One past the range is refused before decoding.
        let frame = default.encode_frame(min, 1).expect("encodes");
        let mut frame = BytesMut::from(&frame[..]);
        frame[2..4].copy_from_slice(&(max + 1).to_be_bytes());
        assert!(matches!(
            decode_request(frame.freeze()),
            Err(RequestError::UnsupportedVersion { .. })
        ));
    }
}

/// Builds the default response of each share API.
fn default_response(key: ApiKey) -> Response {
    use kafka_protocol::messages::*;
    match key {
        ApiKey::ShareGroupHeartbeat => {
            Response::ShareGroupHeartbeat(ShareGroupHeartbeatResponse::default())
        }
        ApiKey::ShareGroupDescribe => {
            Response::ShareGroupDescribe(ShareGroupDescribeResponse::default())
        }
        ApiKey::ShareFetch => Response::ShareFetch(ShareFetchResponseWire::default()),
        ApiKey::ShareAcknowledge => {
            Response::ShareAcknowledge(ShareAcknowledgeResponseWire::default())
        }
        ApiKey::InitializeShareGroupState => {
            Response::InitializeShareGroupState(InitializeShareGroupStateResponse::default())
        }
        ApiKey::ReadShareGroupState => {
            Response::ReadShareGroupState(ReadShareGroupStateResponse::default())
        }
        ApiKey::WriteShareGroupState => {
            Response::WriteShareGroupState(WriteShareGroupStateResponse::default())
        }
        ApiKey::DeleteShareGroupState => {
            Response::DeleteShareGroupState(DeleteShareGroupStateResponse::default())
        }
        ApiKey::ReadShareGroupStateSummary => {
            Response::ReadShareGroupStateSummary(ReadShareGroupStateSummaryResponse::default())
        }
        ApiKey::DescribeShareGroupOffsets => {
            Response::DescribeShareGroupOffsets(DescribeShareGroupOffsetsResponseWire::default())
        }
        ApiKey::AlterShareGroupOffsets => {
            Response::AlterShareGroupOffsets(AlterShareGroupOffsetsResponse::default())
        }
        ApiKey::DeleteShareGroupOffsets => {
            Response::DeleteShareGroupOffsets(DeleteShareGroupOffsetsResponse::default())
        }
        other => panic!("{other:?} is not a share API"),
    }
}

/// The body of a whole response frame: after the size prefix, the
/// correlation id and (flexible header v1) the empty tagged fields.
fn response_body(frame: &Bytes, correlation_id: i32) -> Bytes {
    let size = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
    assert_eq!(size, frame.len() - 4);
    assert_eq!(
        i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]),
        correlation_id
    );
    assert_eq!(frame[8], 0, "flexible response header: no tagged fields");
    frame.slice(9..)
}

#[test]
fn share_responses_encode_at_min_and_max_versions() {
    for (key, min, max) in SHARE_APIS {
        let response = default_response(key);
        assert_eq!(response.api_key(), key);
        for version in [min, max] {
            let frame = encode_response(33, version, &response).expect("encodes");
            assert!(!response_body(&frame, 33).is_empty());
        }
    }
    // The wrapped ones decode back to what was sent, at both versions.
    for version in [1, 2] {
        let fetch = sample_fetch_response();
        let frame =
            encode_response(5, version, &Response::ShareFetch(fetch.clone())).expect("encodes");
        assert_eq!(
            decode::<ShareFetchResponseWire>(&response_body(&frame, 5), version),
            fetch
        );

        let ack = sample_ack_response();
        let frame =
            encode_response(6, version, &Response::ShareAcknowledge(ack.clone())).expect("encodes");
        let back: ShareAcknowledgeResponseWire = decode(&response_body(&frame, 6), version);
        assert_eq!(back.body, ack.body);
        let expected_timeout = if version == 2 { 15_000 } else { 0 };
        assert_eq!(back.acquisition_lock_timeout_ms, expected_timeout);
    }
}

// ---------------------------------------------------------------------------
// DescribeShareGroupOffsets v0..=1
// ---------------------------------------------------------------------------

fn sample_offsets_request() -> DescribeShareGroupOffsetsRequestWire {
    DescribeShareGroupOffsetsRequestWire(DescribeShareGroupOffsetsRequest::default().with_groups(
        vec![
            DescribeShareGroupOffsetsRequestGroup::default()
                .with_group_id(GroupId(StrBytes::from_static_str("share-g")))
                .with_topics(Some(vec![DescribeShareGroupOffsetsRequestTopic::default()
                    .with_topic_name(TopicName(StrBytes::from_static_str("orders")))
                    .with_partitions(vec![0, 2, 7])])),
            // Null topics: every topic-partition of the group.
            DescribeShareGroupOffsetsRequestGroup::default()
                .with_group_id(GroupId(StrBytes::from_static_str("other")))
                .with_topics(None),
        ],
    ))
}

fn offsets_partition(
    index: i32,
    start: i64,
    error: Option<(i16, &'static str)>,
) -> DescribeShareGroupOffsetsResponsePartition {
    let p = DescribeShareGroupOffsetsResponsePartition::default()
        .with_partition_index(index)
        .with_start_offset(start)
        .with_leader_epoch(-1);
    match error {
        None => p,
        Some((code, message)) => p
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_static_str(message))),
    }
}

/// Two groups: the first with two topics (two partitions, one), the second
/// failed without topics; an unknown tagged field on one partition.
fn sample_offsets_body() -> DescribeShareGroupOffsetsResponse {
    let topic_id = sample_topic().topic_id;
    DescribeShareGroupOffsetsResponse::default()
        .with_throttle_time_ms(12)
        .with_groups(vec![
            DescribeShareGroupOffsetsResponseGroup::default()
                .with_group_id(GroupId(StrBytes::from_static_str("share-g")))
                .with_topics(vec![
                    DescribeShareGroupOffsetsResponseTopic::default()
                        .with_topic_name(TopicName(StrBytes::from_static_str("orders")))
                        .with_topic_id(topic_id)
                        .with_partitions(vec![
                            offsets_partition(0, 100, None)
                                .with_unknown_tagged_field(3, Bytes::from_static(b"xyz")),
                            offsets_partition(2, -1, Some((3, "unknown partition"))),
                        ]),
                    DescribeShareGroupOffsetsResponseTopic::default()
                        .with_topic_name(TopicName(StrBytes::from_static_str("ünïcode")))
                        .with_partitions(vec![offsets_partition(5, 0, None)]),
                ]),
            DescribeShareGroupOffsetsResponseGroup::default()
                .with_group_id(GroupId(StrBytes::from_static_str("gone")))
                .with_error_code(69)
                .with_error_message(Some(StrBytes::from_static_str("no such group"))),
        ])
}

fn sample_offsets_response() -> DescribeShareGroupOffsetsResponseWire {
    DescribeShareGroupOffsetsResponseWire {
        body: sample_offsets_body(),
        lags: vec![vec![vec![40, 0], vec![1 << 40]]],
    }
}

/// DescribeShareGroupOffsetsResponse written field by field from its JSON
/// spec, at v0 (`lags` None) or v1 (Lag after LeaderEpoch). Two groups:
/// "g1" with topic "t" (TOPIC_A) of partitions 0 and 1, then "g2" failed
/// (GROUP_ID_NOT_FOUND) with no topics; an unknown tagged field on
/// partition 1 and one on the response.
fn hand_offsets_response(lags: Option<[i64; 2]>) -> Bytes {
    let mut h = Hand::default()
        .i32(0) // ThrottleTimeMs
        .array(2) // Groups
        .string(Some("g1")) //   GroupId
        .array(1) //   Topics
        .string(Some("t")) //     TopicName
        .raw(&TOPIC_A) //     TopicId
        .array(2) //     Partitions
        .i32(0) //       PartitionIndex
        .i64(500) //       StartOffset
        .i32(3); //       LeaderEpoch
    if let Some([lag, _]) = lags {
        h = h.i64(lag); //       Lag (v1+)
    }
    h = h
        .i16(0) //       ErrorCode
        .string(None) //       ErrorMessage
        .no_tags()
        .i32(1) //       PartitionIndex
        .i64(-1) //       StartOffset
        .i32(-1); //       LeaderEpoch
    if let Some([_, lag]) = lags {
        h = h.i64(lag); //       Lag (v1+)
    }
    h.i16(3) //       ErrorCode
        .string(Some("no state")) //       ErrorMessage
        .uvarint(1) //       one unknown tagged field
        .uvarint(9) //         tag
        .uvarint(3) //         size
        .raw(b"abc")
        .no_tags() //     topic tags
        .i16(0) //   ErrorCode
        .string(None) //   ErrorMessage
        .no_tags() //   group tags
        .string(Some("g2")) //   GroupId
        .array(0) //   Topics
        .i16(69) //   ErrorCode (GROUP_ID_NOT_FOUND)
        .string(Some("not a share group")) //   ErrorMessage
        .no_tags() //   group tags
        .uvarint(1) // one unknown tagged field on the response
        .uvarint(0) //   tag
        .uvarint(0) //   size
        .bytes()
}

fn check_hand_offsets(wire: &DescribeShareGroupOffsetsResponseWire) {
    let b = &wire.body;
    assert_eq!(b.throttle_time_ms, 0);
    assert_eq!(b.groups.len(), 2);
    let g1 = &b.groups[0];
    assert_eq!(g1.group_id.as_str(), "g1");
    assert_eq!((g1.error_code, g1.error_message.is_none()), (0, true));
    assert_eq!(g1.topics.len(), 1);
    let t = &g1.topics[0];
    assert_eq!(t.topic_name.as_str(), "t");
    assert_eq!(t.topic_id.as_bytes(), &TOPIC_A);
    assert_eq!(t.partitions.len(), 2);
    let (p0, p1) = (&t.partitions[0], &t.partitions[1]);
    assert_eq!(
        (p0.partition_index, p0.start_offset, p0.leader_epoch),
        (0, 500, 3)
    );
    assert_eq!((p0.error_code, p0.error_message.is_none()), (0, true));
    assert!(p0.unknown_tagged_fields.is_empty());
    assert_eq!(
        (p1.partition_index, p1.start_offset, p1.leader_epoch),
        (1, -1, -1)
    );
    assert_eq!(p1.error_code, 3);
    assert_eq!(
        p1.error_message.as_ref().map(|m| m.as_str()),
        Some("no state")
    );
    assert_eq!(
        p1.unknown_tagged_fields.get(&9).map(|v| &v[..]),
        Some(&b"abc"[..])
    );
    let g2 = &b.groups[1];
    assert_eq!(g2.group_id.as_str(), "g2");
    assert!(g2.topics.is_empty());
    assert_eq!(g2.error_code, 69);
    assert_eq!(
        g2.error_message.as_ref().map(|m| m.as_str()),
        Some("not a share group")
    );
    assert_eq!(b.unknown_tagged_fields.get(&0).map(|v| v.len()), Some(0));
}

#[test]
fn describe_share_group_offsets_request_is_laid_out_as_v0_at_both_versions() {
    let request = sample_offsets_request();
    let v0 = encode(&request, 0);
    assert_eq!(v0, encode(&request.0, 0), "kafka-protocol's own v0 bytes");
    assert_eq!(encode(&request, 1), v0, "v1 is laid out as v0");
    for version in [0, 1] {
        assert_eq!(
            decode::<DescribeShareGroupOffsetsRequestWire>(&v0, version),
            request
        );
    }
    // Written by hand from DescribeShareGroupOffsetsRequest.json.
    let hand = Hand::default()
        .array(2) // Groups
        .string(Some("share-g")) //   GroupId
        .array(1) //   Topics (nullable)
        .string(Some("orders")) //     TopicName
        .array(3) //     Partitions
        .i32(0)
        .i32(2)
        .i32(7)
        .no_tags()
        .no_tags()
        .string(Some("other")) //   GroupId
        .uvarint(0) //   Topics: null
        .no_tags()
        .no_tags() // request tags
        .bytes();
    assert_eq!(v0, hand);
    every_prefix_fails::<DescribeShareGroupOffsetsRequestWire>(&hand, 1);
    for version in [-1, 2] {
        assert!(request.encode(&mut BytesMut::new(), version).is_err());
        assert!(request.compute_size(version).is_err());
        let err = DescribeShareGroupOffsetsRequestWire::decode(&mut hand.clone(), version)
            .expect_err("unsupported version");
        assert!(err.to_string().contains("not supported"), "{err}");
    }
}

#[test]
fn describe_share_group_offsets_response_v0_is_kafka_protocols_encoding() {
    let wire = sample_offsets_response();
    let v0 = encode(&wire, 0);
    // Lag is ignorable: v0 drops it, the bytes are kafka-protocol's.
    assert_eq!(v0, encode(&wire.body, 0));
    let default = DescribeShareGroupOffsetsResponseWire::default();
    assert_eq!(
        encode(&default, 0),
        encode(&DescribeShareGroupOffsetsResponse::default(), 0)
    );
    // Decoding v0: the body kafka-protocol reads, no lag known.
    let back: DescribeShareGroupOffsetsResponseWire = decode(&v0, 0);
    assert_eq!(
        back.body,
        decode::<DescribeShareGroupOffsetsResponse>(&v0, 0)
    );
    assert_eq!(back.body, wire.body);
    assert!(back.lags.is_empty());
    assert_eq!(
        back,
        DescribeShareGroupOffsetsResponseWire::from(wire.body.clone())
    );
    assert_ne!(back, wire, "the lags differ");
    // The hand-written v0 layout reads alike through both decoders.
    let hand = hand_offsets_response(None);
    let back: DescribeShareGroupOffsetsResponseWire = decode(&hand, 0);
    check_hand_offsets(&back);
    assert_eq!(
        back.body,
        decode::<DescribeShareGroupOffsetsResponse>(&hand, 0)
    );
    assert_eq!(encode(&back, 0), hand);
}

#[test]
fn describe_share_group_offsets_response_round_trips_at_v1() {
    let wire = sample_offsets_response();
    let back: DescribeShareGroupOffsetsResponseWire = decode(&encode(&wire, 1), 1);
    assert_eq!(back, wire);
    // Decoding fills the lags to the body's shape, missing ones as -1.
    assert_eq!(back.lags, vec![vec![vec![40, 0], vec![1 << 40]], vec![]]);
    assert_eq!(back.lag(0, 0, 1), 0);
    assert_eq!(back.lag(0, 1, 0), 1 << 40);
    let back: DescribeShareGroupOffsetsResponseWire = decode(
        &encode(&DescribeShareGroupOffsetsResponseWire::default(), 1),
        1,
    );
    assert_eq!(back, DescribeShareGroupOffsetsResponseWire::default());
    // v1 is v0 plus eight bytes a partition.
    let size = |v| wire.compute_size(v).expect("sizes");
    assert_eq!(size(1), size(0) + 3 * 8);
}

#[test]
fn hand_encoded_describe_share_group_offsets_response_v1_decodes_to_its_fields() {
    let hand = hand_offsets_response(Some([1234, -1]));
    let wire: DescribeShareGroupOffsetsResponseWire = decode(&hand, 1);
    check_hand_offsets(&wire);
    assert_eq!(wire.lags, vec![vec![vec![1234, -1]], vec![]]);
    assert_eq!(wire.lag(0, 0, 0), 1234);
    assert_eq!(wire.lag(0, 0, 1), -1);
    // The encoder writes exactly the spec's bytes back.
    assert_eq!(encode(&wire, 1), hand);
    // The same body at v0 is the spec's v0 layout.
    assert_eq!(encode(&wire, 0), hand_offsets_response(None));
    // Decoding leaves what follows the message, on any ByteBuf.
    let mut with_tail = BytesMut::from(&hand[..]);
    with_tail.extend_from_slice(b"TAIL");
    let mut buf = with_tail.freeze();
    check_hand_offsets(
        &DescribeShareGroupOffsetsResponseWire::decode(&mut buf, 1).expect("decodes"),
    );
    assert_eq!(&buf[..], b"TAIL");
    let mut slice: &[u8] = &hand;
    let from_slice = DescribeShareGroupOffsetsResponseWire::decode(&mut slice, 1).expect("slice");
    assert_eq!(from_slice, wire);
    assert!(slice.is_empty());
}

#[test]
fn missing_lags_encode_as_minus_one_and_extra_lags_are_refused() {
    let mut wire = DescribeShareGroupOffsetsResponseWire::from(decode::<
        DescribeShareGroupOffsetsResponse,
    >(
        &hand_offsets_response(None), 0
    ));
    // No lags at all: every Lag is the default.
    assert_eq!(encode(&wire, 1), hand_offsets_response(Some([-1, -1])));
    // Only the first partition's, set through the builder.
    wire.set_lag(0, 0, 0, 77);
    assert_eq!(wire.lags, vec![vec![vec![77]]]);
    assert_eq!(encode(&wire, 1), hand_offsets_response(Some([77, -1])));
    // Only the second's: the first is filled with the default.
    let mut second = DescribeShareGroupOffsetsResponseWire::from(wire.body.clone());
    second.set_lag(0, 0, 1, 5);
    assert_eq!(second.lags, vec![vec![vec![-1, 5]]]);
    assert_eq!(encode(&second, 1), hand_offsets_response(Some([-1, 5])));
    // Empty inner vectors are as good as none.
    second.lags = vec![vec![], vec![]];
    assert_eq!(encode(&second, 1), hand_offsets_response(Some([-1, -1])));
    assert_eq!(
        second,
        DescribeShareGroupOffsetsResponseWire::from(second.body.clone())
    );

    // A lag for a partition, topic or group the body lacks is a bug.
    for (lags, names) in [
        (vec![vec![vec![1, 2, 3]]], "partitions in group 0 topic 0"),
        (vec![vec![vec![], vec![1]]], "topics in group 0"),
        (vec![vec![], vec![vec![1]]], "topics in group 1"),
        (vec![vec![], vec![], vec![]], "groups"),
    ] {
        let bad = DescribeShareGroupOffsetsResponseWire {
            body: wire.body.clone(),
            lags,
        };
        for version in [0, 1] {
            let mut buf = BytesMut::new();
            let err = bad.encode(&mut buf, version).expect_err("lags out of step");
            assert!(err.to_string().contains(names), "{err}");
            assert!(buf.is_empty(), "nothing written on error");
            assert!(bad.compute_size(version).is_err());
        }
    }
}

#[test]
fn describe_share_group_offsets_response_refuses_what_kafka_refuses_to_write() {
    let long = StrBytes::from_string("x".repeat(0x8000));
    let mut wire = sample_offsets_response();
    wire.body.groups[0].topics[0].partitions[1].error_message = Some(long.clone());
    for version in [0, 1] {
        let mut buf = BytesMut::new();
        let err = wire.encode(&mut buf, version).expect_err("too long");
        assert!(err.to_string().contains("ErrorMessage"), "{err}");
        assert!(buf.is_empty());
    }
    // 0x7fff bytes is the limit, and fits.
    let longest = StrBytes::from_string("x".repeat(0x7fff));
    wire.body.groups[0].group_id = GroupId(longest);
    wire.body.groups[0].topics[0].partitions[1].error_message = None;
    let back: DescribeShareGroupOffsetsResponseWire = decode(&encode(&wire, 1), 1);
    assert_eq!(back, wire);
    // A negative tag cannot be written.
    let mut wire = sample_offsets_response();
    wire.body.unknown_tagged_fields.insert(-2, Bytes::new());
    let err = wire.compute_size(1).expect_err("negative tag");
    assert!(err.to_string().contains("negative tag"), "{err}");
    for version in [-1, 2] {
        let err = sample_offsets_response()
            .encode(&mut BytesMut::new(), version)
            .expect_err("unsupported");
        assert!(err.to_string().contains("not supported"), "{err}");
        let err = DescribeShareGroupOffsetsResponseWire::decode(
            &mut hand_offsets_response(None),
            version,
        )
        .expect_err("unsupported");
        assert!(err.to_string().contains("not supported"), "{err}");
    }
}

#[test]
fn truncated_describe_share_group_offsets_responses_are_errors() {
    every_prefix_fails::<DescribeShareGroupOffsetsResponseWire>(
        &hand_offsets_response(Some([1, 2])),
        1,
    );
    every_prefix_fails::<DescribeShareGroupOffsetsResponseWire>(&hand_offsets_response(None), 0);
    every_prefix_fails::<DescribeShareGroupOffsetsResponseWire>(
        &encode(&sample_offsets_response(), 1),
        1,
    );
    // v0 bytes read as v1 run out (eight more bytes a partition).
    assert!(
        DescribeShareGroupOffsetsResponseWire::decode(&mut hand_offsets_response(None), 1).is_err()
    );
    // A count the bytes left cannot hold is refused up front: a cut in the
    // first partition's Lag shows as too many Partitions.
    let hand = hand_offsets_response(Some([1, 2]));
    let lag_at = 4 + 1 + 3 + 1 + 2 + 16 + 1 + 4 + 8 + 4;
    let err = DescribeShareGroupOffsetsResponseWire::decode(&mut hand.slice(..lag_at + 7), 1)
        .expect_err("cut in Lag");
    assert!(err.to_string().contains("truncated in Partitions"), "{err}");
    // Past that check, the error names the field it stopped in: here the
    // first partition's long ErrorMessage leaves room for the count.
    let head = Hand::default()
        .i32(0)
        .array(1)
        .string(Some("g"))
        .array(1)
        .string(Some("t"))
        .raw(&TOPIC_A)
        .array(2)
        .i32(0)
        .i64(0)
        .i32(0)
        .i64(9) // Lag
        .i16(0)
        .string(Some("a long enough error message"))
        .no_tags()
        .i32(1)
        .i64(0)
        .i32(0);
    let cut = head.0.len();
    let whole = head.i64(10).i16(0).string(None).no_tags().bytes();
    for (len, field) in [
        (cut + 7, "truncated in Lag"),
        (cut + 9, "truncated in ErrorCode"),
    ] {
        let err = DescribeShareGroupOffsetsResponseWire::decode(&mut whole.slice(..len), 1)
            .expect_err("cut");
        assert!(err.to_string().contains(field), "{err}");
        assert!(err.to_string().contains("v1"), "{err}");
    }
}

#[test]
fn hostile_describe_share_group_offsets_responses_are_errors_without_allocating() {
    fn err(bytes: Bytes, version: i16) -> String {
        DescribeShareGroupOffsetsResponseWire::decode(&mut bytes.clone(), version)
            .expect_err("hostile input")
            .to_string()
    }
    // Groups announcing u32::MAX - 1 entries in a few bytes.
    let huge = Hand::default()
        .i32(0)
        .raw(&[0xff, 0xff, 0xff, 0xff, 0x0f])
        .raw(&[0; 64])
        .bytes();
    let e = err(huge, 1);
    assert!(
        e.contains("Groups") && e.contains("entries announced"),
        "{e}"
    );
    // Partitions announcing more than the bytes left hold (3 × 28 > 80).
    let partitions = Hand::default()
        .i32(0)
        .array(1)
        .string(Some("g"))
        .array(1)
        .string(Some("t"))
        .raw(&TOPIC_A)
        .array(3)
        .raw(&[0; 80])
        .bytes();
    let e = err(partitions.clone(), 1);
    assert!(e.contains("Partitions"), "{e}");
    // At v0 the same three fit (3 × 20 ≤ 80): all-zero partitions are valid.
    let mut buf = partitions.clone();
    let v0 = DescribeShareGroupOffsetsResponseWire::decode(&mut buf, 0).expect("fits at v0");
    assert_eq!(v0.body.groups[0].topics[0].partitions.len(), 3);
    assert_eq!(
        buf.len(),
        80 - 3 * 20 - 6,
        "the bytes after the message are left"
    );
    // A varint of six bytes.
    let e = err(
        Hand::default().i32(0).raw(&[0x80; 6]).raw(&[0; 8]).bytes(),
        1,
    );
    assert!(e.contains("longer than 5 bytes"), "{e}");
    // A string longer than Kafka allows, and one longer than what is left.
    let e = err(
        Hand::default()
            .i32(0)
            .array(1)
            .uvarint(0x8001)
            .raw(&[b'a'; 64])
            .bytes(),
        1,
    );
    assert!(e.contains("GroupId has invalid length 32768"), "{e}");
    let e = err(
        Hand::default()
            .i32(0)
            .array(1)
            .uvarint(100)
            .raw(&[b'a'; 10])
            .bytes(),
        1,
    );
    assert!(
        e.contains("truncated in GroupId (99 bytes announced"),
        "{e}"
    );
    // Null where the spec allows none.
    let e = err(Hand::default().i32(0).uvarint(0).no_tags().bytes(), 1);
    assert!(e.contains("Groups is null"), "{e}");
    let e = err(
        Hand::default()
            .i32(0)
            .array(1)
            .string(None)
            .raw(&[0; 8])
            .bytes(),
        1,
    );
    assert!(e.contains("GroupId is null"), "{e}");
    // Invalid UTF-8.
    let e = err(
        Hand::default()
            .i32(0)
            .array(1)
            .uvarint(3)
            .raw(&[0xff, 0xfe])
            .raw(&[0; 8])
            .bytes(),
        1,
    );
    assert!(e.contains("GroupId is not UTF-8"), "{e}");
    // Tagged fields: a huge count, a huge size, a tag past i32::MAX.
    let e = err(Hand::default().i32(0).array(0).uvarint(u32::MAX).bytes(), 1);
    assert!(e.contains("tagged fields of the response"), "{e}");
    let e = err(
        Hand::default()
            .i32(0)
            .array(0)
            .uvarint(1)
            .uvarint(1)
            .uvarint(1 << 30)
            .bytes(),
        1,
    );
    assert!(e.contains("tagged fields of the response"), "{e}");
    let e = err(
        Hand::default()
            .i32(0)
            .array(0)
            .uvarint(1)
            .uvarint(u32::MAX)
            .uvarint(0)
            .bytes(),
        1,
    );
    assert!(e.contains("out of range"), "{e}");
}

#[test]
fn describe_share_group_offsets_frames_at_v0_and_v1() {
    // Requests: through encode_frame and decode_request at both versions.
    for version in [0, 1] {
        let request = Request::DescribeShareGroupOffsets(sample_offsets_request());
        let frame = request.encode_frame(version, 31).expect("encodes");
        // Flexible request header v2: the client id, then empty tags.
        let header_len = 2 + 2 + 4 + 2 + "chronik-seed".len() + 1;
        assert_eq!(
            frame.slice(header_len..),
            encode(&sample_offsets_request().0, 0)
        );
        let decoded = decode_request(frame.clone()).expect("decodes");
        assert_eq!(decoded.api_key, ApiKey::DescribeShareGroupOffsets);
        assert_eq!(decoded.version(), version);
        assert!(same_request(&decoded.body, &request));
        for len in header_len..frame.len() {
            assert!(matches!(
                decode_request(frame.slice(..len)),
                Err(RequestError::Malformed {
                    api: "DescribeShareGroupOffsets",
                    ..
                })
            ));
        }
    }
    // Responses: v1 carries the lags, v0 drops them.
    let wire = sample_offsets_response();
    let response = Response::DescribeShareGroupOffsets(wire.clone());
    let v1 = encode_response(8, 1, &response).expect("encodes");
    let back: DescribeShareGroupOffsetsResponseWire = decode(&response_body(&v1, 8), 1);
    assert_eq!(back, wire);
    let v0 = encode_response(8, 0, &response).expect("encodes");
    let body = response_body(&v0, 8);
    assert_eq!(body, encode(&wire.body, 0));
    let back: DescribeShareGroupOffsetsResponseWire = decode(&body, 0);
    assert_eq!(back.body, wire.body);
    assert_eq!(back.lag(0, 0, 0), -1);
    // A response whose lags are out of step is an encoding error, not a panic.
    let mut bad = wire;
    bad.lags.push(vec![vec![1]; 5]);
    assert!(encode_response(8, 1, &Response::DescribeShareGroupOffsets(bad)).is_err());
}
