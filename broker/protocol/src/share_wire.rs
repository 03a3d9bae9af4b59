//! Wire codecs for the KIP-932 share-group messages at the versions
//! kafka-protocol 0.18 lacks: ShareFetch and ShareAcknowledge v2 (KIP-1206,
//! KIP-1222), which Kafka 4.2+ serves and clients such as franz-go require.
//!
//! Owns: the wrapper types the API table uses for ShareFetch and
//! ShareAcknowledge — a kafka-protocol v1 body plus the fields v2 adds — and
//! their encode/decode for versions 1..=2. v1 is kafka-protocol's codec as
//! is. v2 differs from v1 only by fields inserted after a short prefix of
//! compact nullable strings and fixed-width integers, so v2 walks that
//! prefix (bounded, nothing allocated from untrusted lengths), reads or
//! writes the v2-only fields there, and hands the rest of the message to
//! kafka-protocol's v1 codec. Must not: interpret the fields (acquire
//! modes, renew acknowledgements, lock timeouts are the server's business).
//!
//! Field layout (Kafka's ShareFetch/ShareAcknowledge JSON specs, all
//! versions flexible):
//! - ShareFetchRequest v2: GroupId, MemberId (compact nullable strings),
//!   ShareSessionEpoch, MaxWaitMs, MinBytes, MaxBytes, MaxRecords, BatchSize
//!   (int32), then **ShareAcquireMode (int8), IsRenewAck (bool)**, then
//!   Topics, ForgottenTopicsData and tagged fields as in v1.
//! - ShareAcknowledgeRequest v2: GroupId, MemberId, ShareSessionEpoch, then
//!   **IsRenewAck (bool)**, then Topics and tagged fields as in v1.
//! - ShareFetchResponse v2: identical to v1.
//! - ShareAcknowledgeResponse v2: ThrottleTimeMs (int32), ErrorCode (int16),
//!   ErrorMessage (compact nullable string), then **AcquisitionLockTimeoutMs
//!   (int32)**, then Responses, NodeEndpoints and tagged fields as in v1.
//!
//! Encoding a v2-only field at v1 follows Kafka's generated code:
//! ignorable fields (ShareAcquireMode, AcquisitionLockTimeoutMs) are
//! dropped, a non-default non-ignorable one (IsRenewAck = true) is an error.
//! A bool byte decodes as `byte != 0`, as kafka-protocol and Kafka do.

use std::ops::Range;

use anyhow::{anyhow, bail, Result};
use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{
    ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse,
};
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, VersionRange};

/// The versions every wrapper here encodes and decodes.
const VERSIONS: VersionRange = VersionRange { min: 1, max: 2 };

/// The request header version of ShareFetch/ShareAcknowledge (flexible: v2).
const REQUEST_HEADER_VERSION: i16 = 2;
/// The response header version of ShareFetch/ShareAcknowledge (flexible: v1).
const RESPONSE_HEADER_VERSION: i16 = 1;

