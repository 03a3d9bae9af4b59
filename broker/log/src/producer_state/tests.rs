//! Table tests for the producer state machine: each step is one partition
//! request and the outcome the partition must report for it.

use super::*;

const P: i64 = 7;
const Q: i64 = 8;
const R: i64 = 9;

/// One batch of a request.
#[derive(Debug, Clone, Copy)]
struct Spec {
    pid: i64,
    epoch: i16,
    seq: i32,
    records: i32,
    control: bool,
    transactional: bool,
    /// A marker's COMMIT / ABORT.
    commit: Option<bool>,
}

/// An idempotent data batch.
const fn b(pid: i64, epoch: i16, seq: i32, records: i32) -> Spec {
    Spec {
        pid,
        epoch,
        seq,
        records,
        control: false,
        transactional: false,
        commit: None,
    }
}

/// A transactional data batch.
const fn tb(pid: i64, epoch: i16, seq: i32, records: i32) -> Spec {
    Spec {
        transactional: true,
        ..b(pid, epoch, seq, records)
    }
}

/// A control batch of an unknown type (one record, no sequence).
const fn marker(pid: i64, epoch: i16) -> Spec {
    Spec {
        pid,
        epoch,
        seq: -1,
        records: 1,
        control: true,
        transactional: true,
        commit: None,
    }
}

/// A COMMIT (true) or ABORT (false) transaction marker.
const fn end(pid: i64, epoch: i16, commit: bool) -> Spec {
    Spec {
        commit: Some(commit),
        ..marker(pid, epoch)
    }
}

/// A batch from a producer without idempotence.
const fn plain(records: i32) -> Spec {
    b(-1, -1, -1, records)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Written at this base offset.
    Appended(i64),
    /// Not written; the original (base offset, last offset).
    Duplicate(i64, i64),
    /// Rejected: (expected sequence, got).
    OutOfOrder(i32, i32),
    /// Rejected: the producer's current epoch is newer.
    Fenced(i16),
    Invalid,
    /// Rejected: not allowed in the producer's transaction state.
    TxnState,
}
use Outcome::*;

/// A partition reduced to its offsets and producer state.
#[derive(Default)]
struct Harness {
    producers: ProducerStateManager,
    log_end_offset: i64,
    written: Vec<ProducerBatch>,
}

impl Harness {
    fn produce(&mut self, request: &[Spec]) -> Outcome {
        let mut next = self.log_end_offset;
        let batches: Vec<ProducerBatch> = request
            .iter()
            .map(|s| {
                let batch = ProducerBatch {
                    producer_id: s.pid,
                    producer_epoch: s.epoch,
                    base_sequence: s.seq,
                    base_offset: next,
                    last_offset_delta: s.records - 1,
                    max_timestamp: 1_000 + next,
                    is_control: s.control,
                    is_transactional: s.transactional,
                    control: s.commit,
                };
                next += i64::from(s.records);
                batch
            })
            .collect();
        match self.producers.check_append(batches.iter().copied()) {
            Ok(AppendCheck::Append(update)) => {
                self.producers.commit(update);
                self.written.extend(batches);
                let base = self.log_end_offset;
                self.log_end_offset = next;
                Appended(base)
            }
            Ok(AppendCheck::Duplicate {
                base_offset,
                last_offset,
            }) => Duplicate(base_offset, last_offset),
            Err(Error::OutOfOrderSequence { expected, got, .. }) => OutOfOrder(expected, got),
            Err(Error::InvalidProducerEpoch { current_epoch, .. }) => Fenced(current_epoch),
            Err(Error::InvalidRecords(_)) => Invalid,
            Err(Error::InvalidTxnState { .. }) => TxnState,
            Err(e) => panic!("unexpected error {e}"),
        }
    }
}

fn run(steps: &[(&[Spec], Outcome)]) -> Harness {
    let mut h = Harness::default();
    for (i, (request, want)) in steps.iter().enumerate() {
        assert_eq!(h.produce(request), *want, "step {i}: {request:?}");
    }
    h
}

#[test]
fn in_sequence_batches_retries_and_gaps() {
    run(&[
        (&[b(P, 0, 0, 1)], Appended(0)),
        (&[b(P, 0, 1, 1)], Appended(1)),
        (&[b(P, 0, 2, 1)], Appended(2)),
        (&[b(P, 0, 1, 1)], Duplicate(1, 1)),
        (&[b(P, 0, 5, 1)], OutOfOrder(3, 5)),
        (&[b(P, 0, 3, 3)], Appended(3)),
        (&[b(P, 0, 3, 3)], Duplicate(3, 5)),
        // Same first sequence, different last: not the same batch.
        (&[b(P, 0, 3, 2)], OutOfOrder(6, 3)),
        (&[b(P, 0, 6, 1)], Appended(6)),
    ]);
}

