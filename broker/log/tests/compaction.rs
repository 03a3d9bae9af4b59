//! Log compaction (cleanup.policy=compact): what the cleaner keeps, what it
//! removes and when, and recovery from a cleaning a crash interrupted.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use chronik_log::{
    CleanerConfig, FlushPolicy, LogConfig, LogManager, LogManagerConfig, PartitionLog,
};
use chronik_protocol::record_batch::parse_batches;
use chronik_protocol::records::{build_batch, build_control_batch, read_records, SimpleRecord};
use common::{log_files, now_ms, offsets, open, partition_dir};

/// (offset, key, value) of a stored record.
type Record = (i64, Option<String>, Option<String>);

fn manager_config(dir: &Path) -> LogManagerConfig {
    LogManagerConfig {
        flush_policy: FlushPolicy::Never,
        // Tests run the cleaner themselves (`clean_now`).
        cleaner: CleanerConfig {
            threads: 0,
            ..CleanerConfig::default()
        },
        ..common::config(dir, LogConfig::default())
    }
}

fn compacted(extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut o: BTreeMap<String, String> = [
        ("cleanup.policy", "compact"),
        ("min.cleanable.dirty.ratio", "0.01"),
        ("segment.bytes", "1024"),
        ("index.interval.bytes", "128"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    for (k, v) in extra {
        o.insert(k.to_string(), v.to_string());
    }
    o
}

fn create(manager: &LogManager, topic: &str, overrides: BTreeMap<String, String>) {
    manager
        .create_topic(topic, 1, overrides)
        .expect("create topic");
}

fn partition(manager: &LogManager, topic: &str) -> Arc<PartitionLog> {
    Arc::clone(
        manager
            .topic(topic)
            .expect("topic")
            .partition(0)
            .expect("partition 0"),
    )
}

/// Appends one single-record batch; a None value is a tombstone.
fn put(log: &PartitionLog, key: &str, value: Option<&str>, timestamp: i64) -> i64 {
    let mut bytes = build_batch(&[SimpleRecord {
        key: Some(Bytes::from(key.to_string())),
        value: value.map(|v| Bytes::from(v.to_string())),
        timestamp,
    }]);
    let headers = parse_batches(&bytes).expect("valid batch");
    log.append(&mut bytes, &headers)
        .expect("append")
        .base_offset
}

/// Every record from offset 0, with its offset.
fn records(log: &PartitionLog) -> Vec<Record> {
    let text = |b: &Option<Bytes>| b.as_ref().map(|b| String::from_utf8_lossy(b).into_owned());
    let mut out = Vec::new();
    let mut next = log.log_start_offset();
    while next < log.log_end_offset() {
        let chunk = log.read(next, 1 << 20, i64::MAX).expect("read");
        let batches = offsets(&chunk);
        next = batches
            .last()
            .expect("a read below the end returns a batch")
            .1
            + 1;
        for (offset, r) in read_records(&chunk).expect("uncompressed records") {
            out.push((offset, text(&r.key), text(&r.value)));
        }
    }
    out
}

/// Shuts the manager down and opens the directory again (recovery point at
/// the log end, so every closed segment may be cleaned).
fn reopen(manager: Arc<LogManager>, dir: &Path) -> Arc<LogManager> {
    manager.shutdown();
    drop(manager);
    open(manager_config(dir))
}

/// `rounds` rounds of one write to each of keys k0..k{keys}, the value
/// naming the offset; returns the offsets written per key.
fn write_rounds(
    log: &PartitionLog,
    keys: usize,
    rounds: usize,
    ts: i64,
) -> HashMap<String, Vec<i64>> {
    let mut written: HashMap<String, Vec<i64>> = HashMap::new();
    for _ in 0..rounds {
        for k in 0..keys {
            let key = format!("k{k}");
            let offset = log.log_end_offset();
            assert_eq!(put(log, &key, Some(&format!("v{offset}")), ts), offset);
            written.entry(key).or_default().push(offset);
        }
    }
    written
}

fn active_base(dir: &Path) -> i64 {
    let files = log_files(dir);
    let last = files.last().expect("a segment");
    last.trim_end_matches(".log")
        .parse()
        .expect("base offset name")
}

#[test]
fn cleaning_keeps_each_keys_latest_value_at_its_offset() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open(manager_config(dir.path()));
    create(&manager, "c", compacted(&[]));
    let written = write_rounds(&partition(&manager, "c"), 10, 30, now_ms());
    let manager = reopen(manager, dir.path());
    let log = partition(&manager, "c");
    let pdir = partition_dir(dir.path(), "c", 0);
    let (end, size_before) = (log.log_end_offset(), log.size_bytes());
    let active = active_base(&pdir);
    let active_name = format!("{active:020}.log");
    let active_bytes = std::fs::read(pdir.join(&active_name)).expect("active segment");
    let before = records(&log);
    assert_eq!(before.len(), 300);

    assert!(manager.clean_now(100) >= 1, "the log is due");
    let after = records(&log);
    // Below the active segment: each key's last record there; from it on:
    // everything.
    let mut want: Vec<i64> = written
        .values()
        .filter_map(|offsets| offsets.iter().copied().filter(|&o| o < active).max())
        .collect();
    want.extend(before.iter().map(|r| r.0).filter(|&o| o >= active));
    want.sort_unstable();
    assert_eq!(after.iter().map(|r| r.0).collect::<Vec<_>>(), want);
    for (offset, key, value) in &after {
        assert_eq!(
            value.as_deref(),
            Some(format!("v{offset}").as_str()),
            "offsets preserved"
        );
        assert!(key.is_some());
    }
    for (key, offsets) in &written {
        let latest = offsets.last().expect("written");
        assert!(after
            .iter()
            .any(|r| r.0 == *latest && r.1.as_deref() == Some(key.as_str())));
    }
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, end));
    assert!(
        log.size_bytes() < size_before / 2,
        "{} of {size_before} bytes left",
        log.size_bytes()
    );
    assert_eq!(
        std::fs::read(pdir.join(&active_name)).expect("active segment"),
        active_bytes,
        "the active segment is untouched"
    );
    assert_eq!(log.clean_checkpoint(), active);
    assert_eq!(manager.clean_now(100), 0, "nothing dirty is left");
    let stats = manager.stats();
    assert!(stats.cleaner_runs_total >= 1 && stats.cleaner_reclaimed_bytes_total > 0);
    assert!(stats.cleaner_last_run_ms > 0);

    // Appends continue at the same offsets; the gaps survive a clean
    // restart and a full rescan (no checkpoint, no clean-shutdown marker).
    assert_eq!(put(&log, "k0", Some(&format!("v{end}")), now_ms()), end);
    write_rounds(&log, 10, 10, now_ms());
    drop(log);
    let segments_before = log_files(&pdir).len();
    let manager = reopen(manager, dir.path());
    assert!(manager.clean_now(100) >= 1);
    assert!(
        log_files(&pdir).len() < segments_before,
        "small cleaned segments are merged by the next cleaning"
    );
    let expected = records(&partition(&manager, "c"));
    assert!(
        expected
            .iter()
            .all(|r| r.2.as_deref() == Some(format!("v{}", r.0).as_str())),
        "offsets still preserved after a second cleaning"
    );
    manager.shutdown();
    drop(manager);
    std::fs::remove_file(dir.path().join("recovery-point-offset-checkpoint")).expect("checkpoint");
    let _ = std::fs::remove_file(dir.path().join(".clean_shutdown"));
    let manager = open(manager_config(dir.path()));
    let log = partition(&manager, "c");
    assert_eq!(records(&log), expected, "a full rescan accepts the gaps");
    assert_eq!(manager.stats().recovery_truncated_bytes_total, 0);
}

