//! Walking the records inside one RecordBatch v2 — decompressing them first
//! with a bound — to validate a produced batch as Kafka's log validator does,
//! to find records by timestamp and to let the log cleaner pick records.
//!
//! Owns: the record layout (length, attributes, timestamp delta, offset
//! delta, key, value, headers; zigzag varints) as a reader that never
//! allocates per record (offset deltas increasing within the batch's range:
//! a cleaned batch has gaps), and the produce-time checks: the batch's offset
//! range matches its record count, so records are numbered 0..count in order,
//! every record is whole, nothing trails the last one, and the records
//! inflate to at most the given limit. Must not: change bytes (the log
//! stores client batches verbatim).

use crate::compression::decompress_bounded;
use crate::error::InvalidBatch;
use crate::record_batch::{BatchHeader, BATCH_HEADER_SIZE};

/// What a walk reports of each record; the slices borrow the (possibly
/// inflated) records section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordView<'a> {
    /// Absolute offset (base offset + offset delta).
    pub offset: i64,
    /// Absolute timestamp (base timestamp + timestamp delta).
    pub timestamp: i64,
    /// None for a null key.
    pub key: Option<&'a [u8]>,
    /// None for a null value (a tombstone).
    pub value: Option<&'a [u8]>,
    /// The whole record as stored: its length varint and its fields, ready
    /// to be copied into another batch with the same base offset and base
    /// timestamp.
    pub raw: &'a [u8],
}

/// What Kafka's log validator requires of a produced batch beyond framing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProduceRules {
    /// Bytes the records may inflate to (compressed batches).
    pub max_decompressed: usize,
    /// The topic is compacted (cleanup.policy contains compact): every
    /// record needs a key.
    pub require_keys: bool,
}

/// Checks one batch of a Produce request (`batch` holds exactly the batch):
/// Kafka's "inconsistent batch offset range", record framing, for
/// compressed batches that the records inflate within
/// `rules.max_decompressed`, and for a compacted topic that every record
/// has a key (Kafka's "Compacted topic cannot accept message without key").
pub fn validate_produced(
    batch: &[u8],
    header: &BatchHeader,
    rules: ProduceRules,
) -> Result<(), InvalidBatch> {
    if i64::from(header.last_offset_delta) + 1 != i64::from(header.records_count) {
        return Err(InvalidBatch::InconsistentOffsetRange {
            last_offset_delta: header.last_offset_delta,
            records_count: header.records_count,
        });
    }
    if header.is_control() {
        return Err(InvalidBatch::ControlBatchFromClient);
    }
    let mut keyless = None;
    walk(batch, header, rules.max_decompressed, |r| {
        if rules.require_keys && r.key.is_none() && keyless.is_none() {
            keyless = Some(r.offset - header.base_offset);
        }
    })?;
    match keyless {
        Some(delta) => Err(InvalidBatch::MissingKey {
            index: i32::try_from(delta).unwrap_or(i32::MAX),
        }),
        None => Ok(()),
    }
}

