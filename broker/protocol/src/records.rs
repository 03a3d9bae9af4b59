//! Building and reading uncompressed RecordBatch v2 contents, for the data
//! the broker writes itself (committed offsets in `__consumer_offsets`).
//!
//! Owns: Kafka's record encoding (zigzag varints, key/value/headers) for
//! uncompressed batches the broker writes, and the one look inside client
//! batches the broker needs: ListOffsets' record-exact timestamp lookup,
//! which walks (and if needed decompresses, bounded) a single batch; and the
//! log cleaner's rewrites (records dropped, a delete horizon stamped). Produce and
//! Fetch never come here: they keep client records as opaque bytes.

use bytes::Bytes;

use crate::error::BatchError;
use crate::record_batch::{
    parse_batch, BatchHeader, BATCH_HEADER_SIZE, DELETE_HORIZON_FLAG, LOG_OVERHEAD,
};

/// A record the broker writes or reads back (no headers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleRecord {
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub timestamp: i64,
}

fn put_varint(buf: &mut Vec<u8>, value: i64) {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

fn get_varint(buf: &[u8], pos: &mut usize) -> Option<i64> {
    let mut result: u64 = 0;
    for shift in (0..64).step_by(7) {
        let byte = *buf.get(*pos)?;
        *pos += 1;
        result |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(((result >> 1) as i64) ^ -((result & 1) as i64));
        }
    }
    None
}

fn put_bytes(buf: &mut Vec<u8>, bytes: Option<&Bytes>) {
    match bytes {
        Some(b) => {
            put_varint(buf, b.len() as i64);
            buf.extend_from_slice(b);
        }
        None => put_varint(buf, -1),
    }
}

fn get_bytes(buf: &[u8], pos: &mut usize) -> Option<Option<Bytes>> {
    let len = get_varint(buf, pos)?;
    if len < 0 {
        return Some(None);
    }
    let end = pos.checked_add(usize::try_from(len).ok()?)?;
    let slice = buf.get(*pos..end)?;
    *pos = end;
    Some(Some(Bytes::copy_from_slice(slice)))
}

/// Encodes `records` as one uncompressed v2 batch with base offset 0 (the
/// log assigns the real one), no producer id, CreateTime timestamps.
pub fn build_batch(records: &[SimpleRecord]) -> Vec<u8> {
    let base_timestamp = records.first().map(|r| r.timestamp).unwrap_or(0);
    let max_timestamp = records
        .iter()
        .map(|r| r.timestamp)
        .max()
        .unwrap_or(base_timestamp);
    let mut body = Vec::new();
    for (delta, record) in records.iter().enumerate() {
        let mut r = Vec::new();
        r.push(0u8); // attributes
        put_varint(&mut r, record.timestamp - base_timestamp);
        put_varint(&mut r, delta as i64);
        put_bytes(&mut r, record.key.as_ref());
        put_bytes(&mut r, record.value.as_ref());
        put_varint(&mut r, 0); // headers
        put_varint(&mut body, r.len() as i64);
        body.extend_from_slice(&r);
    }
    let mut batch = Vec::with_capacity(BATCH_HEADER_SIZE + body.len());
    batch.extend_from_slice(&0i64.to_be_bytes());
    batch.extend_from_slice(&[0u8; 4]); // batch length, set by seal_batch
    batch.extend_from_slice(&0i32.to_be_bytes()); // partition leader epoch
    batch.push(2); // magic
    batch.extend_from_slice(&[0u8; 4]); // crc, set by seal_batch
    batch.extend_from_slice(&0i16.to_be_bytes()); // attributes
    batch.extend_from_slice(&(records.len().saturating_sub(1) as i32).to_be_bytes());
    batch.extend_from_slice(&base_timestamp.to_be_bytes());
    batch.extend_from_slice(&max_timestamp.to_be_bytes());
    batch.extend_from_slice(&(-1i64).to_be_bytes()); // producer id
    batch.extend_from_slice(&(-1i16).to_be_bytes()); // producer epoch
    batch.extend_from_slice(&(-1i32).to_be_bytes()); // base sequence
    batch.extend_from_slice(&(records.len() as i32).to_be_bytes());
    batch.extend_from_slice(&body);
    seal_batch(&mut batch);
    batch
}

