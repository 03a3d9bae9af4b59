//! One partition's replica on this broker: its role (leader,
//! follower or none) for the current leader epoch, its leader-epoch cache
//! (checkpointed in the partition directory) and its high watermark.
//!
//! Owns: turning a `PartitionImage` from the metadata quorum into a role
//! change (`chronik_replication`'s state machines do the deciding), the
//! leader-side checks handlers call (leadership, min.insync.replicas,
//! acks=all, follower fetches) and the follower-side steps the fetcher calls
//! (epoch answers → truncation, fetched batches → append).
//! Must not: do network I/O or wait; callers act on the returned
//! `LeaderAction`s.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use chronik_log::{AppendInfo, PartitionLog};
use chronik_metadata::PartitionImage;
use chronik_protocol::record_batch::parse_batches;
use chronik_replication::{
    EpochEndOffset, FollowerAction, FollowerPhase, FollowerState, LeaderAction, LeaderEpochCache,
    Millis, PartitionRegistration, PartitionReplicaState, ReplicationConfig, CHECKPOINT_FILE_NAME,
};
use kafka_protocol::error::ResponseError;
use tracing::{debug, info, warn};

use super::epoch_file;

/// What this broker is for the partition right now.
enum Role {
    /// Not a replica, or the partition has no leader.
    None,
    Leader(PartitionReplicaState),
    Follower {
        state: FollowerState,
        /// The request the fetcher must send next for this partition.
        next: FollowerAction,
    },
}

struct Inner {
    role: Role,
    epochs: LeaderEpochCache,
    /// The last high watermark this replica knew (as leader or follower).
    high_watermark: i64,
    /// The leader's high watermark in its last fetch answer (follower).
    leader_high_watermark: i64,
    /// The last registration applied.
    applied: Option<PartitionImage>,
}

/// What a follower's fetcher should do for this partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowerStep {
    /// Ask the leader where `leader_epoch` ends.
    AskEpoch {
        current_leader_epoch: i32,
        leader_epoch: i32,
    },
    /// Fetch from `fetch_offset`.
    Fetch {
        current_leader_epoch: i32,
        fetch_offset: i64,
    },
}

/// Role changes the manager reports (metrics, fetchers, logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    Unchanged,
    BecameLeader,
    BecameFollower { leader: i32 },
    Stopped,
}

pub struct Replica {
    pub topic: String,
    pub partition: i32,
    pub log: Arc<PartitionLog>,
    inner: Mutex<Inner>,
}