#[test]
fn producer_epochs() {
    run(&[
        (&[b(P, 0, 0, 1)], Appended(0)),
        (&[b(P, 0, 1, 1)], Appended(1)),
        (&[b(P, 1, 5, 1)], OutOfOrder(0, 5)),
        (&[b(P, 1, 0, 1)], Appended(2)),
        (&[b(P, 0, 2, 1)], Fenced(1)),
        // A retry from the old epoch is fenced, not a duplicate.
        (&[b(P, 0, 1, 1)], Fenced(1)),
        (&[b(P, 1, 1, 1)], Appended(3)),
        (&[b(P, 1, 0, 1)], Duplicate(2, 2)),
        (&[b(P, 3, 0, 2)], Appended(4)),
        (&[b(P, 3, 2, 1)], Appended(6)),
    ]);
}

#[test]
fn sequences_wrap_after_i32_max() {
    run(&[
        // MAX-1, MAX, 0.
        (&[b(P, 0, i32::MAX - 1, 3)], Appended(0)),
        (&[b(P, 0, 1, 1)], Appended(3)),
        (&[b(P, 0, i32::MAX - 1, 3)], Duplicate(0, 2)),
        (&[b(Q, 0, i32::MAX, 1)], Appended(4)),
        (&[b(Q, 0, 0, 1)], Appended(5)),
        (&[b(Q, 0, i32::MAX, 1)], Duplicate(4, 4)),
        (&[b(R, 0, i32::MAX, 1)], Appended(6)),
        (&[b(R, 0, 1, 1)], OutOfOrder(0, 1)),
    ]);
}

#[test]
fn unknown_producers_are_accepted_at_any_sequence() {
    let h = run(&[
        (&[b(P, 0, 17, 2)], Appended(0)),
        (&[b(P, 0, 19, 1)], Appended(2)),
        (&[b(P, 0, 17, 2)], Duplicate(0, 1)),
        (&[b(Q, 4, 42, 1)], Appended(3)),
        (&[b(Q, 4, 42, 1)], Duplicate(3, 3)),
    ]);
    assert_eq!(h.producers.len(), 2);
}

#[test]
fn only_the_last_five_batches_are_recognised_as_duplicates() {
    let mut steps: Vec<(&[Spec], Outcome)> = Vec::new();
    let batches: Vec<[Spec; 1]> = (0..7).map(|seq| [b(P, 0, seq, 1)]).collect();
    for (seq, batch) in batches.iter().enumerate() {
        steps.push((batch, Appended(seq as i64)));
    }
    steps.extend([
        (&batches[1][..], OutOfOrder(7, 1)),
        (&batches[0][..], OutOfOrder(7, 0)),
        (&batches[2][..], Duplicate(2, 2)),
        (&batches[6][..], Duplicate(6, 6)),
    ]);
    run(&steps);
}

#[test]
fn multi_batch_requests_are_all_or_nothing() {
    let h = run(&[
        (&[b(P, 0, 0, 1), b(P, 0, 1, 2)], Appended(0)),
        (&[b(P, 0, 0, 1), b(P, 0, 1, 2)], Duplicate(0, 2)),
        // A retried batch next to a new one: refused, nothing written.
        (&[b(P, 0, 1, 2), b(P, 0, 3, 1)], OutOfOrder(3, 1)),
        (&[plain(2), b(P, 0, 0, 1)], OutOfOrder(3, 0)),
        // The same batch twice in one request.
        (&[b(P, 0, 3, 1), b(P, 0, 3, 1)], OutOfOrder(4, 3)),
        // A gap in the second batch rejects the first too, and Q's batch
        // leaves no state behind.
        (
            &[b(P, 0, 3, 1), b(Q, 0, 0, 1), b(P, 0, 5, 1)],
            OutOfOrder(4, 5),
        ),
        (&[b(Q, 0, 5, 1)], Appended(3)),
        (&[b(P, 0, 3, 1), plain(3), b(P, 0, 4, 2)], Appended(4)),
        (&[b(P, 0, 4, 2)], Duplicate(8, 9)),
    ]);
    assert_eq!(h.log_end_offset, 10);
}

#[test]
fn batches_without_a_producer_id_carry_no_state() {
    let h = run(&[
        (&[plain(3)], Appended(0)),
        (&[plain(1), plain(2)], Appended(3)),
    ]);
    assert_eq!(h.producers.len(), 0);
}

#[test]
fn transaction_markers_check_and_move_only_the_epoch() {
    run(&[
        (&[b(P, 0, 0, 1)], Appended(0)),
        (&[marker(P, 0)], Appended(1)),
        (&[b(P, 0, 1, 1)], Appended(2)),
        // An abort with a bumped epoch starts a new history at sequence 0.
        (&[marker(P, 1)], Appended(3)),
        (&[b(P, 1, 2, 1)], OutOfOrder(0, 2)),
        (&[b(P, 0, 2, 1)], Fenced(1)),
        (&[marker(P, 0)], Fenced(1)),
        (&[b(P, 1, 0, 1)], Appended(4)),
    ]);
}

