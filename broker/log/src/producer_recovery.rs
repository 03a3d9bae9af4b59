//! A partition's producer state across restarts.
//!
//! Owns: the `<20-digit offset>.snapshot` files (the state as of that
//! offset, written only after a clean shutdown's final fsync) and the
//! rebuild at open: take the newest snapshot that lies inside the recovered
//! log, replay the batch headers stored after it (every segment when there
//! is none: an unclean restart), then delete every snapshot, so none can
//! outlive the log it describes. Headers are walked without CRC checks:
//! recovery already checked everything after the recovery point and
//! trusts what lies before it. After a truncation at run time, the state of
//! the producers whose batches were cut off is rebuilt by reading the log
//! back from its new end, index interval by index interval, only as far as
//! they need (`ProducerStateManager::begin_rewind`).
//! Must not: judge sequences (the log is taken as it is), write snapshots
//! other than at shutdown, or fail open over a damaged snapshot (it falls
//! back to a full replay).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tracing::{debug, warn};

use crate::durable_file::{sync_dir, write_atomically};
use crate::error::{Error, Result};
use crate::producer_state::{ProducerBatch, ProducerStateManager};
use crate::read::{walk_headers, Peek, SegmentSlice};
use crate::recovery::parse_base_offset;
use crate::segment::{remove_if_exists, segment_path, LogSegment};

pub(crate) const SNAPSHOT_EXT: &str = "snapshot";
/// Left by `write_atomically` when a shutdown died mid-write.
const SNAPSHOT_TMP_EXT: &str = "snapshot.tmp";

/// Saves `snapshot` (`ProducerStateManager::encode_snapshot`) as the state
/// of the log below `offset`. The caller must have fsynced that log first.
pub(crate) fn write_snapshot(dir: &Path, offset: i64, snapshot: &[u8]) -> Result<()> {
    write_atomically(&segment_path(dir, offset, SNAPSHOT_EXT), snapshot)
}

/// The producer state of the recovered `segments` (oldest first, never
/// empty).
pub(crate) fn load_producer_state(
    dir: &Path,
    (topic, partition): (&str, i32),
    segments: &[LogSegment],
) -> Result<ProducerStateManager> {
    let SnapshotFiles {
        snapshots,
        leftovers,
    } = list_snapshots(dir)?;
    let log_start = segments.first().map_or(0, LogSegment::base_offset);
    let log_end = segments.last().map_or(0, LogSegment::next_offset);
    // One past the log end was written before recovery truncated the log;
    // one before its start would need the deleted batches in between.
    let usable = snapshots
        .iter()
        .rev()
        .find(|(offset, _)| (log_start..=log_end).contains(offset));
    let mut producers = ProducerStateManager::default();
    let mut from = log_start;
    if let Some((offset, path)) = usable {
        let decoded = fs::read(path)
            .map_err(|e| e.to_string())
            .and_then(|bytes| ProducerStateManager::decode_snapshot(&bytes));
        match decoded {
            Ok(state) => (producers, from) = (state, *offset),
            Err(reason) => {
                warn!(topic, partition, snapshot = %path.display(), %reason, "ignoring unreadable producer snapshot")
            }
        }
    }
    if !replay_from(segments, from, &mut producers, (topic, partition))? {
        warn!(
            topic,
            partition,
            offset = from,
            "producer snapshot is not at a batch boundary; replaying the whole log"
        );
        producers.clear();
        replay_from(segments, log_start, &mut producers, (topic, partition))?;
    }
    let stale: Vec<&PathBuf> = snapshots.iter().map(|(_, p)| p).chain(&leftovers).collect();
    for path in &stale {
        remove_if_exists(path)?;
    }
    if !stale.is_empty() {
        sync_dir(dir)?;
    }
    debug!(
        topic,
        partition,
        producers = producers.len(),
        replayed_from = from,
        "loaded producer state"
    );
    Ok(producers)
}

