//! Follower truncation: `truncate_to` and `truncate_fully_and_start_at`,
//! then appends, restarts, producer state, the flusher and racing reads.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chronik_log::{Error, FlushPolicy, LogConfig, LogManager, PartitionLog};
use common::*;

const TOPIC: &str = "replica";

fn segment_name(base: i64) -> String {
    format!("{base:020}.log")
}

fn names(bases: &[i64]) -> Vec<String> {
    bases.iter().map(|&b| segment_name(b)).collect()
}

/// Every file in the partition directory.
fn all_files(dir: &Path) -> Vec<String> {
    file_names(dir, |_| true)
}

fn partition(manager: &LogManager) -> Arc<PartitionLog> {
    Arc::clone(
        manager
            .topic(TOPIC)
            .expect("topic")
            .partition(0)
            .expect("p0"),
    )
}

/// 2-record batches of 500 bytes: four per 2000-byte segment, so ten
/// batches make segments at 0, 8 and 16 and end at offset 20.
fn ten_batches(dir: &Path, policy: FlushPolicy) -> (Arc<LogManager>, Arc<PartitionLog>) {
    let manager = open_with(dir, small_segments(2_000), policy);
    let log = create(&manager, TOPIC, 1);
    for i in 0..10 {
        append(&log, 2, 1_000 + i, 439);
    }
    assert_eq!(log_files(&partition_dir(dir, TOPIC, 0)), names(&[0, 8, 16]));
    (manager, log)
}

fn pairs(range: std::ops::Range<i64>) -> Vec<(i64, i64)> {
    range.step_by(2).map(|o| (o, o + 1)).collect()
}

#[test]
fn truncating_inside_the_active_segment_cuts_at_the_batch_holding_the_offset() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open_with(dir.path(), LogConfig::default(), FlushPolicy::Never);
    let log = create(&manager, TOPIC, 1);
    for i in 0..10 {
        append(&log, 2, 1_000 + i, 100);
    }
    let batch_bytes = log.size_bytes() / 10;
    log.truncate_to(9)
        .expect("truncate inside the batch at 8..=9");
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.durable_offset()
        ),
        (0, 8, 8)
    );
    assert_eq!(log.size_bytes(), 4 * batch_bytes);
    assert_eq!(read_all(&log, 0), pairs(0..8));
    assert!(log
        .read(8, 1 << 20, i64::MAX)
        .expect("read at the end")
        .is_empty());
    assert!(matches!(
        log.read(10, 1 << 20, i64::MAX),
        Err(Error::OffsetOutOfRange {
            log_end_offset: 8,
            ..
        })
    ));
    let file = partition_dir(dir.path(), TOPIC, 0).join(segment_name(0));
    assert_eq!(
        std::fs::metadata(&file).expect("stat").len(),
        4 * batch_bytes
    );

    log.truncate_to(8).expect("at the end: no-op");
    log.truncate_to(100).expect("past the end: no-op");
    assert_eq!(log.log_end_offset(), 8);
    assert!(matches!(
        log.truncate_to(-1),
        Err(Error::OffsetOutOfRange { offset: -1, .. })
    ));

    let info = append(&log, 3, 2_000, 100);
    assert_eq!((info.base_offset, info.last_offset), (8, 10));
    let mut want = pairs(0..8);
    want.push((8, 10));
    assert_eq!(read_all(&log, 0), want);
    assert_eq!(
        log.offset_for_timestamp(1_004).expect("by time"),
        Some((8, 2_000))
    );
    assert_eq!(log.max_timestamp_offset().expect("max"), Some((10, 2_000)));
}

