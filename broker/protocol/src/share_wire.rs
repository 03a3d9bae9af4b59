//! Wire codecs for the KIP-932 share-group messages at the versions
//! kafka-protocol 0.18 lacks: ShareFetch and ShareAcknowledge v2 (KIP-1206,
//! KIP-1222), which Kafka 4.2+ serves and clients such as franz-go require,
//! and DescribeShareGroupOffsets v1 (KIP-1226: Lag), which Kafka 4.3's
//! admin tools (`kafka-share-groups.sh --describe`) use to print LAG.
//!
//! Owns: the wrapper types the API table uses for ShareFetch,
//! ShareAcknowledge and DescribeShareGroupOffsets, and their encode/decode
//! at versions 1..=2 (ShareFetch/ShareAcknowledge) and 0..=1
//! (DescribeShareGroupOffsets).
//! - ShareFetch/ShareAcknowledge: a kafka-protocol v1 body plus the fields
//!   v2 adds. v1 is kafka-protocol's codec as is. v2 differs from v1 only by
//!   fields inserted after a short prefix of compact nullable strings and
//!   fixed-width integers, so v2 walks that prefix (bounded, nothing
//!   allocated from untrusted lengths), reads or writes the v2-only fields
//!   there, and hands the rest of the message to kafka-protocol's v1 codec.
//! - DescribeShareGroupOffsets: the request is laid out alike at v0 and v1,
//!   so it is kafka-protocol's v0 codec at either. The response's v1 field
//!   (Lag) sits inside the nested partition struct, where no prefix trick
//!   reaches: its codec is written here in full from the JSON spec, for
//!   both versions (v0 is checked against kafka-protocol's bytes in tests).
//!   The body stays kafka-protocol's type; the lags ride beside it (see
//!   [`DescribeShareGroupOffsetsResponseWire`]).
//!
//! Must not: interpret the fields (acquire modes, renew acknowledgements,
//! lock timeouts, lags are the server's business).
//!
//! Field layout (Kafka's JSON specs, all versions flexible):
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
//! - DescribeShareGroupOffsetsRequest v1: identical to v0 (Groups: GroupId,
//!   Topics (nullable): TopicName, Partitions ([]int32)).
//! - DescribeShareGroupOffsetsResponse v0..=1: ThrottleTimeMs (int32),
//!   Groups: [GroupId (compact string), Topics: [TopicName (compact string),
//!   TopicId (uuid, 16 bytes), Partitions: [PartitionIndex (int32),
//!   StartOffset (int64), LeaderEpoch (int32), **Lag (int64, v1+,
//!   ignorable, default -1)**, ErrorCode (int16), ErrorMessage (compact
//!   nullable string), tags], tags], ErrorCode (int16), ErrorMessage
//!   (compact nullable string), tags], tags. Compact arrays and strings
//!   carry an unsigned varint of length + 1; `string` is at most 32767
//!   bytes, as Kafka enforces both ways.
//!
//! Encoding a newer field at an older version follows Kafka's generated
//! code: ignorable fields (ShareAcquireMode, AcquisitionLockTimeoutMs, Lag)
//! are dropped, a non-default non-ignorable one (IsRenewAck = true) is an
//! error. A bool byte decodes as `byte != 0`, as kafka-protocol and Kafka do.

use std::collections::BTreeMap;
use std::fmt::Display;
use std::ops::Range;

use anyhow::{anyhow, bail, Result};
use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup, DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::{
    DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, GroupId,
    ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse,
    TopicName,
};
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{
    Decodable, Encodable, HeaderVersion, Message, StrBytes, VersionRange,
};

/// The versions the ShareFetch/ShareAcknowledge wrappers encode and decode.
const VERSIONS: VersionRange = VersionRange { min: 1, max: 2 };

/// The request header version of every message here (all flexible: v2).
const REQUEST_HEADER_VERSION: i16 = 2;
/// The response header version of every message here (all flexible: v1).
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
    unsupported_in(message, version, VERSIONS)
}

