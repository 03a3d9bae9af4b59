//! Append and read through the public API: offsets, indexes, limits, rolls.

mod common;

use chronik_log::{Error, FlushPolicy, LogConfig};
use chronik_protocol::record_batch::{build_test_batch, parse_batches};
use common::*;

#[test]
fn append_assigns_offsets_in_place_and_reads_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open_with(dir.path(), LogConfig::default(), FlushPolicy::Never);
    let log = create(&manager, "orders", 1);

    let first = append(&log, 3, 1_000, 10);
    assert_eq!(
        (first.base_offset, first.last_offset, first.log_end_offset),
        (0, 2, 3)
    );
    assert_eq!((first.log_append_time_ms, first.log_start_offset), (-1, 0));

    // Several batches in one append get consecutive base offsets, rewritten
    // in the caller's buffer.
    let mut bytes = [
        build_test_batch(2, 2_000, b"a"),
        build_test_batch(5, 2_001, b"b"),
    ]
    .concat();
    let headers = parse_batches(&bytes).expect("valid");
    let second = log.append(&mut bytes, &headers).expect("append");
    assert_eq!(
        (
            second.base_offset,
            second.last_offset,
            second.log_end_offset
        ),
        (3, 9, 10)
    );
    let rewritten = parse_batches(&bytes).expect("CRC still valid after rewrite");
    assert_eq!((rewritten[0].base_offset, rewritten[1].base_offset), (3, 5));

    let read = log.read(0, 1 << 20, i64::MAX).expect("read");
    assert_eq!(offsets(&read), vec![(0, 2), (3, 4), (5, 9)]);
    assert_eq!(
        &read[read.len() - bytes.len()..],
        &bytes[..],
        "stored verbatim"
    );
    assert_eq!(log.log_end_offset(), 10);
    assert_eq!(
        log.durable_offset(),
        10,
        "Never: durable follows the log end"
    );
    assert_eq!(log.size_bytes(), read.len() as u64);
}

#[test]
fn reads_from_the_middle_use_the_index() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open_with(dir.path(), small_segments(1 << 30), FlushPolicy::Never);
    let log = create(&manager, "t", 1);
    for i in 0..500 {
        append(&log, 2, 1_000 + i, 100);
    }
    for offset in [0, 1, 2, 501, 998, 999] {
        let read = log.read(offset, 1 << 20, i64::MAX).expect("read");
        let batches = offsets(&read);
        let (base, last) = batches[0];
        assert!(
            base <= offset && offset <= last,
            "first batch {base}..={last} holds {offset}"
        );
        assert_eq!(base, offset - offset % 2);
        assert_eq!(batches.last().expect("some").1, 999);
    }
    manager.shutdown();
    let index =
        std::fs::metadata(partition_dir(dir.path(), "t", 0).join("00000000000000000000.index"))
            .expect("index");
    assert!(
        index.len() >= 8 * 100,
        "sparse index written at shutdown: {} bytes",
        index.len()
    );
}

#[test]
fn max_bytes_is_honoured_but_one_batch_always_returns() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open_with(dir.path(), LogConfig::default(), FlushPolicy::Never);
    let log = create(&manager, "t", 1);
    for _ in 0..10 {
        append(&log, 1, 0, 939); // 1000-byte batches
    }
    let size = log.read(0, 1 << 20, i64::MAX).expect("read").len() / 10;
    assert_eq!(size, 1000);

    let read = log.read(0, 3 * size + 999, i64::MAX).expect("read");
    assert_eq!(read.len(), 3 * size);
    assert_eq!(offsets(&read), vec![(0, 0), (1, 1), (2, 2)]);

    let read = log.read(4, 10, i64::MAX).expect("read");
    assert_eq!(
        offsets(&read),
        vec![(4, 4)],
        "first batch whole even if larger than max_bytes"
    );
    assert_eq!(log.read(4, 0, i64::MAX).expect("read").len(), size);
}

#[test]
fn upper_bound_hides_batches_at_or_above_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open_with(dir.path(), LogConfig::default(), FlushPolicy::Never);
    let log = create(&manager, "t", 1);
    append(&log, 3, 0, 10); // 0..=2
    append(&log, 3, 0, 10); // 3..=5
    append(&log, 3, 0, 10); // 6..=8
    assert_eq!(
        offsets(&log.read(0, 1 << 20, 6).expect("read")),
        vec![(0, 2), (3, 5)]
    );
    assert_eq!(
        offsets(&log.read(0, 1 << 20, 3).expect("read")),
        vec![(0, 2)]
    );
    assert!(log.read(0, 1 << 20, 0).expect("read").is_empty());
    assert!(log.read(6, 1 << 20, 6).expect("read").is_empty());
    assert!(
        log.read(0, 10, 0).expect("read").is_empty(),
        "the one-batch rule respects the bound"
    );
}

