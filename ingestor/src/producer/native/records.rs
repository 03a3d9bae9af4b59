//! Kafka's record batch (magic 2) as the native producer writes it.
//!
//! Owns: encoding one record (varint lengths, timestamp and offset deltas,
//! headers) into a batch's body as it is appended, and sealing a body into
//! the bytes of a Produce request's `records` field: the 61-byte header
//! (producer id, epoch, base sequence), optional compression of the body, and
//! the CRC-32C. Restamping a sealed batch with another producer identity
//! rewrites the header and the CRC only.
//! Must not: know about partitions, queues, sockets or HTTP.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::compression::{Compressor, Gzip, Lz4, Zstd};

use crate::config::Compression;

/// Size of a magic-2 batch header, up to and including the record count.
pub const BATCH_HEADER_LEN: usize = 61;
/// Where the CRC-32C field sits, and where the bytes it covers begin.
const CRC_OFFSET: usize = 17;
const ATTRIBUTES_OFFSET: usize = 21;
const PRODUCER_ID_OFFSET: usize = 43;

/// Bytes a zigzag varint of `v` takes.
fn varint_len(v: i64) -> usize {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    let mut n = 1;
    while z >= 0x80 {
        z >>= 7;
        n += 1;
    }
    n
}

fn put_varint(buf: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        buf.push((z as u8) | 0x80);
        z >>= 7;
    }
    buf.push(z as u8);
}

fn bytes_len(b: Option<&[u8]>) -> usize {
    match b {
        Some(b) => varint_len(b.len() as i64) + b.len(),
        None => varint_len(-1),
    }
}

fn put_bytes(buf: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        Some(b) => {
            put_varint(buf, b.len() as i64);
            buf.extend_from_slice(b);
        }
        None => put_varint(buf, -1),
    }
}

/// One record's fields, borrowed from the request.
pub struct RecordRef<'a> {
    pub timestamp_ms: i64,
    pub key: Option<&'a [u8]>,
    pub value: &'a [u8],
    /// User headers (header values are never null here) ...
    pub headers: &'a [(&'a [u8], &'a [u8])],
    /// ... then this one (the envelope).
    pub last_header: Option<(&'a [u8], &'a [u8])>,
}

impl RecordRef<'_> {
    fn all_headers(&self) -> impl Iterator<Item = &(&[u8], &[u8])> {
        self.headers.iter().chain(self.last_header.as_ref())
    }

    fn header_count(&self) -> usize {
        self.headers.len() + usize::from(self.last_header.is_some())
    }
}

/// The size of `record`'s encoding at `offset_delta` / `timestamp_delta`.
pub fn encoded_len(record: &RecordRef<'_>, offset_delta: i32, timestamp_delta: i64) -> usize {
    let body = body_len(record, offset_delta, timestamp_delta);
    varint_len(body as i64) + body
}

fn body_len(r: &RecordRef<'_>, offset_delta: i32, timestamp_delta: i64) -> usize {
    1 + varint_len(timestamp_delta)
        + varint_len(i64::from(offset_delta))
        + bytes_len(r.key)
        + bytes_len(Some(r.value))
        + varint_len(r.header_count() as i64)
        + r.all_headers()
            .map(|(k, v)| bytes_len(Some(k)) + bytes_len(Some(v)))
            .sum::<usize>()
}

/// Appends `record` to a batch body.
pub fn encode_record(
    buf: &mut Vec<u8>,
    record: &RecordRef<'_>,
    offset_delta: i32,
    timestamp_delta: i64,
) {
    let body = body_len(record, offset_delta, timestamp_delta);
    buf.reserve(body + 5);
    put_varint(buf, body as i64);
    buf.push(0); // attributes: unused in magic 2 records
    put_varint(buf, timestamp_delta);
    put_varint(buf, i64::from(offset_delta));
    put_bytes(buf, record.key);
    put_bytes(buf, Some(record.value));
    put_varint(buf, record.header_count() as i64);
    for (k, v) in record.all_headers() {
        put_bytes(buf, Some(k));
        put_bytes(buf, Some(v));
    }
}

/// Who wrote a batch, for the broker's idempotence check (-1s without it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
}

impl Stamp {
    pub const NONE: Stamp = Stamp {
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
    };
}

/// What a batch's header says besides the identity.
#[derive(Debug, Clone, Copy)]
pub struct BatchShape {
    pub count: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
}

fn codec_bits(c: Compression) -> i16 {
    match c {
        Compression::None => 0,
        Compression::Gzip => 1,
        Compression::Snappy => 2,
        Compression::Lz4 => 3,
        Compression::Zstd => 4,
    }
}

