//! The leader side of one partition: followers' fetch progress, the ISR and
//! the high watermark.
//!
//! Owns: Kafka's `Partition` leader logic — follower fetch state
//! (`Replica.updateFetchState`), ISR expansion and shrinking
//! (`maybeExpandIsr`, `maybeShrinkIsr`), the high watermark
//! (`maybeIncrementLeaderHW`), the acks=all checks
//! (`checkEnoughReplicasReachOffset`) and the low watermark DeleteRecords
//! waits for (`lowWatermarkIfLeader`, from the log start offsets followers
//! report). Must not: do I/O, read a clock or
//! touch the log — the owner feeds events with the time in milliseconds and
//! performs the returned `LeaderAction`s.
//!
//! Invariants (checked after every step by the tests):
//! - the high watermark never moves backwards, and never exceeds the
//!   leader's log end offset;
//! - it advances only to the minimum log end offset over the *maximal* ISR
//!   (see `isr`), and not at all while a member's offset is unknown in this
//!   leader epoch, so every ISR member (committed or being added) has every
//!   offset below it;
//! - the committed ISR always contains the leader and only assigned
//!   replicas; at most one ISR change is in flight;
//! - a follower joins the ISR only with log end offset >= the high
//!   watermark and >= the start offset of this leader epoch, so it has
//!   replicated everything committed and nothing from a divergent epoch;
//! - a follower's log end offset never exceeds the leader's.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{check_leader_epoch, Error, Result};
use crate::isr::IsrState;
use crate::registration::PartitionRegistration;
use crate::{Millis, ReplicaId};

/// Topic-level replication settings (Kafka's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicationConfig {
    /// min.insync.replicas: the smallest ISR that may accept acks=all.
    pub min_insync_replicas: usize,
    /// replica.lag.time.max.ms: how long a follower may go without being
    /// caught up before it leaves the ISR.
    pub replica_lag_time_max_ms: Millis,
}

impl Default for ReplicationConfig {
    fn default() -> Self {
        ReplicationConfig {
            min_insync_replicas: 1,
            replica_lag_time_max_ms: 30_000,
        }
    }
}

/// What the leader knows about one follower, reset at each new leadership.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerFetchState {
    /// The follower's log end offset: the offset of its last fetch (a
    /// fetch at X means it has everything below X). `None` until its first
    /// fetch in this leader epoch.
    pub log_end_offset: Option<i64>,
    pub last_fetch_time_ms: Millis,
    /// The leader's log end offset when that fetch arrived.
    pub last_fetch_leader_log_end_offset: Option<i64>,
    /// The last time the follower was known to have all the leader had.
    pub last_caught_up_time_ms: Millis,
    /// The follower's log start offset as its last fetch reported it
    /// (Fetch v5+). `None` until it reports one in this leader epoch.
    pub log_start_offset: Option<i64>,
}

impl FollowerFetchState {
    fn new(last_caught_up_time_ms: Millis) -> Self {
        FollowerFetchState {
            log_end_offset: None,
            last_fetch_time_ms: 0,
            last_fetch_leader_log_end_offset: None,
            last_caught_up_time_ms,
            log_start_offset: None,
        }
    }

    /// Kafka's `isCaughtUp`: level with the leader now, or caught up within
    /// the lag window.
    pub fn is_caught_up(
        &self,
        leader_log_end_offset: i64,
        now_ms: Millis,
        max_lag_ms: Millis,
    ) -> bool {
        self.log_end_offset == Some(leader_log_end_offset)
            || now_ms.saturating_sub(self.last_caught_up_time_ms) <= max_lag_ms
    }

    /// Kafka's `updateFetchState`. A fetch at or past the leader's end
    /// means caught up now; a fetch at or past where the leader's end was
    /// at the previous fetch means caught up as of that previous fetch (so a
    /// follower that keeps pace with a busy leader is not shrunk out).
    fn record_fetch(&mut self, fetch_offset: i64, leader_log_end_offset: i64, now_ms: Millis) {
        if fetch_offset >= leader_log_end_offset {
            self.last_caught_up_time_ms = self.last_caught_up_time_ms.max(now_ms);
        } else if self
            .last_fetch_leader_log_end_offset
            .is_some_and(|prev| fetch_offset >= prev)
        {
            self.last_caught_up_time_ms = self.last_caught_up_time_ms.max(self.last_fetch_time_ms);
        }
        self.log_end_offset = Some(fetch_offset);
        self.last_fetch_leader_log_end_offset = Some(leader_log_end_offset);
        self.last_fetch_time_ms = self.last_fetch_time_ms.max(now_ms);
    }
}

