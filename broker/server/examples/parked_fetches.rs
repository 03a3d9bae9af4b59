//! Broker CPU per produced message while many consumers long-poll a partition
//! that gets no data (the benchmark of parked Fetch requests; run by
//! `broker/bench/parked-fetch-cpu.sh`).
//!
//! Creates topics `parked` and `load` (1 partition each), opens `--parked`
//! connections that each keep one Fetch of `parked` waiting (max_wait 30 s,
//! re-sent whenever it returns), then produces `--messages` records to
//! `load` in batches of `--batch` (acks=1, one request at a time) and prints
//! the broker's CPU time (utime+stime of `--broker-pid`) per message.
//!
//!   parked_fetches --bootstrap 127.0.0.1:9092 --broker-pid PID [--parked 1000]
//!                  [--messages 200000] [--batch 100] [--value-bytes 100]
//!
//! Bounded: the produce phase stops after `--messages` or 120 s; the parked
//! connections are dropped on exit.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    CreateTopicsRequest, FetchRequest, ProduceRequest, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

const PRODUCE_BOUND: Duration = Duration::from_secs(120);

struct Args {
    bootstrap: String,
    broker_pid: u32,
    parked: usize,
    messages: u64,
    batch: u64,
    value_bytes: usize,
}

fn parse_args() -> Result<Args> {
    let mut args = Args {
        bootstrap: String::new(),
        broker_pid: 0,
        parked: 1000,
        messages: 200_000,
        batch: 100,
        value_bytes: 100,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--bootstrap" => args.bootstrap = value,
            "--broker-pid" => args.broker_pid = value.parse()?,
            "--parked" => args.parked = value.parse()?,
            "--messages" => args.messages = value.parse()?,
            "--batch" => args.batch = value.parse()?,
            "--value-bytes" => args.value_bytes = value.parse()?,
            other => bail!("unknown flag {other}"),
        }
    }
    ensure!(
        !args.bootstrap.is_empty() && args.broker_pid > 0,
        "--bootstrap and --broker-pid are required"
    );
    ensure!(
        args.batch >= 1 && args.messages >= args.batch,
        "--messages must be at least --batch (>= 1)"
    );
    Ok(args)
}

fn frame<R: Request>(request: &R, version: i16, correlation_id: i32) -> Result<Vec<u8>> {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("parked-fetches")));
    let mut body = BytesMut::new();
    header.encode(&mut body, R::header_version(version))?;
    request.encode(&mut body, version)?;
    let mut out = u32::try_from(body.len())?.to_be_bytes().to_vec();
    out.extend_from_slice(&body);
    Ok(out)
}

fn call<R: Request>(stream: &mut TcpStream, request: &R, version: i16) -> Result<R::Response> {
    stream.write_all(&frame(request, version, 1)?)?;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size)?;
    let mut body = vec![0u8; usize::try_from(u32::from_be_bytes(size))?];
    stream.read_exact(&mut body)?;
    let mut body = Bytes::from(body);
    ResponseHeader::decode(
        &mut body,
        <R::Response as HeaderVersion>::header_version(version),
    )?;
    R::Response::decode(&mut body, version)
}

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

fn cpu_ticks(pid: u32) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after = stat.rsplit_once(')').context("malformed stat")?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    Ok(fields[11].parse::<u64>()? + fields[12].parse::<u64>()?)
}

fn batch(records: u64, value: &Bytes) -> Result<Bytes> {
    let records: Vec<Record> = (0..records)
        .map(|i| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i64::try_from(i).unwrap_or(0),
            // kafka-protocol starts a new batch when sequences do not follow
            // on; offset - 1 keeps them in one (base sequence -1, "none").
            sequence: i32::try_from(i).unwrap_or(i32::MAX) - 1,
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(value.clone()),
            headers: Default::default(),
            delete_horizon: false,
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )?;
    Ok(buf.freeze())
}

fn main() -> Result<()> {
    let args = parse_args()?;
    let mut admin = TcpStream::connect(&args.bootstrap)?;
    let topics = ["parked", "load"]
        .iter()
        .map(|t| {
            CreatableTopic::default()
                .with_name(name(t))
                .with_num_partitions(1)
                .with_replication_factor(-1)
        })
        .collect();
    call(
        &mut admin,
        &CreateTopicsRequest::default()
            .with_topics(topics)
            .with_timeout_ms(10_000),
        5,
    )?;

    // The parked fetches: one thread reads every connection's answers and
    // re-sends; with max_wait 30 s and no data they answer rarely.
    let fetch = FetchRequest::default()
        .with_max_wait_ms(30_000)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name("parked"))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let fetch_frame = frame(&fetch, 12, 7)?;
    let mut parked = Vec::with_capacity(args.parked);
    for _ in 0..args.parked {
        let mut s = TcpStream::connect(&args.bootstrap)?;
        s.write_all(&fetch_frame)?;
        parked.push(s);
    }
    std::thread::sleep(Duration::from_secs(2));

    let value = Bytes::from(vec![b'x'; args.value_bytes]);
    let records = batch(args.batch, &value)?;
    let produce = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name("load"))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])]);
    let mut producer = TcpStream::connect(&args.bootstrap)?;
    let before = cpu_ticks(args.broker_pid)?;
    let started = Instant::now();
    let mut sent = 0u64;
    while sent < args.messages && started.elapsed() < PRODUCE_BOUND {
        let response = call(&mut producer, &produce, 9)?;
        let code = response.responses[0].partition_responses[0].error_code;
        ensure!(code == 0, "produce failed with error {code}");
        sent += args.batch;
    }
    let elapsed = started.elapsed();
    let ticks = cpu_ticks(args.broker_pid)? - before;
    // /proc/PID/stat counts in USER_HZ, 100 on Linux.
    let cpu_secs = ticks as f64 / 100.0;
    println!(
        "parked={} messages={sent} seconds={:.2} msg_per_s={:.0} broker_cpu_s={cpu_secs:.2} broker_cpu_us_per_msg={:.3}",
        args.parked,
        elapsed.as_secs_f64(),
        sent as f64 / elapsed.as_secs_f64(),
        cpu_secs * 1e6 / sent as f64
    );
    drop(parked);
    Ok(())
}
