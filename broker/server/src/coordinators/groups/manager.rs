//! The driver around `chronik_coordinator_state::Group` (classic groups) and
//! `chronik_coordinator_state::ConsumerGroup` (KIP-848 groups): keeps every group,
//! turns delayed replies into answered requests, and feeds the clock.
//!
//! Owns: the group tables (a group id is in at most one of them: an empty
//! group of one kind is dropped when the other protocol claims its id; a
//! group with members migrates online as `group.consumer.migration.policy`
//! allows — a joining ConsumerGroupHeartbeat upgrades a classic group,
//! classic requests for a KIP-848 group are answered by it, and a KIP-848
//! group left with classic members only is downgraded — see
//! `chronik_coordinator_state::migration`), ticket → waiting-request routing
//! (oneshot channels), member id generation, and the 100 ms tick task that
//! expires silent members and times out rebalances. Must not: decode wire
//! messages other than the embedded consumer protocol (`consumer_protocol`)
//! or store offsets (conversions keep the group id, so committed offsets
//! carry over untouched). Locking: one std `Mutex` held only for
//! state-machine calls, never across an await. KIP-848 groups are also
//! written to `__consumer_offsets` (`consumer_group_writes`): a
//! ConsumerGroupHeartbeat that changed its group is answered once the
//! change is stored, other changes (classic requests, the clock, deletion)
//! are written by the tick, and a new coordinator rebuilds every KIP-848
//! group from the log (`load_groups`), members keeping their epochs.
//! Classic groups are written too (Kafka's GroupMetadataValue,
//! `classic_group_records`), when Kafka writes them: the leader's SyncGroup
//! that completes a generation is answered (with every member's SyncGroup)
//! only once the group is stored, and a group that became Empty or was
//! deleted is written (a tombstone) by the tick; a rebalance in progress
//! leaves the last stored generation standing. A new coordinator rebuilds
//! them with the KIP-848 groups, members keeping their generation (their
//! sessions restart at the load). Classic requests, like
//! ConsumerGroupHeartbeat, are answered only by the loaded coordinator
//! (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use chronik_coordinator_state::{
    CommitCheck, ConsumerGroup, ConsumerGroupConfig, ConsumerGroupState, ConsumerMember,
    DecodedClassicMember, Group, GroupConfig, GroupError, GroupState, HeartbeatReply,
    HeartbeatRequest, JoinReply, JoinRequest, Member, MigrationPolicy, Millis, Reply, SyncReply,
    SyncRequest, Ticket, TopicMetadata, CONSUMER_PROTOCOL_TYPE,
};
use kafka_protocol::error::ResponseError;
use tokio::sync::oneshot;

use super::classic_group_records::{self, classic_groups_of};
use super::consumer_group_records::{groups_of, records_of, GroupRecords};
use super::consumer_group_writes::{Desired, GroupWrites, PendingWrite, Scope};
use super::consumer_protocol::{decode_assignment, decode_subscription, encode_assignment};
use super::offset_store::OffsetStore;

const TICK: Duration = Duration::from_millis(100);

/// A read-only copy of a group for DescribeGroups / ListGroups.
#[derive(Debug, Clone)]
pub struct GroupSnapshot {
    pub group_id: String,
    pub state: GroupState,
    pub protocol_type: String,
    pub protocol_name: String,
    pub members: Vec<Member>,
}

/// A read-only copy of a KIP-848 group for ConsumerGroupDescribe.
#[derive(Debug, Clone)]
pub struct ConsumerGroupSnapshot {
    pub group_id: String,
    pub state: ConsumerGroupState,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor: &'static str,
    /// Each member with its target assignment.
    pub members: Vec<(ConsumerMember, chronik_coordinator_state::Assignment)>,
}

/// One line of ListGroups: (group id, protocol type, state, group type).
pub type ListedGroup = (String, String, &'static str, &'static str);

#[derive(Debug)]
pub struct GroupManager {
    config: GroupConfig,
    consumer_config: ConsumerGroupConfig,
    epoch: Instant,
    inner: Mutex<Inner>,
    /// The topics KIP-848 members may subscribe to, built once per
    /// metadata image version.
    topics: Mutex<Option<Arc<TopicMetadata>>>,
    /// Where KIP-848 groups are written.
    offsets: Arc<OffsetStore>,
}

