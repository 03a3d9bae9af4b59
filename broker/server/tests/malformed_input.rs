//! Hostile and malformed bytes on the Kafka port.
//!
//! Each test opens raw TCP connections and sends something no well-behaved
//! client would: garbage, absurd size prefixes, huge array lengths (classic
//! and compact), truncated frames, unknown API keys, unsupported versions, a
//! RecordBatch with a bad CRC. In every case the broker must stay alive, keep
//! its RSS under 1 GiB, answer or close the offending connection (never leave
//! it hanging), and keep serving an rdkafka producer connected throughout.

mod common;

use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use rdkafka::consumer::Consumer;
use rdkafka::producer::{FutureProducer, FutureRecord};

use common::clients::{self, CLIENT_TIMEOUT};
use common::wire::{self, Reply};
use common::Broker;

const CANARY: &str = "canary";
const RSS_LIMIT: u64 = 1 << 30;
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// A broker plus an rdkafka producer that stays connected across the abuse.
struct Fixture {
    broker: Broker,
    producer: FutureProducer,
    canary_sends: i64,
}

impl Fixture {
    async fn new() -> Result<Fixture> {
        let broker = Broker::start(&["--auto-create-topics", "false"])?;
        let admin = clients::admin(&broker)?;
        clients::create_topic(&admin, CANARY, 1).await?;
        let producer = clients::producer(&broker, &[("acks", "1"), ("linger.ms", "0")])?;
        let mut fixture = Fixture {
            broker,
            producer,
            canary_sends: 0,
        };
        fixture.canary("before").await?;
        Ok(fixture)
    }

    /// Produces through the long-lived rdkafka connection; checks the offset.
    async fn canary(&mut self, case: &str) -> Result<()> {
        let value = format!("canary after {case}");
        let d = self
            .producer
            .send(
                FutureRecord::<(), _>::to(CANARY)
                    .partition(0)
                    .payload(&value),
                CLIENT_TIMEOUT,
            )
            .await
            .map_err(|(e, _)| e)
            .with_context(|| format!("rdkafka produce after {case}"))?;
        ensure!(
            d.offset == self.canary_sends,
            "after {case}: canary produce got offset {}, expected {}",
            d.offset,
            self.canary_sends
        );
        self.canary_sends += 1;
        Ok(())
    }

    /// Alive, RSS bounded, a fresh raw ApiVersions answered, rdkafka still served.
    async fn assert_healthy(&mut self, case: &str) -> Result<()> {
        if !self.broker.is_running() {
            bail!(
                "broker died after {case}; stderr tail:\n{}",
                self.broker.log_tail(40)
            );
        }
        let rss = self.broker.rss_bytes()?;
        ensure!(
            rss < RSS_LIMIT,
            "after {case}: broker RSS is {} MiB",
            rss >> 20
        );

        let mut fresh = wire::connect(self.broker.kafka_addr())?;
        wire::send(&mut fresh, &wire::api_versions_v0(4242))?;
        match wire::read_reply(&mut fresh, REPLY_TIMEOUT)? {
            Reply::Frame(f) => {
                let r = wire::decode_api_versions_v0(&f)?;
                ensure!(
                    r.correlation_id == 4242 && r.error_code == 0,
                    "after {case}: ApiVersions v0 answered {r:?}"
                );
            }
            other => bail!("after {case}: a new connection's ApiVersions v0 got {other:?}"),
        }
        self.canary(case).await
    }
}