/// Something the owner must do for the leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaderAction {
    /// Propose this ISR to the controller (AlterPartition with the leader
    /// epoch and `version`, the partition epoch it is based on). It takes
    /// effect only when the owner calls `isr_committed` with the
    /// controller's answer; until then the leader keeps computing with the
    /// maximal ISR.
    IsrChanged {
        leader_epoch: i32,
        isr: BTreeSet<ReplicaId>,
        version: i32,
    },
    /// The high watermark is now this: persist it (the
    /// replication-offset-checkpoint), wake fetches waiting for it, and
    /// re-check acks=all produces with `acks_all_satisfied`.
    HighWatermarkAdvanced(i64),
    /// This follower's log start offset moved up: the low watermark may
    /// have advanced, so re-check DeleteRecords waiting for it.
    FollowerLogStartOffsetAdvanced(ReplicaId),
}

/// The leader's replication state for one partition.
#[derive(Debug, Clone)]
pub struct PartitionReplicaState {
    config: ReplicationConfig,
    leader_id: ReplicaId,
    leader_epoch: i32,
    replicas: Vec<ReplicaId>,
    isr: IsrState,
    /// This replica's log end offset when it took office in this epoch.
    leader_epoch_start_offset: i64,
    log_end_offset: i64,
    high_watermark: i64,
    followers: BTreeMap<ReplicaId, FollowerFetchState>,
}

impl PartitionReplicaState {
    /// This replica (`local_id`) takes office under `registration`. The
    /// owner must first have assigned `(leader_epoch, log_end_offset)` in
    /// the local epoch cache, so OffsetForLeaderEpoch answers end the old
    /// epochs here. `high_watermark` is the one this replica had as a
    /// follower (capped at the log end offset). Followers start with an
    /// unknown log end offset; those in the ISR count as caught up now, as
    /// in Kafka, so they are not shrunk before they had a chance to fetch.
    pub fn become_leader(
        config: ReplicationConfig,
        registration: &PartitionRegistration,
        local_id: ReplicaId,
        log_end_offset: i64,
        high_watermark: i64,
        now_ms: Millis,
    ) -> Result<(Self, Vec<LeaderAction>)> {
        if config.min_insync_replicas == 0 {
            return Err(Error::InvalidConfig {
                name: "min.insync.replicas",
                value: 0,
                reason: "must be at least 1",
            });
        }
        registration.validate()?;
        if registration.leader != Some(local_id) {
            return Err(Error::NotLeader {
                replica_id: local_id,
                leader: registration.leader,
            });
        }
        let followers = registration
            .replicas
            .iter()
            .filter(|&&r| r != local_id)
            .map(|&r| {
                let caught_up = if registration.isr.contains(&r) {
                    now_ms
                } else {
                    0
                };
                (r, FollowerFetchState::new(caught_up))
            })
            .collect();
        let mut state = PartitionReplicaState {
            config,
            leader_id: local_id,
            leader_epoch: registration.leader_epoch,
            replicas: registration.replicas.clone(),
            isr: IsrState::new(registration.isr.clone(), registration.partition_epoch),
            leader_epoch_start_offset: log_end_offset,
            log_end_offset,
            high_watermark: high_watermark.clamp(0, log_end_offset.max(0)),
            followers,
        };
        let actions = state.maybe_advance_high_watermark().into_iter().collect();
        Ok((state, actions))
    }

    /// The leader appended; `log_end_offset` is its new end. With no other
    /// ISR member the high watermark follows at once.
    pub fn append(&mut self, log_end_offset: i64) -> Result<Vec<LeaderAction>> {
        if log_end_offset < self.log_end_offset {
            return Err(Error::LogEndOffsetWentBackwards {
                previous: self.log_end_offset,
                new: log_end_offset,
            });
        }
        self.log_end_offset = log_end_offset;
        Ok(self.maybe_advance_high_watermark().into_iter().collect())
    }