#[test]
fn truncating_across_segments_deletes_the_later_ones() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (_manager, log) = ten_batches(dir.path(), FlushPolicy::Never);
    let pdir = partition_dir(dir.path(), TOPIC, 0);
    assert!(all_files(&pdir).contains(&"00000000000000000000.index".to_string()));

    log.truncate_to(5)
        .expect("truncate inside the batch at 4..=5");
    assert_eq!((log.log_end_offset(), log.size_bytes()), (4, 1_000));
    assert_eq!(read_all(&log, 0), pairs(0..4));
    assert_eq!(
        all_files(&pdir),
        names(&[0]),
        "later segments and the stale indexes of the cut one are gone"
    );
    assert_eq!(log.max_timestamp_offset().expect("max"), Some((3, 1_001)));

    for i in 0..8 {
        let info = append(&log, 2, 3_000 + i, 439);
        assert_eq!(info.base_offset, 4 + 2 * i);
    }
    assert_eq!(read_all(&log, 0), pairs(0..20));
    assert_eq!(
        log_files(&pdir),
        names(&[0, 8, 16]),
        "the cut segment filled up and rolled"
    );
    assert_eq!(
        log.offset_for_timestamp(1_002).expect("by time"),
        Some((4, 3_000))
    );
}

#[test]
fn truncating_at_a_sealed_segment_boundary_empties_that_segment() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (_manager, log) = ten_batches(dir.path(), FlushPolicy::Never);
    let pdir = partition_dir(dir.path(), TOPIC, 0);

    log.truncate_to(8)
        .expect("truncate at the second segment's base");
    assert_eq!(log.log_end_offset(), 8);
    assert_eq!(
        all_files(&pdir),
        [
            "00000000000000000000.index",
            "00000000000000000000.log",
            "00000000000000000000.timeindex",
            "00000000000000000008.log",
        ],
        "the first segment keeps its indexes, the emptied one has none"
    );
    assert_eq!(read_all(&log, 0), pairs(0..8));

    let info = append(&log, 2, 5_000, 439);
    assert_eq!(info.base_offset, 8);
    assert_eq!(
        log_files(&pdir),
        names(&[0, 8]),
        "appended to the emptied segment"
    );
    assert_eq!(read_all(&log, 6), vec![(6, 7), (8, 9)]);

    log.truncate_to(0).expect("truncate everything");
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.size_bytes()
        ),
        (0, 0, 0)
    );
    assert_eq!(log_files(&pdir), names(&[0]));
    assert_eq!(append(&log, 1, 0, 10).base_offset, 0);
}

/// Truncates, appends other batches (rolling), then restarts cleanly or
/// after a crash: the log must be the truncated one plus the new batches.
fn truncation_survives_a_restart(clean: bool) {
    let dir = tempfile::tempdir().expect("temp dir");
    let (manager, log) = ten_batches(dir.path(), FlushPolicy::Never);
    log.truncate_to(10).expect("truncate");
    for i in 0..4 {
        append(&log, 3, 9_000 + i, 439);
    }
    let contents = read_all(&log, 0);
    let end = log.log_end_offset();
    assert_eq!(end, 22);
    assert_eq!(
        log_files(&partition_dir(dir.path(), TOPIC, 0)),
        names(&[0, 8, 19])
    );
    let bytes = log.read(0, 1 << 20, i64::MAX).expect("read");
    drop(log);
    if clean {
        manager.shutdown();
    }
    drop(manager);

    let manager = open_with(dir.path(), small_segments(2_000), FlushPolicy::Never);
    let log = partition(&manager);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, end));
    assert_eq!(read_all(&log, 0), contents);
    assert_eq!(log.read(0, 1 << 20, i64::MAX).expect("read"), bytes);
    assert_eq!(manager.stats().recovery_truncated_bytes_total, 0);
    assert_eq!(append(&log, 1, 0, 10).base_offset, end);
}

#[test]
fn truncation_survives_a_crash() {
    truncation_survives_a_restart(false);
}

#[test]
fn truncation_survives_a_clean_shutdown() {
    truncation_survives_a_restart(true);
}

