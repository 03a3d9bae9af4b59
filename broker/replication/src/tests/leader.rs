//! The leader's high watermark, ISR and acks=all rules as tables of steps,
//! with the invariants checked after every step.


use super::set;
use crate::*;

const LAG: Millis = 1_000;

fn config(min_insync_replicas: usize) -> ReplicationConfig {
    ReplicationConfig {
        min_insync_replicas,
        replica_lag_time_max_ms: LAG,
    }
}

fn leader_of(replicas: &[ReplicaId], isr: &[ReplicaId], min_isr: usize, leo: i64, hw: i64) -> PartitionReplicaState {
    let reg = PartitionRegistration {
        replicas: replicas.to_vec(),
        isr: set(isr),
        leader: Some(replicas[0]),
        leader_epoch: 0,
        partition_epoch: 0,
    };
    let (state, _) = PartitionReplicaState::become_leader(config(min_isr), &reg, replicas[0], leo, hw, 0).expect("valid leader");
    state
}

#[derive(Debug, Clone, Copy)]
enum Ev {
    Append(i64),
    /// (follower, fetch offset, now)
    Fetch(ReplicaId, i64, Millis),
    Tick(Millis),
    /// The controller accepts the pending proposal as proposed.
    Commit,
}

fn changed(isr: &[ReplicaId], version: i32) -> LeaderAction {
    LeaderAction::IsrChanged {
        leader_epoch: 0,
        isr: set(isr),
        version,
    }
}

fn hw(offset: i64) -> LeaderAction {
    LeaderAction::HighWatermarkAdvanced(offset)
}

/// The invariants documented in `leader`.
fn check_invariants(s: &PartitionReplicaState, previous_hw: i64, step: usize) {
    let hw = s.high_watermark();
    assert!(hw >= previous_hw, "step {step}: high watermark went back {previous_hw} -> {hw}");
    assert!(hw <= s.log_end_offset(), "step {step}: high watermark {hw} past the log end");
    let committed = s.isr().committed();
    assert!(committed.contains(&s.leader_id()), "step {step}: leader left the isr {committed:?}");
    assert!(committed.iter().all(|r| s.replicas().contains(r)), "step {step}: isr {committed:?} not among replicas");
    for r in s.isr().maximal() {
        if let Some(leo) = s.follower(r).and_then(|f| f.log_end_offset) {
            assert!(hw <= leo, "step {step}: high watermark {hw} past isr member {r}'s log end {leo}");
            assert!(leo <= s.log_end_offset(), "step {step}: follower {r} ahead of the leader");
        }
    }
}

fn run(s: &mut PartitionReplicaState, steps: &[(Ev, Vec<LeaderAction>)]) {
    for (i, (ev, expected)) in steps.iter().enumerate() {
        let previous_hw = s.high_watermark();
        let actions = match *ev {
            Ev::Append(leo) => s.append(leo).expect("append"),
            Ev::Fetch(r, offset, now) => s.follower_fetch(r, offset, now).expect("fetch"),
            Ev::Tick(now) => s.tick(now),
            Ev::Commit => {
                let proposed = s.isr().pending().expect("a pending change to commit").proposed().clone();
                let version = s.isr().partition_epoch() + 1;
                s.isr_committed(s.leader_epoch(), proposed, version).expect("commit")
            }
        };
        assert_eq!(&actions, expected, "step {i}: {ev:?}");
        check_invariants(s, previous_hw, i);
    }
}

#[test]
fn high_watermark_waits_for_every_isr_member_and_a_slow_follower_is_dropped_then_rejoins() {
    let mut s = leader_of(&[1, 2, 3], &[1, 2, 3], 2, 0, 0);
    run(
        &mut s,
        &[
            (Ev::Append(3), vec![]),
            (Ev::Fetch(2, 0, 10), vec![]),
            (Ev::Fetch(3, 0, 10), vec![]),
            (Ev::Fetch(2, 3, 20), vec![]),
            (Ev::Fetch(3, 3, 20), vec![hw(3)]),
            (Ev::Append(6), vec![]),
            (Ev::Fetch(2, 6, 30), vec![]),
            // 3 was last caught up at 20: still within the window at 1020.
            (Ev::Tick(20 + LAG), vec![]),
            (Ev::Tick(21 + LAG), vec![changed(&[1, 2], 0)]),
            // Shrink in flight: 3 still holds the high watermark back.
            (Ev::Fetch(2, 6, 1_030), vec![]),
            (Ev::Tick(5_000), vec![]),
            (Ev::Commit, vec![hw(6)]),
            // 3 comes back: below the high watermark it may not rejoin.
            (Ev::Fetch(3, 4, 5_100), vec![]),
            (Ev::Fetch(3, 6, 5_200), vec![changed(&[1, 2, 3], 1)]),
            // Expansion in flight: 3 already counts for the high watermark.
            (Ev::Append(8), vec![]),
            (Ev::Fetch(2, 8, 5_210), vec![]),
            (Ev::Commit, vec![]),
            (Ev::Fetch(3, 8, 5_220), vec![hw(8)]),
        ],
    );
    assert_eq!(s.isr().committed(), &set(&[1, 2, 3]));
    assert_eq!(s.isr().partition_epoch(), 2);
}