/// The broker either closed the connection or answered this correlation id;
/// leaving the client waiting forever is the failure.
fn expect_closed_or_answered(
    stream: &mut std::net::TcpStream,
    correlation_id: i32,
    case: &str,
) -> Result<Reply> {
    let reply = wire::read_reply(stream, REPLY_TIMEOUT)?;
    match &reply {
        Reply::Frame(f) => println!("{case}: answered with a {}-byte frame", f.len()),
        other => println!("{case}: {other:?}"),
    }
    match &reply {
        Reply::Closed => {}
        Reply::Frame(f) => {
            let got = wire::correlation_id(f)?;
            ensure!(
                got == correlation_id,
                "{case}: answered with correlation id {got}, sent {correlation_id}"
            );
        }
        Reply::Silent => {
            bail!("{case}: connection neither answered nor closed within {REPLY_TIMEOUT:?}")
        }
    }
    Ok(reply)
}

fn expect_closed(stream: &mut std::net::TcpStream, case: &str) -> Result<()> {
    match wire::read_reply(stream, REPLY_TIMEOUT)? {
        Reply::Closed => Ok(()),
        other => bail!("{case}: expected the broker to close the connection, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_bytes_close_the_connection() -> Result<()> {
    let mut f = Fixture::new().await?;

    // Size prefix -1.
    let mut s = wire::connect(f.broker.kafka_addr())?;
    wire::send(&mut s, &[0xFF; 64])?;
    expect_closed(&mut s, "64 x 0xFF (negative size)")?;
    f.assert_healthy("64 x 0xFF").await?;

    // An HTTP request: its first 4 bytes read as a ~1.2 GB size prefix.
    let mut s = wire::connect(f.broker.kafka_addr())?;
    wire::send(&mut s, b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")?;
    expect_closed(&mut s, "HTTP request on the Kafka port")?;
    f.assert_healthy("HTTP request").await?;

    // A well-sized frame full of garbage (api key 0xABAB, bogus client id length).
    let mut s = wire::connect(f.broker.kafka_addr())?;
    let mut payload = vec![0xAB; 32];
    payload[4..8].copy_from_slice(&77i32.to_be_bytes());
    wire::send(&mut s, &wire::frame(&payload))?;
    expect_closed_or_answered(&mut s, 77, "well-sized garbage frame")?;
    f.assert_healthy("well-sized garbage frame").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gib_size_prefix_is_refused_without_allocating() -> Result<()> {
    let mut f = Fixture::new().await?;
    let rss_before = f.broker.rss_bytes()?;

    let mut s = wire::connect(f.broker.kafka_addr())?;
    let mut bytes = 0x7fff_ffffi32.to_be_bytes().to_vec();
    bytes.extend_from_slice(&wire::header_v1(wire::API_METADATA, 1, 1, "x"));
    wire::send(&mut s, &bytes)?;
    expect_closed(&mut s, "size prefix 0x7fffffff")?;

    // One byte over the default --max-request-bytes (104857600).
    let mut s = wire::connect(f.broker.kafka_addr())?;
    let mut bytes = 104_857_601i32.to_be_bytes().to_vec();
    bytes.extend_from_slice(&wire::header_v1(wire::API_PRODUCE, 3, 2, "x"));
    wire::send(&mut s, &bytes)?;
    expect_closed(&mut s, "size prefix max-request-bytes + 1")?;

    let rss_after = f.broker.rss_bytes()?;
    ensure!(
        rss_after < rss_before + (64 << 20),
        "RSS grew from {} MiB to {} MiB on oversized size prefixes",
        rss_before >> 20,
        rss_after >> 20
    );
    f.assert_healthy("oversized size prefixes").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_array_lengths_do_not_allocate_or_crash() -> Result<()> {
    let mut f = Fixture::new().await?;

    // Metadata v1: topics array length 0x7fffffff with no elements following.
    let mut s = wire::connect(f.broker.kafka_addr())?;
    wire::send(
        &mut s,
        &wire::request_v1(wire::API_METADATA, 1, 11, &0x7fff_ffffi32.to_be_bytes()),
    )?;
    expect_closed_or_answered(&mut s, 11, "Metadata v1 topics length 0x7fffffff")?;
    f.assert_healthy("Metadata v1 huge array").await?;

    // Metadata v1: a negative array length other than -1 (null).
    let mut s = wire::connect(f.broker.kafka_addr())?;
    wire::send(
        &mut s,
        &wire::request_v1(wire::API_METADATA, 1, 12, &(-5i32).to_be_bytes()),
    )?;
    expect_closed_or_answered(&mut s, 12, "Metadata v1 topics length -5")?;
    f.assert_healthy("Metadata v1 negative array").await?;

    // Flexible Metadata (header v2): compact array length varint 0xFFFFFFFF.
    let version = flexible_metadata_version(&f.broker)?;
    for (corr, body, what) in [
        (
            13,
            wire::unsigned_varint(0xFFFF_FFFF),
            "compact length 0xFFFFFFFF",
        ),
        (14, vec![0xFF; 10], "overlong varint"),
    ] {
        let mut payload = wire::header_v2(wire::API_METADATA, version, corr, "x");
        payload.extend_from_slice(&body);
        let mut s = wire::connect(f.broker.kafka_addr())?;
        wire::send(&mut s, &wire::frame(&payload))?;
        let case = format!("Metadata v{version} {what}");
        expect_closed_or_answered(&mut s, corr, &case)?;
        f.assert_healthy(&case).await?;
    }

    // Produce v3: records length 0x7fffffff inside a small frame.
    let mut body = Vec::new();
    body.extend_from_slice(&(-1i16).to_be_bytes());
    body.extend_from_slice(&1i16.to_be_bytes());
    body.extend_from_slice(&1000i32.to_be_bytes());
    body.extend_from_slice(&1i32.to_be_bytes());
    wire::put_string(&mut body, CANARY);
    body.extend_from_slice(&1i32.to_be_bytes());
    body.extend_from_slice(&0i32.to_be_bytes());
    body.extend_from_slice(&0x7fff_ffffi32.to_be_bytes());
    body.extend_from_slice(&[0u8; 16]);
    let mut s = wire::connect(f.broker.kafka_addr())?;
    wire::send(&mut s, &wire::request_v1(wire::API_PRODUCE, 3, 15, &body))?;
    expect_closed_or_answered(&mut s, 15, "Produce v3 records length 0x7fffffff")?;
    f.assert_healthy("Produce v3 huge records length").await
}

/// The broker's highest Metadata version if it is flexible (>= 9), else 9.
fn flexible_metadata_version(broker: &Broker) -> Result<i16> {
    let mut s = wire::connect(broker.kafka_addr())?;
    wire::send(&mut s, &wire::api_versions_v0(1))?;
    let Reply::Frame(frame) = wire::read_reply(&mut s, REPLY_TIMEOUT)? else {
        bail!("ApiVersions v0 not answered");
    };
    let r = wire::decode_api_versions_v0(&frame)?;
    let max = r
        .api_keys
        .iter()
        .find(|(k, _, _)| *k == wire::API_METADATA)
        .map(|(_, _, max)| *max)
        .context("Metadata missing from ApiVersions")?;
    Ok(max.max(9))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_frames_then_close_leave_the_broker_serving() -> Result<()> {
    let mut f = Fixture::new().await?;

    // Half a size prefix.
    let mut s = wire::connect(f.broker.kafka_addr())?;
    wire::send(&mut s, &[0, 0])?;
    drop(s);
    f.assert_healthy("2-byte size prefix then close").await?;

    // A frame announcing 100 bytes, 20 sent.
    let frame = wire::metadata_v1(21, &[CANARY, "a-topic-name-that-pads-the-frame-out"]);
    let mut s = wire::connect(f.broker.kafka_addr())?;
    wire::send(&mut s, &frame[..20])?;
    s.shutdown(Shutdown::Both)?;
    drop(s);
    f.assert_healthy("truncated Metadata frame then close")
        .await?;

    // Half-closed: the request is truncated, the write side shut, and we wait
    // for the broker to notice the EOF and close its side.
    let mut s = wire::connect(f.broker.kafka_addr())?;
    wire::send(&mut s, &frame[..frame.len() - 3])?;
    s.shutdown(Shutdown::Write)?;
    expect_closed(&mut s, "truncated frame then write-side EOF")?;
    f.assert_healthy("truncated frame then write-side EOF")
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_api_key_is_answered_or_closed() -> Result<()> {
    let mut f = Fixture::new().await?;
    let mut s = wire::connect(f.broker.kafka_addr())?;
    wire::send(&mut s, &wire::request_v1(999, 0, 31, &[]))?;
    expect_closed_or_answered(&mut s, 31, "api key 999")?;
    f.assert_healthy("api key 999").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsupported_api_versions_version_gets_v0_response_with_api_keys() -> Result<()> {
    let mut f = Fixture::new().await?;
    let mut s = wire::connect(f.broker.kafka_addr())?;

    // As a newer client would send it: header v2, compact-string body.
    let mut payload = wire::header_v2(wire::API_API_VERSIONS, 127, 41, "future-client");
    for text in ["future-client", "99.0"] {
        payload.extend(wire::unsigned_varint(text.len() as u64 + 1));
        payload.extend_from_slice(text.as_bytes());
    }
    payload.push(0);
    wire::send(&mut s, &wire::frame(&payload))?;

    let Reply::Frame(frame) = wire::read_reply(&mut s, REPLY_TIMEOUT)? else {
        bail!("ApiVersions v127: expected an ApiVersionsResponse v0, got no frame");
    };
    let r = wire::decode_api_versions_v0(&frame)
        .context("ApiVersions v127: response is not a v0 ApiVersionsResponse")?;
    ensure!(
        r.correlation_id == 41,
        "correlation id {}",
        r.correlation_id
    );
    ensure!(
        r.error_code == wire::UNSUPPORTED_VERSION,
        "ApiVersions v127: error_code {}, expected 35 (UNSUPPORTED_VERSION)",
        r.error_code
    );
    // Produce, Fetch, ListOffsets, Metadata, ApiVersions, CreateTopics,
    // DeleteTopics, DescribeConfigs.
    for key in [0i16, 1, 2, 3, 18, 19, 20, 32] {
        ensure!(
            r.api_keys
                .iter()
                .any(|(k, min, max)| *k == key && min <= max),
            "ApiVersions v127 error response lacks api key {key}: {:?}",
            r.api_keys
        );
    }
    let (_, _, api_versions_max) = r
        .api_keys
        .iter()
        .find(|(k, _, _)| *k == 18)
        .copied()
        .unwrap_or_default();
    ensure!(
        api_versions_max >= 3,
        "ApiVersions max version {api_versions_max}; librdkafka uses v3"
    );

    // Clients retry with a version from that list on the same connection.
    wire::send(&mut s, &wire::api_versions_v3(42))?;
    match wire::read_reply(&mut s, REPLY_TIMEOUT)? {
        Reply::Frame(f) => ensure!(
            wire::correlation_id(&f)? == 42,
            "retry answered with the wrong correlation id"
        ),
        other => bail!("ApiVersions v3 retry on the same connection got {other:?}"),
    }
    f.assert_healthy("ApiVersions v127").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsupported_produce_and_metadata_versions_never_crash() -> Result<()> {
    let mut f = Fixture::new().await?;
    for (api_key, name, corr) in [
        (wire::API_PRODUCE, "Produce", 51),
        (wire::API_METADATA, "Metadata", 52),
    ] {
        for version in [99i16, -1] {
            let case = format!("{name} v{version}");
            let mut s = wire::connect(f.broker.kafka_addr())?;
            wire::send(
                &mut s,
                &wire::request_v1(api_key, version, corr, &[0u8; 24]),
            )?;
            if let Reply::Frame(frame) = expect_closed_or_answered(&mut s, corr, &case)? {
                // A response must carry UNSUPPORTED_VERSION somewhere; its
                // layout depends on the version the broker chose to encode.
                let has_35 = frame
                    .windows(2)
                    .any(|w| w == wire::UNSUPPORTED_VERSION.to_be_bytes());
                ensure!(
                    has_35,
                    "{case}: answered, but without UNSUPPORTED_VERSION: {frame:?}"
                );
            }
            f.assert_healthy(&case).await?;
        }
    }
    Ok(())
}

/// Sends `batch` to partition 0 of `CANARY` as Produce v3 (acks=1,
/// correlation id `corr`) on `s` and returns the one partition's answer;
/// fails with `no_response` when none comes.
fn produce_v3_to_canary(
    s: &mut TcpStream,
    corr: i32,
    batch: &[u8],
    no_response: &str,
) -> Result<Vec<wire::ProducePartitionV3>> {
    wire::send(s, &wire::produce_v3(corr, 1, CANARY, 0, batch))?;
    let Reply::Frame(frame) = wire::read_reply(s, REPLY_TIMEOUT)? else {
        bail!("{no_response}");
    };
    let (answered, parts) = wire::decode_produce_v3(&frame)?;
    ensure!(
        answered == corr && parts.len() == 1,
        "Produce v3 response {answered} {parts:?}"
    );
    Ok(parts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_with_bad_crc_is_rejected_per_partition() -> Result<()> {
    let mut f = Fixture::new().await?;
    let now = 1_700_000_000_000i64;

    // A correct raw batch is accepted: proves the encoder before abusing it.
    let good = wire::record_batch(&[b"raw-good-1", b"raw-good-2"], now);
    let mut s = wire::connect(f.broker.kafka_addr())?;
    let parts = produce_v3_to_canary(
        &mut s,
        61,
        &good,
        "Produce v3 with a valid batch: no response",
    )?;
    ensure!(
        parts[0].error_code == 0,
        "valid raw batch rejected: {parts:?}"
    );
    ensure!(
        parts[0].base_offset == f.canary_sends,
        "valid raw batch at {}, expected {}",
        parts[0].base_offset,
        f.canary_sends
    );
    f.canary_sends += 2;

    // Same batch with its CRC flipped: CORRUPT_MESSAGE (2) for the partition,
    // connection kept open, nothing appended.
    let mut bad = good.clone();
    bad[wire::BATCH_CRC_POSITION] ^= 0xFF;
    let parts = produce_v3_to_canary(
        &mut s,
        62,
        &bad,
        "Produce v3 with a bad CRC: expected a response with a partition error, got none",
    )?;
    ensure!(
        parts[0].error_code == 2,
        "bad-CRC batch: partition error {}, expected 2 (CORRUPT_MESSAGE)",
        parts[0].error_code
    );

    // Batch length claiming more bytes than the records field holds.
    let mut lying = good.clone();
    lying[8..12].copy_from_slice(&(good.len() as i32 + 1000).to_be_bytes());
    wire::send(&mut s, &wire::produce_v3(63, 1, CANARY, 0, &lying))?;
    if let Reply::Frame(frame) =
        expect_closed_or_answered(&mut s, 63, "Produce v3 with overlong batch length")?
    {
        let (_, parts) = wire::decode_produce_v3(&frame)?;
        ensure!(
            parts.iter().all(|p| p.error_code != 0),
            "overlong batch length accepted: {parts:?}"
        );
    }

    let consumer = clients::consumer(&f.broker, &[])?;
    let (_, high) = consumer.fetch_watermarks(CANARY, 0, CLIENT_TIMEOUT)?;
    ensure!(
        high == f.canary_sends,
        "high watermark {high} after rejected batches, expected {}",
        f.canary_sends
    );
    f.assert_healthy("bad-CRC produce").await
}

#[test]
fn crc32c_matches_the_standard_check_value() {
    assert_eq!(wire::crc32c(b"123456789"), 0xE306_9283);
}
