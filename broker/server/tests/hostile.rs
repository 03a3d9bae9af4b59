//! Hostile clients on the Kafka port (issue: broker hardening). Each test
//! names the attack it makes, speaks raw bytes where a real client would
//! refuse to send the input, and checks that the broker bounds it: other
//! clients are still served, nothing acknowledged is lost, a restart still
//! works, RSS stays bounded.
//!
//! Malformed framing and decoding attacks are in `malformed_input.rs`; the
//! raft and HTTP ports are in `hostile_ports.rs`.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use common::wire::{self, Reply};
use common::Broker;

const REPLY_TIMEOUT: Duration = Duration::from_secs(5);

/// ApiVersions v0 on a fresh connection must be answered within `within`.
fn api_versions_answers(broker: &Broker, within: Duration) -> Result<Duration> {
    let started = Instant::now();
    let mut stream = wire::connect(broker.kafka_addr())?;
    ensure!(
        wire::send(&mut stream, &wire::api_versions_v0(7))?,
        "broker closed a fresh connection"
    );
    match wire::read_reply(&mut stream, within)? {
        Reply::Frame(frame) => {
            ensure!(wire::correlation_id(&frame)? == 7, "wrong correlation id");
            Ok(started.elapsed())
        }
        other => bail!("ApiVersions on a second connection: {other:?} within {within:?}"),
    }
}

/// Attack: announce a request as large as the whole produce-memory budget
/// (a 4-byte size prefix and a little of the body) and never send the rest.
/// Small requests on other connections are served at once. Each stalled
/// connection is closed when its body has not arrived within the read
/// timeout (time spent waiting for the budget excluded), returning what it
/// reserved to the next.
#[test]
fn size_prefix_without_body_neither_stalls_others_nor_lingers() -> Result<()> {
    let broker = Broker::start(&[
        "--produce-profile",
        "low-latency",
        "--request-read-timeout-ms",
        "1500",
    ])?;
    let mut stalled = Vec::new();
    for _ in 0..4 {
        let mut s = wire::connect(broker.kafka_addr())?;
        // 16 MiB: the low-latency profile's whole budget.
        s.write_all(&(16 * 1024 * 1024i32).to_be_bytes())?;
        // Part of a body, then nothing more.
        s.write_all(&[0u8; 1000])?;
        stalled.push(s);
    }
    let took = api_versions_answers(&broker, Duration::from_secs(2))?;
    ensure!(
        took < Duration::from_secs(2),
        "answered only after {took:?}"
    );
    for s in &mut stalled {
        let reply = wire::read_reply(s, Duration::from_secs(10))?;
        ensure!(
            reply == Reply::Closed,
            "a stalled request's connection was not closed: {reply:?}"
        );
    }
    let metrics = broker.metrics_text()?;
    ensure!(
        metrics.contains("reason=\"request_read_timeout\""),
        "no request_read_timeout close counted"
    );
    Ok(())
}

/// Attack: hold many half-sent large requests at once (each body partly
/// sent, far more than the budget in total). Reservations are
/// all-or-nothing, so the broker stops reading the connections it cannot
/// pay for; small requests are still answered and RSS stays near the
/// budget.
#[test]
fn many_half_sent_large_requests_neither_stall_small_ones_nor_exceed_the_budget() -> Result<()> {
    let broker = Broker::start(&[
        "--produce-profile",
        "low-latency",
        "--request-read-timeout-ms",
        "20000",
    ])?;
    let mut held = Vec::new();
    let chunk = vec![0u8; 256 * 1024];
    for _ in 0..40 {
        let mut s = wire::connect(broker.kafka_addr())?;
        s.write_all(&(8 * 1024 * 1024i32).to_be_bytes())?;
        // 512 KiB each: 20 MiB in total, more than the 16 MiB budget.
        let _ = s.write_all(&chunk);
        let _ = s.write_all(&chunk);
        held.push(s);
    }
    std::thread::sleep(Duration::from_millis(500));
    api_versions_answers(&broker, Duration::from_secs(2))
        .context("with the budget taken by half-sent bodies")?;
    let rss = broker.rss_bytes()?;
    ensure!(
        rss < 256 << 20,
        "RSS {} MiB with 20 MiB half-sent",
        rss >> 20
    );
    drop(held);
    api_versions_answers(&broker, Duration::from_secs(2))
        .context("after the half-sent requests' connections closed")?;
    Ok(())
}

