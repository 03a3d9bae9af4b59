//! Hand-encoded Kafka wire bytes for raw-socket tests: size-prefixed frames,
//! request headers v1 / v2, a few request bodies, RecordBatch v2, and
//! decoders for the two responses the tests read (ApiVersions v0, Produce v3).
//!
//! Encoded by hand on purpose: the tests must be able to send bytes that no
//! well-behaved encoder would produce.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};

pub const API_PRODUCE: i16 = 0;
pub const API_METADATA: i16 = 3;
pub const API_API_VERSIONS: i16 = 18;

pub const UNSUPPORTED_VERSION: i16 = 35;

/// Request header v1: api_key, api_version, correlation_id, client_id (i16 string).
pub fn header_v1(api_key: i16, api_version: i16, correlation_id: i32, client_id: &str) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&api_key.to_be_bytes());
    out.extend_from_slice(&api_version.to_be_bytes());
    out.extend_from_slice(&correlation_id.to_be_bytes());
    put_string(&mut out, client_id);
    out
}

/// Request header v2 (flexible requests): header v1 plus an empty tagged-field section.
pub fn header_v2(api_key: i16, api_version: i16, correlation_id: i32, client_id: &str) -> Vec<u8> {
    let mut out = header_v1(api_key, api_version, correlation_id, client_id);
    out.push(0);
    out
}

/// Prefixes `payload` (header + body) with its i32 size.
pub fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 4);
    out.extend_from_slice(&(payload.len() as i32).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// A complete request frame: header v1 + body.
pub fn request_v1(api_key: i16, api_version: i16, correlation_id: i32, body: &[u8]) -> Vec<u8> {
    let mut payload = header_v1(api_key, api_version, correlation_id, "chronik-raw-test");
    payload.extend_from_slice(body);
    frame(&payload)
}

pub fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as i16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

pub fn unsigned_varint(mut n: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

pub fn signed_varint(n: i64) -> Vec<u8> {
    unsigned_varint(((n << 1) ^ (n >> 63)) as u64)
}

/// ApiVersions v0 request frame (empty body).
pub fn api_versions_v0(correlation_id: i32) -> Vec<u8> {
    request_v1(API_API_VERSIONS, 0, correlation_id, &[])
}

/// ApiVersions v3 request frame (flexible: header v2, compact strings, tags).
pub fn api_versions_v3(correlation_id: i32) -> Vec<u8> {
    let mut payload = header_v2(API_API_VERSIONS, 3, correlation_id, "chronik-raw-test");
    for s in ["chronik-raw-test", "0.1"] {
        payload.extend(unsigned_varint(s.len() as u64 + 1));
        payload.extend_from_slice(s.as_bytes());
    }
    payload.push(0);
    frame(&payload)
}

/// Metadata v1 request frame for the given topics (non-flexible).
pub fn metadata_v1(correlation_id: i32, topics: &[&str]) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for t in topics {
        put_string(&mut body, t);
    }
    request_v1(API_METADATA, 1, correlation_id, &body)
}

/// Produce v3 request frame with one topic / partition carrying `records`.
pub fn produce_v3(
    correlation_id: i32,
    acks: i16,
    topic: &str,
    partition: i32,
    records: &[u8],
) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&(-1i16).to_be_bytes()); // transactional_id: null
    body.extend_from_slice(&acks.to_be_bytes());
    body.extend_from_slice(&10_000i32.to_be_bytes()); // timeout_ms
    body.extend_from_slice(&1i32.to_be_bytes()); // one topic
    put_string(&mut body, topic);
    body.extend_from_slice(&1i32.to_be_bytes()); // one partition
    body.extend_from_slice(&partition.to_be_bytes());
    body.extend_from_slice(&(records.len() as i32).to_be_bytes());
    body.extend_from_slice(records);
    request_v1(API_PRODUCE, 3, correlation_id, &body)
}

/// CRC-32C (Castagnoli), bitwise: slow but tiny, fine for test batches.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0x82F6_3B78 & mask);
        }
    }
    !crc
}

/// An uncompressed RecordBatch v2 with base offset 0, no producer id, one
/// record per value (no key, no headers), timestamps all `timestamp_ms`.
pub fn record_batch(values: &[&[u8]], timestamp_ms: i64) -> Vec<u8> {
    let mut records = Vec::new();
    for (i, value) in values.iter().enumerate() {
        let mut rec = vec![0u8]; // attributes
        rec.extend(signed_varint(0)); // timestamp delta
        rec.extend(signed_varint(i as i64)); // offset delta
        rec.extend(signed_varint(-1)); // key: null
        rec.extend(signed_varint(value.len() as i64));
        rec.extend_from_slice(value);
        rec.extend(signed_varint(0)); // header count
        records.extend(signed_varint(rec.len() as i64));
        records.extend(rec);
    }
    // From attributes to the end: the CRC-covered part.
    let mut covered = Vec::new();
    covered.extend_from_slice(&0i16.to_be_bytes()); // attributes: no compression
    covered.extend_from_slice(&((values.len() as i32) - 1).to_be_bytes()); // last offset delta
    covered.extend_from_slice(&timestamp_ms.to_be_bytes()); // base timestamp
    covered.extend_from_slice(&timestamp_ms.to_be_bytes()); // max timestamp
    covered.extend_from_slice(&(-1i64).to_be_bytes()); // producer id
    covered.extend_from_slice(&(-1i16).to_be_bytes()); // producer epoch
    covered.extend_from_slice(&(-1i32).to_be_bytes()); // base sequence
    covered.extend_from_slice(&(values.len() as i32).to_be_bytes());
    covered.extend(records);

    let mut batch = Vec::new();
    batch.extend_from_slice(&0i64.to_be_bytes()); // base offset
    let batch_length = 4 + 1 + 4 + covered.len(); // leader epoch + magic + crc + covered
    batch.extend_from_slice(&(batch_length as i32).to_be_bytes());
    batch.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
    batch.push(2); // magic
    batch.extend_from_slice(&crc32c(&covered).to_be_bytes());
    batch.extend(covered);
    batch
}