#[test]
fn a_follower_rejoins_only_from_the_current_leader_epoch() {
    // Took office at log end 5 with a high watermark of 2; 3 is out of sync.
    let mut s = leader_of(&[1, 2, 3], &[1, 2], 1, 5, 2);
    assert_eq!(s.leader_epoch_start_offset(), 5);
    run(
        &mut s,
        &[
            (Ev::Fetch(3, 4, 10), vec![]),
            (Ev::Fetch(2, 5, 10), vec![hw(5)]),
            (Ev::Fetch(3, 5, 20), vec![changed(&[1, 2, 3], 0)]),
        ],
    );
}

#[test]
fn a_follower_keeping_pace_with_a_busy_leader_stays_in_sync() {
    let mut s = leader_of(&[1, 2], &[1, 2], 1, 0, 0);
    run(
        &mut s,
        &[
            (Ev::Append(10), vec![]),
            (Ev::Fetch(2, 5, 100), vec![hw(5)]),
            (Ev::Append(20), vec![]),
            // Reached where the leader was at its previous fetch (100 ms).
            (Ev::Fetch(2, 10, 900), vec![hw(10)]),
            (Ev::Append(30), vec![]),
            (Ev::Fetch(2, 20, 1_500), vec![hw(20)]),
            (Ev::Tick(1_800), vec![]),
            (Ev::Tick(900 + LAG + 1), vec![changed(&[1], 0)]),
        ],
    );
    assert_eq!(s.follower(2).map(|f| f.last_caught_up_time_ms), Some(900));
}

#[test]
fn acks_all_is_refused_below_min_isr_and_fails_after_append_when_the_isr_shrinks() {
    let mut s = leader_of(&[1, 2, 3], &[1, 2, 3], 2, 0, 0);
    assert_eq!(s.check_min_isr(), Ok(()));
    run(&mut s, &[(Ev::Append(5), vec![]), (Ev::Fetch(2, 5, 10), vec![]), (Ev::Fetch(3, 5, 10), vec![hw(5)])]);
    assert_eq!(s.acks_all_satisfied(5), Ok(true));
    // A produce ending at 7 is appended; both followers then go silent.
    run(&mut s, &[(Ev::Append(7), vec![])]);
    assert_eq!(s.acks_all_satisfied(7), Ok(false));
    run(&mut s, &[(Ev::Tick(10 + LAG + 1), vec![changed(&[1], 0)])]);
    assert_eq!(s.acks_all_satisfied(7), Ok(false), "still waiting while the shrink is in flight");
    assert_eq!(s.check_min_isr(), Ok(()), "the committed isr still has three");
    run(&mut s, &[(Ev::Commit, vec![hw(7)])]);
    assert_eq!(
        s.acks_all_satisfied(7),
        Err(Error::NotEnoughReplicasAfterAppend { required_offset: 7, isr_size: 1, min_insync_replicas: 2 })
    );
    assert_eq!(s.acks_all_satisfied(5), Err(Error::NotEnoughReplicasAfterAppend { required_offset: 5, isr_size: 1, min_insync_replicas: 2 }));
    assert_eq!(s.check_min_isr(), Err(Error::NotEnoughReplicas { isr_size: 1, min_insync_replicas: 2 }), "new acks=all appends refused up front");
    // One follower catches up and rejoins: acks=all works again.
    run(&mut s, &[(Ev::Fetch(2, 7, 2_000), vec![changed(&[1, 2], 1)])]);
    assert!(s.check_min_isr().is_err(), "not before the controller commits");
    run(&mut s, &[(Ev::Commit, vec![]), (Ev::Append(9), vec![]), (Ev::Fetch(2, 9, 2_100), vec![hw(9)])]);
    assert_eq!(s.check_min_isr(), Ok(()));
    assert_eq!(s.acks_all_satisfied(9), Ok(true));
}