fn unsupported_in(message: &str, version: i16, versions: VersionRange) -> anyhow::Error {
    anyhow!(
        "{message}: version {version} not supported (supported {}..={})",
        versions.min,
        versions.max
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

// ---------------------------------------------------------------------------
// DescribeShareGroupOffsets request
// ---------------------------------------------------------------------------

/// The versions of the DescribeShareGroupOffsets wrappers.
const OFFSETS_VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };

const OFFSETS_REQUEST: &str = "DescribeShareGroupOffsetsRequest";

/// DescribeShareGroupOffsetsRequest v0..=1: v1 changes only the response
/// (it adds Lag), so both versions are kafka-protocol's v0 codec.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DescribeShareGroupOffsetsRequestWire(pub DescribeShareGroupOffsetsRequest);

impl From<DescribeShareGroupOffsetsRequest> for DescribeShareGroupOffsetsRequestWire {
    fn from(body: DescribeShareGroupOffsetsRequest) -> Self {
        DescribeShareGroupOffsetsRequestWire(body)
    }
}

impl Encodable for DescribeShareGroupOffsetsRequestWire {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        match version {
            0 | 1 => self.0.encode(buf, 0),
            v => Err(unsupported_in(OFFSETS_REQUEST, v, OFFSETS_VERSIONS)),
        }
    }

    fn compute_size(&self, version: i16) -> Result<usize> {
        match version {
            0 | 1 => self.0.compute_size(0),
            v => Err(unsupported_in(OFFSETS_REQUEST, v, OFFSETS_VERSIONS)),
        }
    }
}

impl Decodable for DescribeShareGroupOffsetsRequestWire {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        match version {
            0 | 1 => Ok(DescribeShareGroupOffsetsRequestWire(
                DescribeShareGroupOffsetsRequest::decode(buf, 0)?,
            )),
            v => Err(unsupported_in(OFFSETS_REQUEST, v, OFFSETS_VERSIONS)),
        }
    }
}

impl HeaderVersion for DescribeShareGroupOffsetsRequestWire {
    fn header_version(_version: i16) -> i16 {
        REQUEST_HEADER_VERSION
    }
}

impl Message for DescribeShareGroupOffsetsRequestWire {
    const VERSIONS: VersionRange = OFFSETS_VERSIONS;
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

// ---------------------------------------------------------------------------
// DescribeShareGroupOffsets response
// ---------------------------------------------------------------------------

const OFFSETS_RESPONSE: &str = "DescribeShareGroupOffsetsResponse";

/// Kafka's bound on a `string` field, in bytes, enforced when writing and
/// reading alike.
const MAX_STRING_LEN: usize = 0x7fff;

/// The fewest bytes an entry of each response array takes (every string
/// and array length at least one varint byte, empty tagged fields one
/// byte): an announced count the remaining bytes cannot hold is refused
/// before anything is allocated for it.
const MIN_GROUP_LEN: usize = 1 + 1 + 2 + 1 + 1; // GroupId, Topics, ErrorCode, ErrorMessage, tags
const MIN_TOPIC_LEN: usize = 1 + 16 + 1 + 1; // TopicName, TopicId, Partitions, tags
const MIN_PARTITION_LEN_V0: usize = 4 + 8 + 4 + 2 + 1 + 1; // ..., ErrorCode, ErrorMessage, tags
const LAG_LEN: usize = 8;
/// The tagged-field sections, as errors name them.
const PARTITION_TAGS: &str = "the tagged fields of a partition";
const TOPIC_TAGS: &str = "the tagged fields of a topic";
const GROUP_TAGS: &str = "the tagged fields of a group";
const RESPONSE_TAGS: &str = "the tagged fields of the response";
/// A tagged field: its tag and its size, one varint byte each at least.
const MIN_TAGGED_FIELD_LEN: usize = 2;

/// DescribeShareGroupOffsetsResponse v0..=1: kafka-protocol's body plus
/// the per-partition Lag that v1 adds (KIP-1226).
///
/// `lags` follows the body's nesting: `lags[g][t][p]` is the Lag of
/// `body.groups[g].topics[t].partitions[p]`. A partition the vectors do not
/// reach (any level shorter, or `lags` empty) has Lag's default,
/// [`Self::UNKNOWN_LAG`] (-1), so a builder may leave `lags` empty or stop
/// at the last known lag. A lag beyond the body (for a group, topic or
/// partition it lacks) is an encoding error: body and lags were built out
/// of step. v0 does not carry Lag (an ignorable field: dropped); decoding
/// v0 leaves `lags` empty, decoding v1 fills it to the body's shape.
/// Equality compares the bodies and the lag each of their partitions
/// encodes with.
///
/// Unknown tagged fields are kept in the body's `unknown_tagged_fields` on
/// decoding and written back on encoding, as kafka-protocol does at v0.
#[derive(Debug, Clone, Default)]
pub struct DescribeShareGroupOffsetsResponseWire {
    pub body: DescribeShareGroupOffsetsResponse,
    /// Lag per partition, by group, topic and partition index of `body`.
    pub lags: Vec<Vec<Vec<i64>>>,
}

impl From<DescribeShareGroupOffsetsResponse> for DescribeShareGroupOffsetsResponseWire {
    fn from(body: DescribeShareGroupOffsetsResponse) -> Self {
        DescribeShareGroupOffsetsResponseWire {
            body,
            lags: Vec::new(),
        }
    }
}

impl DescribeShareGroupOffsetsResponseWire {
    /// Lag's default in the spec: the lag is not known.
    pub const UNKNOWN_LAG: i64 = -1;

