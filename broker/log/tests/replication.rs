//! Follower appends (`append_as_follower`) and cluster topic ids
//! (`create_topic_with_id`).

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use chronik_log::{Error, FlushPolicy, LogConfig, PartitionLog};
use chronik_protocol::record_batch::{
    build_test_batch, parse_batches, set_base_offset, set_partition_leader_epoch,
};
use common::*;

/// Copies everything `leader` has past `follower`'s log end, as a fetch
/// would, stamping every batch with partition leader epoch `epoch`.
fn replicate(leader: &PartitionLog, follower: &PartitionLog, epoch: i32) -> Vec<u8> {
    let mut copied = Vec::new();
    while follower.log_end_offset() < leader.log_end_offset() {
        let fetched = leader
            .read(follower.log_end_offset(), 1_000, i64::MAX)
            .expect("leader read");
        let mut bytes = fetched.to_vec();
        for h in parse_batches(&bytes).expect("whole batches") {
            set_partition_leader_epoch(&mut bytes, h.position, epoch);
        }
        let headers = parse_batches(&bytes).expect("still valid");
        let info = follower
            .append_as_follower(&mut bytes.clone(), &headers)
            .expect("replicated append");
        assert_eq!(info.base_offset, headers[0].base_offset);
        assert_eq!(info.log_end_offset, follower.log_end_offset());
        assert!(!info.duplicate);
        copied.extend(bytes);
    }
    copied
}

/// Everything `log` holds from `from`, as stored.
fn raw(log: &PartitionLog, from: i64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut next = from;
    while next < log.log_end_offset() {
        let bytes = log.read(next, 1_000, i64::MAX).expect("read");
        next = offsets(&bytes).last().expect("a batch").1 + 1;
        out.extend_from_slice(&bytes);
    }
    out
}

#[test]
fn replicated_batches_are_stored_verbatim_with_their_offsets_and_epochs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open_with(dir.path(), small_segments(2_000), FlushPolicy::Never);
    let leader = create(&manager, "leader", 1);
    let follower = create(&manager, "follower", 1);
    for i in 0..12 {
        append(&leader, 1 + (i % 3) as i32, 1_000 + i, 300);
    }
    produce(&leader, &[idem(5, 0, 0, 2)]).expect("idempotent batch");
    let copied = replicate(&leader, &follower, 7);
    assert_eq!(follower.log_end_offset(), leader.log_end_offset());
    assert_eq!(read_all(&follower, 0), read_all(&leader, 0));
    assert_eq!(raw(&follower, 0), copied, "bytes, leader epochs included");
    for h in parse_batches(&copied).expect("valid") {
        assert_eq!(h.partition_leader_epoch, 7);
    }
    assert!(
        log_files(&partition_dir(dir.path(), "follower", 0)).len() > 1,
        "the follower rolls as append does"
    );
    assert_eq!(follower.size_bytes(), leader.size_bytes());
    assert_eq!(follower.durable_offset(), follower.log_end_offset());

    // The copy survives a restart.
    drop((leader, follower));
    manager.shutdown();
    drop(manager);
    let manager = open_with(dir.path(), small_segments(2_000), FlushPolicy::Never);
    let follower = Arc::clone(
        manager
            .topic("follower")
            .expect("topic")
            .partition(0)
            .expect("p0"),
    );
    assert_eq!(raw(&follower, 0), copied);
}