/// Attack: open connections and leave them idle. `connections.max.idle.ms`
/// closes them.
#[test]
fn idle_connections_are_closed_after_connections_max_idle_ms() -> Result<()> {
    let broker = Broker::start(&["--connections-max-idle-ms", "700"])?;
    let mut idle = wire::connect(broker.kafka_addr())?;
    ensure!(wire::send(&mut idle, &wire::api_versions_v0(1))?);
    ensure!(
        matches!(wire::read_reply(&mut idle, REPLY_TIMEOUT)?, Reply::Frame(_)),
        "no ApiVersions answer"
    );
    let started = Instant::now();
    let reply = wire::read_reply(&mut idle, Duration::from_secs(5))?;
    ensure!(
        reply == Reply::Closed,
        "idle connection still open after {:?}: {reply:?}",
        started.elapsed()
    );
    Ok(())
}

/// Attack: open more connections from one address than
/// `max.connections.per.ip` allows. The excess ones are closed at once;
/// those within the cap keep working.
#[test]
fn connections_over_max_connections_per_ip_are_closed() -> Result<()> {
    let broker = Broker::start(&["--max-connections-per-ip", "4"])?;
    // /ready and the harness may hold none on the Kafka port.
    let mut within: Vec<_> = (0..4)
        .map(|_| wire::connect(broker.kafka_addr()))
        .collect::<Result<_>>()?;
    for (i, s) in within.iter_mut().enumerate() {
        ensure!(wire::send(s, &wire::api_versions_v0(i as i32))?);
        ensure!(
            matches!(wire::read_reply(s, REPLY_TIMEOUT)?, Reply::Frame(_)),
            "connection {i} within the cap not served"
        );
    }
    let mut excess = wire::connect(broker.kafka_addr())?;
    let _ = wire::send(&mut excess, &wire::api_versions_v0(9));
    let reply = wire::read_reply(&mut excess, REPLY_TIMEOUT)?;
    ensure!(
        reply == Reply::Closed,
        "the fifth connection from one IP was served: {reply:?}"
    );
    ensure!(
        broker
            .metrics_text()?
            .contains("reason=\"max_connections_per_ip\""),
        "refusal not counted"
    );
    drop(within.pop());
    // A place is free again (the close is processed asynchronously).
    let deadline = Instant::now() + REPLY_TIMEOUT;
    loop {
        if api_versions_answers(&broker, Duration::from_secs(1)).is_ok() {
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "no connection accepted after one closed"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

// ---- record batches: validation, decompression bombs, internal topics ----

const INVALID_TOPIC_EXCEPTION: i16 = 17;
const CORRUPT_MESSAGE: i16 = 2;
const INVALID_RECORD: i16 = 87;
const INVALID_REQUEST: i16 = 42;
const INVALID_GROUP_ID: i16 = 24;

/// A CRC-valid RecordBatch v2 with base offset `base_offset`, compression
/// `codec`, the given header counts and `records` as its records section.
fn raw_batch(
    base_offset: i64,
    codec: i16,
    last_offset_delta: i32,
    records_count: i32,
    records: &[u8],
) -> Vec<u8> {
    let mut covered = Vec::new();
    covered.extend_from_slice(&codec.to_be_bytes());
    covered.extend_from_slice(&last_offset_delta.to_be_bytes());
    covered.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
    covered.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
    covered.extend_from_slice(&(-1i64).to_be_bytes());
    covered.extend_from_slice(&(-1i16).to_be_bytes());
    covered.extend_from_slice(&(-1i32).to_be_bytes());
    covered.extend_from_slice(&records_count.to_be_bytes());
    covered.extend_from_slice(records);
    let mut batch = Vec::new();
    batch.extend_from_slice(&base_offset.to_be_bytes());
    batch.extend_from_slice(&((4 + 1 + 4 + covered.len()) as i32).to_be_bytes());
    batch.extend_from_slice(&0i32.to_be_bytes());
    batch.push(2);
    batch.extend_from_slice(&wire::crc32c(&covered).to_be_bytes());
    batch.extend(covered);
    batch
}

/// A zstd frame of RLE blocks inflating to `gib` GiB of zeros, built
/// streaming (it never exists uncompressed).
fn zstd_bomb(gib: usize) -> Vec<u8> {
    let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 1).expect("zstd encoder");
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..gib * 1024 {
        encoder.write_all(&zeros).expect("compress");
    }
    encoder.finish().expect("zstd")
}

/// Produce v3 of `batch` to partition 0 of `topic`; returns the error code.
fn produce_raw(broker: &Broker, topic: &str, records: &[u8]) -> Result<i16> {
    let mut stream = wire::connect(broker.kafka_addr())?;
    ensure!(wire::send(
        &mut stream,
        &wire::produce_v3(11, 1, topic, 0, records)
    )?);
    match wire::read_reply(&mut stream, Duration::from_secs(20))? {
        Reply::Frame(frame) => Ok(wire::decode_produce_v3(&frame)?.1[0].error_code),
        other => bail!("produce got {other:?}"),
    }
}

fn create(broker: &Broker, topic: &str) -> Result<()> {
    common::kafka_client::Client::connect(broker)?.create_topic(topic)
}

/// Attack: produce to `__consumer_offsets` (with a gzip batch, which used
/// to brick the next start) and delete it. Both refused; committed offsets
/// survive.
#[test]
fn internal_topics_refuse_produce_and_delete() -> Result<()> {
    use kafka_protocol::messages::{DeleteTopicsRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let broker = Broker::start(&[])?;
    let batch = raw_batch(0, 0, 0, 1, &single_record(b"x"));
    ensure!(
        produce_raw(&broker, "__consumer_offsets", &batch)? == INVALID_TOPIC_EXCEPTION,
        "produce to __consumer_offsets accepted"
    );
    let mut client = common::kafka_client::Client::connect(&broker)?;
    let response = client.send(
        &DeleteTopicsRequest::default()
            .with_topic_names(vec![TopicName(StrBytes::from_static_str(
                "__consumer_offsets",
            ))])
            .with_timeout_ms(5000),
        4,
    )?;
    ensure!(
        response.responses[0].error_code == INVALID_TOPIC_EXCEPTION,
        "DeleteTopics __consumer_offsets: {:?}",
        response.responses[0]
    );
    ensure!(
        broker.data_dir().join("__consumer_offsets-0").is_dir(),
        "the offsets topic's directory is gone"
    );
    Ok(())
}

/// One uncompressed record (offset delta 0, no key) with `value`.
fn single_record(value: &[u8]) -> Vec<u8> {
    record_with_key(None, value)
}

/// One uncompressed record (offset delta 0, no headers).
fn record_with_key(key: Option<&[u8]>, value: &[u8]) -> Vec<u8> {
    let mut rec = vec![0u8];
    rec.extend(wire::signed_varint(0));
    rec.extend(wire::signed_varint(0));
    match key {
        Some(key) => {
            rec.extend(wire::signed_varint(key.len() as i64));
            rec.extend_from_slice(key);
        }
        None => rec.extend(wire::signed_varint(-1)),
    }
    rec.extend(wire::signed_varint(value.len() as i64));
    rec.extend_from_slice(value);
    rec.extend(wire::signed_varint(0));
    let mut out = wire::signed_varint(rec.len() as i64);
    out.extend(rec);
    out
}

/// Attack: a 61-byte-header batch claiming an offset range of 2^31 for one
/// record (Kafka: "inconsistent batch offset range"), a record count larger
/// than its records, and two batches in one Produce v3 partition.
#[test]
fn batches_kafkas_validator_refuses_are_refused() -> Result<()> {
    let broker = Broker::start(&[])?;
    create(&broker, "t")?;
    let record = single_record(b"v");
    let burn = raw_batch(0, 0, i32::MAX - 1, 1, &record);
    ensure!(
        produce_raw(&broker, "t", &burn)? == INVALID_RECORD,
        "offset range 2^31 with one record accepted"
    );
    let short = raw_batch(0, 0, 1, 2, &record);
    ensure!(
        produce_raw(&broker, "t", &short)? == INVALID_RECORD,
        "two records claimed, one present: accepted"
    );
    let ok = raw_batch(0, 0, 0, 1, &record);
    let mut two = ok.clone();
    two.extend_from_slice(&ok);
    ensure!(
        produce_raw(&broker, "t", &two)? == INVALID_RECORD,
        "two batches in one Produce v3 partition accepted"
    );
    ensure!(
        produce_raw(&broker, "t", &ok)? == 0,
        "a valid batch refused"
    );
    let end = common::kafka_client::Client::connect(&broker)?.log_end_offset("t")?;
    ensure!(
        end == 1,
        "log end offset {end}: refused batches burned offsets"
    );
    Ok(())
}

/// Attack: a CRC-valid zstd batch under 1 MiB on the wire that inflates to
/// 4 GiB. Produce refuses it (CORRUPT_MESSAGE) without inflating past the
/// bound; stored anyway (written into the log behind the broker's back, as
/// an old version would have accepted it), ListOffsets by timestamp
/// answers with RSS bounded.
#[test]
fn a_zstd_bomb_is_refused_and_never_inflated_past_the_bound() -> Result<()> {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let mut broker = Broker::start(&[])?;
    create(&broker, "bombs")?;
    let bomb = zstd_bomb(4);
    ensure!(bomb.len() < 1 << 20, "bomb is {} bytes", bomb.len());
    let batch = raw_batch(0, 4, 0, 1, &bomb);
    let started = Instant::now();
    ensure!(
        produce_raw(&broker, "bombs", &batch)? == CORRUPT_MESSAGE,
        "zstd bomb accepted"
    );
    ensure!(
        broker.rss_bytes()? < 512 << 20,
        "RSS {} MiB after refusing the bomb",
        broker.rss_bytes()? >> 20
    );
    println!(
        "bomb ({} KiB) refused in {:?}",
        bomb.len() >> 10,
        started.elapsed()
    );

    // Store it behind the broker's back and recover it (kill -9: the
    // recovery scan takes every CRC-valid batch).
    broker.kill_hard()?;
    let segment = broker
        .data_dir()
        .join("bombs-0")
        .join(format!("{:020}.log", 0));
    std::fs::OpenOptions::new()
        .append(true)
        .open(&segment)
        .with_context(|| segment.display().to_string())?
        .write_all(&batch)?;
    broker.restart()?;
    let mut client = common::kafka_client::Client::connect(&broker)?;
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("bombs")))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(0)])]);
    for _ in 0..3 {
        let response = client.send(&request, 7)?;
        let p = &response.topics[0].partitions[0];
        ensure!(
            p.error_code == 0 && p.offset == 0,
            "ListOffsets by timestamp over the bomb: {p:?}"
        );
    }
    let rss = broker.rss_bytes()?;
    ensure!(
        rss < 512 << 20,
        "RSS {} MiB after ListOffsets over a stored bomb",
        rss >> 20
    );
    Ok(())
}