    /// The Lag that `body.groups[group].topics[topic].partitions[partition]`
    /// encodes with at v1.
    pub fn lag(&self, group: usize, topic: usize, partition: usize) -> i64 {
        self.lags
            .get(group)
            .and_then(|topics| topics.get(topic))
            .and_then(|partitions| partitions.get(partition))
            .copied()
            .unwrap_or(Self::UNKNOWN_LAG)
    }

    /// Sets the Lag of `body.groups[group].topics[topic].partitions[partition]`,
    /// growing `lags` as needed (entries passed over stay unknown).
    pub fn set_lag(&mut self, group: usize, topic: usize, partition: usize, lag: i64) {
        if self.lags.len() <= group {
            self.lags.resize_with(group.saturating_add(1), Vec::new);
        }
        let topics = &mut self.lags[group];
        if topics.len() <= topic {
            topics.resize_with(topic.saturating_add(1), Vec::new);
        }
        let partitions = &mut topics[topic];
        if partitions.len() <= partition {
            partitions.resize(partition.saturating_add(1), Self::UNKNOWN_LAG);
        }
        partitions[partition] = lag;
    }

    /// Every lag must belong to a partition of the body.
    fn check_lags(&self) -> Result<()> {
        let groups = &self.body.groups;
        if self.lags.len() > groups.len() {
            bail!(
                "{OFFSETS_RESPONSE}: lags for {} groups, the body has {}",
                self.lags.len(),
                groups.len()
            );
        }
        for (g, (topic_lags, group)) in self.lags.iter().zip(groups).enumerate() {
            if topic_lags.len() > group.topics.len() {
                bail!(
                    "{OFFSETS_RESPONSE}: lags for {} topics in group {g}, the body has {}",
                    topic_lags.len(),
                    group.topics.len()
                );
            }
            for (t, (partition_lags, topic)) in topic_lags.iter().zip(&group.topics).enumerate() {
                if partition_lags.len() > topic.partitions.len() {
                    bail!(
                        "{OFFSETS_RESPONSE}: lags for {} partitions in group {g} topic {t}, \
                         the body has {}",
                        partition_lags.len(),
                        topic.partitions.len()
                    );
                }
            }
        }
        Ok(())
    }

    /// Writes the message at `version` field by field, in the spec's order.
    /// Fails (on a version, lag shape or length out of bounds) only through
    /// checks that a `Counter` pass meets before a `Writer` pass would.
    fn write<S: Sink>(&self, out: &mut S, version: i16) -> Result<()> {
        let with_lag = match version {
            0 => false,
            1 => true,
            v => return Err(unsupported_in(OFFSETS_RESPONSE, v, OFFSETS_VERSIONS)),
        };
        self.check_lags()?;
        let body = &self.body;
        out.put(&body.throttle_time_ms.to_be_bytes());
        put_array_len(out, "Groups", body.groups.len())?;
        for (g, group) in body.groups.iter().enumerate() {
            put_string(out, "GroupId", Some(group.group_id.as_str()))?;
            put_array_len(out, "Topics", group.topics.len())?;
            for (t, topic) in group.topics.iter().enumerate() {
                put_string(out, "TopicName", Some(topic.topic_name.as_str()))?;
                out.put(topic.topic_id.as_bytes());
                put_array_len(out, "Partitions", topic.partitions.len())?;
                for (p, partition) in topic.partitions.iter().enumerate() {
                    out.put(&partition.partition_index.to_be_bytes());
                    out.put(&partition.start_offset.to_be_bytes());
                    out.put(&partition.leader_epoch.to_be_bytes());
                    if with_lag {
                        out.put(&self.lag(g, t, p).to_be_bytes());
                    }
                    out.put(&partition.error_code.to_be_bytes());
                    put_string(out, "ErrorMessage", partition.error_message.as_deref())?;
                    put_tagged_fields(out, "a partition", &partition.unknown_tagged_fields)?;
                }
                put_tagged_fields(out, "a topic", &topic.unknown_tagged_fields)?;
            }
            out.put(&group.error_code.to_be_bytes());
            put_string(out, "ErrorMessage", group.error_message.as_deref())?;
            put_tagged_fields(out, "a group", &group.unknown_tagged_fields)?;
        }
        put_tagged_fields(out, "the response", &body.unknown_tagged_fields)
    }
}

impl PartialEq for DescribeShareGroupOffsetsResponseWire {
    fn eq(&self, other: &Self) -> bool {
        self.body == other.body
            && self.body.groups.iter().enumerate().all(|(g, group)| {
                group.topics.iter().enumerate().all(|(t, topic)| {
                    (0..topic.partitions.len()).all(|p| self.lag(g, t, p) == other.lag(g, t, p))
                })
            })
    }
}

/// Where `write` puts the message: a byte count or a buffer.
trait Sink {
    fn put(&mut self, bytes: &[u8]);
}

/// Counts the bytes (compute_size).
struct Counter(usize);

impl Sink for Counter {
    fn put(&mut self, bytes: &[u8]) {
        self.0 = self.0.saturating_add(bytes.len());
    }
}

/// Writes the bytes into the caller's buffer.
struct Writer<'a, B>(&'a mut B);