#[test]
fn tombstones_go_only_delete_retention_ms_after_their_segment_was_cleaned() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open(manager_config(dir.path()));
    for (topic, retention) in [("short", "0"), ("long", "3600000")] {
        create(
            &manager,
            topic,
            compacted(&[("delete.retention.ms", retention)]),
        );
    }
    let k0 = |log: &PartitionLog| -> Vec<Record> {
        records(log)
            .into_iter()
            .filter(|r| r.1.as_deref() == Some("k0"))
            .collect()
    };
    // Keys k0..k4, then a tombstone for k0, then enough other writes to
    // close its segment.
    let tombstone_at = |topic: &str| -> i64 {
        let log = partition(&manager, topic);
        write_rounds(&log, 5, 5, now_ms());
        let at = log.log_end_offset();
        put(&log, "k0", None, now_ms());
        for round in 0..40 {
            put(
                &log,
                &format!("k{}", 1 + round % 4),
                Some("later"),
                now_ms(),
            );
        }
        at
    };
    let (short_at, long_at) = (tombstone_at("short"), tombstone_at("long"));
    let manager = reopen(manager, dir.path());
    assert!(manager.clean_now(100) >= 2);
    for (topic, at) in [("short", short_at), ("long", long_at)] {
        assert_eq!(
            k0(&partition(&manager, topic)),
            vec![(at, Some("k0".into()), None)],
            "{topic}: a tombstone in a dirty segment survives its first cleaning"
        );
    }
    // More dirty data, then a second cleaning: the tombstone's segment is
    // clean now.
    for topic in ["short", "long"] {
        let log = partition(&manager, topic);
        for round in 0..40 {
            put(
                &log,
                &format!("k{}", 1 + round % 4),
                Some("again"),
                now_ms(),
            );
        }
    }
    let manager = reopen(manager, dir.path());
    assert!(manager.clean_now(100) >= 2);
    assert_eq!(
        k0(&partition(&manager, "short")),
        vec![],
        "delete.retention.ms=0 passed"
    );
    assert_eq!(
        k0(&partition(&manager, "long")),
        vec![(long_at, Some("k0".into()), None)],
        "delete.retention.ms=1h has not"
    );
}