/// Attack: a Fetch with no byte bound (max_bytes -1, partition_max_bytes
/// 2^31-1) naming one partition many times. Duplicates are refused, the
/// response is capped at the broker's fetch.max.bytes.
#[test]
fn fetch_bounds_hold_against_unbounded_and_duplicate_partitions() -> Result<()> {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{FetchRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let broker = Broker::start(&["--fetch-max-bytes", "1048576"])?;
    create(&broker, "big")?;
    let value = vec![7u8; 200 * 1024];
    for _ in 0..20 {
        ensure!(
            produce_raw(
                &broker,
                "big",
                &raw_batch(0, 0, 0, 1, &single_record(&value))
            )? == 0,
            "setup produce failed"
        );
    }
    let partition = FetchPartition::default()
        .with_partition(0)
        .with_fetch_offset(0)
        .with_partition_max_bytes(i32::MAX);
    let request = FetchRequest::default()
        .with_max_bytes(-1)
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_static_str("big")))
            .with_partitions(vec![partition; 50])]);
    let response = common::kafka_client::Client::connect(&broker)?.send(&request, 12)?;
    let partitions = &response.responses[0].partitions;
    ensure!(partitions.len() == 50);
    let bytes: usize = partitions
        .iter()
        .filter_map(|p| p.records.as_ref())
        .map(|r| r.len())
        .sum();
    ensure!(
        bytes <= (1 << 20) + 256 * 1024,
        "response carried {bytes} record bytes with fetch.max.bytes 1 MiB"
    );
    ensure!(bytes > 0, "the first partition got nothing");
    ensure!(
        partitions[1..]
            .iter()
            .all(|p| p.error_code == INVALID_REQUEST),
        "a duplicate partition was served"
    );
    Ok(())
}

