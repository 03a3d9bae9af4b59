//! Reading whole batches out of segment files, for Fetch and ListOffsets.
//!
//! Owns: walking batch headers from an index-provided position to the batch
//! holding a wanted offset or timestamp (or through a whole segment, for
//! the producer-state rebuilds at open and after a truncation), handing
//! whole batches one by one to the log cleaner, and cutting a read at whole-batch
//! boundaries under a byte budget and an offset upper bound. Works on file
//! handles snapshotted under the partition lock, so it runs without it.
//! Must not: take locks, write, or check CRCs (recovery validated what is
//! stored; consumers verify again).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use chronik_protocol::record_batch::{BATCH_HEADER_SIZE, LOG_OVERHEAD, MAGIC_V2};
use chronik_protocol::records::control_record_type;

use crate::error::{Error, Result};

// Field positions inside a v2 batch header (Kafka's DefaultRecordBatch).
const BATCH_LENGTH_AT: usize = 8;
const MAGIC_AT: usize = 16;
const ATTRIBUTES_AT: usize = 21;
const LAST_OFFSET_DELTA_AT: usize = 23;
const MAX_TIMESTAMP_AT: usize = 35;
const PRODUCER_ID_AT: usize = 43;
const PRODUCER_EPOCH_AT: usize = 51;
const BASE_SEQUENCE_AT: usize = 53;
const CONTROL_FLAG: u8 = 0x20;
const TRANSACTIONAL_FLAG: u8 = 0x10;
/// A control batch (one small record) is read whole with its header.
const CONTROL_BATCH_MAX_BYTES: u64 = 256;

/// Header bytes read per pread while walking; amortises small batches.
const HEADER_BLOCK_BYTES: u64 = 32 * 1024;

/// Bytes `start..end` of one segment file, snapshotted under the partition
/// lock. `end` is the segment size at that moment, so it always falls on a
/// batch boundary.
#[derive(Debug, Clone)]
pub(crate) struct SegmentSlice {
    pub file: Arc<File>,
    pub path: PathBuf,
    pub start: u64,
    pub end: u64,
}

/// A stored batch's header fields, read without checking its CRC.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peek {
    pub base_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    pub size: u64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub is_control: bool,
    pub is_transactional: bool,
    /// A marker's COMMIT (true) / ABORT (false), when `buf` held its record.
    pub control: Option<bool>,
}

fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(x)
}

/// Decodes the header at the start of `buf`; None if `buf` is shorter than
/// a header.
fn peek(buf: &[u8]) -> Option<std::result::Result<Peek, String>> {
    if buf.len() < BATCH_HEADER_SIZE {
        return None;
    }
    let batch_length = be_i32(buf, BATCH_LENGTH_AT);
    let magic = buf[MAGIC_AT] as i8;
    let delta = be_i32(buf, LAST_OFFSET_DELTA_AT);
    if magic != MAGIC_V2 || batch_length < (BATCH_HEADER_SIZE - LOG_OVERHEAD) as i32 || delta < 0 {
        return Some(Err(format!(
            "not a v2 batch header (magic {magic}, length {batch_length})"
        )));
    }
    let base_offset = be_i64(buf, 0);
    Some(Ok(Peek {
        base_offset,
        last_offset: base_offset + i64::from(delta),
        max_timestamp: be_i64(buf, MAX_TIMESTAMP_AT),
        size: LOG_OVERHEAD as u64 + batch_length as u64,
        producer_id: be_i64(buf, PRODUCER_ID_AT),
        producer_epoch: i16::from_be_bytes([buf[PRODUCER_EPOCH_AT], buf[PRODUCER_EPOCH_AT + 1]]),
        base_sequence: be_i32(buf, BASE_SEQUENCE_AT),
        // The flags sit in the low byte of the big-endian attributes.
        is_control: buf[ATTRIBUTES_AT + 1] & CONTROL_FLAG != 0,
        is_transactional: buf[ATTRIBUTES_AT + 1] & TRANSACTIONAL_FLAG != 0,
        control: (buf[ATTRIBUTES_AT + 1] & CONTROL_FLAG != 0)
            .then(|| crate::producer_state::marker_kind(control_record_type(buf)))
            .flatten(),
    }))
}