    /// A Fetch from follower `replica_id` at `fetch_offset` arrived at
    /// `now_ms` (the owner has already checked its current leader epoch with
    /// `validate_leader_epoch`). Call before reading the response, so the
    /// response carries the high watermark this fetch may have advanced.
    pub fn follower_fetch(
        &mut self,
        replica_id: ReplicaId,
        fetch_offset: i64,
        now_ms: Millis,
    ) -> Result<Vec<LeaderAction>> {
        if fetch_offset > self.log_end_offset || fetch_offset < 0 {
            return Err(Error::FetchOffsetOutOfRange {
                replica_id,
                fetch_offset,
                log_end_offset: self.log_end_offset,
            });
        }
        let leader_leo = self.log_end_offset;
        let Some(follower) = self.followers.get_mut(&replica_id) else {
            return Err(Error::NotAFollower {
                replica_id,
                leader: self.leader_id,
                replicas: self.replicas.clone(),
            });
        };
        follower.record_fetch(fetch_offset, leader_leo, now_ms);
        let mut actions = Vec::new();
        actions.extend(self.maybe_expand_isr(replica_id, fetch_offset));
        actions.extend(self.maybe_advance_high_watermark());
        Ok(actions)
    }

    /// The log start offset follower `replica_id` reported in the fetch
    /// just recorded by `follower_fetch` (Kafka's `updateFetchState` takes
    /// both together); a negative one (not reported) changes nothing. It is
    /// capped at the fetch offset: a replica holds nothing past its end.
    pub fn follower_log_start_offset(
        &mut self,
        replica_id: ReplicaId,
        log_start_offset: i64,
    ) -> Option<LeaderAction> {
        let follower = self.followers.get_mut(&replica_id)?;
        if log_start_offset < 0 {
            return None;
        }
        let reported = log_start_offset.min(follower.log_end_offset.unwrap_or(log_start_offset));
        let previous = follower.log_start_offset.replace(reported);
        (previous.is_none_or(|p| reported > p))
            .then_some(LeaderAction::FollowerLogStartOffsetAdvanced(replica_id))
    }

    /// Kafka's `lowWatermarkIfLeader`: the smallest log start offset over
    /// this leader (`leader_log_start_offset`) and every follower on a live
    /// broker (`is_live`: registered, not fenced) — not only the ISR. A
    /// live follower that has not reported one holds it at -1 (Kafka's
    /// unknown offset). DeleteRecords answers a partition once this
    /// reaches the requested offset.
    pub fn low_watermark(
        &self,
        leader_log_start_offset: i64,
        is_live: impl Fn(ReplicaId) -> bool,
    ) -> i64 {
        self.followers
            .iter()
            .filter(|(&r, _)| is_live(r))
            .map(|(_, f)| f.log_start_offset.unwrap_or(-1))
            .fold(leader_log_start_offset, i64::min)
    }

    /// Periodic check (Kafka runs it every replica.lag.time.max.ms / 2):
    /// proposes removing ISR followers that have not been caught up within
    /// the lag window. The ISR may shrink below min.insync.replicas; acks=all
    /// is then refused rather than the partition stalling. A follower whose
    /// log end offset equals the leader's counts as caught up however long
    /// ago it fetched (Kafka's rule): a dead broker level with an idle
    /// leader is removed by the controller when it fences the broker.
    pub fn tick(&mut self, now_ms: Millis) -> Vec<LeaderAction> {
        if self.isr.is_inflight() {
            return Vec::new();
        }
        let max_lag = self.config.replica_lag_time_max_ms;
        let out_of_sync: BTreeSet<ReplicaId> = self
            .isr
            .committed()
            .iter()
            .copied()
            .filter(|&r| r != self.leader_id)
            .filter(|r| {
                self.followers
                    .get(r)
                    .is_none_or(|f| !f.is_caught_up(self.log_end_offset, now_ms, max_lag))
            })
            .collect();
        if out_of_sync.is_empty() {
            return Vec::new();
        }
        let isr = self.isr.propose_shrink(out_of_sync);
        vec![self.isr_changed(isr)]
    }

    /// The controller recorded `isr` at partition epoch `version` (the
    /// answer to an `IsrChanged` proposal, or an ISR change the controller
    /// made itself while this replica kept leading). Answers from another
    /// leader epoch or for an older version are refused and change nothing.
    pub fn isr_committed(
        &mut self,
        leader_epoch: i32,
        isr: BTreeSet<ReplicaId>,
        version: i32,
    ) -> Result<Vec<LeaderAction>> {
        check_leader_epoch(leader_epoch, self.leader_epoch)?;
        if version <= self.isr.partition_epoch() {
            return Err(Error::StaleIsrUpdate {
                version,
                current_version: self.isr.partition_epoch(),
            });
        }
        PartitionRegistration {
            replicas: self.replicas.clone(),
            isr: isr.clone(),
            leader: Some(self.leader_id),
            leader_epoch,
            partition_epoch: version,
        }
        .validate()?;
        self.isr.commit(isr, version);
        Ok(self.maybe_advance_high_watermark().into_iter().collect())
    }

