//! Share-partition transitions: acquisition, locks, acknowledgements,
//! delivery limits, the window and the durable form.

use crate::share_partition::*;

fn config() -> ShareConfig {
    ShareConfig {
        lock_duration_ms: 1000,
        delivery_count_limit: 2,
        max_record_locks: 10,
    }
}

fn ack(first: i64, last: i64, t: AckType) -> AckBatch {
    AckBatch {
        first_offset: first,
        last_offset: last,
        types: vec![t],
    }
}

const BATCH: (usize, AcquireMode) = (100, AcquireMode::BatchOptimized);

#[test]
fn records_acquired_by_one_member_are_not_given_to_another_until_released() {
    let mut sp = SharePartition::new(0, 0, config());
    let got = sp.acquire("a", &[(0, 4)], 5, BATCH, 0);
    assert_eq!(
        got,
        vec![Acquired {
            first_offset: 0,
            last_offset: 4,
            delivery_count: 1
        }]
    );
    assert_eq!(sp.acquire("b", &[(0, 4)], 5, BATCH, 0), vec![]);
    assert_eq!(sp.next_fetch_offset(), 5);
    assert_eq!(
        sp.acknowledge(
            "a",
            &[ack(0, 1, AckType::Accept), ack(2, 4, AckType::Release)],
            10
        ),
        Ok(true)
    );
    assert_eq!(sp.start_offset(), 2, "accepted offsets move the start");
    let again = sp.acquire("b", &[(0, 4)], 5, BATCH, 20);
    assert_eq!(
        again,
        vec![Acquired {
            first_offset: 2,
            last_offset: 4,
            delivery_count: 2
        }]
    );
}

#[test]
fn only_what_is_below_the_high_watermark_is_acquired() {
    let mut sp = SharePartition::new(0, 0, config());
    let got = sp.acquire("a", &[(0, 9)], 3, BATCH, 0);
    assert_eq!(
        got,
        vec![Acquired {
            first_offset: 0,
            last_offset: 2,
            delivery_count: 1
        }]
    );
    assert_eq!(sp.end_offset(), 3);
}

#[test]
fn an_expired_lock_releases_and_the_delivery_limit_archives() {
    let mut sp = SharePartition::new(0, 0, config());
    sp.acquire("a", &[(0, 0)], 1, BATCH, 0);
    assert_eq!(sp.expire_locks(999), 0);
    assert_eq!(sp.expire_locks(1000), 1);
    assert_eq!(sp.record(0), Some((RecordState::Available, 1)));
    sp.acquire("b", &[(0, 0)], 1, BATCH, 1000);
    assert_eq!(sp.record(0), Some((RecordState::Acquired, 2)));
    assert_eq!(sp.expire_locks(5000), 1);
    // Delivered twice (the limit): archived, never again.
    assert_eq!(sp.record(0), None);
    assert_eq!(sp.start_offset(), 1);
    assert_eq!(sp.acquire("c", &[(0, 0)], 1, BATCH, 6000), vec![]);
}

#[test]
fn a_release_at_the_limit_archives_and_a_reject_archives_at_once() {
    let mut sp = SharePartition::new(0, 0, config());
    sp.acquire("a", &[(0, 1)], 2, BATCH, 0);
    sp.acknowledge("a", &[ack(0, 0, AckType::Reject)], 1)
        .expect("reject");
    assert_eq!(sp.start_offset(), 1);
    sp.acknowledge("a", &[ack(1, 1, AckType::Release)], 1)
        .expect("release");
    sp.acquire("a", &[(1, 1)], 2, BATCH, 2);
    sp.acknowledge("a", &[ack(1, 1, AckType::Release)], 3)
        .expect("release at limit");
    assert_eq!(
        sp.start_offset(),
        2,
        "released at the delivery limit: archived"
    );
}

#[test]
fn acknowledgements_are_checked_before_any_applies() {
    let mut sp = SharePartition::new(0, 0, config());
    sp.acquire("a", &[(0, 5)], 6, BATCH, 0);
    let overlap = sp.acknowledge(
        "a",
        &[ack(0, 2, AckType::Accept), ack(2, 3, AckType::Accept)],
        1,
    );
    assert!(
        matches!(overlap, Err(AckError::InvalidRequest(_))),
        "{overlap:?}"
    );
    let backwards = sp.acknowledge("a", &[ack(3, 2, AckType::Accept)], 1);
    assert!(matches!(backwards, Err(AckError::InvalidRequest(_))));
    let wrong_count = sp.acknowledge(
        "a",
        &[AckBatch {
            first_offset: 0,
            last_offset: 2,
            types: vec![AckType::Accept, AckType::Accept],
        }],
        1,
    );
    assert!(matches!(wrong_count, Err(AckError::InvalidRequest(_))));
    let past_end = sp.acknowledge("a", &[ack(4, 9, AckType::Accept)], 1);
    assert!(matches!(past_end, Err(AckError::InvalidRecordState(_))));
    let not_mine = sp.acknowledge("b", &[ack(0, 0, AckType::Accept)], 1);
    assert!(matches!(not_mine, Err(AckError::InvalidRecordState(_))));
    assert_eq!(sp.start_offset(), 0, "nothing applied");
    assert_eq!(sp.acquired_count(), 6);
}

