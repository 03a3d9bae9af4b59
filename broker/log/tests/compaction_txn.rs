//! Log compaction of idempotent and transactional producers' batches: a
//! producer's last batch stays (as an empty batch) for idempotence, aborted
//! records go, and transaction markers go delete.retention.ms after their
//! transaction's records (the delete horizon, batch attribute bit 6), with
//! read_committed unchanged over the cleaned log.

mod common;

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use chronik_log::{LogManager, PartitionLog};
use chronik_protocol::record_batch::parse_batches;
use chronik_protocol::records::{build_batch, build_control_batch, read_records, SimpleRecord};
use common::compaction::*;
use common::{now_ms, open, partition_dir};

/// Appends one single-record batch of producer `producer_id` (epoch 0) with
/// sequence `sequence`; returns what the append did.
fn put_idempotent(
    log: &PartitionLog,
    (producer_id, sequence): (i64, i32),
    key: &str,
    value: &str,
) -> chronik_log::AppendInfo {
    let mut bytes = build_batch(&[SimpleRecord {
        key: Some(Bytes::from(key.to_string())),
        value: Some(Bytes::from(value.to_string())),
        timestamp: now_ms(),
    }]);
    bytes[43..51].copy_from_slice(&producer_id.to_be_bytes());
    bytes[51..53].copy_from_slice(&0i16.to_be_bytes());
    bytes[53..57].copy_from_slice(&sequence.to_be_bytes());
    let crc = common::crc32c(&bytes[21..]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    let headers = parse_batches(&bytes).expect("valid batch");
    log.append(&mut bytes, &headers).expect("append")
}

#[test]
fn a_producers_last_batch_stays_as_an_empty_batch_for_idempotence() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (manager, log) = compacted_topic(dir.path(), &[]);
    assert_eq!(put_idempotent(&log, (7, 0), "k0", "v0").base_offset, 0);
    assert_eq!(put_idempotent(&log, (7, 1), "k0", "v1").base_offset, 1);
    // Later values of k0 (and other keys) supersede both of its records.
    write_rounds(&log, 10, 10, now_ms());
    drop(log);
    let manager = reopen(manager, dir.path());
    assert!(manager.clean_now(100) >= 1);
    let log = partition(&manager, "c");
    let head = log.read(0, 4096, i64::MAX).expect("read");
    let batches = parse_batches(&head).expect("valid batches");
    assert_eq!(
        (
            batches[0].base_offset,
            batches[0].records_count,
            batches[0].producer_id
        ),
        (1, 0, 7),
        "producer 7's first batch is gone, its last one kept empty"
    );
    drop(log);

    // Without the producer snapshot, the state is rebuilt from the log:
    // the retried last batch is still recognised.
    manager.shutdown();
    drop(manager);
    let pdir = partition_dir(dir.path(), "c", 0);
    for entry in std::fs::read_dir(&pdir).expect("list") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "snapshot") {
            std::fs::remove_file(path).expect("remove snapshot");
        }
    }
    let manager = open(manager_config(dir.path()));
    let log = partition(&manager, "c");
    let retry = put_idempotent(&log, (7, 1), "k0", "v1");
    assert!(retry.duplicate && retry.base_offset == 1, "{retry:?}");
    let next = put_idempotent(&log, (7, 2), "k0", "v2");
    assert!(!next.duplicate);
}