#[test]
fn a_crash_right_after_truncating_keeps_the_cut() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (manager, log) = ten_batches(dir.path(), FlushPolicy::Never);
    log.truncate_to(13)
        .expect("truncate inside the batch at 12..=13");
    let checkpoint = std::fs::read_to_string(dir.path().join("recovery-point-offset-checkpoint"))
        .expect("checkpoint");
    let point: i64 = checkpoint
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{TOPIC} 0 ")))
        .expect("an entry")
        .parse()
        .expect("an offset");
    assert!(
        point <= 12,
        "the checkpoint was lowered to the cut: {checkpoint}"
    );
    drop((log, manager));

    let manager = open_with(dir.path(), small_segments(2_000), FlushPolicy::Never);
    let log = partition(&manager);
    assert_eq!(log.log_end_offset(), 12);
    assert_eq!(read_all(&log, 0), pairs(0..12));
    assert_eq!(
        log_files(&partition_dir(dir.path(), TOPIC, 0)),
        names(&[0, 8])
    );
}

#[test]
fn truncating_fully_starts_an_empty_log_anywhere() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (manager, log) = ten_batches(dir.path(), FlushPolicy::Never);
    let pdir = partition_dir(dir.path(), TOPIC, 0);
    produce(&log, &[idem(9, 0, 0, 1)]).expect("a producer");

    // Ahead of the log: a follower behind its leader's log start.
    log.truncate_fully_and_start_at(100).expect("start at 100");
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.size_bytes()
        ),
        (100, 100, 0)
    );
    assert_eq!((log.durable_offset(), log.producer_count()), (100, 0));
    assert_eq!(all_files(&pdir), names(&[100]));
    assert!(log.read(100, 1 << 20, i64::MAX).expect("read").is_empty());
    assert!(matches!(
        log.read(0, 1 << 20, i64::MAX),
        Err(Error::OffsetOutOfRange {
            log_start_offset: 100,
            ..
        })
    ));
    assert_eq!(append(&log, 2, 0, 439).base_offset, 100);
    produce(&log, &[idem(9, 0, 5, 1)]).expect("the producer is unknown again");

    // Below the log start, truncate_to starts afresh too.
    log.truncate_to(50).expect("below the log start");
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (50, 50));
    assert_eq!(all_files(&pdir), names(&[50]));
    for i in 0..5 {
        append(&log, 2, i, 439);
    }
    assert_eq!(log_files(&pdir), names(&[50, 58]));

    // At an existing segment's base: that segment is emptied and kept.
    log.truncate_fully_and_start_at(58).expect("start at 58");
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (58, 58));
    assert_eq!(all_files(&pdir), names(&[58]));
    append(&log, 2, 0, 439);

    drop(log);
    drop(manager);
    let manager = open_with(dir.path(), small_segments(2_000), FlushPolicy::Never);
    let log = partition(&manager);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (58, 60));
    assert_eq!(read_all(&log, 58), vec![(58, 59)]);
}

