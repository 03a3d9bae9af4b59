//! Reopening a data directory: clean shutdown, crash, torn and corrupt tails.

mod common;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use chronik_log::{FlushPolicy, LogManager, PartitionLog};
use common::*;

const TOPIC: &str = "events";

/// Writes `batches` 2-record batches of 500 bytes (four per segment) and
/// returns the manager (still open) and the partition directory.
fn populate(dir: &Path, batches: i64) -> (std::sync::Arc<LogManager>, PathBuf) {
    let manager = open_with(dir, small_segments(2_000), FlushPolicy::Never);
    let log = create(&manager, TOPIC, 1);
    for i in 0..batches {
        append(&log, 2, 1_000 + i, 439);
    }
    (manager, partition_dir(dir, TOPIC, 0))
}

/// Opens `dir` again as `populate` opened it: the manager and the
/// partition's log as recovery left it.
fn reopen(dir: &Path) -> (std::sync::Arc<LogManager>, std::sync::Arc<PartitionLog>) {
    let manager = open_with(dir, small_segments(2_000), FlushPolicy::Never);
    let log = manager
        .topic(TOPIC)
        .expect("topic")
        .partition(0)
        .expect("partition")
        .clone();
    (manager, log)
}

/// Overwrites `bytes` at `position` of `file`.
fn garble(file: &Path, position: u64, bytes: &[u8]) {
    let file = OpenOptions::new().write(true).open(file).expect("open");
    file.write_all_at(bytes, position).expect("garble");
}

fn last_log_file(partition_dir: &Path) -> PathBuf {
    partition_dir.join(log_files(partition_dir).pop().expect("a segment"))
}

#[test]
fn clean_shutdown_keeps_everything() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (manager, pdir) = populate(dir.path(), 10);
    manager.shutdown();
    manager.shutdown(); // idempotent
    assert!(dir.path().join(".clean_shutdown").exists());
    let checkpoint = std::fs::read_to_string(dir.path().join("recovery-point-offset-checkpoint"))
        .expect("checkpoint");
    assert!(
        checkpoint.contains(&format!("{TOPIC} 0 20")),
        "{checkpoint}"
    );
    drop(manager);

    let (manager, log) = reopen(dir.path());
    assert!(
        !dir.path().join(".clean_shutdown").exists(),
        "marker removed at open"
    );
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.durable_offset()
        ),
        (0, 20, 20)
    );
    assert_eq!(read_all(&log, 0).len(), 10);
    assert_eq!(
        log.read(9, 1 << 20, i64::MAX)
            .map(|b| offsets(&b)[0])
            .expect("read"),
        (8, 9)
    );
    assert_eq!(append(&log, 1, 0, 10).base_offset, 20);
    assert_eq!(log_files(&pdir).len(), 3);
    assert_eq!(manager.stats().recovery_truncated_bytes_total, 0);
}

#[test]
fn unclean_reopen_recovers_everything() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (manager, _) = populate(dir.path(), 10);
    drop(manager); // no shutdown: as after a crash
    assert!(!dir.path().join(".clean_shutdown").exists());

    let (_manager, log) = reopen(dir.path());
    assert_eq!((log.log_end_offset(), log.durable_offset()), (20, 20));
    assert_eq!(
        read_all(&log, 0),
        (0..10).map(|i| (2 * i, 2 * i + 1)).collect::<Vec<_>>()
    );
    assert_eq!(append(&log, 3, 0, 10).base_offset, 20);
}

fn torn_tail_is_truncated(clean: bool) {
    let dir = tempfile::tempdir().expect("temp dir");
    let (manager, pdir) = populate(dir.path(), 10);
    if clean {
        manager.shutdown();
    }
    drop(manager);
    let last = last_log_file(&pdir);
    let len = chop_tail(&last, 7);

    let (manager, log) = reopen(dir.path());
    assert_eq!(
        log.log_end_offset(),
        18,
        "the torn last batch (18..=19) is gone"
    );
    assert_eq!(
        std::fs::metadata(&last).expect("stat").len(),
        len - 500,
        "file cut at the batch start"
    );
    assert_eq!(manager.stats().recovery_truncated_bytes_total, 493);
    assert_eq!(read_all(&log, 0).len(), 9);
    let next = append(&log, 2, 0, 10);
    assert_eq!((next.base_offset, next.log_end_offset), (18, 20));
    assert_eq!(
        offsets(&log.read(18, 1 << 20, i64::MAX).expect("read")),
        vec![(18, 19)]
    );
}

#[test]
fn torn_tail_after_crash_is_truncated() {
    torn_tail_is_truncated(false);
}

#[test]
fn torn_tail_after_clean_shutdown_is_truncated() {
    torn_tail_is_truncated(true);
}

#[test]
fn garbled_tail_is_truncated_at_the_bad_batch() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (manager, pdir) = populate(dir.path(), 10);
    drop(manager);
    // The last segment holds batches 8 and 9 (offsets 16..=19); garble the
    // record bytes of batch 8 so its CRC fails.
    let last = last_log_file(&pdir);
    garble(&last, 200, &[0xde, 0xad, 0xbe, 0xef]);

    let (_manager, log) = reopen(dir.path());
    assert_eq!(log.log_end_offset(), 16);
    assert_eq!(std::fs::metadata(&last).expect("stat").len(), 0);
    assert_eq!(append(&log, 1, 0, 10).base_offset, 16);
}

#[test]
fn corruption_in_an_early_segment_drops_the_later_ones() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (manager, pdir) = populate(dir.path(), 10);
    drop(manager);
    // Without a checkpoint every segment is rescanned from the start.
    std::fs::remove_file(dir.path().join("recovery-point-offset-checkpoint"))
        .expect("remove checkpoint");
    // batch 2: offsets 4..=5
    garble(&pdir.join("00000000000000000000.log"), 1_200, &[0xff; 3]);

    let (_manager, log) = reopen(dir.path());
    assert_eq!(log.log_end_offset(), 4);
    assert_eq!(log_files(&pdir), vec!["00000000000000000000.log"]);
    assert_eq!(append(&log, 1, 0, 10).base_offset, 4);
}

#[test]
fn missing_index_files_are_rebuilt() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (manager, pdir) = populate(dir.path(), 10);
    manager.shutdown();
    drop(manager);
    std::fs::remove_file(pdir.join("00000000000000000000.index")).expect("remove index");
    std::fs::write(pdir.join("00000000000000000008.timeindex"), b"garbage")
        .expect("garble time index");

    let (_manager, log) = reopen(dir.path());
    assert_eq!(log.log_end_offset(), 20);
    assert_eq!(
        offsets(&log.read(7, 600, i64::MAX).expect("read")),
        vec![(6, 7)]
    );
    assert_eq!(
        log.offset_for_timestamp(1_005).expect("lookup"),
        Some((10, 1_005))
    );
    assert!(
        pdir.join("00000000000000000000.index").exists(),
        "rebuilt index written back"
    );
}