/// A field ahead of the v2-only ones, as far as stepping over it needs.
#[derive(Debug, Clone, Copy)]
enum Prefix {
    /// Unsigned varint of length + 1 (0 = null), then that many bytes.
    CompactNullableString(&'static str),
    /// Fixed-width fields, `.1` bytes in all.
    Fixed(&'static str, usize),
}

const FETCH_REQUEST_PREFIX: &[Prefix] = &[
    Prefix::CompactNullableString("GroupId"),
    Prefix::CompactNullableString("MemberId"),
    // ShareSessionEpoch, MaxWaitMs, MinBytes, MaxBytes, MaxRecords, BatchSize.
    Prefix::Fixed("ShareSessionEpoch..BatchSize", 6 * 4),
];

const ACK_REQUEST_PREFIX: &[Prefix] = &[
    Prefix::CompactNullableString("GroupId"),
    Prefix::CompactNullableString("MemberId"),
    Prefix::Fixed("ShareSessionEpoch", 4),
];

const ACK_RESPONSE_PREFIX: &[Prefix] = &[
    // ThrottleTimeMs (int32), ErrorCode (int16).
    Prefix::Fixed("ThrottleTimeMs/ErrorCode", 4 + 2),
    Prefix::CompactNullableString("ErrorMessage"),
];

fn unsupported(message: &str, version: i16) -> anyhow::Error {
    anyhow!(
        "{message}: version {version} not supported (supported {}..={})",
        VERSIONS.min,
        VERSIONS.max
    )
}

/// Reads an unsigned varint at `pos` bytes ahead without consuming it,
/// exactly as kafka-protocol's decoder does (at most 5 bytes, stopping at the
/// first byte without the continuation bit). Returns (value, bytes used), or
/// `None` if the buffer ends first.
fn peek_unsigned_varint<B: ByteBuf>(buf: &mut B, pos: usize) -> Option<(u32, usize)> {
    let mut value = 0u32;
    for i in 0..5usize {
        let at = pos.checked_add(i)?;
        let byte = buf.try_peek_bytes(at..at.checked_add(1)?).ok()?;
        let b = u32::from(*byte.first()?);
        value |= (b & 0x7f) << (i * 7);
        if b < 0x80 {
            return Some((value, i + 1));
        }
    }
    Some((value, 5))
}

/// The length in bytes of the fields `prefix` describes at the front of
/// `buf`, checked against what `buf` holds; consumes nothing.
fn prefix_len<B: ByteBuf>(buf: &mut B, prefix: &[Prefix], message: &str) -> Result<usize> {
    let available = buf.remaining();
    let mut pos = 0usize;
    for field in prefix {
        match *field {
            Prefix::CompactNullableString(name) => {
                let (len_plus_one, width) = peek_unsigned_varint(buf, pos)
                    .ok_or_else(|| anyhow!("{message}: truncated in the length of {name}"))?;
                pos += width;
                let len = usize::try_from(len_plus_one.saturating_sub(1))
                    .map_err(|_| anyhow!("{message}: {name} length {len_plus_one} too large"))?;
                let left = available.saturating_sub(pos);
                if len > left {
                    bail!("{message}: truncated in {name} ({len} bytes announced, {left} left)");
                }
                pos += len;
            }
            Prefix::Fixed(name, len) => {
                let left = available.saturating_sub(pos);
                if len > left {
                    bail!("{message}: truncated in {name} ({len} bytes needed, {left} left)");
                }
                pos += len;
            }
        }
    }
    Ok(pos)
}

/// Takes the prefix fields off the front of `buf` (for re-joining with the
/// rest once the v2-only fields after them are read).
fn take_prefix<B: ByteBuf>(buf: &mut B, prefix: &[Prefix], message: &str) -> Result<Bytes> {
    let len = prefix_len(buf, prefix, message)?;
    buf.try_get_bytes(len)
        .map_err(|_| anyhow!("{message}: truncated in the fields before the v2 fields"))
}

fn read_i8<B: ByteBuf>(buf: &mut B, message: &str, field: &str) -> Result<i8> {
    buf.try_get_i8()
        .map_err(|_| anyhow!("{message}: truncated in {field}"))
}

fn read_i32<B: ByteBuf>(buf: &mut B, message: &str, field: &str) -> Result<i32> {
    buf.try_get_i32()
        .map_err(|_| anyhow!("{message}: truncated in {field}"))
}

/// Kafka's bool: one byte, anything but 0 is true (kafka-protocol agrees).
fn read_bool<B: ByteBuf>(buf: &mut B, message: &str, field: &str) -> Result<bool> {
    buf.try_get_u8()
        .map(|b| b != 0)
        .map_err(|_| anyhow!("{message}: truncated in {field}"))
}

/// Encodes `body` at v1, inserting what `put_v2_fields` writes right after
/// the `prefix` fields: the v2 layout.
fn encode_v2<B, E, F>(
    buf: &mut B,
    body: &E,
    prefix: &[Prefix],
    message: &str,
    put_v2_fields: F,
) -> Result<()>
where
    B: ByteBufMut,
    E: Encodable,
    F: FnOnce(&mut B),
{
    let mut v1 = BytesMut::with_capacity(body.compute_size(1)?);
    body.encode(&mut v1, 1)?;
    let mut v1 = v1.freeze();
    let head_len = prefix_len(&mut v1, prefix, message)?;
    let head = v1
        .get(..head_len)
        .ok_or_else(|| anyhow!("{message}: v1 encoding shorter than its prefix"))?;
    buf.put_slice(head);
    put_v2_fields(buf);
    let rest = v1
        .get(head_len..)
        .ok_or_else(|| anyhow!("{message}: v1 encoding shorter than its prefix"))?;
    buf.put_slice(rest);
    Ok(())
}

/// The prefix bytes taken off a buffer, followed by the rest of that buffer:
/// what kafka-protocol's v1 decoder reads once the v2-only fields are gone.
/// Consumes from `tail` exactly what the decoder reads beyond `head`.
struct Rejoined<'a, B: ByteBuf> {
    head: Bytes,
    tail: &'a mut B,
}

impl<B: ByteBuf> Buf for Rejoined<'_, B> {
    fn remaining(&self) -> usize {
        self.head.len().saturating_add(self.tail.remaining())
    }