#[test]
fn replicated_batches_must_follow_the_log_end() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open_with(dir.path(), LogConfig::default(), FlushPolicy::Never);
    let log = create(&manager, "follower", 1);
    let batch_at = |base: i64, count: i32| {
        let mut b = build_test_batch(count, 1_000, b"replicated");
        set_base_offset(&mut b, 0, base);
        b
    };
    let try_append = |bytes: Vec<u8>| {
        let headers = parse_batches(&bytes).expect("valid");
        log.append_as_follower(&mut bytes.clone(), &headers)
    };
    let rejected = |result: chronik_log::Result<_>, want: (i64, i64)| match result {
        Err(Error::NonContiguousAppend { expected, got }) => assert_eq!((expected, got), want),
        other => panic!("expected NonContiguousAppend {want:?}, got {other:?}"),
    };

    let info = try_append(batch_at(0, 2)).expect("starts at the log end");
    assert_eq!(
        (info.base_offset, info.last_offset, info.log_end_offset),
        (0, 1, 2)
    );
    let (end, size) = (log.log_end_offset(), log.size_bytes());
    rejected(try_append(batch_at(1, 2)), (2, 1));
    // An overlap between two batches of one call rejects the whole call.
    rejected(
        try_append([batch_at(2, 2), batch_at(3, 1)].concat()),
        (4, 3),
    );
    assert!(matches!(
        try_append(Vec::new()),
        Err(Error::InvalidRecords(_))
    ));
    assert_eq!(
        (log.log_end_offset(), log.size_bytes()),
        (end, size),
        "nothing written"
    );
    assert_eq!(read_all(&log, 0), vec![(0, 1)]);

    let info = try_append([batch_at(2, 2), batch_at(4, 3)].concat()).expect("contiguous");
    assert_eq!((info.base_offset, info.last_offset), (2, 6));
    assert_eq!(read_all(&log, 0), vec![(0, 1), (2, 3), (4, 6)]);
    // Gaps, as a compacted leader log has them, are taken as they are.
    let info = try_append([batch_at(9, 1), batch_at(12, 2)].concat()).expect("gaps");
    assert_eq!((info.last_offset, info.log_end_offset), (13, 14));
    assert_eq!(
        read_all(&log, 0),
        vec![(0, 1), (2, 3), (4, 6), (9, 9), (12, 13)]
    );
    assert_eq!(read_all(&log, 7), vec![(9, 9), (12, 13)]);
    // A truncation into a gap ends the log there; the leader's next batch
    // may then start at that offset.
    log.truncate_to(11).expect("truncate into the gap");
    assert_eq!(log.log_end_offset(), 11);
    let kept = log.read(0, 1 << 20, i64::MAX).expect("read");
    assert_eq!(common::offsets(&kept), vec![(0, 1), (2, 3), (4, 6), (9, 9)]);
    try_append(batch_at(11, 1)).expect("continues at the cut");
    assert_eq!(read_all(&log, 7), vec![(9, 9), (11, 11)]);
}

#[test]
fn followers_take_batches_larger_than_their_max_message_bytes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open_with(dir.path(), LogConfig::default(), FlushPolicy::Never);
    let overrides = BTreeMap::from([("max.message.bytes".to_string(), "100".to_string())]);
    let topic = manager.create_topic("small", 1, overrides).expect("create");
    let log = topic.partition(0).expect("p0");
    let mut bytes = build_test_batch(1, 0, &[0u8; 200]);
    let headers = parse_batches(&bytes).expect("valid");
    assert!(matches!(
        log.append(&mut bytes.clone(), &headers),
        Err(Error::RecordTooLarge { .. })
    ));
    log.append_as_follower(&mut bytes, &headers)
        .expect("the leader already accepted it");
    assert_eq!(log.log_end_offset(), 1);
}

#[test]
fn replicated_idempotent_batches_let_a_new_leader_deduplicate_retries() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open_with(dir.path(), small_segments(2_000), FlushPolicy::Never);
    let leader = create(&manager, "leader", 1);
    let follower = create(&manager, "follower", 1);
    const P: i64 = 42;
    for seq in [0, 3, 6] {
        produce(&leader, &[idem(P, 0, seq, 3)]).expect("leader append");
    }
    append(&leader, 2, now_ms(), 10); // a plain batch at 9..=10
    replicate(&leader, &follower, 3);
    assert_eq!(follower.producer_count(), 1);

    // The follower takes over: a retry of the last batch is a duplicate
    // with the leader's offsets, the next sequence is appended, a gap is
    // refused.
    let retry = produce(&follower, &[idem(P, 0, 6, 3)]).expect("retry");
    assert!(retry.duplicate);
    assert_eq!((retry.base_offset, retry.last_offset), (6, 8));
    let next = produce(&follower, &[idem(P, 0, 9, 1)]).expect("next sequence");
    assert_eq!((next.base_offset, next.duplicate), (11, false));
    assert!(matches!(
        produce(&follower, &[idem(P, 0, 20, 1)]),
        Err(Error::OutOfOrderSequence {
            expected: 10,
            got: 20,
            ..
        })
    ));

    // Replicated batches are never rejected: a new epoch (or any
    // sequence) replaces the state, and fences the old epoch.
    let mut bytes = idempotent_batch(idem(P, 1, 0, 1), b"new epoch");
    set_base_offset(&mut bytes, 0, follower.log_end_offset());
    let headers = parse_batches(&bytes).expect("valid");
    follower
        .append_as_follower(&mut bytes, &headers)
        .expect("replicated new epoch");
    let mut bytes = idempotent_batch(idem(P, 1, 7, 1), b"a gap, from the leader");
    set_base_offset(&mut bytes, 0, follower.log_end_offset());
    let headers = parse_batches(&bytes).expect("valid");
    follower
        .append_as_follower(&mut bytes, &headers)
        .expect("a leader's sequence is taken as it is");
    assert!(matches!(
        produce(&follower, &[idem(P, 0, 10, 1)]),
        Err(Error::InvalidProducerEpoch {
            epoch: 0,
            current_epoch: 1,
            ..
        })
    ));
    produce(&follower, &[idem(P, 1, 8, 1)]).expect("continues after the replicated sequence");
}

