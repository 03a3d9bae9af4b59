//! Retention by size and by time, applied on demand.

mod common;

use chronik_log::{Error, FlushPolicy, LogConfig};
use common::*;

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

#[test]
fn retention_by_size_deletes_the_oldest_segments() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = LogConfig {
        retention_bytes: 4_500,
        retention_ms: -1,
        ..small_segments(2_000)
    };
    let manager = open_with(dir.path(), config.clone(), FlushPolicy::Never);
    let log = create(&manager, "t", 1);
    let now = now_ms();
    for _ in 0..20 {
        append(&log, 2, now, 439); // 500-byte batches, four per segment
    }
    let pdir = partition_dir(dir.path(), "t", 0);
    assert_eq!(log_files(&pdir).len(), 5);
    assert_eq!(log.size_bytes(), 10_000);

    manager.enforce_retention_now();
    // 10000 bytes: dropping three 2000-byte segments leaves 4000 < 4500, so
    // only two go (6000 left).
    assert_eq!(
        log_files(&pdir),
        vec![
            "00000000000000000016.log",
            "00000000000000000024.log",
            "00000000000000000032.log"
        ]
    );
    assert_eq!(log.log_start_offset(), 16);
    assert_eq!(log.size_bytes(), 6_000);
    assert!(matches!(
        log.read(0, 1 << 20, i64::MAX),
        Err(Error::OffsetOutOfRange {
            log_start_offset: 16,
            ..
        })
    ));
    assert_eq!(
        offsets(&log.read(16, 500, i64::MAX).expect("read"))[0],
        (16, 17)
    );
    assert_eq!(append(&log, 1, now, 10).log_start_offset, 16);
    assert_eq!(manager.stats().segments_deleted_total, 2);

    // Survives a reopen: the log start offset is the first segment's base.
    manager.shutdown();
    drop(manager);
    let manager = open_with(dir.path(), config, FlushPolicy::Never);
    let log = manager
        .topic("t")
        .expect("topic")
        .partition(0)
        .expect("partition")
        .clone();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (16, 41));
}

#[test]
fn retention_by_time_deletes_old_segments_and_rolls_an_expired_active_one() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = LogConfig {
        retention_ms: DAY_MS,
        ..small_segments(2_000)
    };
    let manager = open_with(dir.path(), config, FlushPolicy::Never);
    let log = create(&manager, "t", 1);
    let now = now_ms();
    for _ in 0..8 {
        append(&log, 1, now - 3 * DAY_MS, 439); // two full old segments (0..=3, 4..=7)
    }
    for _ in 0..4 {
        append(&log, 1, now, 439); // one young segment (8..=11)
    }
    append(&log, 1, now - 2 * DAY_MS, 439); // an old batch in the active segment (12)
    let pdir = partition_dir(dir.path(), "t", 0);
    assert_eq!(log_files(&pdir).len(), 4);

    manager.enforce_retention_now();
    // The two old segments go; the young one stops time retention there. The
    // active segment held only an expired batch, so it was rolled (Kafka does
    // the same) to become deletable once everything before it is.
    assert_eq!(log.log_start_offset(), 8);
    assert_eq!(
        log_files(&pdir),
        vec![
            "00000000000000000008.log",
            "00000000000000000012.log",
            "00000000000000000013.log"
        ]
    );
    assert_eq!(log.log_end_offset(), 13);
    assert_eq!(append(&log, 1, now, 10).base_offset, 13);
    assert_eq!(
        offsets(&log.read(8, 500, i64::MAX).expect("read")),
        vec![(8, 8)]
    );

    manager.enforce_retention_now();
    assert_eq!(log.log_start_offset(), 8, "nothing else expired");
}

#[test]
fn unlimited_retention_keeps_everything() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = LogConfig {
        retention_ms: -1,
        retention_bytes: -1,
        ..small_segments(1_000)
    };
    let manager = open_with(dir.path(), config, FlushPolicy::Never);
    let log = create(&manager, "t", 1);
    for _ in 0..10 {
        append(&log, 1, 1, 439);
    }
    manager.enforce_retention_now();
    assert_eq!(log.log_start_offset(), 0);
    assert_eq!(read_all(&log, 0).len(), 10);
}

#[test]
fn a_compact_only_topic_is_never_deleted_by_retention() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = LogConfig {
        retention_bytes: 1_000,
        retention_ms: 1,
        delete_retention: false,
        ..small_segments(2_000)
    };
    let manager = open_with(dir.path(), config, FlushPolicy::Never);
    let log = create(&manager, "t", 1);
    let old = now_ms() - 3 * DAY_MS;
    for _ in 0..12 {
        append(&log, 2, old, 439);
    }
    let pdir = partition_dir(dir.path(), "t", 0);
    let before = log_files(&pdir);
    manager.enforce_retention_now();
    assert!(log_files(&pdir).starts_with(&before), "no segment deleted");
    assert_eq!(log.log_start_offset(), 0);
    assert_eq!(manager.stats().segments_deleted_total, 0);
}

#[test]
fn delete_records_moves_the_log_start_offset_durably_and_drops_whole_segments() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = LogConfig {
        retention_bytes: -1,
        retention_ms: -1,
        ..small_segments(2_000)
    };
    let manager = open_with(dir.path(), config.clone(), FlushPolicy::Never);
    let log = create(&manager, "t", 1);
    let now = now_ms();
    for _ in 0..10 {
        append(&log, 2, now, 439); // 500-byte batches, four (8 offsets) per segment
    }
    let pdir = partition_dir(dir.path(), "t", 0);
    assert_eq!(log_files(&pdir).len(), 3);

    // Offset 11 lies inside the second segment: the first goes, the second
    // stays but serves nothing below 11.
    assert_eq!(log.delete_records_before(11).expect("delete"), 11);
    assert_eq!(log.log_start_offset(), 11);
    assert_eq!(
        log_files(&pdir),
        vec!["00000000000000000008.log", "00000000000000000016.log"]
    );
    assert!(matches!(
        log.read(9, 1 << 20, i64::MAX),
        Err(Error::OffsetOutOfRange {
            log_start_offset: 11,
            ..
        })
    ));
    assert!(!read_all(&log, 11).is_empty());
    // Backwards is a no-op; past the log end is out of range.
    assert_eq!(log.delete_records_before(5).expect("no-op"), 11);
    assert!(matches!(
        log.delete_records_before(21),
        Err(Error::OffsetOutOfRange { .. })
    ));
    manager.shutdown();
    drop(manager);

    let manager = open_with(dir.path(), config, FlushPolicy::Never);
    let log = manager
        .topic("t")
        .and_then(|t| t.partition(0).cloned())
        .expect("reopened");
    assert_eq!(
        log.log_start_offset(),
        11,
        "the log start offset survives a restart"
    );
    assert_eq!(log.log_end_offset(), 20);
}