    fn chunk(&self) -> &[u8] {
        if self.head.is_empty() {
            self.tail.chunk()
        } else {
            &self.head
        }
    }

    fn advance(&mut self, cnt: usize) {
        let from_head = cnt.min(self.head.len());
        self.head.advance(from_head);
        if cnt > from_head {
            self.tail.advance(cnt - from_head);
        }
    }
}

impl<B: ByteBuf> ByteBuf for Rejoined<'_, B> {
    fn peek_bytes(&mut self, r: Range<usize>) -> Bytes {
        let head_len = self.head.len();
        if r.end <= head_len {
            return self.head.slice(r);
        }
        if r.start >= head_len {
            return self.tail.peek_bytes(r.start - head_len..r.end - head_len);
        }
        let mut out = BytesMut::with_capacity(r.len());
        out.extend_from_slice(&self.head[r.start..]);
        out.extend_from_slice(&self.tail.peek_bytes(0..r.end - head_len));
        out.freeze()
    }

    fn get_bytes(&mut self, size: usize) -> Bytes {
        let head_len = self.head.len();
        if size <= head_len {
            return self.head.split_to(size);
        }
        if head_len == 0 {
            return self.tail.get_bytes(size);
        }
        let mut out = BytesMut::with_capacity(size);
        out.extend_from_slice(&self.head.split_to(head_len));
        out.extend_from_slice(&self.tail.get_bytes(size - head_len));
        out.freeze()
    }
}

// ---------------------------------------------------------------------------
// ShareFetch request
// ---------------------------------------------------------------------------

/// ShareFetchRequest v1..=2: kafka-protocol's v1 body plus v2's fields.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ShareFetchRequestWire {
    pub body: ShareFetchRequest,
    /// v2+ (ignorable): 0 = batch-optimized, 1 = record-limit. 0 at v1.
    pub share_acquire_mode: i8,
    /// v2+: whether Renew acknowledgements are present. False at v1.
    pub is_renew_ack: bool,
}

impl From<ShareFetchRequest> for ShareFetchRequestWire {
    fn from(body: ShareFetchRequest) -> Self {
        ShareFetchRequestWire {
            body,
            share_acquire_mode: 0,
            is_renew_ack: false,
        }
    }
}

const SHARE_FETCH_REQUEST: &str = "ShareFetchRequest";

impl ShareFetchRequestWire {
    fn check_encodable(&self, version: i16) -> Result<()> {
        match version {
            1 if self.is_renew_ack => {
                bail!("{SHARE_FETCH_REQUEST} v1 cannot carry IsRenewAck = true (a v2 field)")
            }
            1 | 2 => Ok(()),
            v => Err(unsupported(SHARE_FETCH_REQUEST, v)),
        }
    }
}

impl Encodable for ShareFetchRequestWire {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        self.check_encodable(version)?;
        if version == 1 {
            return self.body.encode(buf, 1);
        }
        encode_v2(
            buf,
            &self.body,
            FETCH_REQUEST_PREFIX,
            SHARE_FETCH_REQUEST,
            |b| {
                b.put_i8(self.share_acquire_mode);
                b.put_u8(u8::from(self.is_renew_ack));
            },
        )
    }

    fn compute_size(&self, version: i16) -> Result<usize> {
        self.check_encodable(version)?;
        let v2_fields = if version == 2 { 1 + 1 } else { 0 };
        Ok(self.body.compute_size(1)? + v2_fields)
    }
}