#[test]
fn create_topic_with_id_is_idempotent_for_the_same_id() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open_with(dir.path(), LogConfig::default(), FlushPolicy::Never);
    let id = [7u8; 16];
    let topic = manager
        .create_topic_with_id("orders", 2, BTreeMap::new(), id)
        .expect("create");
    assert_eq!((topic.topic_id, topic.partition_count()), (id, 2));
    let again = manager
        .create_topic_with_id("orders", 2, BTreeMap::new(), id)
        .expect("same id again");
    assert!(Arc::ptr_eq(&topic, &again));
    assert!(matches!(
        manager.create_topic_with_id("orders", 2, BTreeMap::new(), [8; 16]),
        Err(Error::TopicAlreadyExists(name)) if name == "orders"
    ));
    assert!(matches!(
        manager.create_topic("orders", 2, BTreeMap::new()),
        Err(Error::TopicAlreadyExists(_))
    ));
    assert!(matches!(
        manager.create_topic_with_id("audit", 1, BTreeMap::new(), id),
        Err(Error::InvalidTopicId { .. })
    ));
    assert!(matches!(
        manager.create_topic_with_id("audit", 1, BTreeMap::new(), [0; 16]),
        Err(Error::InvalidTopicId { .. })
    ));
    assert!(manager.topic("audit").is_none());
    let random = manager
        .create_topic("audit", 1, BTreeMap::new())
        .expect("random id");
    assert_ne!(random.topic_id, id);
    assert_ne!(random.topic_id, [0; 16]);

    append(topic.partition(1).expect("p1"), 3, 0, 10);
    manager.shutdown();
    drop((topic, again, random, manager));
    let manager = open_with(dir.path(), LogConfig::default(), FlushPolicy::Never);
    let reloaded = manager
        .topic_by_id(id)
        .expect("found by its id after a restart");
    assert_eq!(reloaded.name, "orders");
    assert_eq!(reloaded.partition(1).expect("p1").log_end_offset(), 3);
    let same = manager
        .create_topic_with_id("orders", 2, BTreeMap::new(), id)
        .expect("still idempotent");
    assert!(Arc::ptr_eq(&reloaded, &same));
}

#[test]
fn a_segment_ending_in_a_gap_survives_a_full_recovery() {
    let dir = tempfile::tempdir().expect("temp dir");
    let manager = open_with(dir.path(), small_segments(600), FlushPolicy::Never);
    let log = create(&manager, "gappy", 1);
    let append_at = |base: i64, payload: usize| {
        let mut b = build_test_batch(1, 1_000, &vec![b'g'; payload]);
        set_base_offset(&mut b, 0, base);
        let headers = parse_batches(&b).expect("valid");
        log.append_as_follower(&mut b, &headers).expect("append")
    };
    // Two ~270-byte batches a segment: [0, 1] then [3, 8] from offset 2.
    for base in [0, 1, 3, 8] {
        append_at(base, 200);
    }
    // The cut leaves that segment ending at 6 after a batch ending at 3; a
    // batch too large to join it rolls a new segment starting at 6.
    log.truncate_to(6).expect("truncate into the gap");
    assert_eq!(log.log_end_offset(), 6);
    append_at(9, 400);
    for base in [12, 20] {
        append_at(base, 200);
    }
    let before = read_all(&log, 0);
    assert!(log_files(&partition_dir(dir.path(), "gappy", 0)).len() > 2);
    drop(log);
    manager.shutdown();
    drop(manager);
    std::fs::remove_file(dir.path().join("recovery-point-offset-checkpoint")).expect("checkpoint");
    let _ = std::fs::remove_file(dir.path().join(".clean_shutdown"));
    let manager = open_with(dir.path(), small_segments(600), FlushPolicy::Never);
    let log = Arc::clone(
        manager
            .topic("gappy")
            .expect("topic")
            .partition(0)
            .expect("p0"),
    );
    assert_eq!(
        read_all(&log, 0),
        before,
        "nothing dropped by a full rescan"
    );
    assert_eq!(manager.stats().recovery_truncated_bytes_total, 0);
}
