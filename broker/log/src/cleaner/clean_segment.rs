//! Rewriting segments without superseded records (Kafka's Cleaner.cleanInto)
//! and building the key map the rewrite consults.
//!
//! Owns: the record-level rules. A record is kept when its key's latest
//! offset in the map is not later than its own (a key the map does not
//! hold is kept); keyless records are dropped (a compacted topic cannot
//! hold them, as in Kafka); records of aborted transactions are dropped.
//! Tombstones and transaction markers go by KIP-534's delete horizon, kept
//! in the batch (attributes bit 6, the base timestamp holding it): a batch
//! that keeps a tombstone and has no horizon is stamped with now +
//! delete.retention.ms, and its tombstones are dropped by the first
//! cleaning after that horizon. A marker (COMMIT or ABORT) stays while any
//! batch of its transaction was read in this run (`Transactions`, which
//! follows each producer across the whole run, every group in order); once
//! none was, it is stamped the same way and dropped by a cleaning after its
//! horizon — an ABORT marker's aborted-transaction entry going with it
//! (`Cleaned::removed_aborts`). Other control batches are kept whole. A
//! batch that loses records is rewritten uncompressed with its base offset
//! and offset range unchanged; one that loses all of them is dropped,
//! except the last batch of the group (so segments still meet end to end)
//! and the last batch of each producer id (its idempotence state survives
//! a restart), which stay as empty batches (a marker too, once it could
//! go: Kafka's empty control batch). Batches
//! that lose nothing and need no stamp are copied byte for byte
//! (compressed ones stay compressed). Output goes through
//! `LogSegment::append_assigned` into the `.cleaned` file, which is
//! fsynced. Must not: swap files or touch the partition's state.

use std::collections::{HashMap, HashSet};

use chronik_protocol::record_batch::{parse_batch, parse_batches, BatchHeader};
use chronik_protocol::record_walk::walk;
use chronik_protocol::records::{
    control_record_type, rebuild_batch, set_delete_horizon, CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT,
};
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
    /// The cleaning's clock: delete horizons at or before it have passed.
    pub now_ms: i64,
    /// delete.retention.ms: how far ahead of now a new horizon lies.
    pub delete_retention_ms: i64,
}

impl Retention<'_> {
    fn new_delete_horizon(&self) -> i64 {
        self.now_ms.saturating_add(self.delete_retention_ms.max(0))
    }

    fn horizon_passed(&self, h: &BatchHeader) -> bool {
        h.delete_horizon_ms()
            .is_some_and(|horizon| horizon <= self.now_ms)
    }
}

/// What one run has read of each producer's transactions, in log order:
/// the producers with a transactional data batch since their last marker
/// (Kafka's CleanedTransactionMetadata, by its rule: a marker may go only
/// when no batch of its transaction is left to read).
#[derive(Debug, Default)]
pub(crate) struct Transactions {
    with_data: HashSet<i64>,
}

impl Transactions {
    fn data_batch(&mut self, h: &BatchHeader) {
        if h.is_transactional() {
            self.with_data.insert(h.producer_id);
        }
    }

    /// A marker of `h`'s producer closes its transaction: whether any of
    /// its batches was read.
    fn marker(&mut self, h: &BatchHeader) -> bool {
        self.with_data.remove(&h.producer_id)
    }
}

/// One cleaned segment and what it cost.
#[derive(Debug)]
pub(crate) struct Cleaned {
    pub segment: LogSegment,
    pub bytes_in: u64,
    /// (producer id, marker offset) of the ABORT markers it no longer
    /// holds: their aborted-transaction entries go when it is swapped in.
    pub removed_aborts: Vec<(i64, i64)>,
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
/// `.cleaned` file of the first one; `txns` carries what the run read of
/// the groups before. Returns the fsynced, sealed segment.
pub(crate) fn clean_group(
    sources: &[SourceSegment],
    txns: &mut Transactions,
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
    let (mut bytes_in, mut removed_aborts) = (0, Vec::new());
    for source in sources {
        bytes_in += source.facts.size;
        for_each_batch(&source.slice, IO_CHUNK, |batch| {
            let h = checked_header(batch, source)?;
            let keep_empty = h.last_offset() == group_last
                || (h.has_producer_id()
                    && retention.producer_last_offsets.get(&h.producer_id)
                        == Some(&h.last_offset()));
            let filtered = if h.is_control() {
                let marker = (&mut *txns, &mut removed_aborts);
                filter_marker(batch, &h, keep_empty, retention, marker)
            } else {
                txns.data_batch(&h);
                filter_batch(batch, &h, keep_empty, retention)
            };
            match filtered {
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
    Ok(Cleaned {
        segment,
        bytes_in,
        removed_aborts,
    })
}

enum Filtered {
    Verbatim,
    Rebuilt(Vec<u8>),
    Dropped,
}

/// A transaction marker (module docs): kept while its transaction has
/// batches, else stamped with a delete horizon, then dropped once that
/// passed — or emptied of its record when it must stay as a producer's or
/// the group's last batch, as Kafka does. A dropped or emptied ABORT
/// marker is added to `removed_aborts`.
fn filter_marker(
    batch: &[u8],
    h: &BatchHeader,
    keep_empty: bool,
    retention: &Retention<'_>,
    (txns, removed_aborts): (&mut Transactions, &mut Vec<(i64, i64)>),
) -> Filtered {
    let kind = control_record_type(batch);
    if !matches!(kind, Some(CONTROL_TYPE_ABORT | CONTROL_TYPE_COMMIT)) || txns.marker(h) {
        return Filtered::Verbatim;
    }
    if h.delete_horizon_ms().is_none() {
        return set_delete_horizon(batch, retention.new_delete_horizon())
            .map_or(Filtered::Verbatim, Filtered::Rebuilt);
    }
    if !retention.horizon_passed(h) {
        return Filtered::Verbatim;
    }
    if kind == Some(CONTROL_TYPE_ABORT) {
        removed_aborts.push((h.producer_id, h.base_offset));
    }
    match keep_empty {
        true => Filtered::Rebuilt(rebuild_batch(batch, &[], 0)),
        false => Filtered::Dropped,
    }
}

/// The record-level rules (module docs) applied to one data batch.
fn filter_batch(
    batch: &[u8],
    h: &BatchHeader,
    keep_empty: bool,
    retention: &Retention<'_>,
) -> Filtered {
    let drop_tombstones = retention.horizon_passed(h);
    let mut records = Vec::new();
    let (mut kept, mut dropped, mut kept_tombstones) = (0i32, 0i32, 0i32);
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
                kept_tombstones += i32::from(r.value.is_none());
            }
        });
        if let Err(e) = walked {
            warn!(base_offset = h.base_offset, error = %e, "cannot read a batch's records; kept as it is");
            return Filtered::Verbatim;
        }
    } else {
        dropped = h.records_count;
    }
    let stamp = kept_tombstones > 0 && h.delete_horizon_ms().is_none();
    match (kept, dropped) {
        // Also a batch emptied by an earlier cleaning, once no longer needed.
        (0, _) if !keep_empty => Filtered::Dropped,
        (_, 0) if !stamp => Filtered::Verbatim,
        _ => {
            let rebuilt = rebuild_batch(batch, &records, kept);
            Filtered::Rebuilt(match stamp {
                true => {
                    set_delete_horizon(&rebuilt, retention.new_delete_horizon()).unwrap_or(rebuilt)
                }
                false => rebuilt,
            })
        }
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
