//! Rewriting segments without superseded records (Kafka's Cleaner.cleanInto)
//! and building the key map the rewrite consults.
//!
//! Owns: the record-level rules. A record is kept when its key's latest
//! offset in the map is not later than its own (a key the map does not
//! hold is kept); keyless records are dropped (a compacted topic cannot
//! hold them, as in Kafka); tombstones are dropped only from sources whose
//! delete horizon passed; records of aborted transactions are dropped;
//! control batches are kept whole. A batch that loses records is rewritten
//! uncompressed with its base offset and offset range unchanged; one that
//! loses all of them is dropped, except the last batch of the group (so
//! segments still meet end to end) and the last batch of each producer id
//! (its idempotence state survives a restart), which stay as empty
//! batches. Batches that lose nothing are copied byte for byte (compressed
//! ones stay compressed). Output goes through `LogSegment::append_assigned`
//! into the `.cleaned` file, which is fsynced. Must not: swap files or
//! touch the partition's state.

use std::collections::HashMap;

use chronik_protocol::record_batch::{parse_batch, parse_batches, BatchHeader};
use chronik_protocol::record_walk::walk;
use chronik_protocol::records::rebuild_batch;
use tracing::warn;

use super::offset_map::OffsetMap;
use super::swap::cleaned_path;
use super::SourceSegment;
use crate::error::{Error, Result};
use crate::producer_state::AbortedTxn;
use crate::read::for_each_batch;
use crate::segment::LogSegment;

/// Bytes read, and buffered for writing, at a time.
const IO_CHUNK: u64 = 1 << 20;

/// What decides which records stay, shared by every group of one run.
#[derive(Debug)]
pub(crate) struct Retention<'a> {
    pub map: &'a OffsetMap,
    /// Aborted transactions overlapping the cleaned range.
    pub aborted: &'a [AbortedTxn],
    /// Each producer id's last batch, by its last offset.
    pub producer_last_offsets: &'a HashMap<i64, i64>,
    /// Bound on a compressed batch's inflated records.
    pub max_decompressed: usize,
}

/// One cleaned segment and what it cost.
#[derive(Debug)]
pub(crate) struct Cleaned {
    pub segment: LogSegment,
    pub bytes_in: u64,
}

/// Fills `map` with the keys of `sources` at offsets `first_dirty..end`,
/// skipping aborted transactional records and control batches. Returns the
/// first offset not mapped: `end`, or where the map filled up.
pub(crate) fn build_offset_map(
    map: &mut OffsetMap,
    sources: &[SourceSegment],
    (first_dirty, end): (i64, i64),
    retention_aborted: &[AbortedTxn],
    max_decompressed: usize,
) -> Result<i64> {
    let mut stopped_at = None;
    for source in sources {
        for_each_batch(&source.slice, IO_CHUNK, |batch| {
            let h = checked_header(batch, source)?;
            if h.last_offset() < first_dirty || h.is_control() || is_aborted(&h, retention_aborted)
            {
                return Ok(true);
            }
            if h.base_offset >= end {
                return Ok(false);
            }
            let walked = walk(batch, &h, max_decompressed, |r| {
                if stopped_at.is_some() || r.offset < first_dirty || r.offset >= end {
                    return;
                }
                if let Some(key) = r.key {
                    if !map.put(key, r.offset) {
                        stopped_at = Some(r.offset);
                    }
                }
            });
            if let Err(e) = walked {
                warn!(segment = %source.slice.path.display(), base_offset = h.base_offset, error = %e,
                    "cannot read a batch's records; its keys are not deduplicated");
            }
            Ok(stopped_at.is_none())
        })?;
        if let Some(offset) = stopped_at {
            return Ok(offset);
        }
    }
    Ok(end)
}