#[test]
fn a_negative_sequence_with_a_producer_id_is_invalid() {
    run(&[
        (&[b(P, 0, -1, 1)], Invalid),
        (&[b(P, 0, 0, 1), b(P, 0, -5, 1)], Invalid),
        (&[b(P, 0, 0, 1)], Appended(0)),
    ]);
}

#[test]
fn replaying_the_log_rebuilds_the_same_state() {
    let h = run(&[
        (&[b(P, 0, 0, 1)], Appended(0)),
        (&[b(Q, 2, i32::MAX, 2)], Appended(1)),
        (&[b(P, 1, 0, 1), plain(4)], Appended(3)),
        (&[marker(Q, 3)], Appended(8)),
        (&[b(P, 1, 1, 1)], Appended(9)),
    ]);
    for seq in 2..8 {
        let mut h2 = Harness {
            log_end_offset: h.log_end_offset,
            ..Harness::default()
        };
        for batch in &h.written {
            h2.producers.replay(batch);
        }
        assert_eq!(h2.producers, h.producers);
        // Sanity: the rebuilt state judges the next batches as the live one.
        let want = if seq == 2 {
            Appended(10)
        } else {
            OutOfOrder(2, seq)
        };
        assert_eq!(h2.produce(&[b(P, 1, seq, 1)]), want);
    }
}

#[test]
fn replay_takes_what_the_log_holds_without_judging_it() {
    let mut h = Harness::default();
    for (offset, (epoch, seq)) in [(0, 0), (0, 5), (2, 9), (1, 0)].into_iter().enumerate() {
        h.producers.replay(&ProducerBatch {
            producer_id: P,
            producer_epoch: epoch,
            base_sequence: seq,
            base_offset: offset as i64,
            last_offset_delta: 0,
            max_timestamp: -1,
            is_control: false,
            is_transactional: false,
            control: None,
        });
    }
    h.log_end_offset = 4;
    assert_eq!(h.produce(&[b(P, 1, 0, 1)]), Duplicate(3, 3));
    assert_eq!(h.produce(&[b(P, 1, 1, 1)]), Appended(4));
}

#[test]
fn snapshots_round_trip_and_reject_damage() {
    let empty = ProducerStateManager::default();
    assert_eq!(
        ProducerStateManager::decode_snapshot(&empty.encode_snapshot()),
        Ok(empty)
    );
    let mut steps: Vec<(&[Spec], Outcome)> = Vec::new();
    let batches: Vec<[Spec; 1]> = (0..7).map(|i| [b(P, 2, 2 * i, 2)]).collect();
    for (i, batch) in batches.iter().enumerate() {
        steps.push((batch, Appended(2 * i as i64)));
    }
    let others = [b(Q, 0, 40, 1), marker(R, 9)];
    steps.push((&others, Appended(14)));
    let state = run(&steps).producers;
    let bytes = state.encode_snapshot();
    assert_eq!(
        ProducerStateManager::decode_snapshot(&bytes).as_ref(),
        Ok(&state)
    );
    assert!(ProducerStateManager::decode_snapshot(&bytes[..bytes.len() - 1]).is_err());
    assert!(ProducerStateManager::decode_snapshot(&[bytes.as_slice(), &[0]].concat()).is_err());
    let mut other_version = bytes.clone();
    other_version[1] = 3;
    assert!(ProducerStateManager::decode_snapshot(&other_version).is_err());
    let mut too_many_batches = bytes;
    // The first entry (P) starts at byte 6; its batch count at 6 + 18.
    too_many_batches[24] = 6;
    assert!(ProducerStateManager::decode_snapshot(&too_many_batches).is_err());
}

#[test]
fn idle_producer_ids_expire_and_used_ones_stay() {
    let mut h = run(&[
        (&[b(P, 0, 0, 1)], Appended(0)),
        (&[b(Q, 0, 0, 1)], Appended(1)),
    ]);
    let ttl = std::time::Duration::from_secs(60);
    let now = std::time::Instant::now();
    assert_eq!(h.producers.expire(now, ttl), 0, "nothing is idle yet");
    assert_eq!(
        h.producers.expire(now + ttl * 2, ttl),
        2,
        "both idle past producer.id.expiration.ms"
    );
    assert_eq!(h.producers.len(), 0);
    // An expired producer is unknown again: any sequence is accepted.
    assert_eq!(h.produce(&[b(P, 0, 9, 1)]), Appended(2));
}