impl<B: ByteBufMut> Sink for Writer<'_, B> {
    fn put(&mut self, bytes: &[u8]) {
        self.0.put_slice(bytes);
    }
}

/// Unsigned varint: 7 bits a byte, low bits first, high bit = more follow.
fn put_uvarint<S: Sink>(out: &mut S, mut value: u32) {
    let mut bytes = [0u8; 5];
    let mut len = 0;
    while value >= 0x80 {
        bytes[len] = (value as u8 & 0x7f) | 0x80;
        value >>= 7;
        len += 1;
    }
    bytes[len] = value as u8;
    out.put(&bytes[..=len]);
}

/// COMPACT_ARRAY length: entries + 1 as an unsigned varint.
fn put_array_len<S: Sink>(out: &mut S, field: &str, len: usize) -> Result<()> {
    let len_plus_one = u32::try_from(len)
        .ok()
        .and_then(|n| n.checked_add(1))
        .ok_or_else(|| anyhow!("{OFFSETS_RESPONSE}: {field} has too many entries ({len})"))?;
    put_uvarint(out, len_plus_one);
    Ok(())
}

/// COMPACT_STRING / COMPACT_NULLABLE_STRING: length + 1 (0 = null), bytes.
fn put_string<S: Sink>(out: &mut S, field: &str, value: Option<&str>) -> Result<()> {
    let Some(s) = value else {
        put_uvarint(out, 0);
        return Ok(());
    };
    let len_plus_one = u32::try_from(s.len())
        .ok()
        .filter(|_| s.len() <= MAX_STRING_LEN)
        .map(|n| n + 1)
        .ok_or_else(|| {
            anyhow!(
                "{OFFSETS_RESPONSE}: {field} is too long ({} bytes, at most {MAX_STRING_LEN})",
                s.len()
            )
        })?;
    put_uvarint(out, len_plus_one);
    out.put(s.as_bytes());
    Ok(())
}

/// A tagged-field section: count, then tag, size and bytes of each field in
/// tag order (the map's order). Only unknown fields exist in this message.
fn put_tagged_fields<S: Sink>(out: &mut S, of: &str, fields: &BTreeMap<i32, Bytes>) -> Result<()> {
    let count = u32::try_from(fields.len())
        .map_err(|_| anyhow!("{OFFSETS_RESPONSE}: too many tagged fields in {of}"))?;
    put_uvarint(out, count);
    for (tag, value) in fields {
        let tag = u32::try_from(*tag)
            .map_err(|_| anyhow!("{OFFSETS_RESPONSE}: negative tag {tag} in {of}"))?;
        let size = u32::try_from(value.len())
            .map_err(|_| anyhow!("{OFFSETS_RESPONSE}: tagged field {tag} of {of} too large"))?;
        put_uvarint(out, tag);
        put_uvarint(out, size);
        out.put(value);
    }
    Ok(())
}

/// Reads the response's primitives off hostile input: every length is
/// checked against the bytes left before it is used, every error names the
/// field.
struct Reader<'a, B> {
    buf: &'a mut B,
    version: i16,
}