/// Writes the cleaned copy of `sources` (consecutive segments) into the
/// `.cleaned` file of the first one; `drop_tombstones[i]` says whether
/// source `i`'s delete horizon passed. Returns the fsynced, sealed segment.
pub(crate) fn clean_group(
    sources: &[SourceSegment],
    drop_tombstones: &[bool],
    retention: &Retention<'_>,
    index_interval_bytes: u32,
    now_ms: i64,
) -> Result<Cleaned> {
    let first = &sources[0];
    let dir = first
        .slice
        .path
        .parent()
        .unwrap_or(std::path::Path::new("."));
    let base = first.facts.base_offset;
    let group_last = sources[sources.len() - 1].facts.next_offset - 1;
    let mut segment = LogSegment::create_cleaned(dir, base, &cleaned_path(dir, base), now_ms)?;
    let mut out = Vec::new();
    let mut bytes_in = 0;
    for (source, &drop_tombstones) in sources.iter().zip(drop_tombstones) {
        bytes_in += source.facts.size;
        for_each_batch(&source.slice, IO_CHUNK, |batch| {
            let h = checked_header(batch, source)?;
            let keep_empty = h.last_offset() == group_last
                || (h.has_producer_id()
                    && retention.producer_last_offsets.get(&h.producer_id)
                        == Some(&h.last_offset()));
            match filter_batch(batch, &h, drop_tombstones, keep_empty, retention) {
                Filtered::Verbatim => out.extend_from_slice(batch),
                Filtered::Rebuilt(bytes) => out.extend_from_slice(&bytes),
                Filtered::Dropped => {}
            }
            if out.len() as u64 >= IO_CHUNK {
                write_out(&mut segment, &mut out, index_interval_bytes)?;
            }
            Ok(true)
        })?;
    }
    write_out(&mut segment, &mut out, index_interval_bytes)?;
    // The group's offset range, even if its last batch ended before it.
    let size = segment.size();
    segment.set_loaded_extent(size, group_last + 1);
    segment.seal();
    segment.log_sync_target().sync()?;
    Ok(Cleaned { segment, bytes_in })
}

enum Filtered {
    Verbatim,
    Rebuilt(Vec<u8>),
    Dropped,
}

/// The record-level rules (module docs) applied to one batch.
fn filter_batch(
    batch: &[u8],
    h: &BatchHeader,
    drop_tombstones: bool,
    keep_empty: bool,
    retention: &Retention<'_>,
) -> Filtered {
    if h.is_control() {
        return Filtered::Verbatim;
    }
    let mut records = Vec::new();
    let (mut kept, mut dropped) = (0i32, 0i32);
    if !is_aborted(h, retention.aborted) {
        let walked = walk(batch, h, retention.max_decompressed, |r| {
            let superseded = r.key.is_none_or(|key| {
                retention
                    .map
                    .get(key)
                    .is_some_and(|latest| latest > r.offset)
            });
            if superseded || (drop_tombstones && r.value.is_none()) {
                dropped += 1;
            } else {
                records.extend_from_slice(r.raw);
                kept += 1;
            }
        });
        if let Err(e) = walked {
            warn!(base_offset = h.base_offset, error = %e, "cannot read a batch's records; kept as it is");
            return Filtered::Verbatim;
        }
    } else {
        dropped = h.records_count;
    }
    match (kept, dropped) {
        (_, 0) => Filtered::Verbatim,
        (0, _) if !keep_empty => Filtered::Dropped,
        _ => Filtered::Rebuilt(rebuild_batch(batch, &records, kept)),
    }
}

/// Whether `h` holds records of a transaction its producer aborted.
fn is_aborted(h: &BatchHeader, aborted: &[AbortedTxn]) -> bool {
    h.is_transactional()
        && aborted.iter().any(|a| {
            a.producer_id == h.producer_id
                && a.first_offset <= h.base_offset
                && h.last_offset() <= a.last_offset
        })
}

/// The CRC-checked header of a stored batch.
fn checked_header(batch: &[u8], source: &SourceSegment) -> Result<BatchHeader> {
    parse_batch(batch, 0).map_err(|e| Error::Corrupt {
        path: source.slice.path.clone(),
        position: 0,
        reason: format!("cleaner read an invalid batch: {e}"),
    })
}

/// Appends the buffered batches to the cleaned segment.
fn write_out(segment: &mut LogSegment, out: &mut Vec<u8>, index_interval_bytes: u32) -> Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    let headers = parse_batches(out).map_err(|e| Error::InvalidRecords(e.to_string()))?;
    segment.append_assigned(out, &headers, index_interval_bytes)?;
    out.clear();
    Ok(())
}
