//! Idempotent producers: retried batches answered with their original
//! offsets, sequence and epoch checks, and producer state that survives
//! clean and unclean restarts.

mod common;

use std::path::Path;
use std::sync::{Arc, Barrier};

use chronik_log::{AppendInfo, Error, FlushPolicy, LogManager, PartitionLog};
use common::*;

const TOPIC: &str = "idempotent";
const P: i64 = 1_000;

fn open_manager(dir: &Path) -> Arc<LogManager> {
    open_with(dir, small_segments(2_000), FlushPolicy::Never)
}

fn partition(manager: &LogManager) -> Arc<PartitionLog> {
    let topic = manager.topic(TOPIC).expect("topic");
    Arc::clone(topic.partition(0).expect("partition 0"))
}

#[track_caller]
fn appended(log: &PartitionLog, batches: &[Idempotent]) -> AppendInfo {
    let info = produce(log, batches).expect("append");
    assert!(!info.duplicate, "{info:?}");
    info
}

#[track_caller]
fn assert_out_of_order(result: chronik_log::Result<AppendInfo>, pid: i64, want: (i32, i32)) {
    match result {
        Err(Error::OutOfOrderSequence {
            producer_id,
            expected,
            got,
        }) => assert_eq!((producer_id, expected, got), (pid, want.0, want.1)),
        other => panic!("expected OutOfOrderSequence, got {other:?}"),
    }
}

#[test]
fn retries_return_the_original_offsets_and_write_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open_manager(dir.path());
    let log = create(&manager, TOPIC, 1);
    let first = appended(&log, &[idem(P, 0, 0, 3)]);
    assert_eq!((first.base_offset, first.last_offset), (0, 2));
    append(&log, 2, now_ms(), 10); // a producer without idempotence: 3..=4
    let second = appended(&log, &[idem(P, 0, 3, 2)]);
    assert_eq!((second.base_offset, second.last_offset), (5, 6));
    let (end, size) = (log.log_end_offset(), log.size_bytes());

    let retry = produce(&log, &[idem(P, 0, 3, 2)]).expect("retry");
    assert_eq!(
        retry,
        AppendInfo {
            base_offset: 5,
            last_offset: 6,
            log_end_offset: 7,
            log_append_time_ms: -1,
            log_start_offset: 0,
            duplicate: true,
        }
    );
    let older_retry = produce(&log, &[idem(P, 0, 0, 3)]).expect("retry");
    assert_eq!(
        (
            older_retry.base_offset,
            older_retry.last_offset,
            older_retry.duplicate
        ),
        (0, 2, true)
    );
    assert_eq!((log.log_end_offset(), log.size_bytes()), (end, size));
    assert_eq!(read_all(&log, 0), vec![(0, 2), (3, 4), (5, 6)]);
    assert_eq!(log.producer_count(), 1);
}

#[test]
fn out_of_order_and_fenced_requests_are_rejected_whole() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open_manager(dir.path());
    let log = create(&manager, TOPIC, 1);
    appended(&log, &[idem(P, 0, 0, 1)]);
    assert_out_of_order(produce(&log, &[idem(P, 0, 2, 1)]), P, (1, 2));
    // The gap is in the second batch; the first is not written either.
    assert_out_of_order(
        produce(&log, &[idem(P, 0, 1, 1), idem(P, 0, 3, 1)]),
        P,
        (2, 3),
    );
    assert_eq!(log.log_end_offset(), 1);
    let pair = appended(&log, &[idem(P, 0, 1, 1), idem(P, 0, 2, 2)]);
    assert_eq!((pair.base_offset, pair.last_offset), (1, 3));
    let retried_pair = produce(&log, &[idem(P, 0, 1, 1), idem(P, 0, 2, 2)]).expect("retry");
    assert_eq!(
        (
            retried_pair.base_offset,
            retried_pair.last_offset,
            retried_pair.duplicate
        ),
        (1, 3, true)
    );
    // A new epoch must start at sequence 0.
    assert_out_of_order(produce(&log, &[idem(P, 1, 4, 1)]), P, (0, 4));
    assert_eq!(appended(&log, &[idem(P, 1, 0, 1)]).base_offset, 4);
    match produce(&log, &[idem(P, 0, 4, 1)]) {
        Err(Error::InvalidProducerEpoch {
            producer_id,
            epoch,
            current_epoch,
        }) => assert_eq!((producer_id, epoch, current_epoch), (P, 0, 1)),
        other => panic!("expected InvalidProducerEpoch, got {other:?}"),
    }
    // A retried batch next to a new one is refused, not half-written.
    assert_out_of_order(
        produce(&log, &[idem(P, 1, 0, 1), idem(P, 1, 1, 1)]),
        P,
        (1, 0),
    );
    assert_eq!(read_all(&log, 0), vec![(0, 0), (1, 1), (2, 3), (4, 4)]);
}

#[test]
fn concurrent_copies_of_one_batch_are_written_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open_manager(dir.path());
    let log = create(&manager, TOPIC, 1);
    let threads = 8;
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (log, barrier) = (Arc::clone(&log), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                let same = produce(&log, &[idem(P, 0, 0, 5)]).expect("append");
                // Each thread is also a producer of its own.
                let own = P + 1 + t as i64;
                for seq in 0..20 {
                    produce(&log, &[idem(own, 0, seq, 1)]).expect("own sequence");
                }
                same
            })
        })
        .collect();
    let results: Vec<AppendInfo> = handles
        .into_iter()
        .map(|h| h.join().expect("thread"))
        .collect();
    assert_eq!(results.iter().filter(|r| !r.duplicate).count(), 1);
    assert!(results.iter().all(|r| r.last_offset - r.base_offset == 4));
    assert!(results
        .windows(2)
        .all(|w| w[0].base_offset == w[1].base_offset));
    assert_eq!(log.log_end_offset(), 5 + 8 * 20);
    assert_eq!(log.producer_count(), 9);
}