/// Byte offset of the CRC field inside a RecordBatch v2.
pub const BATCH_CRC_POSITION: usize = 8 + 4 + 4 + 1;

/// Connects with bounded timeouts.
pub fn connect(addr: SocketAddr) -> Result<TcpStream> {
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .with_context(|| format!("connecting to {addr}"))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// What the broker did after we sent something.
#[derive(Debug, PartialEq, Eq)]
pub enum Reply {
    /// Orderly close (EOF) or reset, with no complete frame before it.
    Closed,
    /// One complete response frame (without its size prefix).
    Frame(Vec<u8>),
    /// Nothing (or only part of a frame) within the timeout; connection open.
    Silent,
}

/// Reads one response frame, or observes a close, within `timeout`.
pub fn read_reply(stream: &mut TcpStream, timeout: Duration) -> Result<Reply> {
    let deadline = Instant::now() + timeout;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        if buf.len() >= 4 {
            let size = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
            ensure!(size >= 0, "broker sent a negative frame size {size}");
            let size = size as usize;
            if buf.len() >= 4 + size {
                return Ok(Reply::Frame(buf[4..4 + size].to_vec()));
            }
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(Reply::Silent);
        }
        stream.set_read_timeout(Some((deadline - now).max(Duration::from_millis(1))))?;
        match stream.read(&mut chunk) {
            Ok(0) => return Ok(Reply::Closed),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Ok(Reply::Silent)
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::ConnectionReset
                        | ErrorKind::ConnectionAborted
                        | ErrorKind::BrokenPipe
                ) =>
            {
                return Ok(Reply::Closed)
            }
            Err(e) => return Err(e).context("reading reply"),
        }
    }
}

/// Writes `bytes`, treating a reset/broken pipe as "broker closed on us".
/// Returns false if the broker had already closed the connection.
pub fn send(stream: &mut TcpStream, bytes: &[u8]) -> Result<bool> {
    match stream.write_all(bytes).and_then(|()| stream.flush()) {
        Ok(()) => Ok(true),
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(e).context("writing request"),
    }
}

/// A big-endian cursor over a response frame.
pub struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Cursor { data, pos: 0 }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        ensure!(
            self.pos + n <= self.data.len(),
            "response truncated: need {n} bytes at {} of {}",
            self.pos,
            self.data.len()
        );
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub fn i16(&mut self) -> Result<i16> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    pub fn i32(&mut self) -> Result<i32> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn i64(&mut self) -> Result<i64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }

    pub fn string(&mut self) -> Result<String> {
        let len = self.i16()?;
        ensure!(len >= 0, "unexpected null string");
        Ok(String::from_utf8_lossy(self.take(len as usize)?).into_owned())
    }

    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }
}

/// An ApiVersionsResponse v0 body (what a broker sends when it does not
/// support the requested ApiVersions version).
#[derive(Debug)]
pub struct ApiVersionsV0 {
    pub correlation_id: i32,
    pub error_code: i16,
    /// (api_key, min_version, max_version)
    pub api_keys: Vec<(i16, i16, i16)>,
}

/// Decodes response header v0 + ApiVersionsResponse v0 from one frame.
pub fn decode_api_versions_v0(frame: &[u8]) -> Result<ApiVersionsV0> {
    let mut c = Cursor::new(frame);
    let correlation_id = c.i32()?;
    let error_code = c.i16()?;
    let n = c.i32()?;
    ensure!((0..=10_000).contains(&n), "implausible api_keys length {n}");
    let mut api_keys = Vec::with_capacity(n as usize);
    for _ in 0..n {
        api_keys.push((c.i16()?, c.i16()?, c.i16()?));
    }
    Ok(ApiVersionsV0 {
        correlation_id,
        error_code,
        api_keys,
    })
}

/// One partition of a Produce v3 response.
#[derive(Debug)]
pub struct ProducePartitionV3 {
    pub topic: String,
    pub partition: i32,
    pub error_code: i16,
    pub base_offset: i64,
}

/// Decodes response header v0 + ProduceResponse v3: (correlation id, partitions).
pub fn decode_produce_v3(frame: &[u8]) -> Result<(i32, Vec<ProducePartitionV3>)> {
    let mut c = Cursor::new(frame);
    let correlation_id = c.i32()?;
    let topics = c.i32()?;
    ensure!(
        (0..=1000).contains(&topics),
        "implausible topic count {topics}"
    );
    let mut out = Vec::new();
    for _ in 0..topics {
        let topic = c.string()?;
        let partitions = c.i32()?;
        ensure!(
            (0..=1000).contains(&partitions),
            "implausible partition count {partitions}"
        );
        for _ in 0..partitions {
            let partition = c.i32()?;
            let error_code = c.i16()?;
            let base_offset = c.i64()?;
            let _log_append_time = c.i64()?;
            out.push(ProducePartitionV3 {
                topic: topic.clone(),
                partition,
                error_code,
                base_offset,
            });
        }
    }
    if c.remaining() < 4 {
        bail!("Produce v3 response lacks throttle_time_ms");
    }
    Ok((correlation_id, out))
}

/// Correlation id of any response frame (first 4 bytes).
pub fn correlation_id(frame: &[u8]) -> Result<i32> {
    Cursor::new(frame).i32()
}