impl Replica {
    pub fn open(topic: &str, log: Arc<PartitionLog>) -> Replica {
        let epochs = epoch_file::load(log.dir()).unwrap_or_else(|e| {
            warn!(topic, partition = log.partition(), error = %e, "unreadable {CHECKPOINT_FILE_NAME}; starting empty");
            LeaderEpochCache::new()
        });
        Replica {
            topic: topic.to_string(),
            partition: log.partition(),
            log,
            inner: Mutex::new(Inner {
                role: Role::None,
                epochs,
                high_watermark: 0,
                leader_high_watermark: 0,
                applied: None,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forgets the role, after the log was cut back under it (its
    /// directory reopened): a follower takes it afresh at the next `apply`
    /// (OffsetForLeaderEpoch, truncation, fetch); a leader serves nothing
    /// until the controller's new leader epoch for it arrives (followers
    /// may hold records past the cut under the old one). Leader epochs past
    /// the log end go with the log.
    pub fn forget_role(&self) {
        let mut inner = self.lock();
        if !matches!(inner.role, Role::Leader(_)) {
            inner.applied = None;
        }
        inner.role = Role::None;
        let leo = self.log.log_end_offset();
        if inner.epochs.truncate_from_end(leo) {
            self.save_epochs(&inner.epochs);
        }
        inner.high_watermark = inner.high_watermark.min(leo);
        inner.leader_high_watermark = inner.leader_high_watermark.min(leo);
    }

    /// Applies the quorum's registration for this partition.
    pub fn apply(
        &self,
        image: &PartitionImage,
        local_id: i32,
        config: ReplicationConfig,
        now: Millis,
    ) -> (Transition, Vec<LeaderAction>) {
        let mut inner = self.lock();
        if inner.applied.as_ref() == Some(image) {
            return (Transition::Unchanged, Vec::new());
        }
        // The partition epoch grows with every change: an older image is an
        // AlterPartition answer that arrived after the metadata moved on (a
        // reassignment removed this replica, a new leader was elected).
        // Applying it would bring back a role the quorum has taken away.
        if let Some(applied) = &inner.applied {
            if image.partition_epoch < applied.partition_epoch {
                debug!(
                    topic = self.topic,
                    partition = self.partition,
                    stale = image.partition_epoch,
                    applied = applied.partition_epoch,
                    "ignoring an older partition image"
                );
                return (Transition::Unchanged, Vec::new());
            }
        }
        inner.applied = Some(image.clone());
        let registration = PartitionRegistration {
            replicas: image.replicas.clone(),
            isr: image.isr.iter().copied().collect(),
            leader: (image.leader >= 0).then_some(image.leader),
            leader_epoch: image.leader_epoch,
            partition_epoch: image.partition_epoch,
        };
        let leo = self.log.log_end_offset();
        if image.leader == local_id {
            if let Role::Leader(state) = &mut inner.role {
                if state.leader_epoch() == image.leader_epoch {
                    // Same leadership: an ISR change (ours committed, or the
                    // controller's after fencing a broker).
                    if image.partition_epoch > state.isr().partition_epoch() {
                        let isr: BTreeSet<i32> = registration.isr.clone();
                        return match state.isr_committed(
                            image.leader_epoch,
                            isr,
                            image.partition_epoch,
                        ) {
                            Ok(actions) => (Transition::Unchanged, actions),
                            Err(e) => {
                                warn!(topic = self.topic, partition = self.partition, error = %e, "ISR update refused");
                                (Transition::Unchanged, Vec::new())
                            }
                        };
                    }
                    return (Transition::Unchanged, Vec::new());
                }
            }
            if let Err(e) = inner.epochs.assign(image.leader_epoch, leo) {
                warn!(topic = self.topic, partition = self.partition, error = %e, "cannot record leader epoch");
            }
            self.save_epochs(&inner.epochs);
            let hw = inner.high_watermark;
            match PartitionReplicaState::become_leader(
                config,
                &registration,
                local_id,
                leo,
                hw,
                now,
            ) {
                Ok((state, actions)) => {
                    info!(topic = self.topic, partition = self.partition, leader_epoch = image.leader_epoch,
                          log_end_offset = leo, isr = ?image.isr, "became leader");
                    inner.role = Role::Leader(state);
                    (Transition::BecameLeader, actions)
                }
                Err(e) => {
                    warn!(topic = self.topic, partition = self.partition, error = %e, "cannot take leadership");
                    inner.role = Role::None;
                    (Transition::Stopped, Vec::new())
                }
            }
        } else if image.leader >= 0 && image.replicas.contains(&local_id) {
            if let Role::Follower { state, .. } = &inner.role {
                if state.leader_epoch() == image.leader_epoch && state.leader_id() == image.leader {
                    return (Transition::Unchanged, Vec::new());
                }
            }
            let hw = inner.high_watermark;
            let (state, actions) = FollowerState::become_follower(
                local_id,
                image.leader,
                image.leader_epoch,
                &inner.epochs,
                leo,
                hw,
            );
            let next = self.perform_follower_actions(&mut inner, actions);
            inner.role = Role::Follower { state, next };
            info!(
                topic = self.topic,
                partition = self.partition,
                leader = image.leader,
                leader_epoch = image.leader_epoch,
                log_end_offset = leo,
                "became follower"
            );
            (
                Transition::BecameFollower {
                    leader: image.leader,
                },
                Vec::new(),
            )
        } else {
            let was_active = !matches!(inner.role, Role::None);
            inner.role = Role::None;
            if !image.replicas.contains(&local_id) {
                self.delete_records_of_former_replica(&mut inner);
            }
            (
                if was_active {
                    Transition::Stopped
                } else {
                    Transition::Unchanged
                },
                Vec::new(),
            )
        }
    }

    /// A broker that is no longer a replica of this partition (a
    /// reassignment moved it away, KIP-455) deletes what it held, as
    /// Kafka's StopReplica with deletion does; should it become a replica
    /// again it fetches everything afresh from the leader.
    fn delete_records_of_former_replica(&self, inner: &mut Inner) {
        if self.log.log_end_offset() == 0 && self.log.log_start_offset() == 0 {
            return;
        }
        info!(
            topic = self.topic,
            partition = self.partition,
            log_end_offset = self.log.log_end_offset(),
            "no longer a replica: deleting its log"
        );
        if let Err(e) = self.log.truncate_fully_and_start_at(0) {
            warn!(topic = self.topic, partition = self.partition, error = %e, "cannot delete the log of a former replica");
            return;
        }
        inner.epochs.truncate_from_end(0);
        self.save_epochs(&inner.epochs);
        inner.high_watermark = 0;
        inner.leader_high_watermark = 0;
    }

    /// Runs truncations and high-watermark updates in order; returns the
    /// request to send next.
    fn perform_follower_actions(
        &self,
        inner: &mut Inner,
        actions: Vec<FollowerAction>,
    ) -> FollowerAction {
        let mut next = None;
        for action in actions {
            match action {
                FollowerAction::Truncate { offset } => {
                    if offset < self.log.log_end_offset() {
                        info!(
                            topic = self.topic,
                            partition = self.partition,
                            offset,
                            log_end_offset = self.log.log_end_offset(),
                            "truncating divergent log"
                        );
                        if let Err(e) = self.log.truncate_to(offset) {
                            warn!(topic = self.topic, partition = self.partition, error = %e, "truncation failed");
                        }
                    }
                    if inner.epochs.truncate_from_end(offset) {
                        self.save_epochs(&inner.epochs);
                    }
                    inner.high_watermark = inner.high_watermark.min(offset);
                }
                FollowerAction::HighWatermarkAdvanced(hw) => inner.high_watermark = hw,
                send => next = Some(send),
            }
        }
        // The state machines always end a step with a request to send.
        next.unwrap_or(FollowerAction::SendFetch {
            leader_id: -1,
            current_leader_epoch: -1,
            fetch_offset: self.log.log_end_offset(),
        })
    }

    fn save_epochs(&self, epochs: &LeaderEpochCache) {
        if let Err(e) = epoch_file::save(self.log.dir(), epochs) {
            warn!(topic = self.topic, partition = self.partition, error = %e, "writing {CHECKPOINT_FILE_NAME} failed");
        }
    }

    // ---- leader side -------------------------------------------------

    /// Append as leader, one operation under this partition's lock:
    /// leadership, leader epoch and (for acks=all) min.insync.replicas are
    /// checked, `append` writes the records stamped with the epoch, and the
    /// leader state learns the new log end — with no leadership change in
    /// between. NOT_LEADER_OR_FOLLOWER when this broker does not lead,
    /// NOT_ENOUGH_REPLICAS when acks=all and the ISR is below
    /// min.insync.replicas.
    ///
    /// Besides the committed ISR, the leader counts the ISR members that
    /// fetched within replica.lag.time.max.ms: when the quorum cannot commit
    /// an ISR shrink (two of three nodes down), dead followers stay in the
    /// committed ISR, and acks=all must still be refused rather than hang.
    pub fn append_if_leader(
        &self,
        acks_all: bool,
        now: Millis,
        append: impl FnOnce(i32) -> Result<AppendInfo, (ResponseError, String)>,
    ) -> Result<(AppendInfo, Vec<LeaderAction>), (ResponseError, String)> {
        let mut inner = self.lock();
        let Role::Leader(state) = &mut inner.role else {
            return Err((
                ResponseError::NotLeaderOrFollower,
                "this broker does not lead the partition".into(),
            ));
        };
        if acks_all {
            check_min_isr(state, now)?;
        }
        let info = append(state.leader_epoch())?;
        let actions = state.append(info.log_end_offset).unwrap_or_default();
        remember_hw(&mut inner, &actions);
        Ok((info, actions))
    }

    /// acks=all: `Ok(true)` when every ISR member has `end_offset`.
    pub fn acks_all_satisfied(&self, end_offset: i64) -> Result<bool, (ResponseError, String)> {
        let inner = self.lock();
        match &inner.role {
            Role::Leader(state) => state
                .acks_all_satisfied(end_offset)
                .map_err(|e| (ResponseError::NotEnoughReplicasAfterAppend, e.to_string())),
            _ => Err((
                ResponseError::NotLeaderOrFollower,
                "leadership moved before the ISR had the records".into(),
            )),
        }
    }

    /// The offset consumers may read below: the replication high watermark
    /// (and the caller caps it at what is durable here).
    pub fn consumer_high_watermark(&self) -> Result<i64, ResponseError> {
        let inner = self.lock();
        match &inner.role {
            Role::Leader(state) => Ok(state.high_watermark()),
            _ => Err(ResponseError::NotLeaderOrFollower),
        }
    }

    /// The offset a consumer's fetch reads below on this replica, after
    /// checking its `current_leader_epoch` (KIP-320) against the epoch this
    /// replica knows: the leader's high watermark, or — when
    /// `followers_serve` (Fetch v11+, KIP-392) — the high watermark this
    /// follower last learned from its leader. NOT_LEADER_OR_FOLLOWER
    /// otherwise. The caller caps it at what is durable here.
    pub fn consumer_read_bound(
        &self,
        current_leader_epoch: i32,
        followers_serve: bool,
    ) -> Result<i64, ResponseError> {
        let inner = self.lock();
        match &inner.role {
            Role::Leader(state) => {
                check_current_epoch(current_leader_epoch, state.leader_epoch())?;
                Ok(state.high_watermark())
            }
            Role::Follower { state, .. } if followers_serve => {
                check_current_epoch(current_leader_epoch, state.leader_epoch())?;
                Ok(inner.high_watermark.min(self.log.log_end_offset()))
            }
            _ => Err(ResponseError::NotLeaderOrFollower),
        }
    }

    /// KIP-392's candidates when this broker leads: its own log end offset,
    /// and every in-sync follower whose log holds `fetch_offset` (its log
    /// start at or below it, its log end at or above it) with its log end
    /// offset. `None` when this broker does not lead.
    pub fn read_replica_candidates(&self, fetch_offset: i64) -> Option<(i64, Vec<(i32, i64)>)> {
        let inner = self.lock();
        let Role::Leader(state) = &inner.role else {
            return None;
        };
        let followers = state
            .isr()
            .committed()
            .iter()
            .filter(|&&id| id != state.leader_id())
            .filter_map(|&id| {
                let f = state.follower(id)?;
                let end = f.log_end_offset?;
                let start = f.log_start_offset.unwrap_or(0);
                (start <= fetch_offset && fetch_offset <= end).then_some((id, end))
            })
            .collect();
        Some((state.log_end_offset(), followers))
    }

    /// The current leader epoch when this broker leads and the asker's
    /// `current_leader_epoch` (-1 = not given) matches it (KIP-320):
    /// NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH
    /// otherwise.
    pub fn leader_epoch_matching(&self, current_leader_epoch: i32) -> Result<i32, ResponseError> {
        let epoch = self
            .leader_epoch()
            .ok_or(ResponseError::NotLeaderOrFollower)?;
        check_current_epoch(current_leader_epoch, epoch)?;
        Ok(epoch)
    }

    /// The current leader epoch when this broker leads.
    pub fn leader_epoch(&self) -> Option<i32> {
        match &self.lock().role {
            Role::Leader(state) => Some(state.leader_epoch()),
            _ => None,
        }
    }

    /// A follower's fetch at `fetch_offset`, reporting its log start offset
    /// (negative: not reported). Returns the actions to perform.
    pub fn follower_fetch(
        &self,
        replica_id: i32,
        (fetch_offset, log_start_offset): (i64, i64),
        current_leader_epoch: i32,
        now: Millis,
    ) -> Result<Vec<LeaderAction>, ResponseError> {
        let mut inner = self.lock();
        let Role::Leader(state) = &mut inner.role else {
            return Err(ResponseError::NotLeaderOrFollower);
        };
        check_current_epoch(current_leader_epoch, state.leader_epoch())?;
        let mut actions = state
            .follower_fetch(replica_id, fetch_offset.min(state.log_end_offset()), now)
            .map_err(|e| {
                warn!(topic = self.topic, partition = self.partition, replica_id, error = %e, "follower fetch refused");
                ResponseError::NotLeaderOrFollower
            })?;
        actions.extend(state.follower_log_start_offset(replica_id, log_start_offset));
        remember_hw(&mut inner, &actions);
        Ok(actions)
    }

    /// The high watermark a follower's fetch in `current_leader_epoch` is
    /// told (a read: the fetch's position was recorded on arrival).
    /// NOT_LEADER_OR_FOLLOWER off the leader, or the epoch's error.
    pub fn high_watermark_for_follower(
        &self,
        current_leader_epoch: i32,
    ) -> Result<i64, ResponseError> {
        let inner = self.lock();
        let Role::Leader(state) = &inner.role else {
            return Err(ResponseError::NotLeaderOrFollower);
        };
        check_current_epoch(current_leader_epoch, state.leader_epoch())?;
        Ok(state.high_watermark())
    }

    /// Kafka's low watermark (`PartitionReplicaState::low_watermark`) with
    /// this leader's log start offset; `is_live` says which brokers are
    /// registered and unfenced. NOT_LEADER_OR_FOLLOWER off the leader.
    pub fn low_watermark(&self, is_live: impl Fn(i32) -> bool) -> Result<i64, ResponseError> {
        match &self.lock().role {
            Role::Leader(state) => Ok(state.low_watermark(self.log.log_start_offset(), is_live)),
            _ => Err(ResponseError::NotLeaderOrFollower),
        }
    }

    /// Periodic ISR shrink check.
    pub fn tick(&self, now: Millis) -> Vec<LeaderAction> {
        let mut inner = self.lock();
        match &mut inner.role {
            Role::Leader(state) => state.tick(now),
            _ => Vec::new(),
        }
    }

    /// The controller refused or lost an ISR proposal.
    pub fn isr_change_failed(&self) {
        if let Role::Leader(state) = &mut self.lock().role {
            state.isr_change_failed();
        }
    }

    /// OffsetForLeaderEpoch, answered by the leader (or, for a consumer,
    /// by any replica holding the log).
    pub fn end_offset_for(&self, epoch: i32) -> Option<EpochEndOffset> {
        let inner = self.lock();
        inner
            .epochs
            .end_offset_for(epoch, self.log.log_end_offset())
    }

    /// (ISR size, replicas assigned) when this broker leads.
    pub fn leader_isr(&self) -> Option<(usize, usize)> {
        match &self.lock().role {
            Role::Leader(state) => Some((state.isr().committed().len(), state.replicas().len())),
            _ => None,
        }
    }

    // ---- follower side -----------------------------------------------

    /// The leader this replica follows and what to send it next.
    pub fn follower_step(&self) -> Option<(i32, FollowerStep)> {
        let inner = self.lock();
        let Role::Follower { state, next } = &inner.role else {
            return None;
        };
        let step = match *next {
            FollowerAction::SendOffsetForLeaderEpoch {
                current_leader_epoch,
                leader_epoch,
                ..
            } => FollowerStep::AskEpoch {
                current_leader_epoch,
                leader_epoch,
            },
            _ => FollowerStep::Fetch {
                current_leader_epoch: state.leader_epoch(),
                fetch_offset: self.log.log_end_offset(),
            },
        };
        Some((state.leader_id(), step))
    }

    /// The leader answered OffsetForLeaderEpoch for `asked_in_epoch`'s
    /// leadership (ignored if leadership moved on meanwhile).
    pub fn on_epoch_answer(&self, asked_in_epoch: i32, answer: Option<EpochEndOffset>) {
        let mut inner = self.lock();
        let epochs = inner.epochs.clone();
        let Role::Follower { state, .. } = &mut inner.role else {
            return;
        };
        if state.leader_epoch() != asked_in_epoch || state.phase() != FollowerPhase::Truncating {
            return;
        }
        let actions = match state.on_epoch_end_offset(&epochs, answer) {
            Ok(actions) => actions,
            Err(e) => {
                warn!(topic = self.topic, partition = self.partition, error = %e, "epoch answer refused");
                return;
            }
        };
        let next = self.perform_follower_actions(&mut inner, actions);
        if let Role::Follower { next: slot, .. } = &mut inner.role {
            *slot = next;
        }
    }

    /// Appends what the leader returned for a fetch made in `fetched_in_epoch`
    /// at `fetch_offset`, then records the leader's high watermark. Returns
    /// the number of records appended.
    pub fn on_fetched(
        &self,
        fetched_in_epoch: i32,
        fetch_offset: i64,
        records: &Bytes,
        leader_high_watermark: i64,
    ) -> Result<u64, String> {
        let mut inner = self.lock();
        match &inner.role {
            Role::Follower { state, .. }
                if state.leader_epoch() == fetched_in_epoch
                    && state.phase() == FollowerPhase::Fetching => {}
            _ => return Ok(0),
        }
        if self.log.log_end_offset() != fetch_offset {
            return Ok(0);
        }
        let mut appended = 0u64;
        if !records.is_empty() {
            let batches =
                parse_batches(records).map_err(|e| format!("leader sent bad batches: {e}"))?;
            // Only whole batches from the fetch offset on (a batch may start
            // before it when the leader answered from a compressed batch).
            let mut skipped = batches
                .iter()
                .take_while(|b| b.base_offset < fetch_offset)
                .count();
            // An empty log started at the leader's log start, which falls
            // inside a batch: it takes that batch whole, from its base
            // (Kafka's answer to UnexpectedAppendOffsetException); the log
            // start then follows the leader's again (`follow_log_start`).
            let log_is_empty = self.log.log_start_offset() == fetch_offset;
            if skipped > 0
                && log_is_empty
                && batches[0].base_offset + i64::from(batches[0].last_offset_delta) >= fetch_offset
            {
                let base = batches[0].base_offset;
                self.log
                    .truncate_fully_and_start_at(base)
                    .map_err(|e| format!("restarting the empty log at {base}: {e}"))?;
                skipped = 0;
            }
            if let Some(start) = batches.get(skipped).map(|b| b.position) {
                let mut slice = records[start..].to_vec();
                let reparsed = if start == 0 {
                    batches
                } else {
                    parse_batches(&slice).map_err(|e| format!("re-parsing batches: {e}"))?
                };
                let mut epochs_changed = false;
                for b in &reparsed {
                    if b.partition_leader_epoch >= 0 {
                        epochs_changed |= inner
                            .epochs
                            .assign(b.partition_leader_epoch, b.base_offset)
                            .unwrap_or(false);
                    }
                    appended += u64::try_from(b.records_count).unwrap_or(0);
                }
                self.log
                    .append_as_follower(&mut slice, &reparsed)
                    .map_err(|e| e.to_string())?;
                if epochs_changed {
                    self.save_epochs(&inner.epochs);
                }
            }
        }
        let leo = self.log.log_end_offset();
        Self::follower_log_ended_at(&mut inner, leo, leader_high_watermark);
        Ok(appended)
    }

    /// Tells the follower state machine where the local log now ends and
    /// what high watermark the leader reported; takes up the local high
    /// watermark it derives.
    fn follower_log_ended_at(inner: &mut Inner, log_end_offset: i64, leader_high_watermark: i64) {
        inner.leader_high_watermark = leader_high_watermark;
        let Role::Follower { state, .. } = &mut inner.role else {
            return;
        };
        if let Ok(actions) = state.on_fetch_response(log_end_offset, leader_high_watermark) {
            for a in actions {
                if let FollowerAction::HighWatermarkAdvanced(hw) = a {
                    inner.high_watermark = hw;
                }
            }
        }
    }

    /// The leader answered OFFSET_OUT_OF_RANGE for `fetch_offset`, below its
    /// log start offset (retention or DeleteRecords removed what this
    /// follower would fetch next, e.g. for a replica a reassignment just
    /// added): the follower starts an empty log at the leader's log start
    /// and fetches from there, as Kafka's truncateFullyAndStartAt. Returns
    /// whether it did (not when the role, epoch or log end moved on).
    pub fn on_fetch_below_log_start(
        &self,
        fetched_in_epoch: i32,
        fetch_offset: i64,
        leader_log_start: i64,
        leader_high_watermark: i64,
    ) -> Result<bool, String> {
        let mut inner = self.lock();
        match &inner.role {
            Role::Follower { state, .. }
                if state.leader_epoch() == fetched_in_epoch
                    && state.phase() == FollowerPhase::Fetching => {}
            _ => return Ok(false),
        }
        if self.log.log_end_offset() != fetch_offset || leader_log_start <= fetch_offset {
            return Ok(false);
        }
        info!(
            topic = self.topic,
            partition = self.partition,
            fetch_offset,
            leader_log_start,
            "behind the leader's log start: starting the log afresh there"
        );
        self.log
            .truncate_fully_and_start_at(leader_log_start)
            .map_err(|e| e.to_string())?;
        inner.epochs.truncate_from_end(0);
        self.save_epochs(&inner.epochs);
        Self::follower_log_ended_at(&mut inner, leader_log_start, leader_high_watermark);
        Ok(true)
    }

    /// Replica lag in messages as a follower knows it (leader HW - own end).
    pub fn follower_lag(&self) -> Option<i64> {
        let inner = self.lock();
        match &inner.role {
            Role::Follower { .. } => {
                Some((inner.leader_high_watermark - self.log.log_end_offset()).max(0))
            }
            _ => None,
        }
    }
}

/// An asker's current leader epoch against this leader's: older is fenced,
/// newer is unknown (this broker has not seen that leadership yet).
/// acks=all needs min.insync.replicas in the ISR, counting only members
/// that fetched within replica.lag.time.max.ms (see `append_if_leader`).
fn check_min_isr(
    state: &PartitionReplicaState,
    now: Millis,
) -> Result<(), (ResponseError, String)> {
    state
        .check_min_isr()
        .map_err(|e| (ResponseError::NotEnoughReplicas, e.to_string()))?;
    let lag = state.config().replica_lag_time_max_ms;
    let live = state
        .isr()
        .committed()
        .iter()
        .filter(|&&r| {
            r == state.leader_id()
                || state.follower(r).is_some_and(|f| {
                    now.saturating_sub(f.last_fetch_time_ms.max(f.last_caught_up_time_ms)) <= lag
                })
        })
        .count();
    let min = state.config().min_insync_replicas;
    if live < min {
        return Err((
            ResponseError::NotEnoughReplicas,
            format!("only {live} in-sync replicas are fetching; min.insync.replicas is {min}"),
        ));
    }
    Ok(())
}

fn check_current_epoch(current_leader_epoch: i32, leader_epoch: i32) -> Result<(), ResponseError> {
    match current_leader_epoch {
        c if c < 0 || c == leader_epoch => Ok(()),
        c if c < leader_epoch => Err(ResponseError::FencedLeaderEpoch),
        _ => Err(ResponseError::UnknownLeaderEpoch),
    }
}

fn remember_hw(inner: &mut Inner, actions: &[LeaderAction]) {
    for a in actions {
        if let LeaderAction::HighWatermarkAdvanced(hw) = a {
            inner.high_watermark = *hw;
        }
    }
}

/// The checkpoint path of a partition directory (for tests and tools).
pub fn checkpoint_path(dir: &Path) -> std::path::PathBuf {
    dir.join(CHECKPOINT_FILE_NAME)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chronik_log::{LogManager, LogManagerConfig};

    const CONFIG: ReplicationConfig = ReplicationConfig {
        min_insync_replicas: 1,
        replica_lag_time_max_ms: 30_000,
    };

    fn image(
        replicas: &[i32],
        leader: i32,
        leader_epoch: i32,
        partition_epoch: i32,
    ) -> PartitionImage {
        PartitionImage {
            partition: 0,
            replicas: replicas.to_vec(),
            isr: replicas.to_vec(),
            leader,
            leader_epoch,
            partition_epoch,
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
            elr: Vec::new(),
            last_known_elr: Vec::new(),
        }
    }

    /// A reassignment moves partition 0 off broker 2; the answer to an ISR
    /// change broker 2 proposed while it still led arrives afterwards. It
    /// must not make broker 2 a leader again (it would accept writes into
    /// a log it just deleted and park them until the client times out).
    #[test]
    fn an_older_image_never_brings_a_removed_leader_back() {
        let dir = tempfile::tempdir().expect("temp dir");
        let on_flush: chronik_log::OnFlush = Arc::new(|_| {});
        let log = LogManager::open(LogManagerConfig::new(dir.path()), on_flush).expect("log");
        let topic = log.create_topic("t", 1, Default::default()).expect("topic");
        let replica = Replica::open("t", topic.partition(0).expect("partition 0").clone());

        let (t, _) = replica.apply(&image(&[2, 3, 1], 2, 1, 1), 2, CONFIG, 0);
        assert_eq!(t, Transition::BecameLeader);
        // the move to {3, 4, 5} is done: broker 2 is no replica any more
        let (t, _) = replica.apply(&image(&[3, 4, 5], 3, 2, 6), 2, CONFIG, 10);
        assert_eq!(t, Transition::Stopped);
        assert_eq!(replica.leader_isr(), None);
        // the late answer to broker 2's own ISR expansion (partition epoch 2)
        let (t, actions) = replica.apply(&image(&[2, 3, 1, 4], 2, 1, 2), 2, CONFIG, 20);
        assert_eq!(t, Transition::Unchanged);
        assert!(actions.is_empty());
        assert_eq!(
            replica.leader_isr(),
            None,
            "a stale image made broker 2 leader again"
        );
        // a newer image still applies
        let (t, _) = replica.apply(&image(&[3, 4, 2], 2, 3, 7), 2, CONFIG, 30);
        assert_eq!(t, Transition::BecameLeader);
    }
}