/// Attack: commit offsets under a group id longer than the stored key can
/// hold (it used to be truncated on disk, so a restart read back another
/// group's id).
#[test]
fn an_oversized_group_id_is_refused_not_truncated() -> Result<()> {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{GroupId, OffsetCommitRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let broker = Broker::start(&[])?;
    create(&broker, "t")?;
    let group = "g".repeat(70_000);
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(1)])]);
    let response = common::kafka_client::Client::connect(&broker)?.send(&request, 8)?;
    let code = response.topics[0].partitions[0].error_code;
    ensure!(
        code == INVALID_GROUP_ID,
        "70,000-byte group id commit answered {code}"
    );
    Ok(())
}

/// Commits offset `offset` for (group, "t", 0) with a simple (memberless) commit.
fn commit(broker: &Broker, group: &str, offset: i64) -> Result<()> {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{GroupId, OffsetCommitRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.into())))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])]);
    let response = common::kafka_client::Client::connect(broker)?.send(&request, 8)?;
    let code = response.topics[0].partitions[0].error_code;
    ensure!(code == 0, "commit answered {code}");
    Ok(())
}

fn committed(broker: &Broker, group: &str) -> Result<i64> {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    use kafka_protocol::messages::{GroupId, OffsetFetchRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.into())))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partition_indexes(vec![0])]));
    let response = common::kafka_client::Client::connect(broker)?.send(&request, 7)?;
    Ok(response.topics[0].partitions[0].committed_offset)
}