#[test]
fn a_lone_leader_commits_at_once_but_min_isr_still_applies() {
    let reg = PartitionRegistration { replicas: vec![1, 2], isr: set(&[1]), leader: Some(1), leader_epoch: 3, partition_epoch: 7 };
    let (mut s, actions) = PartitionReplicaState::become_leader(config(2), &reg, 1, 4, 1, 0).expect("valid");
    assert_eq!(actions, [hw(4)], "alone in the isr: the high watermark is the log end");
    assert_eq!(s.append(6), Ok(vec![hw(6)]));
    assert_eq!(s.check_min_isr(), Err(Error::NotEnoughReplicas { isr_size: 1, min_insync_replicas: 2 }));
    assert_eq!(s.append(5), Err(Error::LogEndOffsetWentBackwards { previous: 6, new: 5 }));
    assert!(matches!(
        PartitionReplicaState::become_leader(config(2), &reg, 2, 4, 1, 0),
        Err(Error::NotLeader { replica_id: 2, leader: Some(1) })
    ));
    assert!(matches!(
        PartitionReplicaState::become_leader(config(0), &reg, 1, 4, 1, 0),
        Err(Error::InvalidConfig { name: "min.insync.replicas", .. })
    ));
}

#[test]
fn bad_fetches_and_isr_answers_are_refused_without_changing_state() {
    let mut s = leader_of(&[1, 2, 3], &[1, 2, 3], 2, 5, 0);
    assert_eq!(s.follower_fetch(2, 6, 1), Err(Error::FetchOffsetOutOfRange { replica_id: 2, fetch_offset: 6, log_end_offset: 5 }));
    assert!(matches!(s.follower_fetch(1, 5, 1), Err(Error::NotAFollower { replica_id: 1, .. })), "the leader is not its own follower");
    assert!(matches!(s.follower_fetch(9, 5, 1), Err(Error::NotAFollower { replica_id: 9, .. })));
    assert_eq!(s.follower(2).and_then(|f| f.log_end_offset), None);

    assert_eq!(s.tick(LAG + 1), vec![changed(&[1], 0)], "neither follower fetched");
    let before = s.isr().clone();
    assert_eq!(s.isr_committed(0, set(&[1]), 0), Err(Error::StaleIsrUpdate { version: 0, current_version: 0 }));
    assert_eq!(s.isr_committed(1, set(&[1]), 1), Err(Error::UnknownLeaderEpoch { request_epoch: 1, current_epoch: 0 }));
    assert!(matches!(s.isr_committed(0, set(&[2, 3]), 1), Err(Error::InvalidRegistration { .. })), "the leader must stay in the isr");
    assert_eq!(s.isr(), &before);
    assert!(s.tick(LAG + 2).is_empty(), "one change in flight at a time");
    s.isr_change_failed();
    assert_eq!(s.tick(LAG + 3), vec![changed(&[1], 0)], "proposed again after a failure");

    let table = [(None, Ok(())), (Some(0), Ok(())), (Some(-1), Err(Error::FencedLeaderEpoch { request_epoch: -1, current_epoch: 0 })), (Some(1), Err(Error::UnknownLeaderEpoch { request_epoch: 1, current_epoch: 0 }))];
    for (epoch, expected) in table {
        assert_eq!(s.validate_leader_epoch(epoch), expected, "{epoch:?}");
    }
}

#[test]
fn the_low_watermark_is_the_smallest_log_start_offset_over_live_replicas() {
    let mut s = leader_of(&[1, 2, 3], &[1, 2, 3], 2, 10, 0);
    let all_live = |_: ReplicaId| true;
    assert_eq!(s.low_watermark(4, all_live), -1, "followers that never reported hold it at -1");
    s.follower_fetch(2, 10, 1).expect("fetch");
    assert_eq!(s.follower_log_start_offset(2, 0), Some(LeaderAction::FollowerLogStartOffsetAdvanced(2)));
    s.follower_fetch(3, 8, 1).expect("fetch");
    assert_eq!(s.follower_log_start_offset(3, 3), Some(LeaderAction::FollowerLogStartOffsetAdvanced(3)));
    assert_eq!(s.low_watermark(4, all_live), 0);

    // Steps: (follower, its fetch offset, reported log start, advanced?, low watermark after,
    // with replica 3 live?).
    let table = [
        (2, 10, 4, true, 3, true),
        (2, 10, 4, false, 3, true),
        (2, 10, -1, false, 3, true),
        (3, 9, 2, false, 2, true),
        (3, 9, 6, true, 4, true),
        (3, 9, 20, true, 4, true),
        (2, 10, 7, true, 7, false),
    ];
    for (step, (r, offset, start, advanced, low, three_live)) in table.into_iter().enumerate() {
        s.follower_fetch(r, offset, 2).expect("fetch");
        let action = s.follower_log_start_offset(r, start);
        assert_eq!(action.is_some(), advanced, "step {step}: {action:?}");
        assert_eq!(s.low_watermark(10, |id| id != 3 || three_live), low, "step {step}");
    }
    assert_eq!(s.follower(3).and_then(|f| f.log_start_offset), Some(9), "capped at the follower's log end");
    assert_eq!(s.low_watermark(5, all_live), 5, "the leader's own log start counts");
    assert_eq!(s.follower_log_start_offset(1, 9), None, "the leader is not its own follower");
}