/// Replays every batch from offset `from` on. Returns false, having
/// replayed nothing, if `from` falls inside a batch. A corrupt header (in a
/// segment recovery trusted) clears the state, which leaves the producers
/// it held unknown, hence unchecked, rather than wrongly checked; the walk
/// goes on at the next segment.
fn replay_from(
    segments: &[LogSegment],
    from: i64,
    producers: &mut ProducerStateManager,
    (topic, partition): (&str, i32),
) -> Result<bool> {
    let first = segments
        .partition_point(|s| s.base_offset() <= from)
        .saturating_sub(1);
    for (i, segment) in segments[first..].iter().enumerate() {
        let start = if i == 0 {
            segment.index_lookup(from).0
        } else {
            0
        };
        let slice = SegmentSlice {
            file: Arc::clone(segment.log_file()),
            path: segment.log_path().to_path_buf(),
            start,
            end: segment.size(),
        };
        let mut aligned = true;
        let walked = walk_headers(&slice, |h| {
            if h.last_offset < from {
                return;
            }
            aligned &= h.base_offset >= from;
            if aligned {
                producers.replay(&stored_batch(h));
            }
        });
        match walked {
            Ok(()) if !aligned => return Ok(false),
            Ok(()) => {}
            Err(e @ Error::Corrupt { .. }) => {
                warn!(topic, partition, error = %e, "unreadable batch header; forgetting producer state read so far");
                producers.clear();
            }
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// After `segments` were truncated: rebuilds the producers whose retained
/// batches lay past the new log end, reading batch headers backwards from
/// it (a log with transactions is replayed whole instead). A corrupt header stops the reading: producers not rebuilt by then
/// keep what newer batches gave, or are forgotten (unknown ids are not
/// checked). An I/O error is returned after installing what was rebuilt.
pub(crate) fn rewind_producer_state(
    segments: &[LogSegment],
    producers: &mut ProducerStateManager,
    (topic, partition): (&str, i32),
) -> Result<()> {
    let end = segments.last().map_or(0, LogSegment::next_offset);
    if producers.has_transactions() {
        // Open and aborted transactions depend on markers anywhere behind
        // the cut: replay the whole log (truncations are rare).
        let mut rebuilt = ProducerStateManager::default();
        let start = segments.first().map_or(0, LogSegment::base_offset);
        let replayed = replay_from(segments, start, &mut rebuilt, (topic, partition));
        *producers = rebuilt;
        debug!(
            topic,
            partition,
            log_end_offset = end,
            "replayed transactional producer state after a truncation"
        );
        return replayed.map(drop);
    }
    let mut rewind = producers.begin_rewind(end);
    let mut outcome = Ok(());
    'segments: for segment in segments.iter().rev() {
        let mut range_end = segment.size();
        for start in segment.walk_starts_newest_first() {
            if rewind.is_done() {
                break 'segments;
            }
            if start >= range_end {
                continue;
            }
            let walked = walk_headers(&segment.slice(start, range_end), |h| {
                rewind.observe(&stored_batch(h))
            });
            match walked {
                Ok(()) => rewind.end_range(),
                Err(e @ Error::Corrupt { .. }) => {
                    warn!(topic, partition, error = %e, "unreadable batch header while rewinding producer state; producers not rebuilt yet keep only the newer batches found, or are forgotten");
                    break 'segments;
                }
                Err(e) => {
                    outcome = Err(e);
                    break 'segments;
                }
            }
            range_end = start;
        }
    }
    rewind.finish(producers);
    debug!(
        topic,
        partition,
        producers = producers.len(),
        log_end_offset = end,
        "rewound producer state"
    );
    outcome
}

fn stored_batch(h: &Peek) -> ProducerBatch {
    ProducerBatch {
        producer_id: h.producer_id,
        producer_epoch: h.producer_epoch,
        base_sequence: h.base_sequence,
        base_offset: h.base_offset,
        // The header's last offset delta, a non-negative i32.
        last_offset_delta: i32::try_from(h.last_offset - h.base_offset).unwrap_or(i32::MAX),
        max_timestamp: h.max_timestamp,
        is_control: h.is_control,
        is_transactional: h.is_transactional,
        control: h.control,
    }
}

/// The snapshot files of a partition directory.
#[derive(Debug, Default)]
struct SnapshotFiles {
    /// By offset, oldest first.
    snapshots: Vec<(i64, PathBuf)>,
    /// Temporary files of interrupted writes.
    leftovers: Vec<PathBuf>,
}

fn list_snapshots(dir: &Path) -> Result<SnapshotFiles> {
    let mut files = SnapshotFiles::default();
    for entry in fs::read_dir(dir).map_err(Error::io(dir))? {
        let entry = entry.map_err(Error::io(dir))?;
        let name = entry.file_name();
        let Some((stem, ext)) = name.to_str().and_then(|n| n.split_once('.')) else {
            continue;
        };
        match (parse_base_offset(stem), ext) {
            (Some(offset), SNAPSHOT_EXT) => files.snapshots.push((offset, entry.path())),
            (Some(_), SNAPSHOT_TMP_EXT) => files.leftovers.push(entry.path()),
            _ => {}
        }
    }
    files.snapshots.sort_unstable();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::producer_state::AppendCheck;
    use chronik_protocol::record_batch::{build_test_batch, parse_batches};

    /// Two segments: [pid 1 seq 0-1, pid 2 seq 0-1] at offsets 0..=3 and
    /// [pid 1 seq 2-3, pid 3 seq 0-1] at 4..=7.
    fn two_segments(dir: &Path) -> Vec<LogSegment> {
        [(0, [(1, 0), (2, 0)]), (4, [(1, 2), (3, 0)])]
            .into_iter()
            .map(|(base, batches)| {
                let mut segment = LogSegment::create(dir, base, 0).expect("create");
                for (pid, seq) in batches {
                    let mut bytes = build_test_batch(2, 0, b"records");
                    let headers = parse_batches(&bytes).expect("valid");
                    // The CRC goes stale; the header walk does not check it.
                    bytes[43..51].copy_from_slice(&i64::to_be_bytes(pid));
                    bytes[51..53].copy_from_slice(&0i16.to_be_bytes());
                    bytes[53..57].copy_from_slice(&i32::to_be_bytes(seq));
                    segment.append(&mut bytes, &headers, 0).expect("append");
                }
                segment
            })
            .collect()
    }

    fn accepts(state: &ProducerStateManager, pid: i64, seq: i32) -> bool {
        let batch = ProducerBatch {
            producer_id: pid,
            producer_epoch: 0,
            base_sequence: seq,
            base_offset: 8,
            last_offset_delta: 0,
            max_timestamp: 0,
            is_control: false,
            is_transactional: false,
            control: None,
        };
        matches!(state.check_append([batch]), Ok(AppendCheck::Append(_)))
    }

    fn load(dir: &Path, segments: &[LogSegment]) -> ProducerStateManager {
        load_producer_state(dir, ("t", 0), segments).expect("load")
    }

    fn snapshot_of(pids: &[i64]) -> Vec<u8> {
        let mut state = ProducerStateManager::default();
        for &producer_id in pids {
            state.replay(&ProducerBatch {
                producer_id,
                producer_epoch: 0,
                base_sequence: 0,
                base_offset: 0,
                last_offset_delta: 0,
                max_timestamp: 0,
                is_control: false,
                is_transactional: false,
                control: None,
            });
        }
        state.encode_snapshot()
    }

    #[test]
    fn without_a_snapshot_every_segment_is_replayed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let segments = two_segments(dir.path());
        let state = load(dir.path(), &segments);
        assert_eq!(state.len(), 3);
        assert!(accepts(&state, 1, 4) && accepts(&state, 2, 2) && accepts(&state, 3, 2));
        assert!(!accepts(&state, 1, 2), "pid 1 is at sequence 3");
    }

    #[test]
    fn the_newest_snapshot_inside_the_log_replaces_what_precedes_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let segments = two_segments(dir.path());
        write_snapshot(dir.path(), 4, &snapshot_of(&[])).expect("write");
        let state = load(dir.path(), &segments);
        assert_eq!(state.len(), 2, "only the second segment was replayed");
        assert!(accepts(&state, 1, 4) && accepts(&state, 3, 2));

        write_snapshot(dir.path(), 4, &snapshot_of(&[])).expect("write");
        write_snapshot(dir.path(), 8, &snapshot_of(&[9])).expect("write");
        let state = load(dir.path(), &segments);
        assert_eq!(state.len(), 1, "a snapshot at the log end replays nothing");
        let files = list_snapshots(dir.path()).expect("list");
        assert!(files.snapshots.is_empty() && files.leftovers.is_empty());
    }

    #[test]
    fn unusable_snapshots_fall_back_to_a_full_replay_and_are_removed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let segments = two_segments(dir.path());
        // Used, the first two would leave 2 (nothing replayed) and 4 (two
        // more producers) ids instead of the log's 3.
        let cases: [(i64, Vec<u8>); 3] = [
            (9, snapshot_of(&[9, 10])), // beyond the log end
            (3, snapshot_of(&[9, 10])), // inside the batch at 2..=3
            (4, b"garbage".to_vec()),   // undecodable
        ];
        for (offset, bytes) in cases {
            write_snapshot(dir.path(), offset, &bytes).expect("write");
            fs::write(segment_path(dir.path(), 2, SNAPSHOT_TMP_EXT), b"torn").expect("leftover");
            let state = load(dir.path(), &segments);
            assert_eq!(state.len(), 3, "snapshot at {offset}");
            let files = list_snapshots(dir.path()).expect("list");
            assert!(files.snapshots.is_empty() && files.leftovers.is_empty());
        }
    }
}