impl<B: ByteBuf> Reader<'_, B> {
    fn error(&self, what: impl Display) -> anyhow::Error {
        anyhow!("{OFFSETS_RESPONSE} v{}: {what}", self.version)
    }

    fn truncated(&self, field: &str) -> anyhow::Error {
        self.error(format_args!("truncated in {field}"))
    }

    fn i16(&mut self, field: &str) -> Result<i16> {
        self.buf.try_get_i16().map_err(|_| self.truncated(field))
    }

    fn i32(&mut self, field: &str) -> Result<i32> {
        self.buf.try_get_i32().map_err(|_| self.truncated(field))
    }

    fn i64(&mut self, field: &str) -> Result<i64> {
        self.buf.try_get_i64().map_err(|_| self.truncated(field))
    }

    /// An unsigned varint of at most 5 bytes; a fifth byte that announces a
    /// sixth is refused, as Kafka refuses it.
    fn uvarint(&mut self, field: &str) -> Result<u32> {
        let mut value = 0u32;
        for i in 0..5u32 {
            let byte = self.buf.try_get_u8().map_err(|_| self.truncated(field))?;
            value |= u32::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.error(format_args!("{field}: varint longer than 5 bytes")))
    }

    /// A length taken from the wire, refused unless that many bytes remain.
    fn available(&self, field: &str, len: usize) -> Result<()> {
        let left = self.buf.remaining();
        if len > left {
            return Err(self.error(format_args!(
                "truncated in {field} ({len} bytes announced, {left} left)"
            )));
        }
        Ok(())
    }

    fn nullable_string(&mut self, field: &str) -> Result<Option<StrBytes>> {
        let Some(len) = self.uvarint(field)?.checked_sub(1) else {
            return Ok(None);
        };
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        if len > MAX_STRING_LEN {
            return Err(self.error(format_args!(
                "{field} has invalid length {len} (at most {MAX_STRING_LEN})"
            )));
        }
        self.available(field, len)?;
        let bytes = self
            .buf
            .try_get_bytes(len)
            .map_err(|_| self.truncated(field))?;
        StrBytes::from_utf8(bytes)
            .map(Some)
            .map_err(|e| self.error(format_args!("{field} is not UTF-8: {e}")))
    }

    fn string(&mut self, field: &str) -> Result<StrBytes> {
        self.nullable_string(field)?
            .ok_or_else(|| self.error(format_args!("{field} is null, which it may not be")))
    }

    /// A non-nullable COMPACT_ARRAY's entry count, refused if the bytes left
    /// cannot hold that many entries of at least `min_entry_len` bytes.
    fn array_len(&mut self, field: &str, min_entry_len: usize) -> Result<usize> {
        let Some(count) = self.uvarint(field)?.checked_sub(1) else {
            return Err(self.error(format_args!("{field} is null, which it may not be")));
        };
        let count = usize::try_from(count).unwrap_or(usize::MAX);
        let left = self.buf.remaining();
        if count.saturating_mul(min_entry_len) > left {
            return Err(self.error(format_args!(
                "truncated in {field} ({count} entries announced, {left} bytes left)"
            )));
        }
        Ok(count)
    }

    fn uuid_bytes(&mut self, field: &str) -> Result<Vec<u8>> {
        self.available(field, 16)?;
        let bytes = self
            .buf
            .try_get_bytes(16)
            .map_err(|_| self.truncated(field))?;
        Ok(bytes.to_vec())
    }

    /// A tagged-field section; this message defines no tagged field, so
    /// every one is unknown and kept as it came.
    fn tagged_fields(&mut self, field: &str) -> Result<BTreeMap<i32, Bytes>> {
        let count = self.uvarint(field)?;
        let count = usize::try_from(count).unwrap_or(usize::MAX);
        self.available(field, count.saturating_mul(MIN_TAGGED_FIELD_LEN))?;
        let mut fields = BTreeMap::new();
        for _ in 0..count {
            let tag = self.uvarint(field)?;
            let tag = i32::try_from(tag)
                .map_err(|_| self.error(format_args!("{field}: tag {tag} out of range")))?;
            let size = self.uvarint(field)?;
            let size = usize::try_from(size).unwrap_or(usize::MAX);
            self.available(field, size)?;
            let value = self
                .buf
                .try_get_bytes(size)
                .map_err(|_| self.truncated(field))?;
            fields.insert(tag, value);
        }
        Ok(fields)
    }
}

impl Encodable for DescribeShareGroupOffsetsResponseWire {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        // Every check runs in the counting pass, so nothing is half written.
        self.compute_size(version)?;
        self.write(&mut Writer(buf), version)
    }

    fn compute_size(&self, version: i16) -> Result<usize> {
        let mut counter = Counter(0);
        self.write(&mut counter, version)?;
        Ok(counter.0)
    }
}