/// Damage an older broker (or a disk) could leave in `__consumer_offsets`:
/// a gzip batch (which used to fail replay: the broker never came up
/// again), a record with an undecodable key, and a CRC-valid zero-record
/// batch as the last batch (which used to loop forever). Start-up skips
/// them, counts them, and keeps every real commit.
#[test]
fn start_up_never_bricks_on_consumer_offsets_content() -> Result<()> {
    let mut broker = Broker::start(&[])?;
    create(&broker, "t")?;
    commit(&broker, "before", 5)?;
    let end =
        common::kafka_client::Client::connect(&broker)?.log_end_offset("__consumer_offsets")?;
    broker.kill_hard()?;

    let mut gzipped = flate_gzip(&single_record(b"not an offset record"));
    let gzip_batch = raw_batch(end, 1, 0, 1, &std::mem::take(&mut gzipped));
    let garbage_key = raw_batch(end + 1, 0, 0, 1, &record_with_key(Some(b"\xff\xfe"), b"v"));
    let empty = raw_batch(end + 2, 0, 0, 0, &[]);
    let segment = broker
        .data_dir()
        .join("__consumer_offsets-0")
        .join(format!("{:020}.log", 0));
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&segment)
        .with_context(|| segment.display().to_string())?;
    for batch in [&gzip_batch, &garbage_key, &empty] {
        file.write_all(batch)?;
    }
    drop(file);

    broker
        .restart()
        .context("restart over a damaged __consumer_offsets")?;
    ensure!(committed(&broker, "before")? == 5, "a real commit was lost");
    let metrics = common::prom::parse(&broker.metrics_text()?);
    let skipped = metrics
        .iter()
        .find(|s| s.name == "chronik_offsets_records_skipped_total")
        .map_or(0.0, |s| s.value);
    ensure!(skipped >= 2.0, "skipped records counted: {skipped}");
    // And the store still works after the damage.
    commit(&broker, "after", 9)?;
    broker.restart()?;
    ensure!(
        committed(&broker, "after")? == 9 && committed(&broker, "before")? == 5,
        "commits after the damage lost"
    );
    Ok(())
}

fn flate_gzip(data: &[u8]) -> Vec<u8> {
    use kafka_protocol::records::{Compression, RecordBatchEncoder, RecordEncodeOptions};
    // kafka-protocol's own gzip batch; its records section is what we want.
    let record = common::kafka_client::plain_record(0, bytes::Bytes::copy_from_slice(data));
    let mut out = bytes::BytesMut::new();
    RecordBatchEncoder::encode(
        &mut out,
        &[record],
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::Gzip,
        },
    )
    .expect("gzip batch");
    out[61..].to_vec()
}

// ---- caps: topics, partitions, partitions per request ----

const POLICY_VIOLATION: i16 = 44;