/// Reads headers at arbitrary positions of one slice through a block buffer.
struct HeaderReader<'a> {
    slice: &'a SegmentSlice,
    block: Vec<u8>,
    block_start: u64,
}

impl<'a> HeaderReader<'a> {
    fn new(slice: &'a SegmentSlice) -> Self {
        Self {
            slice,
            block: Vec::new(),
            block_start: 0,
        }
    }

    fn corrupt(&self, position: u64, reason: String) -> Error {
        Error::Corrupt {
            path: self.slice.path.clone(),
            position,
            reason,
        }
    }

    fn peek_at(&mut self, pos: u64) -> Result<Peek> {
        let header = BATCH_HEADER_SIZE as u64;
        if pos + header > self.slice.end {
            return Err(self.corrupt(pos, "batch header runs past the end of the segment".into()));
        }
        // A control batch's record (its marker type) must be in the block
        // too: it is tiny, so take a little more than a header.
        let header = header + CONTROL_BATCH_MAX_BYTES.min(self.slice.end - pos - header);
        let cached =
            pos >= self.block_start && pos + header <= self.block_start + self.block.len() as u64;
        if !cached {
            let len = HEADER_BLOCK_BYTES.min(self.slice.end - pos);
            self.block.resize(len as usize, 0);
            self.slice
                .file
                .read_exact_at(&mut self.block, pos)
                .map_err(Error::io(&self.slice.path))?;
            self.block_start = pos;
        }
        let at = (pos - self.block_start) as usize;
        match peek(&self.block[at..]) {
            Some(Ok(h)) if pos + h.size <= self.slice.end => Ok(h),
            Some(Ok(h)) => Err(self.corrupt(
                pos,
                format!("batch of {} bytes runs past the end of the segment", h.size),
            )),
            Some(Err(reason)) => Err(self.corrupt(pos, reason)),
            None => Err(self.corrupt(pos, "short header".into())),
        }
    }
}

/// Whole batches from the batch containing `fetch_offset` on, across the
/// slices in order: at most `max_bytes`, except that a first batch larger
/// than `max_bytes` is returned whole (Kafka's at-least-one-batch rule), and
/// nothing from a batch whose base offset is >= `upper_bound`.
pub(crate) fn read_batches(
    slices: &[SegmentSlice],
    fetch_offset: i64,
    max_bytes: usize,
    upper_bound: i64,
) -> Result<Bytes> {
    let mut out = BytesMut::new();
    for slice in slices {
        let budget = max_bytes.saturating_sub(out.len());
        if budget == 0 && !out.is_empty() {
            break;
        }
        let mut headers = HeaderReader::new(slice);
        let mut pos = slice.start;
        while pos < slice.end {
            let h = headers.peek_at(pos)?;
            if h.last_offset >= fetch_offset {
                break;
            }
            pos += h.size;
        }
        if pos >= slice.end {
            continue;
        }
        let want = (budget as u64).min(slice.end - pos) as usize;
        let old = out.len();
        out.resize(old + want, 0);
        slice
            .file
            .read_exact_at(&mut out[old..], pos)
            .map_err(Error::io(&slice.path))?;
        let (mut used, mut bounded) = (0usize, false);
        while let Some(h) = peek(&out[old + used..]) {
            let h = h.map_err(|reason| headers.corrupt(pos + used as u64, reason))?;
            if h.base_offset >= upper_bound {
                bounded = true;
                break;
            }
            if (used as u64) + h.size > want as u64 {
                break;
            }
            used += h.size as usize;
        }
        out.truncate(old + used);
        if used == 0 {
            if !bounded && out.is_empty() {
                // The first batch alone is larger than max_bytes.
                let h = headers.peek_at(pos)?;
                if h.base_offset < upper_bound {
                    out.resize(h.size as usize, 0);
                    slice
                        .file
                        .read_exact_at(&mut out, pos)
                        .map_err(Error::io(&slice.path))?;
                }
            }
            break;
        }
        if bounded || pos + (used as u64) < slice.end {
            break;
        }
    }
    Ok(out.freeze())
}