#[test]
fn records_younger_than_min_compaction_lag_stay() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open(manager_config(dir.path()));
    for topic in ["young", "old"] {
        create(
            &manager,
            topic,
            compacted(&[("min.compaction.lag.ms", "3600000")]),
        );
    }
    write_rounds(&partition(&manager, "young"), 5, 20, now_ms());
    write_rounds(&partition(&manager, "old"), 5, 20, now_ms() - 2 * 3_600_000);
    let manager = reopen(manager, dir.path());
    assert_eq!(manager.clean_now(100), 1, "only the old log is cleanable");
    assert_eq!(records(&partition(&manager, "young")).len(), 100);
    assert!(records(&partition(&manager, "old")).len() < 100);
}

#[test]
fn a_delete_policy_topic_is_never_compacted() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open(manager_config(dir.path()));
    let mut overrides = compacted(&[]);
    overrides.insert("cleanup.policy".into(), "delete".into());
    create(&manager, "d", overrides);
    write_rounds(&partition(&manager, "d"), 5, 20, now_ms());
    let manager = reopen(manager, dir.path());
    assert_eq!(manager.clean_now(100), 0);
    assert_eq!(records(&partition(&manager, "d")).len(), 100);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("list") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

#[test]
fn a_crash_before_the_swap_leaves_the_old_segments() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open(manager_config(dir.path()));
    create(&manager, "c", compacted(&[]));
    write_rounds(&partition(&manager, "c"), 10, 20, now_ms());
    let before = records(&partition(&manager, "c"));
    manager.shutdown();
    drop(manager);
    // A crash while the cleaned copy was being written.
    let pdir = partition_dir(dir.path(), "c", 0);
    let leftover = pdir.join(format!("{:020}.log.cleaned", 0));
    std::fs::write(&leftover, b"half a cleaned segment").expect("write leftover");
    let manager = open(manager_config(dir.path()));
    assert!(!leftover.exists(), "an uncommitted cleaned file is deleted");
    assert_eq!(records(&partition(&manager, "c")), before);
}