/// Calls `each` for every record of the stored `batch`, in order.
pub fn walk(
    batch: &[u8],
    header: &BatchHeader,
    max_decompressed: usize,
    mut each: impl FnMut(RecordView<'_>),
) -> Result<(), InvalidBatch> {
    let section = batch
        .get(BATCH_HEADER_SIZE..header.size)
        .ok_or(InvalidBatch::Truncated)?;
    let inflated;
    let records = if header.compression_codec() == 0 {
        section
    } else {
        inflated = decompress_bounded(header.compression_codec(), section, max_decompressed)?;
        &inflated[..]
    };
    let mut pos = 0usize;
    let mut previous_delta = -1i64;
    for index in 0..header.records_count {
        let start = pos;
        let length = read_varint(records, &mut pos)?;
        let length = usize::try_from(length).map_err(|_| InvalidBatch::BadRecord {
            index,
            reason: "negative length",
        })?;
        let end = pos
            .checked_add(length)
            .filter(|&e| e <= records.len())
            .ok_or(InvalidBatch::BadRecord {
                index,
                reason: "length past the batch",
            })?;
        let body = &records[pos..end];
        let mut p = 1usize; // attributes
        if body.is_empty() {
            return Err(InvalidBatch::BadRecord {
                index,
                reason: "empty record",
            });
        }
        let timestamp_delta = read_varint(body, &mut p)?;
        let offset_delta = read_varint(body, &mut p)?;
        // Increasing within the batch's range: a produced batch, whose
        // record count is its offset range, is then numbered 0..count; a
        // batch the cleaner rewrote keeps its records' offsets, with gaps.
        if offset_delta <= previous_delta || offset_delta > i64::from(header.last_offset_delta) {
            return Err(InvalidBatch::BadRecord {
                index,
                reason: "offset delta out of sequence",
            });
        }
        previous_delta = offset_delta;
        let key = take_bytes(body, &mut p, index)?;
        let value = take_bytes(body, &mut p, index)?;
        let headers = read_varint(body, &mut p)?;
        if headers < 0 {
            return Err(InvalidBatch::BadRecord {
                index,
                reason: "negative header count",
            });
        }
        for _ in 0..headers {
            let key_len = read_varint(body, &mut p)?;
            if key_len < 0 {
                return Err(InvalidBatch::BadRecord {
                    index,
                    reason: "null header key",
                });
            }
            advance(body, &mut p, key_len, index)?;
            take_bytes(body, &mut p, index)?;
        }
        if p != body.len() {
            return Err(InvalidBatch::BadRecord {
                index,
                reason: "record length does not match its fields",
            });
        }
        each(RecordView {
            offset: header.base_offset.saturating_add(offset_delta),
            timestamp: header.base_timestamp.saturating_add(timestamp_delta),
            key,
            value,
            raw: &records[start..end],
        });
        pos = end;
    }
    if pos != records.len() {
        return Err(InvalidBatch::TrailingBytes {
            count: header.records_count,
        });
    }
    Ok(())
}

fn read_varint(buf: &[u8], pos: &mut usize) -> Result<i64, InvalidBatch> {
    let mut result: u64 = 0;
    for shift in (0..64).step_by(7) {
        let byte = *buf.get(*pos).ok_or(InvalidBatch::Truncated)?;
        *pos += 1;
        result |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(((result >> 1) as i64) ^ -((result & 1) as i64));
        }
    }
    Err(InvalidBatch::Truncated)
}

/// A varint length then that many bytes (-1 = null), returned.
fn take_bytes<'a>(
    buf: &'a [u8],
    pos: &mut usize,
    index: i32,
) -> Result<Option<&'a [u8]>, InvalidBatch> {
    let len = read_varint(buf, pos)?;
    if len == -1 {
        return Ok(None);
    }
    let start = *pos;
    advance(buf, pos, len, index)?;
    Ok(Some(&buf[start..*pos]))
}

fn advance(buf: &[u8], pos: &mut usize, len: i64, index: i32) -> Result<(), InvalidBatch> {
    let len = usize::try_from(len).map_err(|_| InvalidBatch::BadRecord {
        index,
        reason: "negative field length",
    })?;
    let end = pos
        .checked_add(len)
        .filter(|&e| e <= buf.len())
        .ok_or(InvalidBatch::BadRecord {
            index,
            reason: "field past the record",
        })?;
    *pos = end;
    Ok(())
}