/// Three producers, ten 2-record batches each, interleaved over three
/// segments; the third producer is at epoch 2. Batch k sits at 2k..=2k+1.
fn populate(dir: &Path) -> Arc<LogManager> {
    let manager = open_manager(dir);
    let log = create(&manager, TOPIC, 1);
    for i in 0..10 {
        for (n, epoch) in [(0, 0), (1, 0), (2, 2)] {
            appended(&log, &[idem(P + n, epoch, 2 * i, 2)]);
        }
    }
    assert_eq!(log_files(&partition_dir(dir, TOPIC, 0)).len(), 3);
    manager
}

/// What a restarted partition must still know about `populate`'s producers.
fn assert_producer_state_restored(log: &PartitionLog) {
    assert_eq!((log.log_end_offset(), log.producer_count()), (60, 3));
    for n in 0..3 {
        let (pid, epoch) = (P + n, if n == 2 { 2 } else { 0 });
        let last_batch = 2 * (27 + n);
        let retry = produce(log, &[idem(pid, epoch, 18, 2)]).expect("retry");
        assert_eq!(
            (retry.base_offset, retry.last_offset, retry.duplicate),
            (last_batch, last_batch + 1, true),
            "producer {pid}"
        );
        let fifth_last = produce(log, &[idem(pid, epoch, 10, 2)]).expect("retry");
        assert_eq!(fifth_last.base_offset, last_batch - 4 * 6);
        assert!(fifth_last.duplicate);
        assert_out_of_order(produce(log, &[idem(pid, epoch, 8, 2)]), pid, (20, 8));
        assert_out_of_order(produce(log, &[idem(pid, epoch, 21, 1)]), pid, (20, 21));
    }
    assert!(matches!(
        produce(log, &[idem(P + 2, 1, 20, 1)]),
        Err(Error::InvalidProducerEpoch {
            current_epoch: 2,
            ..
        })
    ));
    assert_eq!(log.log_end_offset(), 60, "nothing was written");
    for n in 0..3 {
        let epoch = if n == 2 { 2 } else { 0 };
        let next = appended(log, &[idem(P + n, epoch, 20, 1)]);
        assert_eq!(next.base_offset, 60 + n);
    }
}

fn snapshot_files(dir: &Path) -> Vec<String> {
    file_names(&partition_dir(dir, TOPIC, 0), |n| n.contains(".snapshot"))
}

#[test]
fn producer_state_survives_a_clean_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = populate(dir.path());
    manager.shutdown();
    drop(manager);
    assert_eq!(
        snapshot_files(dir.path()),
        vec!["00000000000000000060.snapshot"]
    );

    let manager = open_manager(dir.path());
    assert!(snapshot_files(dir.path()).is_empty(), "consumed at open");
    assert_producer_state_restored(&partition(&manager));
}

#[test]
fn producer_state_survives_a_crash() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = populate(dir.path());
    drop(manager); // no shutdown: as after a crash
    assert!(snapshot_files(dir.path()).is_empty());

    let manager = open_manager(dir.path());
    assert_producer_state_restored(&partition(&manager));
    // And again after a crash following the restart.
    drop(manager);
    let manager = open_manager(dir.path());
    let log = partition(&manager);
    assert_eq!(log.log_end_offset(), 63);
    let retry = produce(&log, &[idem(P + 2, 2, 20, 1)]).expect("retry");
    assert_eq!((retry.base_offset, retry.duplicate), (62, true));
}

#[test]
fn a_damaged_snapshot_falls_back_to_replaying_the_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = populate(dir.path());
    manager.shutdown();
    drop(manager);
    let snapshot = partition_dir(dir.path(), TOPIC, 0).join("00000000000000000060.snapshot");
    std::fs::write(&snapshot, b"not a snapshot").expect("damage snapshot");

    let manager = open_manager(dir.path());
    assert!(snapshot_files(dir.path()).is_empty());
    assert_producer_state_restored(&partition(&manager));
}

#[test]
fn a_snapshot_beyond_a_truncated_log_is_ignored() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = populate(dir.path());
    manager.shutdown();
    drop(manager);
    // Tear the last batch (producer P+2, sequence 18, offsets 58..=59).
    let pdir = partition_dir(dir.path(), TOPIC, 0);
    let last = pdir.join(log_files(&pdir).pop().expect("a segment"));
    chop_tail(&last, 7);

    let manager = open_manager(dir.path());
    let log = partition(&manager);
    assert_eq!(log.log_end_offset(), 58);
    assert!(snapshot_files(dir.path()).is_empty());
    // The torn batch is not in the log, so its retry is new, not a duplicate.
    let retry = appended(&log, &[idem(P + 2, 2, 18, 2)]);
    assert_eq!((retry.base_offset, retry.last_offset), (58, 59));
    assert_out_of_order(produce(&log, &[idem(P + 2, 2, 21, 1)]), P + 2, (20, 21));
}
