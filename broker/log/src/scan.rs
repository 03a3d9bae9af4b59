//! CRC-checked walk over the batches stored in a segment file.
//!
//! Owns: reading a segment in bounded chunks and validating every batch
//! (`BatchScanner`: framing, magic, CRC-32C) plus offset contiguity, and
//! reporting where the valid prefix ends and why it stopped. Used by
//! recovery. Must not: modify files or indexes — callers decide what to do
//! with a torn or corrupt tail.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use chronik_protocol::error::BatchError;
use chronik_protocol::record_batch::BatchScanner;

use crate::error::{Error, Result};
use crate::segment::BatchInfo;

/// Bytes read per step; a batch larger than this is read whole on its own.
const CHUNK_BYTES: u64 = 1 << 20;

/// How a scan ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScanOutcome {
    /// End of the last valid batch.
    pub valid_end: u64,
    /// One past the last valid batch's last offset.
    pub next_offset: i64,
    /// Why the scan stopped before `end`, if it did.
    pub stop_reason: Option<String>,
}

/// Validates the batches of `file` between byte `start` and `end`, calling
/// `on_batch` for each valid one in order. The first batch must have base
/// offset `expected_offset` and each later one must follow its predecessor
/// directly; offsets relative to `segment_base` must fit in u32.
pub(crate) fn scan_batches(
    file: &File,
    path: &Path,
    (start, end): (u64, u64),
    segment_base: i64,
    expected_offset: i64,
    mut on_batch: impl FnMut(&BatchInfo),
) -> Result<ScanOutcome> {
    let mut pos = start;
    let mut expected = expected_offset;
    let mut want = CHUNK_BYTES;
    let stop = |pos: u64, next_offset: i64, reason: String| ScanOutcome {
        valid_end: pos,
        next_offset,
        stop_reason: Some(reason),
    };
    while pos < end {
        let len = want.min(end - pos);
        let mut buf = vec![0u8; usize::try_from(len).unwrap_or(usize::MAX)];
        file.read_exact_at(&mut buf, pos).map_err(Error::io(path))?;
        let mut scanner = BatchScanner::new(&buf);
        for h in scanner.by_ref() {
            let position = pos + h.position as u64;
            // Compaction leaves gaps between batches, never overlaps.
            if h.base_offset < expected {
                let reason = format!(
                    "batch has base offset {} where at least {expected} was expected",
                    h.base_offset
                );
                return Ok(stop(position, expected, reason));
            }
            if h.last_offset() - segment_base > i64::from(u32::MAX)
                || position > u64::from(u32::MAX)
            {
                return Ok(stop(
                    position,
                    expected,
                    "batch lies beyond what a segment can index".into(),
                ));
            }
            on_batch(&BatchInfo {
                base_offset: h.base_offset,
                last_offset: h.last_offset(),
                max_timestamp: h.max_timestamp,
                position,
                size: h.size as u64,
            });
            expected = h.last_offset() + 1;
        }
        let valid = scanner.valid_bytes() as u64;
        match scanner.error() {
            None => want = CHUNK_BYTES,
            // The chunk ended inside a batch that may be whole on disk: read
            // again from that batch, at least as far as it claims to reach.
            Some(BatchError::Truncated { needed, .. })
                if pos + valid + *needed as u64 <= end && (valid > 0 || (*needed as u64) > len) =>
            {
                want = CHUNK_BYTES.max(*needed as u64);
            }
            Some(e) => return Ok(stop(pos + valid, expected, e.to_string())),
        }
        pos += valid;
    }
    Ok(ScanOutcome {
        valid_end: pos,
        next_offset: expected,
        stop_reason: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chronik_protocol::record_batch::{build_test_batch, set_base_offset};
    use std::io::Write;

    fn file_with(bytes: &[u8]) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().expect("temp file");
        f.write_all(bytes).expect("write");
        f
    }

    fn batches(counts: &[i32], first_offset: i64) -> Vec<u8> {
        let mut out = Vec::new();
        let mut next = first_offset;
        for &c in counts {
            let mut b = build_test_batch(c, 1_000 + next, b"payload");
            set_base_offset(&mut b, 0, next);
            next += i64::from(c);
            out.extend(b);
        }
        out
    }

    fn scan(bytes: &[u8], expected: i64) -> (ScanOutcome, usize) {
        let f = file_with(bytes);
        let mut seen = 0;
        let outcome = scan_batches(
            f.as_file(),
            f.path(),
            (0, bytes.len() as u64),
            10,
            expected,
            |_| seen += 1,
        )
        .expect("scan");
        (outcome, seen)
    }

    #[test]
    fn walks_every_valid_batch() {
        let bytes = batches(&[2, 3, 1], 10);
        let (outcome, seen) = scan(&bytes, 10);
        assert_eq!(seen, 3);
        assert_eq!(
            outcome,
            ScanOutcome {
                valid_end: bytes.len() as u64,
                next_offset: 16,
                stop_reason: None
            }
        );
    }

    #[test]
    fn stops_at_a_torn_tail() {
        let bytes = batches(&[2, 3], 10);
        let first = batches(&[2], 10).len() as u64;
        let (outcome, seen) = scan(&bytes[..bytes.len() - 7], 10);
        assert_eq!(seen, 1);
        assert_eq!(outcome.valid_end, first);
        assert_eq!(outcome.next_offset, 12);
        assert!(outcome.stop_reason.is_some());
    }

    #[test]
    fn stops_at_a_crc_mismatch_and_at_an_offset_overlap() {
        let mut bytes = batches(&[2, 3], 10);
        let first = batches(&[2], 10).len();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x5a;
        let (outcome, _) = scan(&bytes, 10);
        assert_eq!(outcome.valid_end, first as u64);

        // Compaction leaves gaps; an overlap is invalid.
        let gap = [batches(&[2], 10), batches(&[1], 13)].concat();
        let (outcome, seen) = scan(&gap, 10);
        assert_eq!((seen, outcome.next_offset), (2, 14));
        assert!(outcome.stop_reason.is_none());
        let overlap = [batches(&[2], 10), batches(&[1], 11)].concat();
        let (outcome, seen) = scan(&overlap, 10);
        assert_eq!(
            (seen, outcome.valid_end, outcome.next_offset),
            (1, first as u64, 12)
        );
        assert!(outcome
            .stop_reason
            .expect("stopped")
            .contains("base offset 11"));
    }

    #[test]
    fn reads_batches_larger_than_a_chunk() {
        let big = vec![7u8; (CHUNK_BYTES + 100) as usize];
        let mut b1 = build_test_batch(1, 5, &big);
        set_base_offset(&mut b1, 0, 10);
        let mut all = batches(&[1], 9);
        all.extend(b1);
        all.extend(batches(&[4], 11));
        let (outcome, seen) = scan(&all, 9);
        assert_eq!(
            (seen, outcome.next_offset, outcome.stop_reason),
            (3, 15, None)
        );
    }
}
