//! The follower side of one partition: truncate what the new leader does
//! not have, then fetch from the local log end offset.
//!
//! Owns: Kafka's `AbstractFetcherThread` per-partition logic — the
//! OffsetForLeaderEpoch truncation decision (`truncation_offset`, KIP-101 /
//! KIP-279) and the follower's high watermark. Must not: send requests,
//! append or truncate the log — the owner performs the returned
//! `FollowerAction`s in order.
//!
//! Invariants:
//! - the follower fetches only after truncation is complete, always at its
//!   local log end offset;
//! - truncation never keeps an offset the leader wrote in a different epoch:
//!   the log is cut at the end of the last epoch both sides share;
//! - the follower's high watermark is <= its log end offset and only moves
//!   forward, except that a truncation below it pulls it down (which clean
//!   elections never cause);
//! - its log end offset grows only by appending fetched records.

use crate::epoch_cache::{EpochEndOffset, LeaderEpochCache};
use crate::error::{Error, Result};
use crate::ReplicaId;

/// The truncation decision for one OffsetForLeaderEpoch answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truncation {
    /// Truncate the log to `offset` (a no-op if it is the log end offset)
    /// and start fetching there.
    Complete { offset: i64 },
    /// The leader answered with an epoch this replica never saw: truncate
    /// to the end of our largest epoch below it, then ask the leader again
    /// about `next_epoch`.
    Partial { offset: i64, next_epoch: i32 },
}

/// Kafka's `getOffsetTruncationState`: where to cut the local log after the
/// leader answered OffsetForLeaderEpoch for our latest epoch.
///
/// - undefined answer → the local high watermark (all that is known safe);
/// - the leader's epoch is one we have → min(our end of it, the leader's
///   end of it), i.e. keep only what both wrote in that epoch;
/// - we have an older epoch only → a partial truncation to its end, and
///   another round;
/// - we track no epochs at all → the leader's end offset.
///
/// Never beyond the local log end offset.
pub fn truncation_offset(
    local_cache: &LeaderEpochCache,
    local_log_end_offset: i64,
    local_high_watermark: i64,
    leader_answer: Option<EpochEndOffset>,
) -> Truncation {
    let Some(answer) = leader_answer else {
        return Truncation::Complete {
            offset: local_high_watermark.min(local_log_end_offset),
        };
    };
    match local_cache.end_offset_for(answer.leader_epoch, local_log_end_offset) {
        Some(local) if local.leader_epoch == answer.leader_epoch => Truncation::Complete {
            offset: local
                .end_offset
                .min(answer.end_offset)
                .min(local_log_end_offset),
        },
        Some(local) => Truncation::Partial {
            offset: local.end_offset.min(local_log_end_offset),
            next_epoch: local.leader_epoch,
        },
        None => Truncation::Complete {
            offset: answer.end_offset.min(local_log_end_offset),
        },
    }
}

/// Something the owner must do for the follower, in the order returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowerAction {
    /// Send OffsetForLeaderEpoch (replica id = ours, current leader epoch,
    /// `leader_epoch`) to the leader; hand the answer to
    /// `on_epoch_end_offset`.
    SendOffsetForLeaderEpoch {
        leader_id: ReplicaId,
        current_leader_epoch: i32,
        leader_epoch: i32,
    },
    /// Remove every offset >= `offset` from the local log and call
    /// `LeaderEpochCache::truncate_from_end(offset)` (then rewrite the
    /// checkpoint), before sending anything else.
    Truncate { offset: i64 },
    /// Send Fetch (replica id = ours, current leader epoch) at
    /// `fetch_offset`; append what comes back, assigning each batch's
    /// partition leader epoch at its base offset in the epoch cache, then
    /// call `on_fetch_response`.
    SendFetch {
        leader_id: ReplicaId,
        current_leader_epoch: i32,
        fetch_offset: i64,
    },
    /// The local high watermark is now this: persist it.
    HighWatermarkAdvanced(i64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowerPhase {
    /// Waiting for an OffsetForLeaderEpoch answer.
    Truncating,
    /// Fetching from the leader.
    Fetching,
}

impl FollowerPhase {
    fn name(self) -> &'static str {
        match self {
            FollowerPhase::Truncating => "Truncating",
            FollowerPhase::Fetching => "Fetching",
        }
    }
}

/// A replica following `leader_id` in `leader_epoch`.
#[derive(Debug, Clone)]
pub struct FollowerState {
    replica_id: ReplicaId,
    leader_id: ReplicaId,
    leader_epoch: i32,
    phase: FollowerPhase,
    log_end_offset: i64,
    high_watermark: i64,
}