#[derive(Debug, Default)]
struct Inner {
    groups: HashMap<String, Group>,
    consumer_groups: HashMap<String, ConsumerGroup>,
    waiting: HashMap<Ticket, oneshot::Sender<Reply>>,
    next_ticket: Ticket,
    writes: GroupWrites,
}

impl GroupManager {
    pub fn new(
        config: GroupConfig,
        consumer_config: ConsumerGroupConfig,
        offsets: Arc<OffsetStore>,
    ) -> Arc<GroupManager> {
        Arc::new(GroupManager {
            config,
            consumer_config,
            epoch: Instant::now(),
            inner: Mutex::new(Inner::default()),
            topics: Mutex::new(None),
            offsets,
        })
    }

    /// Rebuilds every group — classic and KIP-848 — from `records` (the log
    /// this broker just replayed as the new coordinator): members keep their
    /// generations, epochs and assignments, their sessions start now.
    /// Requests still waiting on the groups this replaces are answered
    /// COORDINATOR_NOT_AVAILABLE (their reply channels are dropped).
    pub fn load_groups(&self, records: &BTreeMap<String, GroupRecords>) {
        let now = self.now();
        let stored = groups_of(records);
        let classic = classic_groups_of(records);
        let mut inner = self.lock();
        inner.waiting.clear();
        inner.groups = classic
            .iter()
            .map(|(id, group)| (id.clone(), Group::restore(id, group, self.config, now)))
            .collect();
        inner.consumer_groups = stored
            .iter()
            .map(|(id, group)| {
                let restored = ConsumerGroup::restore(id, group, self.consumer_config, now);
                (id.clone(), restored)
            })
            .collect();
        for id in stored.keys() {
            inner.groups.remove(id);
        }
        inner.writes.load(records);
        tracing::info!(
            consumer_groups = stored.len(),
            classic_groups = inner.groups.len(),
            "loaded the groups"
        );
    }

    /// Whether this broker is the loaded coordinator (as for OffsetFetch).
    fn coordinating(&self) -> Result<(), GroupError> {
        self.offsets.readable().map_err(|e| match e {
            ResponseError::CoordinatorLoadInProgress => GroupError::CoordinatorLoadInProgress,
            ResponseError::CoordinatorNotAvailable => GroupError::CoordinatorNotAvailable,
            _ => GroupError::NotCoordinator,
        })
    }

    /// Appends `write` in its turn; the change it records stands once this
    /// returns Ok (else the error the coordinator answers, and the group is
    /// written whole again by the tick).
    pub async fn store(&self, write: Option<PendingWrite>) -> Result<(), ResponseError> {
        let Some(mut write) = write else {
            return Ok(());
        };
        write.turn.wait().await;
        let stored = self.offsets.write_group_records(&write.changes).await;
        write.turn.appended();
        if let Err(error) = &stored {
            tracing::warn!(group_id = %write.group_id, ?error, "storing a group failed");
            self.lock().writes.failed(&write);
        }
        stored
    }