/// Appends a single-record transactional batch of producer `producer_id`
/// (epoch 0, sequence `sequence`).
fn put_transactional(log: &PartitionLog, (producer_id, sequence): (i64, i32), key: &str) -> i64 {
    let mut bytes = build_batch(&[SimpleRecord {
        key: Some(Bytes::from(key.to_string())),
        value: Some(Bytes::from("in a transaction")),
        timestamp: now_ms(),
    }]);
    bytes[21..23].copy_from_slice(&0x10i16.to_be_bytes());
    bytes[43..51].copy_from_slice(&producer_id.to_be_bytes());
    bytes[51..53].copy_from_slice(&0i16.to_be_bytes());
    bytes[53..57].copy_from_slice(&sequence.to_be_bytes());
    let crc = common::crc32c(&bytes[21..]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    let headers = parse_batches(&bytes).expect("valid batch");
    log.append(&mut bytes, &headers)
        .expect("append")
        .base_offset
}

/// Appends a COMMIT or ABORT marker for producer `producer_id` (epoch 0).
fn end_transaction(log: &PartitionLog, producer_id: i64, commit: bool) -> i64 {
    let mut bytes = build_control_batch(producer_id, 0, commit, 0, now_ms());
    let headers = parse_batches(&bytes).expect("valid marker");
    log.append(&mut bytes, &headers)
        .expect("append marker")
        .base_offset
}

#[test]
fn aborted_transactional_records_are_removed_and_markers_kept() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (manager, log) = compacted_topic(dir.path(), &[]);
    let aborted = put_transactional(&log, (5, 0), "only-aborted");
    let abort_marker = end_transaction(&log, 5, false);
    let committed = put_transactional(&log, (6, 0), "only-committed");
    let commit_marker = end_transaction(&log, 6, true);
    write_rounds(&log, 10, 10, now_ms());
    drop(log);
    let manager = reopen(manager, dir.path());
    assert!(manager.clean_now(100) >= 1);
    let log = partition(&manager, "c");
    let kept: Vec<i64> = records(&log).iter().map(|r| r.0).collect();
    assert!(!kept.contains(&aborted), "the aborted record is removed");
    assert!(
        kept.contains(&committed),
        "the committed record, its key's latest, stays"
    );
    let head = log.read(0, 1 << 20, i64::MAX).expect("read");
    let markers: Vec<i64> = parse_batches(&head)
        .expect("valid batches")
        .iter()
        .filter(|h| h.is_control())
        .map(|h| h.base_offset)
        .collect();
    assert_eq!(
        markers,
        vec![abort_marker, commit_marker],
        "markers are kept"
    );
}

const HOUR_MS: i64 = 3_600_000;

/// (base offset, delete horizon, record count) of each control batch,
/// every batch's CRC checked by the project's batch reader.
fn markers(log: &PartitionLog) -> Vec<(i64, Option<i64>, i32)> {
    let bytes = log.read(0, 1 << 20, i64::MAX).expect("read");
    read_records(&bytes).expect("every batch decodes");
    parse_batches(&bytes)
        .expect("every CRC is valid")
        .iter()
        .filter(|h| h.is_control())
        .map(|h| (h.base_offset, h.delete_horizon_ms(), h.records_count))
        .collect()
}

/// What a read_committed consumer gets from the whole log, as Kafka's
/// consumer decides it: records below the last stable offset, none of a
/// producer from an aborted transaction's first offset until its ABORT
/// marker, no control records. (offset, key) pairs.
fn read_committed(log: &PartitionLog) -> Vec<(i64, String)> {
    let end = log
        .first_unstable_offset()
        .unwrap_or(i64::MAX)
        .min(log.log_end_offset());
    let bytes = log
        .read(log.log_start_offset(), 1 << 20, end)
        .expect("read");
    let mut aborted = log.aborted_transactions(log.log_start_offset(), end);
    aborted.sort_by_key(|a| a.first_offset);
    let (mut pending, mut skipping) = (aborted.into_iter().peekable(), Vec::new());
    let mut out = Vec::new();
    for h in parse_batches(&bytes).expect("valid batches") {
        let batch = &bytes[h.position..h.position + h.size];
        while let Some(a) = pending.next_if(|a| a.first_offset <= h.last_offset()) {
            skipping.push(a.producer_id);
        }
        if h.is_control() {
            let abort = chronik_protocol::records::control_record_type(batch)
                == Some(chronik_protocol::records::CONTROL_TYPE_ABORT);
            if abort {
                skipping.retain(|&p| p != h.producer_id);
            }
            continue;
        }
        if h.is_transactional() && skipping.contains(&h.producer_id) {
            continue;
        }
        for (offset, r) in read_records(batch).expect("uncompressed") {
            let key = String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()).into_owned();
            out.push((offset, key));
        }
    }
    out
}

