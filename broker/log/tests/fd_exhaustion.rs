//! Running out of file descriptors is not an fsync failure. With the
//! process at its open-files limit, the group-commit flusher cannot open a
//! partition directory to sync it (EMFILE); that used to take the partition
//! offline until restart. Now the partition stays online, the sync is
//! retried, and once descriptors are free the data becomes durable.
//!
//! Its own test binary (own process): it lowers this process's open-files
//! limit with `prlimit` and exhausts it.

mod common;

use std::fs::File;
use std::process::Command;
use std::time::{Duration, Instant};

use chronik_log::FlushPolicy;
use chronik_protocol::record_batch::{build_test_batch, parse_batches};
use common::{open_with, small_segments};

#[test]
fn emfile_while_syncing_a_directory_keeps_the_partition_online() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open_with(
        dir.path(),
        small_segments(512),
        FlushPolicy::GroupCommit {
            max_wait: Duration::from_millis(300),
        },
    );
    let topic = manager
        .create_topic("t", 1, Default::default())
        .expect("create");
    let log = topic.partition(0).expect("partition 0");
    let wait_durable = |end: i64, within: Duration| {
        let deadline = Instant::now() + within;
        while log.durable_offset() < end && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        log.durable_offset()
    };
    let mut batch = build_test_batch(2, 0, &[0u8; 600]);
    let headers = parse_batches(&batch).expect("valid");
    log.append(&mut batch, &headers).expect("append");
    assert_eq!(wait_durable(2, Duration::from_secs(10)), 2);

    // How many descriptors a rolling append keeps open.
    let open_fds = || {
        std::fs::read_dir("/proc/self/fd")
            .expect("/proc/self/fd")
            .count()
    };
    let before = open_fds();
    let mut batch = build_test_batch(2, 0, &[0u8; 600]);
    let headers = parse_batches(&batch).expect("valid");
    log.append(&mut batch, &headers).expect("append that rolls");
    let kept = open_fds().saturating_sub(before);
    assert_eq!(wait_durable(4, Duration::from_secs(10)), 4);

    // Exhaust descriptors but for what the next roll needs (and a little
    // slack, taken back right after it): the roll succeeds, and the flush
    // that must then sync the directory finds none left.
    let status = Command::new("prlimit")
        .arg(format!("--pid={}", std::process::id()))
        .arg("--nofile=512:512")
        .status()
        .expect("prlimit runs");
    assert!(status.success(), "prlimit failed");
    let mut hog = Vec::new();
    loop {
        match File::open("/dev/null") {
            Ok(f) => hog.push(f),
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(24), "expected EMFILE, got {e}");
                break;
            }
        }
        assert!(hog.len() < 100_000, "open-files limit not applied");
    }
    let slack = 2;
    hog.truncate(hog.len() - (kept + slack));
    let mut batch = build_test_batch(2, 0, &[0u8; 600]);
    let headers = parse_batches(&batch).expect("valid");
    log.append(&mut batch, &headers)
        .expect("append that rolls, with descriptors to spare");
    while let Ok(f) = File::open("/dev/null") {
        hog.push(f);
    }
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!log.is_offline(), "EMFILE took the partition offline");
    assert!(log.durable_offset() < 6, "durable without a directory sync");

    drop(hog);
    assert_eq!(
        wait_durable(6, Duration::from_secs(10)),
        6,
        "the sync was not retried once descriptors were free"
    );
    assert!(!log.is_offline());
    let mut batch = build_test_batch(1, 0, b"after");
    let headers = parse_batches(&batch).expect("valid");
    log.append(&mut batch, &headers)
        .expect("appends still accepted");
}