#[test]
fn a_crash_after_the_commit_point_completes_the_swap() {
    let (cleaned_dir, crashed_dir) = (
        tempfile::tempdir().expect("temp dir"),
        tempfile::tempdir().expect("temp dir"),
    );
    let manager = open(manager_config(cleaned_dir.path()));
    create(&manager, "c", compacted(&[]));
    write_rounds(&partition(&manager, "c"), 10, 20, now_ms());
    let manager = reopen(manager, cleaned_dir.path());
    assert!(manager.clean_now(100) >= 1);
    write_rounds(&partition(&manager, "c"), 10, 20, now_ms());
    let original = records(&partition(&manager, "c"));
    manager.shutdown();
    drop(manager);
    copy_dir(cleaned_dir.path(), crashed_dir.path());
    let (cleaned_p, crashed_p) = (
        partition_dir(cleaned_dir.path(), "c", 0),
        partition_dir(crashed_dir.path(), "c", 0),
    );
    let segments_before = log_files(&crashed_p);

    let manager = open(manager_config(cleaned_dir.path()));
    assert!(manager.clean_now(100) >= 1);
    let want = records(&partition(&manager, "c"));
    manager.shutdown();
    drop(manager);
    let cleaned_files = log_files(&cleaned_p);
    assert!(cleaned_files.len() < segments_before.len());

    // The crashed copy: the first cleaned segment renamed to .swap (the
    // commit point), old segments and their indexes still in place.
    let first = &cleaned_files[0];
    std::fs::copy(
        cleaned_p.join(first),
        crashed_p.join(format!("{first}.swap")),
    )
    .expect("swap file");
    let manager = open(manager_config(crashed_dir.path()));
    let got = records(&partition(&manager, "c"));
    let base_of = |f: &String| -> i64 { f.trim_end_matches(".log").parse().expect("base") };
    let first_next = base_of(&cleaned_files[1]);
    assert!(
        segments_before
            .iter()
            .filter(|f| base_of(f) < first_next)
            .count()
            > 1,
        "the swap replaces several segments"
    );
    let below = |rs: &[Record]| {
        rs.iter()
            .filter(|r| r.0 < first_next)
            .cloned()
            .collect::<Vec<_>>()
    };
    let above = |rs: &[Record]| {
        rs.iter()
            .filter(|r| r.0 >= first_next)
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        below(&got),
        below(&want),
        "the swapped-in segment's records"
    );
    assert_eq!(
        above(&got),
        above(&original),
        "the segments after it, not cleaned"
    );
    let files = log_files(&crashed_p);
    assert!(
        !files.iter().any(|f| (1..first_next).contains(&base_of(f))),
        "the segments the swap replaced are gone: {files:?}"
    );
    let names: Vec<String> = std::fs::read_dir(&crashed_p)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with(".swap")), "{names:?}");
}

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
    let manager = open(manager_config(dir.path()));
    create(&manager, "c", compacted(&[]));
    let log = partition(&manager, "c");
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
    let manager = open(manager_config(dir.path()));
    create(&manager, "c", compacted(&[]));
    let log = partition(&manager, "c");
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

#[test]
fn the_cleaner_thread_compacts_a_live_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open(LogManagerConfig {
        cleaner: CleanerConfig {
            threads: 2,
            backoff: std::time::Duration::from_millis(10),
            ..CleanerConfig::default()
        },
        ..manager_config(dir.path())
    });
    create(&manager, "live", compacted(&[]));
    let log = partition(&manager, "live");
    write_rounds(&log, 10, 30, now_ms());
    // No restart: the cleaner waits for the flusher to sync the closed
    // segments, then compacts them, while this thread keeps reading the
    // whole log (a read racing a swap must still see whole, valid batches).
    let compacted = common::wait_until(std::time::Duration::from_secs(20), || {
        records(&log).len() < 100 && manager.stats().cleaner_runs_total >= 1
    });
    assert!(compacted, "{} records left", records(&log).len());
    manager.shutdown();
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
    let manager = open(manager_config(dir.path()));
    create(
        &manager,
        "c",
        compacted(&[("delete.retention.ms", "3600000")]),
    );
    let log = partition(&manager, "c");
    let superseded = put_transactional(&log, (6, 0), "k0");
    let marker = end_transaction(&log, 6, true);
    // A second transaction whose record stays its key's latest.
    let live = put_transactional(&log, (6, 1), "live");
    let live_marker = end_transaction(&log, 6, true);
    write_rounds(&log, 10, 10, now_ms());
    drop(log);
    let t0 = now_ms();
    let manager = clean_at(manager, dir.path(), t0);
    let log = partition(&manager, "c");
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

    let manager = clean_at(manager, dir.path(), t0 + 1);
    let horizon = t0 + 1 + HOUR_MS;
    let log = partition(&manager, "c");
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
    let manager = clean_at(manager, dir.path(), horizon);
    let log = partition(&manager, "c");
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
    let manager = reopen(manager, dir.path());
    let log = partition(&manager, "c");
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
    let manager = open(manager_config(dir.path()));
    create(
        &manager,
        "c",
        compacted(&[("delete.retention.ms", "3600000")]),
    );
    let log = partition(&manager, "c");
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
    let manager = clean_at(manager, dir.path(), t0);
    let log = partition(&manager, "c");
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

    let manager = clean_at(manager, dir.path(), t0 + 1);
    let horizon = t0 + 1 + HOUR_MS;
    let log = partition(&manager, "c");
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

    let manager = clean_at(manager, dir.path(), horizon);
    let log = partition(&manager, "c");
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
    let manager = reopen(manager, dir.path());
    let log = partition(&manager, "c");
    assert!(
        log.aborted_transactions(0, i64::MAX).is_empty(),
        "after a restart"
    );
    assert_eq!(read_committed(&log), stored(&log));
}

#[test]
fn a_marker_stays_while_its_producers_last_batch_does() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open(manager_config(dir.path()));
    create(&manager, "c", compacted(&[("delete.retention.ms", "0")]));
    let log = partition(&manager, "c");
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