/// Attack: create a topic with 2^31-1 partitions, then more topics than the
/// broker allows, then auto-create through Metadata past the cap.
#[test]
fn topic_and_partition_caps_refuse_creation_with_policy_violation() -> Result<()> {
    use common::kafka_client::topic_metadata_request;
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::{CreateTopicsRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    // __consumer_offsets, __transaction_state and __share_group_state are
    // three topics with one partition each already.
    let broker = Broker::start(&["--max-broker-partitions", "10", "--max-topics", "6"])?;
    let mut client = common::kafka_client::Client::connect(&broker)?;
    let create = |name: &str, partitions: i32| {
        CreateTopicsRequest::default()
            .with_timeout_ms(5000)
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_string(name.into())))
                .with_num_partitions(partitions)
                .with_replication_factor(-1)])
    };
    let huge = client.send(&create("huge", i32::MAX), 5)?;
    ensure!(
        huge.topics[0].error_code == POLICY_VIOLATION,
        "2^31-1 partitions: {:?}",
        huge.topics[0]
    );
    for name in ["a", "b", "c"] {
        let r = client.send(&create(name, 2), 5)?;
        ensure!(
            r.topics[0].error_code == 0,
            "topic {name} within the caps refused: {:?}",
            r.topics[0]
        );
    }
    let fourth = client.send(&create("d", 1), 5)?;
    ensure!(
        fourth.topics[0].error_code == POLICY_VIOLATION,
        "a seventh topic (max 6): {:?}",
        fourth.topics[0]
    );
    let metadata = client.send(&topic_metadata_request("auto", true), 9)?;
    ensure!(
        metadata.topics[0].error_code == POLICY_VIOLATION,
        "auto-creation past the cap: {:?}",
        metadata.topics[0].error_code
    );
    ensure!(
        !broker.data_dir().join("huge-0").exists() && !broker.data_dir().join("auto-0").exists(),
        "a refused topic left files"
    );
    Ok(())
}

/// Attack: one ListOffsets request naming more partitions than
/// `--max-partitions-per-request`: the connection is closed before any
/// work; other connections are served.
#[test]
fn a_request_naming_too_many_partitions_is_refused() -> Result<()> {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let broker = Broker::start(&["--max-partitions-per-request", "100"])?;
    create(&broker, "t")?;
    let request = |n: i32| {
        ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(
                    (0..n)
                        .map(|i| {
                            ListOffsetsPartition::default()
                                .with_partition_index(i)
                                .with_timestamp(-1)
                        })
                        .collect(),
                )])
    };
    let mut client = common::kafka_client::Client::connect(&broker)?;
    client
        .send(&request(100), 7)
        .context("100 partitions (the cap) refused")?;
    ensure!(
        client.send(&request(101), 7).is_err(),
        "101 partitions answered"
    );
    api_versions_answers(&broker, Duration::from_secs(2))?;
    ensure!(
        broker
            .metrics_text()?
            .contains("reason=\"too_many_partitions\""),
        "refusal not counted"
    );
    Ok(())
}

// ---- shutdown ----

/// Attack on shutdown: at SIGTERM one client has pipelined fetches whose
/// responses it never reads (the broker's writes block), another is
/// half-way through a request, a third holds the metrics port with half a
/// request header. The broker still exits within its stated bound
/// (`SHUTDOWN_BOUND`, 23 s) and logs each phase.
#[test]
fn sigterm_ends_the_process_within_the_bound_whatever_clients_do() -> Result<()> {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{FetchRequest, TopicName};
    use kafka_protocol::protocol::{Encodable, StrBytes};
    let mut broker = Broker::start(&[])?;
    create(&broker, "big")?;
    let value = vec![1u8; 512 * 1024];
    for _ in 0..8 {
        ensure!(
            produce_raw(
                &broker,
                "big",
                &raw_batch(0, 0, 0, 1, &single_record(&value))
            )? == 0
        );
    }
    // Fetches of 4 MiB each, never read.
    let fetch = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(8 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_static_str("big")))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(8 << 20)])]);
    let mut body = bytes::BytesMut::new();
    fetch.encode(&mut body, 11)?;
    let request = wire::request_v1(1, 11, 1, &body);
    let mut unread = wire::connect(broker.kafka_addr())?;
    for _ in 0..64 {
        if !wire::send(&mut unread, &request).unwrap_or(false) {
            break;
        }
    }
    let mut half_sent = wire::connect(broker.kafka_addr())?;
    half_sent.write_all(&(1_000_000i32).to_be_bytes())?;
    half_sent.write_all(&[0u8; 100])?;
    let mut half_header = std::net::TcpStream::connect(broker.metrics_addr())?;
    half_header.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")?;
    std::thread::sleep(Duration::from_millis(500));

    let started = Instant::now();
    let status = broker.stop()?;
    let took = started.elapsed();
    ensure!(
        took < Duration::from_secs(25),
        "SIGTERM took {took:?} to end the process"
    );
    ensure!(status.success(), "exit status {status:?}");
    let log = broker.log_tail(60);
    ensure!(
        log.contains("shutdown: Kafka listener closed"),
        "shutdown phases not logged:\n{log}"
    );
    println!(
        "exited {took:?} after SIGTERM\n{}",
        log.lines()
            .filter(|l| l.contains("shutdown"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    drop((unread, half_sent, half_header));
    Ok(())
}