/// The batch's bytes: header, then `body` compressed with `compression`.
pub fn seal(
    body: &[u8],
    shape: BatchShape,
    compression: Compression,
    stamp: Stamp,
) -> anyhow::Result<Bytes> {
    let mut out = BytesMut::with_capacity(BATCH_HEADER_LEN + body.len());
    out.put_i64(0); // base offset: the broker assigns it
    out.put_i32(0); // batch length, below
    out.put_i32(-1); // partition leader epoch: the broker's to set
    out.put_i8(2); // magic
    out.put_u32(0); // CRC, below
    out.put_i16(codec_bits(compression));
    out.put_i32(shape.count - 1);
    out.put_i64(shape.base_timestamp);
    out.put_i64(shape.max_timestamp);
    out.put_i64(stamp.producer_id);
    out.put_i16(stamp.producer_epoch);
    out.put_i32(stamp.base_sequence);
    out.put_i32(shape.count);
    let copy = |b: &mut BytesMut| -> anyhow::Result<()> {
        b.put_slice(body);
        Ok(())
    };
    match compression {
        Compression::None => out.put_slice(body),
        Compression::Snappy => {
            // Raw snappy, as librdkafka writes it (Kafka and this broker
            // read raw and xerial-framed alike): no copy of the body first.
            let at = out.len();
            out.resize(at + snap::raw::max_compress_len(body.len()), 0);
            let n = snap::raw::Encoder::new().compress(body, &mut out[at..])?;
            out.truncate(at + n);
        }
        Compression::Gzip => Gzip::compress(&mut out, copy)?,
        Compression::Lz4 => Lz4::compress(&mut out, copy)?,
        Compression::Zstd => Zstd::compress(&mut out, copy)?,
    }
    let batch_len = i32::try_from(out.len() - 12)?;
    out[8..12].copy_from_slice(&batch_len.to_be_bytes());
    let crc = crc32c::crc32c(&out[ATTRIBUTES_OFFSET..]);
    out[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(out.freeze())
}

/// The same batch under another producer identity.
pub fn restamp(batch: &Bytes, stamp: Stamp) -> Bytes {
    let mut out = BytesMut::from(&batch[..]);
    let at = PRODUCER_ID_OFFSET;
    out[at..at + 8].copy_from_slice(&stamp.producer_id.to_be_bytes());
    out[at + 8..at + 10].copy_from_slice(&stamp.producer_epoch.to_be_bytes());
    out[at + 10..at + 14].copy_from_slice(&stamp.base_sequence.to_be_bytes());
    let crc = crc32c::crc32c(&out[ATTRIBUTES_OFFSET..]);
    out[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::records::RecordBatchDecoder;

    fn sample(compression: Compression) {
        let headers: [(&[u8], &[u8]); 1] = [(b"h", b"v")];
        let mut body = Vec::new();
        let values: [&[u8]; 3] = [b"one", b"", &[0xffu8; 300]];
        for (i, v) in values.iter().enumerate() {
            let r = RecordRef {
                timestamp_ms: 1_000 + i as i64,
                key: if i == 1 { None } else { Some(b"k") },
                value: v,
                headers: &headers,
                last_header: Some((b"chronik-env", &[7u8; 32])),
            };
            let before = body.len();
            encode_record(&mut body, &r, i as i32, r.timestamp_ms - 1_000);
            assert_eq!(
                body.len() - before,
                encoded_len(&r, i as i32, r.timestamp_ms - 1_000)
            );
        }
        let shape = BatchShape {
            count: 3,
            base_timestamp: 1_000,
            max_timestamp: 1_002,
        };
        let stamp = Stamp {
            producer_id: 42,
            producer_epoch: 0,
            base_sequence: 7,
        };
        let sealed = seal(&body, shape, compression, stamp).expect("sealing");
        let again = Stamp {
            producer_id: 43,
            producer_epoch: 1,
            base_sequence: 0,
        };
        for (bytes, s) in [(sealed.clone(), stamp), (restamp(&sealed, again), again)] {
            let mut buf = bytes.clone();
            let set = RecordBatchDecoder::decode(&mut buf).expect("a valid batch, CRC included");
            assert_eq!(set.records.len(), 3);
            for (i, rec) in set.records.iter().enumerate() {
                assert_eq!(rec.producer_id, s.producer_id);
                assert_eq!(rec.producer_epoch, s.producer_epoch);
                assert_eq!(rec.sequence, s.base_sequence + i as i32);
                assert_eq!(rec.offset, i as i64);
                assert_eq!(rec.timestamp, 1_000 + i as i64);
                assert_eq!(rec.value.as_deref(), Some(values[i]));
                assert_eq!(rec.headers.len(), 2);
            }
            assert!(set.records[1].key.is_none());
        }
    }

    #[test]
    fn batches_decode_with_every_codec() {
        for c in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            sample(c);
        }
    }

    #[test]
    fn varints_match_their_lengths() {
        for v in [0i64, -1, 1, 63, 64, -64, -65, 1 << 20, i64::MAX, i64::MIN] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(b.len(), varint_len(v), "{v}");
        }
    }
}