impl Decodable for ShareFetchRequestWire {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        match version {
            1 => Ok(ShareFetchRequest::decode(buf, 1)?.into()),
            2 => {
                let message = "ShareFetchRequest v2";
                let head = take_prefix(buf, FETCH_REQUEST_PREFIX, message)?;
                let share_acquire_mode = read_i8(buf, message, "ShareAcquireMode")?;
                let is_renew_ack = read_bool(buf, message, "IsRenewAck")?;
                let body = ShareFetchRequest::decode(&mut Rejoined { head, tail: buf }, 1)?;
                Ok(ShareFetchRequestWire {
                    body,
                    share_acquire_mode,
                    is_renew_ack,
                })
            }
            v => Err(unsupported(SHARE_FETCH_REQUEST, v)),
        }
    }
}

impl HeaderVersion for ShareFetchRequestWire {
    fn header_version(_version: i16) -> i16 {
        REQUEST_HEADER_VERSION
    }
}

impl Message for ShareFetchRequestWire {
    const VERSIONS: VersionRange = VERSIONS;
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

// ---------------------------------------------------------------------------
// ShareAcknowledge request
// ---------------------------------------------------------------------------

/// ShareAcknowledgeRequest v1..=2: kafka-protocol's v1 body plus v2's field.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ShareAcknowledgeRequestWire {
    pub body: ShareAcknowledgeRequest,
    /// v2+: whether Renew acknowledgements are present. False at v1.
    pub is_renew_ack: bool,
}

impl From<ShareAcknowledgeRequest> for ShareAcknowledgeRequestWire {
    fn from(body: ShareAcknowledgeRequest) -> Self {
        ShareAcknowledgeRequestWire {
            body,
            is_renew_ack: false,
        }
    }
}

const SHARE_ACK_REQUEST: &str = "ShareAcknowledgeRequest";

impl ShareAcknowledgeRequestWire {
    fn check_encodable(&self, version: i16) -> Result<()> {
        match version {
            1 if self.is_renew_ack => {
                bail!("{SHARE_ACK_REQUEST} v1 cannot carry IsRenewAck = true (a v2 field)")
            }
            1 | 2 => Ok(()),
            v => Err(unsupported(SHARE_ACK_REQUEST, v)),
        }
    }
}

impl Encodable for ShareAcknowledgeRequestWire {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        self.check_encodable(version)?;
        if version == 1 {
            return self.body.encode(buf, 1);
        }
        encode_v2(
            buf,
            &self.body,
            ACK_REQUEST_PREFIX,
            SHARE_ACK_REQUEST,
            |b| {
                b.put_u8(u8::from(self.is_renew_ack));
            },
        )
    }

    fn compute_size(&self, version: i16) -> Result<usize> {
        self.check_encodable(version)?;
        let v2_fields = if version == 2 { 1 } else { 0 };
        Ok(self.body.compute_size(1)? + v2_fields)
    }
}

impl Decodable for ShareAcknowledgeRequestWire {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        match version {
            1 => Ok(ShareAcknowledgeRequest::decode(buf, 1)?.into()),
            2 => {
                let message = "ShareAcknowledgeRequest v2";
                let head = take_prefix(buf, ACK_REQUEST_PREFIX, message)?;
                let is_renew_ack = read_bool(buf, message, "IsRenewAck")?;
                let body = ShareAcknowledgeRequest::decode(&mut Rejoined { head, tail: buf }, 1)?;
                Ok(ShareAcknowledgeRequestWire { body, is_renew_ack })
            }
            v => Err(unsupported(SHARE_ACK_REQUEST, v)),
        }
    }
}

impl HeaderVersion for ShareAcknowledgeRequestWire {
    fn header_version(_version: i16) -> i16 {
        REQUEST_HEADER_VERSION
    }
}