/// The first batch, scanning the slices in order, whose max timestamp is
/// >= `timestamp`: `(base offset, max timestamp)`.
pub(crate) fn find_timestamp(
    slices: &[SegmentSlice],
    timestamp: i64,
) -> Result<Option<(i64, i64)>> {
    for slice in slices {
        let mut headers = HeaderReader::new(slice);
        let mut pos = slice.start;
        while pos < slice.end {
            let h = headers.peek_at(pos)?;
            if h.max_timestamp >= timestamp {
                return Ok(Some((h.base_offset, h.max_timestamp)));
            }
            pos += h.size;
        }
    }
    Ok(None)
}

/// The first batch in the slice whose last offset is >= `offset`, as
/// `(its position, its base offset)`; None when the slice ends first.
pub(crate) fn locate(slice: &SegmentSlice, offset: i64) -> Result<Option<(u64, i64)>> {
    let mut headers = HeaderReader::new(slice);
    let mut pos = slice.start;
    while pos < slice.end {
        let h = headers.peek_at(pos)?;
        if h.last_offset >= offset {
            return Ok(Some((pos, h.base_offset)));
        }
        pos += h.size;
    }
    Ok(None)
}

/// Every batch header of the slice, in order, to `on_batch`: a header walk
/// for data recovery validated or trusted (no CRC check, records unread).
pub(crate) fn walk_headers(slice: &SegmentSlice, mut on_batch: impl FnMut(&Peek)) -> Result<()> {
    let mut headers = HeaderReader::new(slice);
    let mut pos = slice.start;
    while pos < slice.end {
        let h = headers.peek_at(pos)?;
        on_batch(&h);
        pos += h.size;
    }
    Ok(())
}

/// Every batch of the slice, whole and in order, to `on_batch` until it
/// returns false: reads of at most `chunk` bytes (one batch when it is
/// larger), for the log cleaner.
pub(crate) fn for_each_batch(
    slice: &SegmentSlice,
    chunk: u64,
    mut on_batch: impl FnMut(&[u8]) -> Result<bool>,
) -> Result<()> {
    let mut headers = HeaderReader::new(slice);
    let mut buf = Vec::new();
    let mut pos = slice.start;
    while pos < slice.end {
        buf.resize(chunk.min(slice.end - pos) as usize, 0);
        slice
            .file
            .read_exact_at(&mut buf, pos)
            .map_err(Error::io(&slice.path))?;
        let mut used = 0usize;
        while let Some(h) = peek(&buf[used..]) {
            let h = h.map_err(|reason| headers.corrupt(pos + used as u64, reason))?;
            if used as u64 + h.size > buf.len() as u64 {
                break;
            }
            if !on_batch(&buf[used..used + h.size as usize])? {
                return Ok(());
            }
            used += h.size as usize;
        }
        if used == 0 {
            let h = headers.peek_at(pos)?;
            buf.resize(h.size as usize, 0);
            slice
                .file
                .read_exact_at(&mut buf, pos)
                .map_err(Error::io(&slice.path))?;
            if !on_batch(&buf)? {
                return Ok(());
            }
            used = buf.len();
        }
        pos += used as u64;
    }
    Ok(())
}

/// Max timestamp of the first batch in the slice (segment.ms counts from it).
pub(crate) fn first_batch_max_timestamp(slice: &SegmentSlice) -> Result<i64> {
    first_batch(slice).map(|h| h.max_timestamp)
}

/// The header of the batch the slice starts with.
pub(crate) fn first_batch(slice: &SegmentSlice) -> Result<Peek> {
    HeaderReader::new(slice).peek_at(slice.start)
}