    /// Runs the clock until the runtime stops.
    pub fn spawn_ticker(self: &Arc<Self>) {
        let manager = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(TICK);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                interval.tick().await;
                let Some(manager) = manager.upgrade() else {
                    return;
                };
                for write in manager.tick() {
                    // In their turns, apart from the clock: a slow append
                    // must not hold up rebalance timeouts.
                    let manager = manager.clone();
                    tokio::spawn(async move { manager.store(Some(write)).await });
                }
            }
        });
    }

    fn now(&self) -> Millis {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave a group half-updated in
        // a way later calls can't handle; keep serving.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Advances every group's clock; returns the writes of the KIP-848
    /// groups that changed since their last write (only while this broker
    /// is their coordinator).
    fn tick(&self) -> Vec<PendingWrite> {
        let now = self.now();
        let mut inner = self.lock();
        let mut replies = Vec::new();
        let mut changed = Vec::new();
        for group in inner.groups.values_mut() {
            if group.needs_ticks() || group.state() == GroupState::PreparingRebalance {
                let before = (group.state(), group.generation_id());
                replies.extend(group.tick(now));
                if (group.state(), group.generation_id()) != before {
                    changed.push(group.group_id().to_string());
                }
            }
        }
        let mut downgrades = Vec::new();
        for group in inner.consumer_groups.values_mut() {
            if group.has_members() {
                let epoch = group.group_epoch();
                group.tick(now);
                if group.group_epoch() != epoch {
                    changed.push(group.group_id().to_string());
                }
                if group.should_downgrade() {
                    downgrades.push(group.group_id().to_string());
                }
            }
        }
        for group_id in changed {
            inner.writes.mark_dirty(&group_id);
        }
        for group_id in downgrades {
            self.downgrade(&mut inner, &group_id, now);
        }
        deliver(&mut inner, replies);
        if self.offsets.readable().is_err() {
            return Vec::new();
        }
        let inner = &mut *inner;
        let dirty = inner.writes.take_dirty();
        dirty
            .iter()
            .filter_map(|id| {
                let desired = desired(inner, id);
                inner.writes.take_whole(id, desired)
            })
            .collect()
    }

    /// Replaces the KIP-848 group `group_id` by the classic group it
    /// becomes (its classic members, rebalancing).
    fn downgrade(&self, inner: &mut Inner, group_id: &str, now: Millis) {
        if let Some(group) = inner.consumer_groups.remove(group_id) {
            inner.writes.mark_dirty(group_id);
            tracing::info!(group_id, "downgraded the consumer group to a classic group");
            let classic = group.into_classic(self.config, now);
            inner.groups.insert(group_id.to_string(), classic);
        }
    }

    /// The migration policy in force.
    pub fn migration_policy(&self) -> MigrationPolicy {
        self.consumer_config.migration_policy
    }

    /// JoinGroup. `metadata`: the cluster's topics, for a classic member
    /// of a KIP-848 group.
    pub async fn join(
        &self,
        group_id: &str,
        request: JoinRequest,
        metadata: &TopicMetadata,
    ) -> JoinReply {
        let member_id = request.member_id.clone();
        if let Err(error) = self.coordinating() {
            return JoinReply::error(error, &member_id);
        }
        let fresh_member_id = format!("{}-{}", request.client_id, uuid::Uuid::new_v4());
        let rx = {
            let now = self.now();
            let mut inner = self.lock();
            if let Some(group) = inner.consumer_groups.get_mut(group_id) {
                if group.has_members() {
                    // Only `disabled` keeps classic members out (KAFKA-20640).
                    if self.migration_policy() == MigrationPolicy::Disabled {
                        return JoinReply::error(GroupError::InconsistentGroupProtocol, &member_id);
                    }
                    let subscription = request
                        .protocols
                        .first()
                        .and_then(|(_, m)| decode_subscription(m.clone()));
                    let config = self.config;
                    inner.writes.mark_dirty(group_id);
                    let group = inner
                        .consumer_groups
                        .get_mut(group_id)
                        .expect("looked up above");
                    return group.classic_join(
                        request,
                        subscription,
                        fresh_member_id,
                        &config,
                        metadata,
                        now,
                    );
                }
                inner.consumer_groups.remove(group_id);
                inner.writes.mark_dirty(group_id);
            }
            let (ticket, rx) = register(&mut inner);
            let config = self.config;
            let group = inner
                .groups
                .entry(group_id.to_string())
                .or_insert_with(|| Group::new(group_id, config));
            if group.state() == GroupState::Dead {
                *group = Group::new(group_id, config);
            }
            let replies = group.join(ticket, request, fresh_member_id, now);
            inner.writes.mark_dirty(group_id);
            deliver(&mut inner, replies);
            rx
        };
        match rx.await {
            Ok(Reply::Join(_, reply)) => reply,
            _ => JoinReply::error(GroupError::CoordinatorNotAvailable, &member_id),
        }
    }

    /// SyncGroup. `metadata`: the cluster's topics, to name a classic
    /// member's partitions in a KIP-848 group.
    pub async fn sync(
        &self,
        group_id: &str,
        request: SyncRequest,
        metadata: &TopicMetadata,
    ) -> SyncReply {
        if let Err(error) = self.coordinating() {
            return sync_error(error);
        }
        let (rx, completed) = {
            let now = self.now();
            let mut inner = self.lock();
            if let Some(group) = inner.consumer_groups.get_mut(group_id) {
                let result = group.classic_sync(&request, now);
                inner.writes.mark_dirty(group_id);
                return match result {
                    Ok(sync) => SyncReply {
                        error: None,
                        protocol_type: Some(CONSUMER_PROTOCOL_TYPE.to_string()),
                        protocol_name: Some(sync.protocol_name),
                        assignment: encode_assignment(&sync.assignment, metadata),
                    },
                    Err(error) => sync_error(error),
                };
            }
            let (ticket, rx) = register(&mut inner);
            let Some(group) = inner.groups.get_mut(group_id) else {
                inner.waiting.remove(&ticket);
                return sync_error(GroupError::UnknownMemberId);
            };
            let before = group.state();
            let replies = group.sync(ticket, request, now);
            if before == GroupState::CompletingRebalance && group.state() == GroupState::Stable {
                // The leader's assignments completed the generation: every
                // member is answered once it is stored, as Kafka does.
                let desired = desired(&inner, group_id);
                let write = inner.writes.take_whole(group_id, desired);
                (rx, Some((write, replies)))
            } else {
                deliver(&mut inner, replies);
                (rx, None)
            }
        };
        if let Some((write, replies)) = completed {
            let stored = self.store(write).await;
            let replies = match stored {
                Ok(()) => replies,
                Err(error) => {
                    let error = match error {
                        ResponseError::NotCoordinator => GroupError::NotCoordinator,
                        _ => GroupError::CoordinatorNotAvailable,
                    };
                    replies
                        .into_iter()
                        .map(|reply| match reply {
                            Reply::Sync(ticket, _) => Reply::Sync(ticket, sync_error(error)),
                            other => other,
                        })
                        .collect()
                }
            };
            deliver(&mut self.lock(), replies);
        }
        match rx.await {
            Ok(Reply::Sync(_, reply)) => reply,
            _ => sync_error(GroupError::CoordinatorNotAvailable),
        }
    }

    pub fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        generation_id: i32,
    ) -> Result<(), GroupError> {
        self.coordinating()?;
        let now = self.now();
        let mut inner = self.lock();
        if let Some(group) = inner.consumer_groups.get_mut(group_id) {
            let result = group.classic_heartbeat(member_id, generation_id, now);
            inner.writes.mark_dirty(group_id);
            return result;
        }
        match inner.groups.get_mut(group_id) {
            Some(group) => group.heartbeat(member_id, generation_id, now),
            None => Err(GroupError::UnknownMemberId),
        }
    }

    pub fn leave(&self, group_id: &str, member_id: &str) -> Result<(), GroupError> {
        self.coordinating()?;
        let now = self.now();
        let mut inner = self.lock();
        if let Some(group) = inner.consumer_groups.get_mut(group_id) {
            let result = group.classic_leave(member_id);
            inner.writes.mark_dirty(group_id);
            return result;
        }
        let Some(group) = inner.groups.get_mut(group_id) else {
            return Err(GroupError::UnknownMemberId);
        };
        let (result, replies) = group.leave(member_id, now);
        inner.writes.mark_dirty(group_id);
        deliver(&mut inner, replies);
        result
    }

    /// ConsumerGroupHeartbeat. `metadata`: the cluster's topics a member
    /// may subscribe to. A joining member upgrades a classic group with
    /// members when the policy and the group allow it, else it is
    /// GROUP_ID_NOT_FOUND (as is any other heartbeat for a classic group);
    /// an empty classic group is replaced. A group left with classic
    /// members only is downgraded.
    pub fn consumer_heartbeat(
        &self,
        group_id: &str,
        request: HeartbeatRequest,
        metadata: &TopicMetadata,
    ) -> (Result<HeartbeatReply, GroupError>, Option<PendingWrite>) {
        let fresh_member_id = if request.member_id.is_empty() {
            uuid::Uuid::new_v4().to_string()
        } else {
            String::new()
        };
        let now = self.now();
        let mut inner = self.lock();
        let joining = request.member_epoch == 0;
        let before = inner
            .consumer_groups
            .get(group_id)
            .map(|g| (g.group_epoch(), g.assignment_epoch()));
        let result = self.consumer_heartbeat_locked(
            &mut inner,
            group_id,
            request,
            fresh_member_id,
            metadata,
            now,
        );
        // A heartbeat that moved neither an epoch nor the membership
        // changed only its own member's records.
        let inner = &mut *inner;
        let group = inner.consumer_groups.get(group_id);
        let after = group.map(|g| (g.group_epoch(), g.assignment_epoch()));
        let write = match &result {
            Err(_) if before == after => None,
            Ok(reply) if !joining && before == after => {
                inner
                    .writes
                    .take(group_id, group, Scope::Member(&reply.member_id))
            }
            _ => inner.writes.take(group_id, group, Scope::Whole),
        };
        (result, write)
    }

    fn consumer_heartbeat_locked(
        &self,
        inner: &mut Inner,
        group_id: &str,
        request: HeartbeatRequest,
        fresh_member_id: String,
        metadata: &TopicMetadata,
        now: Millis,
    ) -> Result<HeartbeatReply, GroupError> {
        let config = self.consumer_config;
        let joining = request.member_epoch == 0;
        if let Some(classic) = inner.groups.get(group_id) {
            if classic.has_members() {
                if !joining {
                    return Err(GroupError::GroupIdNotFound);
                }
                let mut upgraded = ConsumerGroup::from_classic(
                    classic,
                    &decode_members(classic),
                    config,
                    metadata,
                    now,
                )?;
                // The conversion stands only if the joining member is admitted.
                let reply = upgraded.heartbeat(request, fresh_member_id, metadata, now)?;
                tracing::info!(group_id, "upgraded the classic group to a consumer group");
                inner.groups.remove(group_id);
                inner.consumer_groups.insert(group_id.to_string(), upgraded);
                return Ok(reply);
            }
            inner.groups.remove(group_id);
        }
        let group = match inner.consumer_groups.get_mut(group_id) {
            Some(group) => group,
            // Only a joining member creates the group.
            None if !joining => return Err(GroupError::UnknownMemberId),
            None => inner
                .consumer_groups
                .entry(group_id.to_string())
                .or_insert_with(|| ConsumerGroup::new(group_id, config)),
        };
        let result = group.heartbeat(request, fresh_member_id, metadata, now);
        if !group.has_members() && result.is_err() {
            inner.consumer_groups.remove(group_id);
        } else if group.should_downgrade() {
            self.downgrade(inner, group_id, now);
        }
        result
    }

    /// The subscribable topics at metadata `version`: the cached copy, or
    /// `build`'s when the version moved on.
    pub fn topic_metadata(
        &self,
        version: u64,
        build: impl FnOnce() -> TopicMetadata,
    ) -> Arc<TopicMetadata> {
        let mut cached = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        match cached.as_ref() {
            Some(topics) if topics.version == version => topics.clone(),
            _ => {
                let topics = Arc::new(build());
                *cached = Some(topics.clone());
                topics
            }
        }
    }

    pub fn consumer_describe(&self, group_id: &str) -> Option<ConsumerGroupSnapshot> {
        let inner = self.lock();
        inner
            .consumer_groups
            .get(group_id)
            .map(|g| ConsumerGroupSnapshot {
                group_id: g.group_id().to_string(),
                state: g.state(),
                group_epoch: g.group_epoch(),
                assignment_epoch: g.assignment_epoch(),
                assignor: g.assignor().name(),
                members: g
                    .members()
                    .map(|m| (m.clone(), g.target_of(&m.member_id)))
                    .collect(),
            })
    }

    /// Whether a live group (of either kind) has this id.
    pub fn exists(&self, group_id: &str) -> bool {
        let inner = self.lock();
        inner.groups.contains_key(group_id) || inner.consumer_groups.contains_key(group_id)
    }

    /// OffsetFetch v9's member check for a KIP-848 group (others: Ok).
    pub fn check_fetch(
        &self,
        group_id: &str,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), GroupError> {
        let inner = self.lock();
        match inner.consumer_groups.get(group_id) {
            Some(group) => group.check_fetch(member_id, member_epoch),
            None => Ok(()),
        }
    }

    /// Whether an OffsetCommit from (member, generation or member epoch)
    /// may be stored, by the rules of the group's protocol.
    pub fn check_commit(&self, group_id: &str, member_id: &str, generation_id: i32) -> CommitCheck {
        if let Err(error) = self.coordinating() {
            return CommitCheck::Rejected(error);
        }
        let inner = self.lock();
        if let Some(group) = inner.consumer_groups.get(group_id) {
            return match group.check_commit(member_id, generation_id) {
                Ok(()) => CommitCheck::Ok,
                Err(e) => CommitCheck::Rejected(e),
            };
        }
        match inner.groups.get(group_id) {
            Some(group) => group.check_commit(member_id, generation_id),
            None if generation_id < 0 => CommitCheck::Ok,
            None => CommitCheck::Rejected(GroupError::IllegalGeneration),
        }
    }

    /// DeleteGroups: only groups without members may be deleted.
    pub fn delete(&self, group_id: &str) -> Result<(), GroupError> {
        let mut inner = self.lock();
        if let Some(group) = inner.consumer_groups.get(group_id) {
            if group.has_members() {
                return Err(GroupError::NonEmptyGroup);
            }
            inner.consumer_groups.remove(group_id);
            inner.writes.mark_dirty(group_id);
            return Ok(());
        }
        match inner.groups.get_mut(group_id) {
            Some(group) => {
                group.delete()?;
                inner.groups.remove(group_id);
                inner.writes.mark_dirty(group_id);
                Ok(())
            }
            None => Ok(()),
        }
    }

    pub fn describe(&self, group_id: &str) -> Option<GroupSnapshot> {
        let inner = self.lock();
        inner.groups.get(group_id).map(snapshot)
    }

    /// Every live group for ListGroups, classic and KIP-848, by id.
    pub fn list(&self) -> Vec<ListedGroup> {
        let inner = self.lock();
        let classic = inner.groups.values().map(|g| {
            (
                g.group_id().to_string(),
                g.protocol_type().unwrap_or_default().to_string(),
                g.state().kafka_name(),
                "classic",
            )
        });
        let consumer = inner.consumer_groups.values().map(|g| {
            (
                g.group_id().to_string(),
                "consumer".to_string(),
                g.state().kafka_name(),
                "consumer",
            )
        });
        let mut groups: Vec<ListedGroup> = classic.chain(consumer).collect();
        groups.sort_by(|a, b| a.0.cmp(&b.0));
        groups
    }
}

