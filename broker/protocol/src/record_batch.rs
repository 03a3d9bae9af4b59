//! A read-only view of Kafka RecordBatch (magic v2) headers, plus the two
//! in-place rewrites the broker performs (base offset, partition leader epoch).
//!
//! Owns: the on-wire/on-disk batch header layout, batch boundary walking and
//! CRC-32C verification. Records stay opaque bytes: the broker never
//! decompresses or re-encodes them, so every compression codec is accepted.
//! Must not: allocate per record, do I/O, or trust any length before checking
//! it against the bytes actually present.

use crate::error::BatchError;

/// Bytes before `batchLength`'s coverage starts (baseOffset + batchLength).
pub const LOG_OVERHEAD: usize = 12;
/// Size of a v2 RecordBatch header, up to and including the record count.
pub const BATCH_HEADER_SIZE: usize = 61;
/// The only record format this broker stores.
pub const MAGIC_V2: i8 = 2;

const BASE_OFFSET: usize = 0;
const BATCH_LENGTH: usize = 8;
const PARTITION_LEADER_EPOCH: usize = 12;
const MAGIC: usize = 16;
const CRC: usize = 17;
const ATTRIBUTES: usize = 21;
const LAST_OFFSET_DELTA: usize = 23;
const BASE_TIMESTAMP: usize = 27;
const MAX_TIMESTAMP: usize = 35;
const PRODUCER_ID: usize = 43;
const PRODUCER_EPOCH: usize = 51;
const BASE_SEQUENCE: usize = 53;
const RECORDS_COUNT: usize = 57;

const COMPRESSION_MASK: i16 = 0x07;
const TRANSACTIONAL_FLAG: i16 = 0x10;
const CONTROL_FLAG: i16 = 0x20;
/// KIP-534: the base timestamp holds the batch's delete horizon.
pub const DELETE_HORIZON_FLAG: i16 = 0x40;

/// Decoded header fields of one RecordBatch. `position` is the batch's byte
/// offset inside the buffer it was parsed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub position: usize,
    pub base_offset: i64,
    /// Total size of the batch in bytes, including the 12-byte log overhead.
    pub size: usize,
    pub partition_leader_epoch: i32,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl BatchHeader {
    pub fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta)
    }
    /// Number of offsets this batch occupies.
    pub fn offset_count(&self) -> i64 {
        i64::from(self.last_offset_delta) + 1
    }
    pub fn compression_codec(&self) -> i16 {
        self.attributes & COMPRESSION_MASK
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_FLAG != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_FLAG != 0
    }
    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }
    /// The delete horizon the log cleaner stamped on this batch (KIP-534:
    /// attributes bit 6, the base timestamp holding it): its tombstones, or
    /// the transaction marker it is, may go once the horizon has passed.
    pub fn delete_horizon_ms(&self) -> Option<i64> {
        (self.attributes & DELETE_HORIZON_FLAG != 0).then_some(self.base_timestamp)
    }
}

fn read_i16(buf: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([buf[at], buf[at + 1]])
}
fn read_i32(buf: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
}
fn read_i64(buf: &[u8], at: usize) -> i64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    i64::from_be_bytes(b)
}

/// The last offset of the last whole batch in `buf` (batches as the log
/// returns them), walking only the length fields: no CRC check. None when
/// `buf` holds no whole batch.
pub fn last_offset_in(buf: &[u8]) -> Option<i64> {
    let (mut pos, mut last) = (0usize, None);
    while buf.len().saturating_sub(pos) >= BATCH_HEADER_SIZE {
        let length = usize::try_from(read_i32(buf, pos + 8)).ok()?;
        let end = pos.checked_add(LOG_OVERHEAD)?.checked_add(length)?;
        if end > buf.len() || length < BATCH_HEADER_SIZE - LOG_OVERHEAD {
            break;
        }
        last = Some(read_i64(buf, pos) + i64::from(read_i32(buf, pos + 23)));
        pos = end;
    }
    last
}