/// One cleaning as of `now`: fresh dirty data (other keys, stamped `now`:
/// a record from after the cleaning's clock would count as too young to
/// clean), a restart so every closed segment may be cleaned, then the
/// cleaner.
fn clean_at(manager: Arc<LogManager>, dir: &Path, now: i64) -> Arc<LogManager> {
    write_rounds(&partition(&manager, "c"), 10, 3, now);
    let manager = reopen(manager, dir);
    assert!(
        manager.clean_now_at(100, now) >= 1,
        "the log is due at {now}"
    );
    manager
}

/// `clean_at`, then topic "c"'s partition 0.
fn cleaned_at(
    manager: Arc<LogManager>,
    dir: &Path,
    now: i64,
) -> (Arc<LogManager>, Arc<PartitionLog>) {
    let manager = clean_at(manager, dir, now);
    let log = partition(&manager, "c");
    (manager, log)
}

/// Every stored data record as (offset, key): after a cleaning that removed
/// the aborted records, what a read_committed consumer must get.
fn stored(log: &PartitionLog) -> Vec<(i64, String)> {
    let markers: Vec<i64> = markers(log).iter().map(|m| m.0).collect();
    records(log)
        .into_iter()
        .filter(|r| !markers.contains(&r.0))
        .map(|(offset, key, _)| (offset, key.expect("keyed")))
        .collect()
}

#[test]
fn a_committed_transactions_marker_goes_delete_retention_ms_after_its_records() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (manager, log) = compacted_topic(dir.path(), &[("delete.retention.ms", "3600000")]);
    let superseded = put_transactional(&log, (6, 0), "k0");
    let marker = end_transaction(&log, 6, true);
    // A second transaction whose record stays its key's latest.
    let live = put_transactional(&log, (6, 1), "live");
    let live_marker = end_transaction(&log, 6, true);
    write_rounds(&log, 10, 10, now_ms());
    drop(log);
    let t0 = now_ms();
    let (manager, log) = cleaned_at(manager, dir.path(), t0);
    assert!(
        !records(&log).iter().any(|r| r.0 == superseded),
        "superseded"
    );
    assert_eq!(
        markers(&log),
        vec![(marker, None, 1), (live_marker, None, 1)],
        "the cleaning that removed the transaction's record still read it"
    );
    drop(log);

    let (manager, log) = cleaned_at(manager, dir.path(), t0 + 1);
    let horizon = t0 + 1 + HOUR_MS;
    assert_eq!(
        markers(&log),
        vec![(marker, Some(horizon), 1), (live_marker, None, 1)],
        "a marker with no records left gets a delete horizon; one with a live record does not"
    );
    drop(log);

    let manager = clean_at(manager, dir.path(), horizon - 1);
    assert_eq!(
        markers(&partition(&manager, "c")),
        vec![(marker, Some(horizon), 1), (live_marker, None, 1)],
        "kept until its horizon"
    );
    let (manager, log) = cleaned_at(manager, dir.path(), horizon);
    assert_eq!(
        markers(&log),
        vec![(live_marker, None, 1)],
        "gone after its horizon"
    );
    assert!(
        records(&log).iter().any(|r| r.0 == live),
        "the live record stays"
    );
    assert_eq!(read_committed(&log), stored(&log));
    drop(log);
    let (_manager, log) = reopened(manager, dir.path());
    assert_eq!(
        markers(&log),
        vec![(live_marker, None, 1)],
        "after a restart"
    );
    assert_eq!(
        log.first_unstable_offset(),
        None,
        "no transaction is left open"
    );
}