/// Sets the batch length field and the CRC of a v2 batch whose header and
/// records are otherwise final.
fn seal_batch(batch: &mut [u8]) {
    let length = i32::try_from(batch.len() - LOG_OVERHEAD).unwrap_or(i32::MAX);
    batch[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// The stored `batch` holding only `count` of its records, `records` (their
/// `raw` bytes from `record_walk::walk` of this batch, concatenated in
/// order), uncompressed: what the log cleaner writes back. Base offset,
/// last offset delta, timestamps, producer fields and leader epoch are
/// kept, so no offset moves (compaction leaves gaps); the compression bits
/// are cleared and the record count, length and CRC recomputed. `count`
/// may be 0: Kafka's cleaner keeps such an empty batch when it must retain
/// the batch's producer state or offset range.
pub fn rebuild_batch(batch: &[u8], records: &[u8], count: i32) -> Vec<u8> {
    let mut out = Vec::with_capacity(BATCH_HEADER_SIZE + records.len());
    out.extend_from_slice(&batch[..BATCH_HEADER_SIZE]);
    out.extend_from_slice(records);
    let attributes = i16::from_be_bytes([out[21], out[22]]) & !COMPRESSION_BITS;
    out[21..23].copy_from_slice(&attributes.to_be_bytes());
    out[57..61].copy_from_slice(&count.to_be_bytes());
    seal_batch(&mut out);
    out
}

/// RecordBatch attributes bits 0-2: the compression codec.
const COMPRESSION_BITS: i16 = 0x07;

/// The uncompressed stored `batch` with its delete horizon set to
/// `horizon_ms` (KIP-534, as Kafka's cleaner stamps it): the base timestamp
/// becomes the horizon, attributes bit 6 is set, and every record's
/// timestamp delta is re-encoded against the new base, so each record keeps
/// its timestamp (max timestamp, offsets and producer fields unchanged);
/// length and CRC are recomputed. None when the batch is compressed or a
/// record does not decode (the caller keeps the batch as it is).
pub fn set_delete_horizon(batch: &[u8], horizon_ms: i64) -> Option<Vec<u8>> {
    let header = parse_batch(batch, 0).ok()?;
    if header.compression_codec() != 0 || header.size != batch.len() {
        return None;
    }
    // A record grows by at most 9 bytes (a longer timestamp delta) and
    // takes at least 7: twice the batch is room enough, whatever the
    // header's record count says.
    let mut out = Vec::with_capacity(batch.len().saturating_mul(2));
    out.extend_from_slice(&batch[..BATCH_HEADER_SIZE]);
    let mut pos = BATCH_HEADER_SIZE;
    let mut record = Vec::new();
    for _ in 0..header.records_count {
        let len = usize::try_from(get_varint(batch, &mut pos)?).ok()?;
        let body = batch.get(pos..pos.checked_add(len)?)?;
        pos += len;
        let mut p = 1; // attributes
        let timestamp = header
            .base_timestamp
            .checked_add(get_varint(body, &mut p)?)?;
        record.clear();
        record.push(*body.first()?);
        put_varint(&mut record, timestamp.checked_sub(horizon_ms)?);
        record.extend_from_slice(&body[p..]);
        put_varint(&mut out, i64::try_from(record.len()).ok()?);
        out.extend_from_slice(&record);
    }
    if pos != batch.len() {
        return None;
    }
    let attributes = header.attributes | DELETE_HORIZON_FLAG;
    out[21..23].copy_from_slice(&attributes.to_be_bytes());
    out[27..35].copy_from_slice(&horizon_ms.to_be_bytes());
    seal_batch(&mut out);
    Some(out)
}

/// Reads every (offset, record) of the uncompressed batches in `buf`.
/// Compressed batches are reported as errors: the broker never writes them.
pub fn read_records(buf: &[u8]) -> Result<Vec<(i64, SimpleRecord)>, BatchError> {
    let mut out = Vec::new();
    let mut position = 0;
    while position < buf.len() {
        let header = parse_batch(buf, position)?;
        read_batch_records(&buf[position..position + header.size], &header, &mut out)?;
        position += header.size;
    }
    Ok(out)
}

fn read_batch_records(
    batch: &[u8],
    header: &BatchHeader,
    out: &mut Vec<(i64, SimpleRecord)>,
) -> Result<(), BatchError> {
    let malformed = || BatchError::InvalidLength {
        position: header.position,
        batch_length: header.size as i32,
    };
    if header.compression_codec() != 0 {
        return Err(malformed());
    }
    let mut pos = BATCH_HEADER_SIZE;
    for _ in 0..header.records_count {
        let len = get_varint(batch, &mut pos).ok_or_else(malformed)?;
        let end = usize::try_from(len)
            .ok()
            .and_then(|len| pos.checked_add(len))
            .filter(|&end| end > pos && end <= batch.len())
            .ok_or_else(malformed)?;
        // Fields are read within this record only.
        let record = &batch[..end];
        let mut p = pos + 1; // attributes
        let ts_delta = get_varint(record, &mut p).ok_or_else(malformed)?;
        let offset_delta = get_varint(record, &mut p).ok_or_else(malformed)?;
        let key = get_bytes(record, &mut p).ok_or_else(malformed)?;
        let value = get_bytes(record, &mut p).ok_or_else(malformed)?;
        out.push((
            header
                .base_offset
                .checked_add(offset_delta)
                .ok_or_else(malformed)?,
            SimpleRecord {
                key,
                value,
                timestamp: header
                    .base_timestamp
                    .checked_add(ts_delta)
                    .ok_or_else(malformed)?,
            },
        ));
        pos = end;
    }
    Ok(())
}

/// Within one stored batch (`batch` starts at its first byte), the first
/// record whose timestamp is at or after `timestamp` — Kafka's ListOffsets
/// rule — decompressing if needed, never past `max_decompressed` bytes (a
/// batch that inflates further, or does not decode, has no answer).
/// `timestamp = None` finds the record with the batch's largest timestamp
/// instead. Returns (offset, timestamp).
pub fn find_record_by_timestamp(
    batch: &[u8],
    timestamp: Option<i64>,
    max_decompressed: usize,
) -> Option<(i64, i64)> {
    let header = parse_batch(batch, 0).ok()?;
    if header.is_control() {
        return None;
    }
    let mut found: Option<(i64, i64)> = None;
    crate::record_walk::walk(batch, &header, max_decompressed, |r| match timestamp {
        Some(ts) => {
            if found.is_none() && r.timestamp >= ts {
                found = Some((r.offset, r.timestamp));
            }
        }
        None => {
            if found.is_none_or(|(_, best)| r.timestamp > best) {
                found = Some((r.offset, r.timestamp));
            }
        }
    })
    .ok()?;
    found
}

/// Kafka's control record types (the key's second field).
pub const CONTROL_TYPE_ABORT: i16 = 0;
pub const CONTROL_TYPE_COMMIT: i16 = 1;

/// A transaction marker as Kafka writes it: one uncompressed v2 batch with
/// the transactional and control attributes, no sequence, and one control
/// record — key (version 0, COMMIT or ABORT), value Kafka's
/// EndTransactionMarker (version 0, coordinator epoch). Base offset and
/// leader epoch are 0: the leader's append assigns them.
pub fn build_control_batch(
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
    timestamp_ms: i64,
) -> Vec<u8> {
    let kind = if commit {
        CONTROL_TYPE_COMMIT
    } else {
        CONTROL_TYPE_ABORT
    };
    let key = [0i16.to_be_bytes(), kind.to_be_bytes()].concat();
    let value = [
        &0i16.to_be_bytes()[..],
        &coordinator_epoch.to_be_bytes()[..],
    ]
    .concat();
    let mut batch = build_batch(&[SimpleRecord {
        key: Some(Bytes::from(key)),
        value: Some(Bytes::from(value)),
        timestamp: timestamp_ms,
    }]);
    // attributes (transactional | control), producer id and epoch; the
    // base sequence stays -1.
    batch[21..23].copy_from_slice(&0x30i16.to_be_bytes());
    batch[43..51].copy_from_slice(&producer_id.to_be_bytes());
    batch[51..53].copy_from_slice(&producer_epoch.to_be_bytes());
    seal_batch(&mut batch);
    batch
}

/// The control type of the control batch in `batch` (a whole batch, or at
/// least its header and first record): the second i16 of its first
/// record's key. None when it cannot be read (bounds-checked: never panics
/// on hostile bytes).
pub fn control_record_type(batch: &[u8]) -> Option<i16> {
    let mut pos = crate::record_batch::BATCH_HEADER_SIZE;
    let _length = get_varint(batch, &mut pos)?;
    pos = pos.checked_add(1)?; // record attributes
    let _timestamp_delta = get_varint(batch, &mut pos)?;
    let _offset_delta = get_varint(batch, &mut pos)?;
    let key_len = get_varint(batch, &mut pos)?;
    if key_len < 4 {
        return None;
    }
    let key = batch.get(pos..pos.checked_add(4)?)?;
    Some(i16::from_be_bytes([key[2], key[3]]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record_batch::{parse_batches, set_base_offset};

    #[test]
    fn a_delete_horizon_keeps_every_record_and_its_timestamp() {
        let records: Vec<SimpleRecord> = [(Some("k"), Some("v"), 5_000), (Some("k2"), None, 4_000)]
            .iter()
            .map(|&(k, v, ts)| SimpleRecord {
                key: k.map(|k| Bytes::from(k.to_string())),
                value: v.map(|v| Bytes::from(v.to_string())),
                timestamp: ts,
            })
            .collect();
        let mut batch = build_batch(&records);
        set_base_offset(&mut batch, 0, 40);
        let stamped = set_delete_horizon(&batch, 1_000_000).expect("uncompressed batch");
        let header = parse_batch(&stamped, 0).expect("the CRC was recomputed");
        assert_eq!(header.delete_horizon_ms(), Some(1_000_000));
        assert_eq!(
            parse_batch(&batch, 0).expect("valid").delete_horizon_ms(),
            None
        );
        assert_eq!(
            (
                header.base_offset,
                header.max_timestamp,
                header.records_count
            ),
            (40, 5_000, 2)
        );
        let read: Vec<(i64, SimpleRecord)> = read_records(&stamped).expect("readable");
        let expected: Vec<(i64, SimpleRecord)> = (40..).zip(records).collect();
        assert_eq!(read, expected);
        let mut walked = Vec::new();
        crate::record_walk::walk(&stamped, &header, 1 << 20, |r| walked.push(r.timestamp))
            .expect("walkable");
        assert_eq!(walked, vec![5_000, 4_000]);
        let again = set_delete_horizon(&stamped, 7).expect("restamped");
        assert_eq!(read_records(&again).expect("readable"), read);
    }

    #[test]
    fn a_rebuilt_batch_keeps_offsets_and_drops_records() {
        let records: Vec<SimpleRecord> = (0..4)
            .map(|i| SimpleRecord {
                key: Some(Bytes::from(format!("k{i}"))),
                value: Some(Bytes::from(format!("v{i}"))),
                timestamp: 1000 + i,
            })
            .collect();
        let mut batch = build_batch(&records);
        set_base_offset(&mut batch, 0, 70);
        let header = parse_batch(&batch, 0).expect("valid");
        let mut raws = Vec::new();
        crate::record_walk::walk(&batch, &header, 1 << 20, |r| raws.push(r.raw.to_vec()))
            .expect("walk");
        let rebuilt = rebuild_batch(&batch, &[raws[1].clone(), raws[3].clone()].concat(), 2);
        let h = parse_batch(&rebuilt, 0).expect("CRC and length recomputed");
        assert_eq!(
            (h.base_offset, h.last_offset(), h.records_count),
            (70, 73, 2)
        );
        let read = read_records(&rebuilt).expect("readable");
        assert_eq!(
            read.iter()
                .map(|(o, r)| (*o, r.key.clone()))
                .collect::<Vec<_>>(),
            vec![(71, Some(Bytes::from("k1"))), (73, Some(Bytes::from("k3")))]
        );
        let empty = rebuild_batch(&batch, &[], 0);
        let h = parse_batch(&empty, 0).expect("an empty batch is valid");
        assert_eq!((h.last_offset(), h.records_count, h.size), (73, 0, 61));
    }

    #[test]
    fn round_trips_records_including_nulls() {
        let records = vec![
            SimpleRecord {
                key: Some(Bytes::from("k1")),
                value: Some(Bytes::from("v1")),
                timestamp: 1000,
            },
            SimpleRecord {
                key: Some(Bytes::from("k2")),
                value: None,
                timestamp: 1005,
            },
            SimpleRecord {
                key: None,
                value: Some(Bytes::from(vec![7u8; 300])),
                timestamp: 999,
            },
        ];
        let mut batch = build_batch(&records);
        let headers = parse_batches(&batch).expect("a valid batch with a correct CRC");
        assert_eq!(headers[0].records_count, 3);
        assert_eq!(headers[0].max_timestamp, 1005);
        set_base_offset(&mut batch, 0, 40);
        let read = read_records(&batch).expect("readable");
        assert_eq!(read.len(), 3);
        assert_eq!(read[1].0, 41);
        assert_eq!(
            read.iter().map(|(_, r)| r.clone()).collect::<Vec<_>>(),
            records
        );
    }

    #[test]
    fn finds_the_exact_record_for_a_timestamp() {
        let records: Vec<SimpleRecord> = [100, 105, 103, 110]
            .iter()
            .map(|ts| SimpleRecord {
                key: None,
                value: Some(Bytes::from("v")),
                timestamp: *ts,
            })
            .collect();
        let mut batch = build_batch(&records);
        set_base_offset(&mut batch, 0, 10);
        assert_eq!(
            find_record_by_timestamp(&batch, Some(104), 1 << 20),
            Some((11, 105))
        );
        assert_eq!(
            find_record_by_timestamp(&batch, Some(100), 1 << 20),
            Some((10, 100))
        );
        assert_eq!(find_record_by_timestamp(&batch, Some(111), 1 << 20), None);
        assert_eq!(
            find_record_by_timestamp(&batch, None, 1 << 20),
            Some((13, 110))
        );
    }

    #[test]
    fn offsets_and_timestamps_that_overflow_are_malformed_not_a_panic() {
        // Found by the record_batch fuzz target: base timestamp near i64::MAX
        // plus a record's positive delta.
        let records = [SimpleRecord {
            key: None,
            value: Some(Bytes::from("v")),
            timestamp: i64::MAX,
        }];
        let mut batch = build_batch(&records);
        batch[27..35].copy_from_slice(&i64::MAX.to_be_bytes());
        // The record's timestamp delta is 0; make it 5 (zigzag 10).
        let delta_at = BATCH_HEADER_SIZE + 1 + 1;
        batch[delta_at] = 10;
        let crc = crc32c::crc32c(&batch[21..]);
        batch[17..21].copy_from_slice(&crc.to_be_bytes());
        assert!(read_records(&batch).is_err());
    }

    #[test]
    fn control_batches_carry_their_type_and_a_valid_crc() {
        for (commit, kind) in [(true, CONTROL_TYPE_COMMIT), (false, CONTROL_TYPE_ABORT)] {
            let batch = build_control_batch(42, 3, commit, 7, 1000);
            let h = crate::record_batch::parse_batch(&batch, 0).expect("a valid batch");
            assert!(h.is_control() && h.is_transactional());
            assert_eq!(
                (h.producer_id, h.producer_epoch, h.base_sequence),
                (42, 3, -1)
            );
            assert_eq!(control_record_type(&batch), Some(kind));
        }
        let batch = build_control_batch(1, 0, true, 0, 0);
        for cut in 0..batch.len() {
            // never panics; a cut inside the key reads nothing
            let _ = control_record_type(&batch[..cut]);
        }
        assert_eq!(control_record_type(&batch[..60]), None);
    }

    #[test]
    fn varints_match_kafkas_zigzag_encoding() {
        let mut buf = Vec::new();
        put_varint(&mut buf, -1);
        put_varint(&mut buf, 300);
        assert_eq!(buf, vec![0x01, 0xd8, 0x04]);
        let mut pos = 0;
        assert_eq!(get_varint(&buf, &mut pos), Some(-1));
        assert_eq!(get_varint(&buf, &mut pos), Some(300));
        assert_eq!(
            get_varint(&[0xff, 0xff], &mut 0),
            None,
            "an unterminated varint is an error"
        );
    }
}