#[test]
fn transactions_open_at_their_first_batch_and_markers_end_them() {
    // P: offsets 0-1 (txn), Q: 2 (txn), P: 3 (txn), P commit at 4,
    // Q abort at 5, then P again: 6-7 (txn) and abort at 8.
    let mut h = run(&[
        (&[tb(P, 0, 0, 2)], Appended(0)),
        (&[tb(Q, 0, 0, 1)], Appended(2)),
        (&[tb(P, 0, 2, 1)], Appended(3)),
    ]);
    assert_eq!(h.producers.first_unstable_offset(), Some(0));
    assert!(h.producers.has_open_transaction(P) && h.producers.has_open_transaction(Q));
    assert_eq!(h.produce(&[end(P, 0, true)]), Appended(4));
    assert_eq!(
        h.producers.first_unstable_offset(),
        Some(2),
        "the last stable offset moves to Q's transaction"
    );
    assert_eq!(h.produce(&[end(Q, 0, false)]), Appended(5));
    assert_eq!(h.producers.first_unstable_offset(), None);
    assert_eq!(h.produce(&[tb(P, 0, 3, 2)]), Appended(6));
    assert_eq!(h.produce(&[end(P, 0, false)]), Appended(8));
    fn aborted(p: &ProducerStateManager, from: i64, upto: i64) -> Vec<(i64, i64, i64)> {
        p.aborted_transactions(from, upto)
            .iter()
            .map(|a| (a.producer_id, a.first_offset, a.last_offset))
            .collect()
    }
    assert_eq!(aborted(&h.producers, 0, 100), [(Q, 2, 5), (P, 6, 8)]);
    assert_eq!(
        aborted(&h.producers, 0, 2),
        [],
        "a range before Q's first record"
    );
    assert_eq!(aborted(&h.producers, 6, 7), [(P, 6, 8)]);
    assert_eq!(
        aborted(&h.producers, 9, 100),
        [],
        "a range after every marker"
    );
    h.producers.prune_aborted(6);
    assert_eq!(
        aborted(&h.producers, 0, 100),
        [(P, 6, 8)],
        "retention dropped Q's"
    );
}

#[test]
fn a_non_transactional_batch_inside_an_open_transaction_is_refused() {
    let mut h = run(&[(&[tb(P, 0, 0, 1)], Appended(0))]);
    assert_eq!(h.produce(&[b(P, 0, 1, 1)]), TxnState);
    assert_eq!(h.produce(&[end(P, 0, true)]), Appended(1));
    assert_eq!(
        h.produce(&[b(P, 0, 1, 1)]),
        Appended(2),
        "after the marker it is fine"
    );
    // a marker for a producer with nothing open changes nothing but the epoch
    assert_eq!(h.produce(&[end(R, 3, false)]), Appended(3));
    assert_eq!(h.producers.aborted_transactions(0, 100), []);
    // an older epoch's transactional batch is fenced by the marker's epoch
    assert_eq!(h.produce(&[tb(R, 2, 0, 1)]), Fenced(3));
}

#[test]
fn replay_rebuilds_what_the_leader_had_and_snapshots_keep_it() {
    let h = run(&[
        (&[tb(P, 0, 0, 2)], Appended(0)),
        (&[tb(Q, 0, 0, 1)], Appended(2)),
        (&[end(Q, 0, false)], Appended(3)),
    ]);
    let mut follower = ProducerStateManager::default();
    for batch in &h.written {
        follower.replay(batch);
    }
    assert_eq!(follower.first_unstable_offset(), Some(0));
    assert_eq!(
        follower.aborted_transactions(0, 10),
        h.producers.aborted_transactions(0, 10)
    );
    let decoded =
        ProducerStateManager::decode_snapshot(&h.producers.encode_snapshot()).expect("decodes");
    assert_eq!(decoded.first_unstable_offset(), Some(0));
    assert!(decoded.has_open_transaction(P));
    assert_eq!(decoded.aborted_transactions(0, 10).len(), 1);
    // a version 1 snapshot (no transaction fields) still loads
    let v1 = run(&[(&[b(P, 0, 0, 1)], Appended(0))]).producers;
    let mut bytes = v1.encode_snapshot();
    bytes[1] = 1;
    // drop the open-transaction field of the one entry and the aborted count
    bytes.drain(6 + 10..6 + 18);
    bytes.truncate(bytes.len() - 4);
    assert_eq!(ProducerStateManager::decode_snapshot(&bytes), Ok(v1));
}

#[test]
fn a_producer_with_an_open_transaction_never_expires() {
    let mut h = run(&[
        (&[tb(P, 0, 0, 1)], Appended(0)),
        (&[b(Q, 0, 0, 1)], Appended(1)),
    ]);
    let later = Instant::now() + Duration::from_secs(3600);
    assert_eq!(h.producers.expire(later, Duration::from_secs(1)), 1);
    assert!(h.producers.has_open_transaction(P));
}