impl Message for ShareAcknowledgeRequestWire {
    const VERSIONS: VersionRange = VERSIONS;
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

// ---------------------------------------------------------------------------
// ShareFetch response
// ---------------------------------------------------------------------------

/// ShareFetchResponse v1..=2: the v2 layout is v1's, so this is
/// kafka-protocol's v1 codec at either version.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ShareFetchResponseWire(pub ShareFetchResponse);

impl From<ShareFetchResponse> for ShareFetchResponseWire {
    fn from(body: ShareFetchResponse) -> Self {
        ShareFetchResponseWire(body)
    }
}

const SHARE_FETCH_RESPONSE: &str = "ShareFetchResponse";

impl Encodable for ShareFetchResponseWire {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        match version {
            1 | 2 => self.0.encode(buf, 1),
            v => Err(unsupported(SHARE_FETCH_RESPONSE, v)),
        }
    }

    fn compute_size(&self, version: i16) -> Result<usize> {
        match version {
            1 | 2 => self.0.compute_size(1),
            v => Err(unsupported(SHARE_FETCH_RESPONSE, v)),
        }
    }
}

impl Decodable for ShareFetchResponseWire {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        match version {
            1 | 2 => Ok(ShareFetchResponseWire(ShareFetchResponse::decode(buf, 1)?)),
            v => Err(unsupported(SHARE_FETCH_RESPONSE, v)),
        }
    }
}

impl HeaderVersion for ShareFetchResponseWire {
    fn header_version(_version: i16) -> i16 {
        RESPONSE_HEADER_VERSION
    }
}

impl Message for ShareFetchResponseWire {
    const VERSIONS: VersionRange = VERSIONS;
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

// ---------------------------------------------------------------------------
// ShareAcknowledge response
// ---------------------------------------------------------------------------

/// ShareAcknowledgeResponse v1..=2: kafka-protocol's v1 body plus v2's field.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ShareAcknowledgeResponseWire {
    pub body: ShareAcknowledgeResponse,
    /// v2+ (ignorable): how long acquired records stay locked, in ms.
    /// Not sent at v1; 0 when decoded from v1.
    pub acquisition_lock_timeout_ms: i32,
}

impl From<ShareAcknowledgeResponse> for ShareAcknowledgeResponseWire {
    fn from(body: ShareAcknowledgeResponse) -> Self {
        ShareAcknowledgeResponseWire {
            body,
            acquisition_lock_timeout_ms: 0,
        }
    }
}

const SHARE_ACK_RESPONSE: &str = "ShareAcknowledgeResponse";

impl Encodable for ShareAcknowledgeResponseWire {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        match version {
            1 => self.body.encode(buf, 1),
            2 => encode_v2(
                buf,
                &self.body,
                ACK_RESPONSE_PREFIX,
                SHARE_ACK_RESPONSE,
                |b| {
                    b.put_i32(self.acquisition_lock_timeout_ms);
                },
            ),
            v => Err(unsupported(SHARE_ACK_RESPONSE, v)),
        }
    }

    fn compute_size(&self, version: i16) -> Result<usize> {
        match version {
            1 => self.body.compute_size(1),
            2 => Ok(self.body.compute_size(1)? + 4),
            v => Err(unsupported(SHARE_ACK_RESPONSE, v)),
        }
    }
}

impl Decodable for ShareAcknowledgeResponseWire {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        match version {
            1 => Ok(ShareAcknowledgeResponse::decode(buf, 1)?.into()),
            2 => {
                let message = "ShareAcknowledgeResponse v2";
                let head = take_prefix(buf, ACK_RESPONSE_PREFIX, message)?;
                let acquisition_lock_timeout_ms =
                    read_i32(buf, message, "AcquisitionLockTimeoutMs")?;
                let body = ShareAcknowledgeResponse::decode(&mut Rejoined { head, tail: buf }, 1)?;
                Ok(ShareAcknowledgeResponseWire {
                    body,
                    acquisition_lock_timeout_ms,
                })
            }
            v => Err(unsupported(SHARE_ACK_RESPONSE, v)),
        }
    }
}

impl HeaderVersion for ShareAcknowledgeResponseWire {
    fn header_version(_version: i16) -> i16 {
        RESPONSE_HEADER_VERSION
    }
}

impl Message for ShareAcknowledgeResponseWire {
    const VERSIONS: VersionRange = VERSIONS;
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}