#[test]
fn an_aborted_transactions_records_go_at_once_and_its_marker_after_the_horizon() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (manager, log) = compacted_topic(dir.path(), &[("delete.retention.ms", "3600000")]);
    let aborted = [
        put_transactional(&log, (5, 0), "only-aborted"),
        put_transactional(&log, (5, 1), "k1"),
    ];
    let abort_marker = end_transaction(&log, 5, false);
    // The producer goes on: a committed transaction after the aborted one,
    // which a read_committed consumer must not drop.
    let committed = put_transactional(&log, (5, 2), "after-abort");
    let commit_marker = end_transaction(&log, 5, true);
    write_rounds(&log, 10, 10, now_ms());
    assert_eq!(log.aborted_transactions(0, i64::MAX).len(), 1);
    drop(log);
    let t0 = now_ms();
    let (manager, log) = cleaned_at(manager, dir.path(), t0);
    let kept: Vec<i64> = records(&log).iter().map(|r| r.0).collect();
    assert!(
        !aborted.iter().any(|o| kept.contains(o)),
        "aborted records go at once"
    );
    assert!(kept.contains(&committed));
    assert_eq!(
        markers(&log),
        vec![(abort_marker, None, 1), (commit_marker, None, 1)]
    );
    assert_eq!(read_committed(&log), stored(&log));
    drop(log);

    let (manager, log) = cleaned_at(manager, dir.path(), t0 + 1);
    let horizon = t0 + 1 + HOUR_MS;
    assert_eq!(
        markers(&log),
        vec![(abort_marker, Some(horizon), 1), (commit_marker, None, 1)]
    );
    assert_eq!(
        log.aborted_transactions(0, i64::MAX).len(),
        1,
        "kept with its marker"
    );
    assert_eq!(read_committed(&log), stored(&log));
    drop(log);

    let (manager, log) = cleaned_at(manager, dir.path(), horizon);
    assert_eq!(
        markers(&log),
        vec![(commit_marker, None, 1)],
        "gone after its horizon"
    );
    assert!(
        log.aborted_transactions(0, i64::MAX).is_empty(),
        "its aborted-transaction entry went with it"
    );
    let committed_reads = read_committed(&log);
    assert!(committed_reads.contains(&(committed, "after-abort".into())));
    assert_eq!(committed_reads, stored(&log));
    drop(log);
    let (_manager, log) = reopened(manager, dir.path());
    assert!(
        log.aborted_transactions(0, i64::MAX).is_empty(),
        "after a restart"
    );
    assert_eq!(read_committed(&log), stored(&log));
}

#[test]
fn a_marker_stays_while_its_producers_last_batch_does() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (manager, log) = compacted_topic(dir.path(), &[("delete.retention.ms", "0")]);
    let aborted = put_transactional(&log, (9, 0), "k0");
    let marker = end_transaction(&log, 9, false);
    write_rounds(&log, 10, 10, now_ms());
    drop(log);
    let t0 = now_ms();
    let mut manager = manager;
    for t in [t0, t0 + 1, t0 + 2] {
        manager = clean_at(manager, dir.path(), t);
    }
    let log = partition(&manager, "c");
    let head = log.read(0, 1 << 20, i64::MAX).expect("read");
    let first = parse_batches(&head).expect("valid batches")[0];
    assert_eq!(
        (first.base_offset, first.records_count),
        (aborted, 0),
        "the producer's last data batch stays, empty, for its idempotence state"
    );
    assert_eq!(
        markers(&log),
        vec![(marker, None, 1)],
        "so its transaction still has a batch, and its marker stays"
    );
    assert_eq!(log.aborted_transactions(0, i64::MAX).len(), 1);
    assert_eq!(read_committed(&log), stored(&log));

    // The producer writes again: its old batch may go, then the marker.
    let next = put_transactional(&log, (9, 1), "next");
    let next_marker = end_transaction(&log, 9, true);
    drop(log);
    let t1 = now_ms();
    for t in [t1, t1 + 1, t1 + 2] {
        manager = clean_at(manager, dir.path(), t);
    }
    let log = partition(&manager, "c");
    assert_eq!(markers(&log), vec![(next_marker, None, 1)]);
    assert!(log.aborted_transactions(0, i64::MAX).is_empty());
    let reads = read_committed(&log);
    assert!(reads.contains(&(next, "next".into())));
    assert_eq!(reads, stored(&log));
}