#[test]
fn producers_resume_from_the_batches_left_after_a_truncation() {
    let dir = tempfile::tempdir().expect("temp dir");
    // 161-byte idempotent batches: twelve per 2000-byte segment.
    let manager = open_with(dir.path(), small_segments(2_000), FlushPolicy::Never);
    let log = create(&manager, TOPIC, 1);
    const P: i64 = 1_000;
    const Q: i64 = 2_000;
    for seq in 0..30 {
        let info = produce(&log, &[idem(P, 0, seq, 1)]).expect("append");
        assert_eq!(info.base_offset, i64::from(seq));
    }
    produce(&log, &[idem(Q, 0, 0, 1)]).expect("Q, entirely after the cut");
    produce(&log, &[idem(P, 1, 0, 1)]).expect("P's next epoch, after the cut");
    assert_eq!(
        log_files(&partition_dir(dir.path(), TOPIC, 0)),
        names(&[0, 12, 24])
    );
    assert!(matches!(
        produce(&log, &[idem(P, 0, 30, 1)]),
        Err(Error::InvalidProducerEpoch { .. })
    ));

    // Cut at the last segment's base: P's state comes back from the
    // segment before, Q is forgotten.
    log.truncate_to(24).expect("truncate");
    assert_eq!(log.producer_count(), 1);
    for seq in 19..24 {
        let retry = produce(&log, &[idem(P, 0, seq, 1)]).expect("retry");
        assert!(retry.duplicate, "seq {seq}");
        assert_eq!(retry.base_offset, i64::from(seq));
    }
    assert!(matches!(
        produce(&log, &[idem(P, 0, 30, 1)]),
        Err(Error::OutOfOrderSequence {
            expected: 24,
            got: 30,
            ..
        })
    ));
    produce(&log, &[idem(Q, 0, 7, 1)]).expect("an unknown producer starts anywhere");
    let info = produce(&log, &[idem(P, 0, 24, 1)]).expect("P resumes at 24");
    assert!(!info.duplicate);
    assert_eq!(info.base_offset, 25);

    // The rebuilt state matches what a restart replays from the log.
    drop(log);
    drop(manager);
    let manager = open_with(dir.path(), small_segments(2_000), FlushPolicy::Never);
    let log = partition(&manager);
    assert!(
        produce(&log, &[idem(P, 0, 24, 1)])
            .expect("retry")
            .duplicate
    );
    assert!(produce(&log, &[idem(Q, 0, 7, 1)]).expect("retry").duplicate);
    produce(&log, &[idem(P, 0, 25, 1)]).expect("next");
}

#[test]
fn group_commit_offsets_follow_a_truncation() {
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = FlushPolicy::GroupCommit {
        max_wait: Duration::from_millis(2),
    };
    let (manager, log) = ten_batches(dir.path(), policy);
    let patience = Duration::from_secs(20);
    assert!(wait_until(patience, || log.durable_offset() == 20));
    log.truncate_to(9).expect("truncate");
    assert_eq!((log.log_end_offset(), log.durable_offset()), (8, 8));
    append(&log, 2, 0, 439);
    append(&log, 2, 0, 439);
    assert!(wait_until(patience, || log.durable_offset() == 12));
    assert!(!log.is_offline());
    manager.shutdown();
    let checkpoint = std::fs::read_to_string(dir.path().join("recovery-point-offset-checkpoint"))
        .expect("checkpoint");
    assert!(
        checkpoint.contains(&format!("{TOPIC} 0 12")),
        "{checkpoint}"
    );
}

#[test]
fn closed_partitions_refuse_truncation() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (manager, log) = ten_batches(dir.path(), FlushPolicy::Never);
    manager.shutdown();
    assert!(matches!(log.truncate_to(2), Err(Error::ShuttingDown)));
    assert!(matches!(
        log.truncate_fully_and_start_at(2),
        Err(Error::ShuttingDown)
    ));
    assert_eq!(log.log_end_offset(), 20);
}

#[test]
fn reads_racing_truncations_do_not_fail_unexpectedly() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (_manager, log) = ten_batches(dir.path(), FlushPolicy::Never);
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (log, stop) = (Arc::clone(&log), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut reads = 0u64;
            while !stop.load(Ordering::Acquire) {
                for offset in [0, 4, 9, 17] {
                    // Errors are allowed (the data may be cut meanwhile),
                    // and so are batches cut and rewritten under the read:
                    // consumers read below the high watermark, which a
                    // truncation never cuts.
                    if let Ok(bytes) = log.read(offset, 1_500, i64::MAX) {
                        let _ = chronik_protocol::record_batch::parse_batches(&bytes);
                        reads += 1;
                    }
                }
                let _ = log.offset_for_timestamp(1_005);
            }
            reads
        })
    };
    for round in 0..40 {
        log.truncate_to(3 + round % 5).expect("truncate");
        while log.log_end_offset() < 20 {
            append(&log, 2, 1_000 + round, 439);
        }
    }
    stop.store(true, Ordering::Release);
    assert!(reader.join().expect("reader") > 0);
    assert_eq!(read_all(&log, 0).len(), 10);
}