/// Parses the header of the batch that starts at `buf[position..]`, checking
/// that the whole batch is present, that it is magic v2 and that its CRC-32C
/// matches. Does not look at records.
pub fn parse_batch(buf: &[u8], position: usize) -> Result<BatchHeader, BatchError> {
    let rest = buf.get(position..).ok_or(BatchError::Truncated {
        position,
        needed: LOG_OVERHEAD,
        available: 0,
    })?;
    if rest.len() < LOG_OVERHEAD + 5 {
        return Err(BatchError::Truncated {
            position,
            needed: LOG_OVERHEAD + 5,
            available: rest.len(),
        });
    }
    let batch_length = read_i32(rest, BATCH_LENGTH);
    let magic = rest[MAGIC] as i8;
    if magic != MAGIC_V2 {
        return Err(BatchError::UnsupportedMagic { position, magic });
    }
    if batch_length < (BATCH_HEADER_SIZE - LOG_OVERHEAD) as i32 {
        return Err(BatchError::InvalidLength {
            position,
            batch_length,
        });
    }
    let size = LOG_OVERHEAD + batch_length as usize;
    if rest.len() < size {
        return Err(BatchError::Truncated {
            position,
            needed: size,
            available: rest.len(),
        });
    }
    let batch = &rest[..size];
    let stored_crc = read_i32(batch, CRC) as u32;
    let computed_crc = crc32c::crc32c(&batch[ATTRIBUTES..]);
    if stored_crc != computed_crc {
        return Err(BatchError::CrcMismatch {
            position,
            stored: stored_crc,
            computed: computed_crc,
        });
    }
    let header = BatchHeader {
        position,
        base_offset: read_i64(batch, BASE_OFFSET),
        size,
        partition_leader_epoch: read_i32(batch, PARTITION_LEADER_EPOCH),
        crc: stored_crc,
        attributes: read_i16(batch, ATTRIBUTES),
        last_offset_delta: read_i32(batch, LAST_OFFSET_DELTA),
        base_timestamp: read_i64(batch, BASE_TIMESTAMP),
        max_timestamp: read_i64(batch, MAX_TIMESTAMP),
        producer_id: read_i64(batch, PRODUCER_ID),
        producer_epoch: read_i16(batch, PRODUCER_EPOCH),
        base_sequence: read_i32(batch, BASE_SEQUENCE),
        records_count: read_i32(batch, RECORDS_COUNT),
    };
    if header.last_offset_delta < 0 || header.records_count < 0 {
        return Err(BatchError::InvalidLength {
            position,
            batch_length,
        });
    }
    Ok(header)
}

/// Walks every batch in `buf`, which must consist of whole, valid batches
/// back to back (a produce request's records, or a log segment's contents).
pub fn parse_batches(buf: &[u8]) -> Result<Vec<BatchHeader>, BatchError> {
    let mut headers = Vec::new();
    let mut position = 0;
    while position < buf.len() {
        let header = parse_batch(buf, position)?;
        position += header.size;
        headers.push(header);
    }
    Ok(headers)
}

/// Iterates valid batches from the start of `buf` and stops at the first
/// invalid or incomplete one; `valid_bytes()` then says where the valid prefix
/// ends. Used by log recovery to find a torn or corrupt tail.
#[derive(Debug)]
pub struct BatchScanner<'a> {
    buf: &'a [u8],
    position: usize,
    error: Option<BatchError>,
}

impl<'a> BatchScanner<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self {
            buf,
            position: 0,
            error: None,
        }
    }
    /// Bytes from the start of the buffer covered by valid batches so far.
    pub fn valid_bytes(&self) -> usize {
        self.position
    }
    /// Why the scan stopped early, if it did.
    pub fn error(&self) -> Option<&BatchError> {
        self.error.as_ref()
    }
}

impl Iterator for BatchScanner<'_> {
    type Item = BatchHeader;
    fn next(&mut self) -> Option<BatchHeader> {
        if self.error.is_some() || self.position >= self.buf.len() {
            return None;
        }
        match parse_batch(self.buf, self.position) {
            Ok(header) => {
                self.position += header.size;
                Some(header)
            }
            Err(e) => {
                self.error = Some(e);
                None
            }
        }
    }
}

/// Sums the record counts of the whole batches in `buf` by following their
/// length fields only (no CRC check): for metrics on data already validated
/// when it was appended. Stops at the first incomplete batch.
pub fn count_records(buf: &[u8]) -> u64 {
    let mut position = 0;
    let mut total = 0u64;
    while buf.len() >= position + BATCH_HEADER_SIZE {
        let batch_length = read_i32(buf, position + BATCH_LENGTH);
        if batch_length < (BATCH_HEADER_SIZE - LOG_OVERHEAD) as i32 {
            break;
        }
        total += u64::try_from(read_i32(buf, position + RECORDS_COUNT)).unwrap_or(0);
        position += LOG_OVERHEAD + batch_length as usize;
    }
    total
}

/// Overwrites the base offset of the batch at `buf[position..]`. The base
/// offset is outside the CRC's coverage, so the CRC stays valid.
pub fn set_base_offset(buf: &mut [u8], position: usize, base_offset: i64) {
    buf[position + BASE_OFFSET..position + BASE_OFFSET + 8]
        .copy_from_slice(&base_offset.to_be_bytes());
}

/// Overwrites the partition leader epoch (also outside the CRC's coverage).
pub fn set_partition_leader_epoch(buf: &mut [u8], position: usize, epoch: i32) {
    buf[position + PARTITION_LEADER_EPOCH..position + PARTITION_LEADER_EPOCH + 4]
        .copy_from_slice(&epoch.to_be_bytes());
}