#[test]
fn out_of_range_offsets() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open_with(dir.path(), LogConfig::default(), FlushPolicy::Never);
    let log = create(&manager, "t", 1);
    append(&log, 5, 0, 10);
    assert!(log
        .read(5, 1 << 20, i64::MAX)
        .expect("read at the log end")
        .is_empty());
    for offset in [-1, 6, 100] {
        match log.read(offset, 1 << 20, i64::MAX) {
            Err(Error::OffsetOutOfRange {
                offset: o,
                log_start_offset: 0,
                log_end_offset: 5,
            }) => assert_eq!(o, offset),
            other => panic!("offset {offset}: expected OffsetOutOfRange, got {other:?}"),
        }
    }
}

#[test]
fn rejects_oversized_and_mismatched_batches() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log_config = LogConfig {
        max_message_bytes: 500,
        ..LogConfig::default()
    };
    let manager = open_with(dir.path(), log_config, FlushPolicy::Never);
    let log = create(&manager, "t", 1);
    let mut big = build_test_batch(1, 0, &[0u8; 600]);
    let headers = parse_batches(&big).expect("valid");
    assert!(matches!(
        log.append(&mut big, &headers),
        Err(Error::RecordTooLarge { max: 500, .. })
    ));
    let mut small = build_test_batch(1, 0, b"x");
    assert!(matches!(
        log.append(&mut small, &[]),
        Err(Error::InvalidRecords(_))
    ));
    let mut doubled = [small.clone(), small.clone()].concat();
    let one = parse_batches(&small).expect("valid");
    assert!(matches!(
        log.append(&mut doubled, &one),
        Err(Error::InvalidRecords(_))
    ));
    assert_eq!(log.log_end_offset(), 0);
}

#[test]
fn segments_roll_by_size_and_reads_span_them() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open_with(dir.path(), small_segments(2_000), FlushPolicy::Never);
    let log = create(&manager, "t", 1);
    for _ in 0..10 {
        append(&log, 2, 0, 439); // 500-byte batches: four per segment
    }
    let names = log_files(&partition_dir(dir.path(), "t", 0));
    assert_eq!(
        names,
        vec![
            "00000000000000000000.log",
            "00000000000000000008.log",
            "00000000000000000016.log"
        ],
    );
    let read = log
        .read(5, 1 << 20, i64::MAX)
        .expect("read across segments");
    let batches = offsets(&read);
    assert_eq!(batches.first(), Some(&(4, 5)));
    assert_eq!(batches.last(), Some(&(18, 19)));
    assert_eq!(batches.len(), 8);
    assert_eq!(read_all(&log, 0).len(), 10);
    assert_eq!(manager.stats().segments_rolled_total, 2);
}

#[test]
fn offset_for_timestamp_and_max_timestamp() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open_with(dir.path(), small_segments(1_000), FlushPolicy::Never);
    let log = create(&manager, "t", 1);
    assert_eq!(log.offset_for_timestamp(0).expect("lookup"), None);
    assert_eq!(log.max_timestamp_offset().expect("lookup"), None);
    // Timestamps 1000, 2000, ... with one out-of-order batch (offset 10..=11).
    for i in 0..20i64 {
        let ts = if i == 5 { 50_000 } else { 1_000 * (i + 1) };
        append(&log, 2, ts, 200);
    }
    let table = [
        (0, Some((0, 1_000))),
        (1_000, Some((0, 1_000))),
        (1_001, Some((2, 2_000))),
        (4_500, Some((8, 5_000))),
        (5_001, Some((10, 50_000))),
        (20_000, Some((10, 50_000))),
        (50_001, None),
    ];
    for (ts, expected) in table {
        assert_eq!(
            log.offset_for_timestamp(ts).expect("lookup"),
            expected,
            "timestamp {ts}"
        );
    }
    assert_eq!(
        log.max_timestamp_offset().expect("lookup"),
        Some((11, 50_000))
    );
}