/// What the log should hold for `group_id`: the KIP-848 group's records,
/// the classic group's record (its last stored generation while it
/// rebalances), or nothing (a tombstone for each record left).
fn desired(inner: &Inner, group_id: &str) -> Desired {
    if let Some(group) = inner.consumer_groups.get(group_id) {
        return Desired::Records(records_of(group_id, &group.stored()));
    }
    match inner.groups.get(group_id) {
        Some(group) if group.state() != GroupState::Dead => match group.stored() {
            Some(stored) => Desired::Records(classic_group_records::records_of(group_id, &stored)),
            None => Desired::KeepClassic,
        },
        _ => Desired::Records(GroupRecords::new()),
    }
}

/// What a classic group's members' embedded protocol decodes to, for an
/// upgrade: the subscription of the group's protocol and the assignment.
fn decode_members(group: &Group) -> BTreeMap<String, Option<DecodedClassicMember>> {
    let protocol = group.protocol_name().unwrap_or_default();
    group
        .members()
        .map(|m| {
            let decoded = decode_subscription(m.metadata_for(protocol)).and_then(|subscription| {
                Some(DecodedClassicMember {
                    subscription,
                    assignment: decode_assignment(m.assignment.clone())?,
                })
            });
            (m.member_id.clone(), decoded)
        })
        .collect()
}