impl FollowerState {
    /// This replica now follows `leader_id` in `leader_epoch`. It first asks
    /// the leader where its latest epoch ends; a replica whose cache is
    /// empty (it never had a leader epoch) truncates to its high watermark
    /// and fetches, as Kafka does.
    pub fn become_follower(
        replica_id: ReplicaId,
        leader_id: ReplicaId,
        leader_epoch: i32,
        local_cache: &LeaderEpochCache,
        log_end_offset: i64,
        high_watermark: i64,
    ) -> (Self, Vec<FollowerAction>) {
        let mut state = FollowerState {
            replica_id,
            leader_id,
            leader_epoch,
            phase: FollowerPhase::Truncating,
            log_end_offset,
            high_watermark: high_watermark.min(log_end_offset),
        };
        let actions = match local_cache.latest_epoch() {
            Some(epoch) => vec![state.ask_epoch(epoch)],
            None => state.finish_truncation(high_watermark.min(log_end_offset)),
        };
        (state, actions)
    }

    /// The leader answered OffsetForLeaderEpoch (`None`: UNDEFINED).
    /// `local_cache` is the cache as it is now, before any truncation this
    /// call asks for.
    pub fn on_epoch_end_offset(
        &mut self,
        local_cache: &LeaderEpochCache,
        leader_answer: Option<EpochEndOffset>,
    ) -> Result<Vec<FollowerAction>> {
        self.expect_phase(FollowerPhase::Truncating, "epoch end offset")?;
        let decision = truncation_offset(
            local_cache,
            self.log_end_offset,
            self.high_watermark,
            leader_answer,
        );
        Ok(match decision {
            Truncation::Complete { offset } => self.finish_truncation(offset),
            Truncation::Partial { offset, next_epoch } => {
                let mut actions = self.truncate(offset);
                actions.push(self.ask_epoch(next_epoch));
                actions
            }
        })
    }

    /// The owner appended a fetch response's records; the local log now
    /// ends at `log_end_offset`, and the leader reported
    /// `leader_high_watermark`. The local high watermark becomes
    /// min(leader's, local log end offset) if that is higher (Kafka sets it
    /// even when lower; a lower value only happens right after a leader
    /// change, before the new leader's high watermark catches up, and
    /// nothing below the old one is lost).
    pub fn on_fetch_response(
        &mut self,
        log_end_offset: i64,
        leader_high_watermark: i64,
    ) -> Result<Vec<FollowerAction>> {
        self.expect_phase(FollowerPhase::Fetching, "fetch response")?;
        if log_end_offset < self.log_end_offset {
            return Err(Error::FollowerLogEndOffsetWentBackwards {
                previous: self.log_end_offset,
                new: log_end_offset,
            });
        }
        self.log_end_offset = log_end_offset;
        let mut actions = Vec::new();
        let hw = leader_high_watermark.min(log_end_offset);
        if hw > self.high_watermark {
            self.high_watermark = hw;
            actions.push(FollowerAction::HighWatermarkAdvanced(hw));
        }
        actions.push(self.fetch());
        Ok(actions)
    }

    pub fn replica_id(&self) -> ReplicaId {
        self.replica_id
    }
    pub fn leader_id(&self) -> ReplicaId {
        self.leader_id
    }
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }
    pub fn phase(&self) -> FollowerPhase {
        self.phase
    }
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    fn expect_phase(&self, phase: FollowerPhase, event: &'static str) -> Result<()> {
        if self.phase == phase {
            Ok(())
        } else {
            Err(Error::UnexpectedFollowerEvent {
                event,
                phase: self.phase.name(),
            })
        }
    }

    fn ask_epoch(&self, leader_epoch: i32) -> FollowerAction {
        FollowerAction::SendOffsetForLeaderEpoch {
            leader_id: self.leader_id,
            current_leader_epoch: self.leader_epoch,
            leader_epoch,
        }
    }

    fn fetch(&self) -> FollowerAction {
        FollowerAction::SendFetch {
            leader_id: self.leader_id,
            current_leader_epoch: self.leader_epoch,
            fetch_offset: self.log_end_offset,
        }
    }

    fn truncate(&mut self, offset: i64) -> Vec<FollowerAction> {
        if offset >= self.log_end_offset {
            return Vec::new();
        }
        self.log_end_offset = offset;
        self.high_watermark = self.high_watermark.min(offset);
        vec![FollowerAction::Truncate { offset }]
    }

    fn finish_truncation(&mut self, offset: i64) -> Vec<FollowerAction> {
        let mut actions = self.truncate(offset);
        self.phase = FollowerPhase::Fetching;
        actions.push(self.fetch());
        actions
    }
}

#[cfg(test)]
#[rustfmt::skip]
mod tests {
    use super::*;
    use crate::epoch_cache::EpochEntry;

    fn cache(entries: &[(i32, i64)]) -> LeaderEpochCache {
        LeaderEpochCache::from_entries(entries.iter().map(|&(epoch, start_offset)| EpochEntry { epoch, start_offset }))
            .expect("valid entries")
    }

    /// (epoch, start offset) pairs, as table cells.
    type Pairs = &'static [(i32, i64)];