    /// The controller refused the proposal (or it was lost): forget it. The
    /// next fetch or tick proposes again if it is still needed.
    pub fn isr_change_failed(&mut self) {
        self.isr.abandon_pending();
    }

    /// Before an acks=all append: NOT_ENOUGH_REPLICAS when the committed
    /// ISR is below min.insync.replicas.
    pub fn check_min_isr(&self) -> Result<()> {
        let isr_size = self.isr.committed().len();
        if isr_size < self.config.min_insync_replicas {
            return Err(Error::NotEnoughReplicas {
                isr_size,
                min_insync_replicas: self.config.min_insync_replicas,
            });
        }
        Ok(())
    }

    /// Whether an acks=all produce whose records end at `required_offset`
    /// (the log end offset right after its append) may be answered:
    /// `Ok(false)` keep waiting, `Ok(true)` answer success. Kafka's rule:
    /// once the high watermark covers it, the answer is
    /// NOT_ENOUGH_REPLICAS_AFTER_APPEND if the maximal ISR has meanwhile
    /// dropped below min.insync.replicas (the records stay in the log).
    pub fn acks_all_satisfied(&self, required_offset: i64) -> Result<bool> {
        if self.high_watermark < required_offset {
            return Ok(false);
        }
        let isr_size = self.isr.maximal().len();
        if isr_size < self.config.min_insync_replicas {
            return Err(Error::NotEnoughReplicasAfterAppend {
                required_offset,
                isr_size,
                min_insync_replicas: self.config.min_insync_replicas,
            });
        }
        Ok(true)
    }

    /// Checks the current leader epoch a Fetch or OffsetForLeaderEpoch
    /// request carries (`None`: an old client that sends none).
    pub fn validate_leader_epoch(&self, current_leader_epoch: Option<i32>) -> Result<()> {
        match current_leader_epoch {
            Some(e) => check_leader_epoch(e, self.leader_epoch),
            None => Ok(()),
        }
    }

    pub fn config(&self) -> ReplicationConfig {
        self.config
    }
    pub fn leader_id(&self) -> ReplicaId {
        self.leader_id
    }
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }
    pub fn leader_epoch_start_offset(&self) -> i64 {
        self.leader_epoch_start_offset
    }
    pub fn replicas(&self) -> &[ReplicaId] {
        &self.replicas
    }
    pub fn isr(&self) -> &IsrState {
        &self.isr
    }
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }
    pub fn follower(&self, replica_id: ReplicaId) -> Option<&FollowerFetchState> {
        self.followers.get(&replica_id)
    }

    fn isr_changed(&self, isr: BTreeSet<ReplicaId>) -> LeaderAction {
        LeaderAction::IsrChanged {
            leader_epoch: self.leader_epoch,
            isr,
            version: self.isr.partition_epoch(),
        }
    }

    /// Kafka's `isFollowerInSync` + `canAddReplicaToIsr`.
    fn maybe_expand_isr(
        &mut self,
        replica_id: ReplicaId,
        log_end_offset: i64,
    ) -> Option<LeaderAction> {
        let eligible = !self.isr.is_inflight()
            && !self.isr.in_maximal(replica_id)
            && log_end_offset >= self.high_watermark
            && log_end_offset >= self.leader_epoch_start_offset;
        if !eligible {
            return None;
        }
        let isr = self.isr.propose_expand(replica_id);
        Some(self.isr_changed(isr))
    }

    /// Kafka's `maybeIncrementLeaderHW` over the maximal ISR.
    fn maybe_advance_high_watermark(&mut self) -> Option<LeaderAction> {
        let mut candidate = self.log_end_offset;
        for replica_id in self.isr.maximal() {
            if replica_id == self.leader_id {
                continue;
            }
            // A member that has not fetched in this epoch holds the HW.
            let leo = self
                .followers
                .get(&replica_id)
                .and_then(|f| f.log_end_offset)?;
            candidate = candidate.min(leo);
        }
        if candidate > self.high_watermark {
            self.high_watermark = candidate;
            Some(LeaderAction::HighWatermarkAdvanced(candidate))
        } else {
            None
        }
    }
}