#[test]
fn per_offset_types_and_renew() {
    let mut sp = SharePartition::new(0, 0, config());
    sp.acquire("a", &[(0, 2)], 3, BATCH, 0);
    let b = AckBatch {
        first_offset: 0,
        last_offset: 2,
        types: vec![AckType::Accept, AckType::Renew, AckType::Gap],
    };
    sp.acknowledge("a", &[b], 900).expect("ack");
    assert_eq!(sp.start_offset(), 1);
    assert_eq!(
        sp.expire_locks(1500),
        0,
        "renewed at 900: locked until 1900"
    );
    assert_eq!(sp.expire_locks(1900), 1);
}

#[test]
fn the_window_never_exceeds_max_record_locks() {
    let mut sp = SharePartition::new(0, 0, config());
    let got = sp.acquire("a", &[(0, 99)], 100, BATCH, 0);
    assert_eq!(
        got,
        vec![Acquired {
            first_offset: 0,
            last_offset: 9,
            delivery_count: 1
        }]
    );
    assert!(!sp.can_acquire(100));
    sp.acknowledge("a", &[ack(0, 4, AckType::Accept)], 1)
        .expect("ack");
    assert!(sp.can_acquire(100));
    let more = sp.acquire("a", &[(10, 99)], 100, BATCH, 2);
    assert_eq!(
        more,
        vec![Acquired {
            first_offset: 10,
            last_offset: 14,
            delivery_count: 1
        }]
    );
}

#[test]
fn record_limit_mode_stops_at_max_records_batch_mode_finishes_the_batch() {
    let mut sp = SharePartition::new(0, 0, config());
    let got = sp.acquire(
        "a",
        &[(0, 4), (5, 9)],
        10,
        (3, AcquireMode::BatchOptimized),
        0,
    );
    assert_eq!(
        got,
        vec![Acquired {
            first_offset: 0,
            last_offset: 4,
            delivery_count: 1
        }]
    );
    let mut sp = SharePartition::new(0, 0, config());
    let got = sp.acquire("a", &[(0, 4), (5, 9)], 10, (3, AcquireMode::RecordLimit), 0);
    assert_eq!(
        got,
        vec![Acquired {
            first_offset: 0,
            last_offset: 2,
            delivery_count: 1
        }]
    );
}

#[test]
fn the_durable_form_rebuilds_the_same_state_with_acquired_as_available() {
    let mut sp = SharePartition::new(5, 3, config());
    sp.acquire("a", &[(5, 12)], 13, BATCH, 0);
    sp.acknowledge(
        "a",
        &[
            ack(5, 5, AckType::Accept),
            ack(7, 7, AckType::Accept),
            ack(8, 8, AckType::Release),
            ack(9, 9, AckType::Reject),
        ],
        1,
    )
    .expect("ack");
    let snap = sp.snapshot();
    assert_eq!(snap.start_offset, 6);
    assert_eq!(snap.state_epoch, 3);
    let back = SharePartition::from_snapshot(&snap, config()).expect("valid");
    assert_eq!(back.start_offset(), 6);
    assert_eq!(back.end_offset(), 13);
    assert_eq!(back.record(6), Some((RecordState::Available, 1)));
    assert_eq!(back.record(7), Some((RecordState::Acknowledged, 1)));
    assert_eq!(back.record(9), Some((RecordState::Archived, 1)));
    assert_eq!(back.record(12), Some((RecordState::Available, 1)));
    assert_eq!(back.next_fetch_offset(), 6);
}

#[test]
fn a_snapshot_that_could_not_have_been_written_is_refused() {
    let overlapping = ShareSnapshot {
        state_epoch: 0,
        start_offset: 0,
        batches: vec![
            StateBatch {
                first_offset: 0,
                last_offset: 5,
                state: RecordState::Archived,
                delivery_count: 1,
            },
            StateBatch {
                first_offset: 3,
                last_offset: 7,
                state: RecordState::Available,
                delivery_count: 1,
            },
        ],
    };
    assert!(SharePartition::from_snapshot(&overlapping, config()).is_none());
    let huge = ShareSnapshot {
        state_epoch: 0,
        start_offset: 0,
        batches: vec![StateBatch {
            first_offset: 0,
            last_offset: i64::MAX - 1,
            state: RecordState::Available,
            delivery_count: 1,
        }],
    };
    assert!(SharePartition::from_snapshot(&huge, config()).is_none());
}

#[test]
fn a_member_leaving_releases_what_it_held() {
    let mut sp = SharePartition::new(0, 0, config());
    sp.acquire("a", &[(0, 1)], 2, BATCH, 0);
    sp.acquire("b", &[(2, 3)], 4, BATCH, 0);
    assert_eq!(sp.release_member("a"), 2);
    assert_eq!(sp.next_fetch_offset(), 0);
    assert_eq!(sp.acquired_count(), 2);
}

#[test]
fn offsets_the_log_skips_are_archived_and_a_moved_log_start_is_followed() {
    let mut sp = SharePartition::new(0, 0, config());
    sp.acquire("a", &[(0, 1)], 10, BATCH, 0);
    // Offsets 2..5 compacted away.
    let got = sp.acquire("a", &[(5, 6)], 10, BATCH, 0);
    assert_eq!(
        got,
        vec![Acquired {
            first_offset: 5,
            last_offset: 6,
            delivery_count: 1
        }]
    );
    assert_eq!(sp.record(3), Some((RecordState::Archived, 0)));
    sp.follow_log_start(6);
    assert_eq!(sp.start_offset(), 6);
    assert_eq!(sp.record(5), None);
}