/// Builds a minimal valid batch with `count` empty-bodied records' worth of
/// offsets. For tests in this crate and dependants; the records section is
/// filler bytes, which is fine because the broker never parses records.
pub fn build_test_batch(count: i32, timestamp: i64, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; BATCH_HEADER_SIZE];
    b.extend_from_slice(payload);
    let batch_length = (b.len() - LOG_OVERHEAD) as i32;
    b[BATCH_LENGTH..BATCH_LENGTH + 4].copy_from_slice(&batch_length.to_be_bytes());
    b[PARTITION_LEADER_EPOCH..PARTITION_LEADER_EPOCH + 4].copy_from_slice(&0i32.to_be_bytes());
    b[MAGIC] = MAGIC_V2 as u8;
    b[LAST_OFFSET_DELTA..LAST_OFFSET_DELTA + 4].copy_from_slice(&(count - 1).to_be_bytes());
    b[BASE_TIMESTAMP..BASE_TIMESTAMP + 8].copy_from_slice(&timestamp.to_be_bytes());
    b[MAX_TIMESTAMP..MAX_TIMESTAMP + 8].copy_from_slice(&timestamp.to_be_bytes());
    b[PRODUCER_ID..PRODUCER_ID + 8].copy_from_slice(&(-1i64).to_be_bytes());
    b[PRODUCER_EPOCH..PRODUCER_EPOCH + 2].copy_from_slice(&(-1i16).to_be_bytes());
    b[BASE_SEQUENCE..BASE_SEQUENCE + 4].copy_from_slice(&(-1i32).to_be_bytes());
    b[RECORDS_COUNT..RECORDS_COUNT + 4].copy_from_slice(&count.to_be_bytes());
    let crc = crc32c::crc32c(&b[ATTRIBUTES..]);
    b[CRC..CRC + 4].copy_from_slice(&crc.to_be_bytes());
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_valid_batch_and_rewrites_base_offset() {
        let mut b = build_test_batch(3, 1_700_000_000_000, b"abc");
        let h = parse_batch(&b, 0).expect("valid");
        assert_eq!(h.offset_count(), 3);
        assert_eq!(h.size, b.len());
        set_base_offset(&mut b, 0, 42);
        let h = parse_batch(&b, 0).expect("still valid after rewrite");
        assert_eq!(h.base_offset, 42);
        assert_eq!(h.last_offset(), 44);
    }

    #[test]
    fn detects_crc_mismatch() {
        let mut b = build_test_batch(1, 0, b"payload");
        let last = b.len() - 1;
        b[last] ^= 0xff;
        assert!(matches!(
            parse_batch(&b, 0),
            Err(BatchError::CrcMismatch { .. })
        ));
    }

    #[test]
    fn detects_truncation_and_bad_magic() {
        let b = build_test_batch(1, 0, b"payload");
        assert!(matches!(
            parse_batch(&b[..b.len() - 2], 0),
            Err(BatchError::Truncated { .. })
        ));
        let mut m = b.clone();
        m[MAGIC] = 1;
        assert!(matches!(
            parse_batch(&m, 0),
            Err(BatchError::UnsupportedMagic { magic: 1, .. })
        ));
    }

    #[test]
    fn negative_length_is_rejected_not_panicking() {
        let mut b = build_test_batch(1, 0, b"x");
        b[BATCH_LENGTH..BATCH_LENGTH + 4].copy_from_slice(&i32::MIN.to_be_bytes());
        assert!(matches!(
            parse_batch(&b, 0),
            Err(BatchError::InvalidLength { .. })
        ));
    }

    #[test]
    fn counts_records_across_batches() {
        let mut buf = build_test_batch(3, 0, b"a");
        buf.extend(build_test_batch(4, 0, b"b"));
        assert_eq!(count_records(&buf), 7);
        assert_eq!(
            count_records(&buf[..buf.len() - 1]),
            7,
            "the second header is whole; its count is read"
        );
        assert_eq!(count_records(&buf[..10]), 0);
    }

    #[test]
    fn scanner_stops_at_the_first_bad_batch() {
        let mut buf = build_test_batch(2, 0, b"one");
        let first_len = buf.len();
        buf.extend(build_test_batch(1, 0, b"two"));
        buf.extend_from_slice(&[0xde, 0xad, 0xbe]);
        let mut scanner = BatchScanner::new(&buf);
        let found: Vec<_> = scanner.by_ref().collect();
        assert_eq!(found.len(), 2);
        assert!(scanner.valid_bytes() > first_len);
        assert_eq!(scanner.valid_bytes(), buf.len() - 3);
        assert!(scanner.error().is_some());
    }
}