fn snapshot(group: &Group) -> GroupSnapshot {
    GroupSnapshot {
        group_id: group.group_id().to_string(),
        state: group.state(),
        protocol_type: group.protocol_type().unwrap_or_default().to_string(),
        protocol_name: group.protocol_name().unwrap_or_default().to_string(),
        members: group.members().cloned().collect(),
    }
}

fn register(inner: &mut Inner) -> (Ticket, oneshot::Receiver<Reply>) {
    inner.next_ticket += 1;
    let ticket = inner.next_ticket;
    let (tx, rx) = oneshot::channel();
    inner.waiting.insert(ticket, tx);
    (ticket, rx)
}

/// Hands each reply to the request waiting on its ticket. A requester that
/// went away (connection closed) simply doesn't receive it.
fn deliver(inner: &mut Inner, replies: Vec<Reply>) {
    for reply in replies {
        let ticket = match &reply {
            Reply::Join(t, _) | Reply::Sync(t, _) => *t,
        };
        if let Some(tx) = inner.waiting.remove(&ticket) {
            let _ = tx.send(reply);
        }
    }
}

fn sync_error(error: GroupError) -> SyncReply {
    SyncReply {
        error: Some(error),
        protocol_type: None,
        protocol_name: None,
        assignment: Default::default(),
    }
}