/// Produce rules of a delete-policy topic with a 1 MiB inflation limit.
#[cfg(test)]
const RULES: ProduceRules = ProduceRules {
    max_decompressed: 1 << 20,
    require_keys: false,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record_batch::parse_batch;
    use crate::records::{build_batch, SimpleRecord};

    fn batch_of(n: usize) -> Vec<u8> {
        let records: Vec<SimpleRecord> = (0..n)
            .map(|i| SimpleRecord {
                key: None,
                value: Some(bytes::Bytes::from(format!("v{i}"))),
                timestamp: 1000 + i as i64,
            })
            .collect();
        build_batch(&records)
    }

    fn refresh_crc(batch: &mut [u8]) {
        let crc = crc32c::crc32c(&batch[21..]);
        batch[17..21].copy_from_slice(&crc.to_be_bytes());
    }

    #[test]
    fn a_well_formed_batch_walks_every_record() {
        let batch = batch_of(5);
        let header = parse_batch(&batch, 0).expect("valid");
        validate_produced(&batch, &header, RULES).expect("valid batch");
        let mut seen = Vec::new();
        walk(&batch, &header, 1 << 20, |r| {
            seen.push((
                r.offset,
                r.timestamp,
                r.key.is_some(),
                r.value.map(<[u8]>::to_vec),
            ));
        })
        .expect("walk");
        assert_eq!(seen.len(), 5);
        assert_eq!(seen[3], (3, 1003, false, Some(b"v3".to_vec())));
    }

    #[test]
    fn a_cleaned_batch_with_gaps_walks_but_a_produced_one_is_refused() {
        let batch = batch_of(4);
        let header = parse_batch(&batch, 0).expect("valid");
        let mut kept = Vec::new();
        walk(&batch, &header, 1 << 20, |r| {
            if r.offset % 2 == 1 {
                kept.extend_from_slice(r.raw);
            }
        })
        .expect("walk");
        let cleaned = crate::records::rebuild_batch(&batch, &kept, 2);
        let cleaned_header = parse_batch(&cleaned, 0).expect("valid");
        let mut offsets = Vec::new();
        walk(&cleaned, &cleaned_header, 1 << 20, |r| {
            offsets.push((r.offset, r.timestamp))
        })
        .expect("a cleaned batch keeps its records' offsets");
        assert_eq!(offsets, vec![(1, 1001), (3, 1003)]);
        assert!(
            matches!(
                validate_produced(&cleaned, &cleaned_header, RULES),
                Err(InvalidBatch::InconsistentOffsetRange { .. })
            ),
            "a produced batch's offsets have no gaps"
        );
        let mut reversed = kept[..kept.len() / 2].to_vec();
        reversed.splice(0..0, kept[kept.len() / 2..].iter().copied());
        let reversed = crate::records::rebuild_batch(&batch, &reversed, 2);
        let reversed_header = parse_batch(&reversed, 0).expect("valid");
        assert!(
            walk(&reversed, &reversed_header, 1 << 20, |_| {}).is_err(),
            "offsets must increase"
        );
    }

    #[test]
    fn a_compacted_topic_refuses_keyless_records() {
        let batch = batch_of(2);
        let header = parse_batch(&batch, 0).expect("valid");
        let compacted = ProduceRules {
            require_keys: true,
            ..RULES
        };
        assert!(matches!(
            validate_produced(&batch, &header, compacted),
            Err(InvalidBatch::MissingKey { index: 0 })
        ));
    }

    #[test]
    fn an_offset_range_larger_than_the_record_count_is_refused() {
        let mut batch = batch_of(1);
        // lastOffsetDelta = 2^31 - 1 with one record: would burn 2^31 offsets.
        batch[23..27].copy_from_slice(&i32::MAX.to_be_bytes());
        refresh_crc(&mut batch);
        let header = parse_batch(&batch, 0).expect("CRC-valid");
        assert!(matches!(
            validate_produced(&batch, &header, RULES),
            Err(InvalidBatch::InconsistentOffsetRange { .. })
        ));
    }

    #[test]
    fn a_record_count_larger_than_the_records_is_refused() {
        let mut batch = batch_of(2);
        batch[23..27].copy_from_slice(&2i32.to_be_bytes());
        batch[57..61].copy_from_slice(&3i32.to_be_bytes());
        refresh_crc(&mut batch);
        let header = parse_batch(&batch, 0).expect("CRC-valid");
        assert!(validate_produced(&batch, &header, RULES).is_err());
    }
}

#[cfg(test)]
mod kafka_protocol_batches {
    use bytes::{Bytes, BytesMut};
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    use super::*;
    use crate::record_batch::parse_batch;

    #[test]
    fn batches_a_real_encoder_writes_validate_with_every_codec() {
        for compression in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let records: Vec<Record> = (0..3)
                .map(|i| Record {
                    transactional: false,
                    control: false,
                    delete_horizon: false,
                    partition_leader_epoch: -1,
                    producer_id: -1,
                    producer_epoch: -1,
                    timestamp_type: TimestampType::Creation,
                    offset: i,
                    sequence: i as i32 - 1,
                    timestamp: 1_700_000_000_000 + i,
                    key: Some(Bytes::from("k")),
                    value: Some(Bytes::from(format!("value-{i}"))),
                    headers: [(
                        kafka_protocol::protocol::StrBytes::from_static_str("h"),
                        Some(Bytes::from("x")),
                    )]
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
            .expect("encode");
            let header = parse_batch(&out, 0).expect("parse");
            assert_eq!(
                (header.size, header.records_count),
                (out.len(), 3),
                "{compression:?}: one batch of 3"
            );
            validate_produced(&out, &header, RULES)
                .unwrap_or_else(|e| panic!("{compression:?}: {e}"));
        }
    }
}
