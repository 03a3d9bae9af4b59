//! Log compaction (cleanup.policy=compact): what the cleaner keeps, what it
//! removes and when, and recovery from a cleaning a crash interrupted.
//! Transactions and idempotent producers under compaction:
//! compaction_txn.rs.

mod common;

use std::path::Path;

use chronik_log::{CleanerConfig, LogManagerConfig, PartitionLog};
use common::compaction::*;
use common::{file_names, log_files, now_ms, open, partition_dir};

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
    let names = file_names(&crashed_p, |_| true);
    assert!(names.iter().all(|n| !n.ends_with(".swap")), "{names:?}");
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