    fn answer(leader_epoch: i32, end_offset: i64) -> Option<EpochEndOffset> {
        Some(EpochEndOffset { leader_epoch, end_offset })
    }

    #[test]
    fn truncation_offset_follows_kafka() {
        // (local cache, local leo, local hw, leader answer, decision, why)
        type Row = (Pairs, i64, i64, Option<EpochEndOffset>, Truncation, &'static str);
        let table: [Row; 7] = [
            (&[(0, 0)], 10, 5, answer(0, 8), Truncation::Complete { offset: 8 }, "divergent tail past the leader's end of epoch 0"),
            (&[(0, 0)], 6, 5, answer(0, 8), Truncation::Complete { offset: 6 }, "behind the leader: keep everything"),
            (&[(0, 0), (2, 7)], 12, 5, answer(1, 9), Truncation::Partial { offset: 7, next_epoch: 0 }, "leader's epoch 1 unknown here: cut to the end of our epoch 0, ask again"),
            (&[(0, 0), (1, 4)], 12, 5, answer(1, 9), Truncation::Complete { offset: 9 }, "shared epoch 1: the shorter end wins"),
            (&[(3, 4)], 12, 5, answer(2, 6), Truncation::Complete { offset: 4 }, "leader's epoch older than our first entry: keep only up to our first start"),
            (&[(0, 0)], 10, 5, None, Truncation::Complete { offset: 5 }, "undefined answer: fall back to the high watermark"),
            (&[], 10, 5, answer(0, 7), Truncation::Complete { offset: 7 }, "no local epochs: the leader's end offset"),
        ];
        for (entries, leo, hw, leader, expected, why) in table {
            assert_eq!(truncation_offset(&cache(entries), leo, hw, leader), expected, "{why}");
        }
    }

    #[test]
    fn a_returning_replica_truncates_then_fetches_from_its_end() {
        let mut local = cache(&[(0, 0), (2, 7)]);
        let (mut f, actions) = FollowerState::become_follower(2, 1, 3, &local, 12, 5);
        assert_eq!(actions, [FollowerAction::SendOffsetForLeaderEpoch { leader_id: 1, current_leader_epoch: 3, leader_epoch: 2 }]);
        assert!(f.on_fetch_response(12, 5).is_err(), "no fetching before truncation");
        // The leader never had epoch 2; its largest epoch below is 1.
        let actions = f.on_epoch_end_offset(&local, answer(1, 9)).expect("truncating");
        assert_eq!(
            actions,
            [
                FollowerAction::Truncate { offset: 7 },
                FollowerAction::SendOffsetForLeaderEpoch { leader_id: 1, current_leader_epoch: 3, leader_epoch: 0 }
            ]
        );
        local.truncate_from_end(7);
        let actions = f.on_epoch_end_offset(&local, answer(0, 6)).expect("truncating");
        assert_eq!(
            actions,
            [FollowerAction::Truncate { offset: 6 }, FollowerAction::SendFetch { leader_id: 1, current_leader_epoch: 3, fetch_offset: 6 }]
        );
        assert_eq!((f.phase(), f.log_end_offset(), f.high_watermark()), (FollowerPhase::Fetching, 6, 5));
        let actions = f.on_fetch_response(9, 8).expect("fetching");
        assert_eq!(
            actions,
            [FollowerAction::HighWatermarkAdvanced(8), FollowerAction::SendFetch { leader_id: 1, current_leader_epoch: 3, fetch_offset: 9 }]
        );
        let actions = f.on_fetch_response(9, 20).expect("fetching");
        assert_eq!(actions[0], FollowerAction::HighWatermarkAdvanced(9), "capped at the local log end offset");
        let actions = f.on_fetch_response(9, 4).expect("fetching");
        assert_eq!(actions.len(), 1, "a lower leader high watermark does not pull ours back: {actions:?}");
        assert_eq!(f.high_watermark(), 9);
        assert_eq!(f.on_fetch_response(8, 9), Err(Error::FollowerLogEndOffsetWentBackwards { previous: 9, new: 8 }));
    }

    #[test]
    fn a_replica_without_epochs_truncates_to_its_high_watermark() {
        let (f, actions) = FollowerState::become_follower(2, 1, 0, &LeaderEpochCache::new(), 4, 3);
        assert_eq!(
            actions,
            [FollowerAction::Truncate { offset: 3 }, FollowerAction::SendFetch { leader_id: 1, current_leader_epoch: 0, fetch_offset: 3 }]
        );
        assert_eq!(f.phase(), FollowerPhase::Fetching);
        let (_, actions) = FollowerState::become_follower(2, 1, 0, &LeaderEpochCache::new(), 0, 0);
        assert_eq!(actions, [FollowerAction::SendFetch { leader_id: 1, current_leader_epoch: 0, fetch_offset: 0 }], "an empty replica just fetches");
    }
}