impl Decodable for DescribeShareGroupOffsetsResponseWire {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        let with_lag = match version {
            0 => false,
            1 => true,
            v => return Err(unsupported_in(OFFSETS_RESPONSE, v, OFFSETS_VERSIONS)),
        };
        let min_partition_len = MIN_PARTITION_LEN_V0 + if with_lag { LAG_LEN } else { 0 };
        let mut r = Reader { buf, version };
        let mut body = DescribeShareGroupOffsetsResponse::default();
        let mut lags = Vec::new();
        body.throttle_time_ms = r.i32("ThrottleTimeMs")?;
        let group_count = r.array_len("Groups", MIN_GROUP_LEN)?;
        body.groups.reserve(group_count);
        for _ in 0..group_count {
            let mut group = DescribeShareGroupOffsetsResponseGroup::default();
            let mut topic_lags = Vec::new();
            group.group_id = GroupId(r.string("GroupId")?);
            let topic_count = r.array_len("Topics", MIN_TOPIC_LEN)?;
            group.topics.reserve(topic_count);
            for _ in 0..topic_count {
                let mut topic = DescribeShareGroupOffsetsResponseTopic::default();
                let mut partition_lags = Vec::new();
                topic.topic_name = TopicName(r.string("TopicName")?);
                topic.topic_id = r
                    .uuid_bytes("TopicId")?
                    .try_into()
                    .map_err(|e| r.error(format_args!("TopicId: {e}")))?;
                let partition_count = r.array_len("Partitions", min_partition_len)?;
                topic.partitions.reserve(partition_count);
                if with_lag {
                    partition_lags.reserve(partition_count);
                }
                for _ in 0..partition_count {
                    let mut partition = DescribeShareGroupOffsetsResponsePartition::default();
                    partition.partition_index = r.i32("PartitionIndex")?;
                    partition.start_offset = r.i64("StartOffset")?;
                    partition.leader_epoch = r.i32("LeaderEpoch")?;
                    if with_lag {
                        partition_lags.push(r.i64("Lag")?);
                    }
                    partition.error_code = r.i16("ErrorCode")?;
                    partition.error_message = r.nullable_string("ErrorMessage")?;
                    partition.unknown_tagged_fields = r.tagged_fields(PARTITION_TAGS)?;
                    topic.partitions.push(partition);
                }
                topic.unknown_tagged_fields = r.tagged_fields(TOPIC_TAGS)?;
                group.topics.push(topic);
                if with_lag {
                    topic_lags.push(partition_lags);
                }
            }
            group.error_code = r.i16("ErrorCode")?;
            group.error_message = r.nullable_string("ErrorMessage")?;
            group.unknown_tagged_fields = r.tagged_fields(GROUP_TAGS)?;
            body.groups.push(group);
            if with_lag {
                lags.push(topic_lags);
            }
        }
        body.unknown_tagged_fields = r.tagged_fields(RESPONSE_TAGS)?;
        Ok(DescribeShareGroupOffsetsResponseWire { body, lags })
    }
}

impl HeaderVersion for DescribeShareGroupOffsetsResponseWire {
    fn header_version(_version: i16) -> i16 {
        RESPONSE_HEADER_VERSION
    }
}

impl Message for DescribeShareGroupOffsetsResponseWire {
    const VERSIONS: VersionRange = OFFSETS_VERSIONS;
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

// ---------------------------------------------------------------------------
// The wrappers as requests (API key and response type), so a client — the
// broker's tests, a harness — sends them like any kafka-protocol request.
// ---------------------------------------------------------------------------

impl kafka_protocol::protocol::Request for ShareFetchRequestWire {
    const KEY: i16 = kafka_protocol::messages::ApiKey::ShareFetch as i16;
    type Response = ShareFetchResponseWire;
}

impl kafka_protocol::protocol::Request for ShareAcknowledgeRequestWire {
    const KEY: i16 = kafka_protocol::messages::ApiKey::ShareAcknowledge as i16;
    type Response = ShareAcknowledgeResponseWire;
}

impl kafka_protocol::protocol::Request for DescribeShareGroupOffsetsRequestWire {
    const KEY: i16 = kafka_protocol::messages::ApiKey::DescribeShareGroupOffsets as i16;
    type Response = DescribeShareGroupOffsetsResponseWire;
}
