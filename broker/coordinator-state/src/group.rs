//! One consumer group's membership and rebalance state machine.
//!
//! Invariants: a member is in `awaiting_join` only while the group is
//! PreparingRebalance, and in `awaiting_sync` only while it is
//! CompletingRebalance; every ticket taken in is answered exactly once (by a
//! completed rebalance, an error, or the member's removal).

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::member::Member;
use crate::types::*;

/// Kafka's group states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// The name Kafka uses in DescribeGroups and ListGroups.
    pub fn kafka_name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// Broker-wide group settings (Kafka's `group.*` configs).
#[derive(Debug, Clone, Copy)]
pub struct GroupConfig {
    /// group.initial.rebalance.delay.ms: how long the first rebalance of an
    /// empty group waits for more members.
    pub initial_rebalance_delay_ms: u64,
    pub min_session_timeout_ms: u64,
    pub max_session_timeout_ms: u64,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            initial_rebalance_delay_ms: 3_000,
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
        }
    }
}

#[derive(Debug)]
pub struct Group {
    group_id: String,
    config: GroupConfig,
    pub(crate) state: GroupState,
    pub(crate) generation_id: i32,
    pub(crate) protocol_type: Option<String>,
    pub(crate) protocol_name: Option<String>,
    pub(crate) leader: Option<String>,
    pub(crate) members: BTreeMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, and when they lapse.
    pending_members: BTreeMap<String, Millis>,
    awaiting_join: BTreeMap<String, Ticket>,
    awaiting_sync: BTreeMap<String, Ticket>,
    rebalance_deadline: Millis,
    /// The first rebalance of an empty group may not complete before this.
    join_not_before: Millis,
}

impl Group {
    pub fn new(group_id: &str, config: GroupConfig) -> Group {
        Group {
            group_id: group_id.to_string(),
            config,
            state: GroupState::Empty,
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: BTreeMap::new(),
            pending_members: BTreeMap::new(),
            awaiting_join: BTreeMap::new(),
            awaiting_sync: BTreeMap::new(),
            rebalance_deadline: 0,
            join_not_before: 0,
        }
    }

    /// A KIP-848 group downgraded to a classic one (`migration`): its
    /// members, at generation `generation_id`, must all rejoin
    /// (PreparingRebalance).
    pub(crate) fn converted(
        group_id: &str,
        config: GroupConfig,
        generation_id: i32,
        members: Vec<Member>,
        now: Millis,
    ) -> Group {
        let mut group = Group::new(group_id, config);
        group.generation_id = generation_id;
        group.protocol_type = Some(CONSUMER_PROTOCOL_TYPE.to_string());
        group.state = GroupState::Stable;
        group.members = members
            .into_iter()
            .map(|m| (m.member_id.clone(), m))
            .collect();
        // No request waits on a converted group: there are no replies.
        let _ = group.prepare_rebalance(now);
        group
    }

    pub fn group_id(&self) -> &str {
        &self.group_id
    }
    pub fn state(&self) -> GroupState {
        self.state
    }
    pub fn generation_id(&self) -> i32 {
        self.generation_id
    }
    pub fn protocol_type(&self) -> Option<&str> {
        self.protocol_type.as_deref()
    }
    pub fn protocol_name(&self) -> Option<&str> {
        self.protocol_name.as_deref()
    }
    pub fn leader(&self) -> Option<&str> {
        self.leader.as_deref()
    }
    pub fn members(&self) -> impl Iterator<Item = &Member> {
        self.members.values()
    }
    pub fn has_members(&self) -> bool {
        !self.members.is_empty()
    }
    /// Whether a tick may change anything (a rebalance or a live member).
    pub fn needs_ticks(&self) -> bool {
        !self.members.is_empty() || !self.pending_members.is_empty()
    }

    /// JoinGroup. `fresh_member_id` is used when the request has no member id.
    pub fn join(
        &mut self,
        ticket: Ticket,
        request: JoinRequest,
        fresh_member_id: String,
        now: Millis,
    ) -> Vec<Reply> {
        let reject =
            |error, member_id: &str| vec![Reply::Join(ticket, JoinReply::error(error, member_id))];
        if self.state == GroupState::Dead {
            return reject(GroupError::CoordinatorNotAvailable, &request.member_id);
        }
        if request.session_timeout_ms < self.config.min_session_timeout_ms
            || request.session_timeout_ms > self.config.max_session_timeout_ms
        {
            return reject(GroupError::InvalidSessionTimeout, &request.member_id);
        }
        if request.protocol_type.is_empty()
            || request.protocols.is_empty()
            || !self.protocols_compatible(&request)
        {
            return reject(GroupError::InconsistentGroupProtocol, &request.member_id);
        }
        let member_id = if request.member_id.is_empty() {
            if request.require_known_member_id {
                self.pending_members
                    .insert(fresh_member_id.clone(), now + request.session_timeout_ms);
                return reject(GroupError::MemberIdRequired, &fresh_member_id);
            }
            fresh_member_id
        } else if self.pending_members.remove(&request.member_id).is_some()
            || self.members.contains_key(&request.member_id)
        {
            request.member_id.clone()
        } else {
            return reject(GroupError::UnknownMemberId, &request.member_id);
        };

        let previous = self.members.get(&member_id);
        let changed = previous.is_none_or(|m| {
            m.protocols != request.protocols || m.protocol_type != request.protocol_type
        });
        let member = Member {
            member_id: member_id.clone(),
            group_instance_id: request.group_instance_id,
            client_id: request.client_id,
            client_host: request.client_host,
            session_timeout_ms: request.session_timeout_ms,
            rebalance_timeout_ms: request.rebalance_timeout_ms.max(request.session_timeout_ms),
            protocol_type: request.protocol_type,
            protocols: request.protocols,
            assignment: previous.map(|m| m.assignment.clone()).unwrap_or_default(),
            last_heard_ms: now,
        };
        self.members.insert(member_id.clone(), member);

        if self.state == GroupState::Stable
            && !changed
            && self.leader.as_deref() != Some(member_id.as_str())
        {
            // A follower rejoining with the same subscription: nothing to rebalance.
            return vec![Reply::Join(ticket, self.join_reply(&member_id, false))];
        }
        let mut replies = Vec::new();
        if let Some(old) = self.awaiting_join.insert(member_id.clone(), ticket) {
            replies.push(Reply::Join(
                old,
                JoinReply::error(GroupError::RebalanceInProgress, &member_id),
            ));
        }
        match self.state {
            GroupState::PreparingRebalance => replies.extend(self.maybe_complete_join(now)),
            _ => replies.extend(self.prepare_rebalance(now)),
        }
        replies
    }

    /// SyncGroup.
    pub fn sync(&mut self, ticket: Ticket, request: SyncRequest, now: Millis) -> Vec<Reply> {
        let reject = |group: &Group, error| {
            vec![Reply::Sync(
                ticket,
                group.sync_reply(Some(error), Bytes::new()),
            )]
        };
        if !self.members.contains_key(&request.member_id) {
            return reject(self, GroupError::UnknownMemberId);
        }
        if request.generation_id != self.generation_id {
            return reject(self, GroupError::IllegalGeneration);
        }
        let type_mismatch = request
            .protocol_type
            .as_ref()
            .is_some_and(|t| Some(t) != self.protocol_type.as_ref());
        let name_mismatch = request
            .protocol_name
            .as_ref()
            .is_some_and(|n| Some(n) != self.protocol_name.as_ref());
        if type_mismatch || name_mismatch {
            return reject(self, GroupError::InconsistentGroupProtocol);
        }
        match self.state {
            GroupState::Empty | GroupState::Dead => reject(self, GroupError::UnknownMemberId),
            GroupState::PreparingRebalance => reject(self, GroupError::RebalanceInProgress),
            GroupState::Stable => {
                let assignment = self.touch(&request.member_id, now);
                vec![Reply::Sync(ticket, self.sync_reply(None, assignment))]
            }
            GroupState::CompletingRebalance => {
                self.touch(&request.member_id, now);
                let mut replies = Vec::new();
                if let Some(old) = self.awaiting_sync.insert(request.member_id.clone(), ticket) {
                    replies.push(Reply::Sync(
                        old,
                        self.sync_reply(Some(GroupError::RebalanceInProgress), Bytes::new()),
                    ));
                }
                if self.leader.as_deref() == Some(request.member_id.as_str()) {
                    for (member_id, assignment) in request.assignments {
                        if let Some(m) = self.members.get_mut(&member_id) {
                            m.assignment = assignment;
                        }
                    }
                    self.state = GroupState::Stable;
                    let waiting = std::mem::take(&mut self.awaiting_sync);
                    for (member_id, ticket) in waiting {
                        let assignment = self
                            .members
                            .get(&member_id)
                            .map(|m| m.assignment.clone())
                            .unwrap_or_default();
                        replies.push(Reply::Sync(ticket, self.sync_reply(None, assignment)));
                    }
                }
                replies
            }
        }
    }

    /// Heartbeat.
    pub fn heartbeat(
        &mut self,
        member_id: &str,
        generation_id: i32,
        now: Millis,
    ) -> Result<(), GroupError> {
        if !self.members.contains_key(member_id) {
            return Err(GroupError::UnknownMemberId);
        }
        if generation_id != self.generation_id {
            return Err(GroupError::IllegalGeneration);
        }
        self.touch(member_id, now);
        match self.state {
            GroupState::PreparingRebalance => Err(GroupError::RebalanceInProgress),
            GroupState::CompletingRebalance | GroupState::Stable => Ok(()),
            GroupState::Empty | GroupState::Dead => Err(GroupError::UnknownMemberId),
        }
    }

    /// LeaveGroup for one member.
    pub fn leave(&mut self, member_id: &str, now: Millis) -> (Result<(), GroupError>, Vec<Reply>) {
        if self.pending_members.remove(member_id).is_some() {
            return (Ok(()), Vec::new());
        }
        if !self.members.contains_key(member_id) {
            return (Err(GroupError::UnknownMemberId), Vec::new());
        }
        let replies = self.remove_member(member_id, now);
        (Ok(()), replies)
    }

    /// Advances time: expires silent members and lapsed member ids, and
    /// completes a rebalance whose deadline passed.
    pub fn tick(&mut self, now: Millis) -> Vec<Reply> {
        self.pending_members.retain(|_, deadline| *deadline >= now);
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| !self.awaiting_join.contains_key(&m.member_id) && m.session_expired(now))
            .map(|m| m.member_id.clone())
            .collect();
        let mut replies = Vec::new();
        for member_id in expired {
            replies.extend(self.remove_member(&member_id, now));
        }
        replies.extend(self.maybe_complete_join(now));
        replies
    }

    /// Whether an OffsetCommit from (member, generation) may be stored.
    /// generation < 0 with no members is a "simple" commit (manual assignment).
    pub fn check_commit(&self, member_id: &str, generation_id: i32) -> CommitCheck {
        if generation_id < 0 && self.members.is_empty() {
            return CommitCheck::Ok;
        }
        if !self.members.contains_key(member_id) {
            return CommitCheck::Rejected(GroupError::UnknownMemberId);
        }
        if generation_id != self.generation_id {
            return CommitCheck::Rejected(GroupError::IllegalGeneration);
        }
        if self.state == GroupState::CompletingRebalance {
            return CommitCheck::Rejected(GroupError::RebalanceInProgress);
        }
        CommitCheck::Ok
    }

    /// Marks the group deleted (DeleteGroups); only an empty group may go.
    pub fn delete(&mut self) -> Result<(), GroupError> {
        if self.has_members() || self.state != GroupState::Empty {
            return Err(GroupError::NonEmptyGroup);
        }
        self.state = GroupState::Dead;
        Ok(())
    }

    fn touch(&mut self, member_id: &str, now: Millis) -> Bytes {
        match self.members.get_mut(member_id) {
            Some(m) => {
                m.last_heard_ms = now;
                m.assignment.clone()
            }
            None => Bytes::new(),
        }
    }

    fn remove_member(&mut self, member_id: &str, now: Millis) -> Vec<Reply> {
        self.members.remove(member_id);
        let mut replies = Vec::new();
        if let Some(ticket) = self.awaiting_join.remove(member_id) {
            replies.push(Reply::Join(
                ticket,
                JoinReply::error(GroupError::UnknownMemberId, member_id),
            ));
        }
        if let Some(ticket) = self.awaiting_sync.remove(member_id) {
            replies.push(Reply::Sync(
                ticket,
                self.sync_reply(Some(GroupError::UnknownMemberId), Bytes::new()),
            ));
        }
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                replies.extend(self.prepare_rebalance(now))
            }
            GroupState::PreparingRebalance => replies.extend(self.maybe_complete_join(now)),
            GroupState::Empty | GroupState::Dead => {}
        }
        replies
    }

    fn protocols_compatible(&self, request: &JoinRequest) -> bool {
        let others: Vec<&Member> = self
            .members
            .values()
            .filter(|m| m.member_id != request.member_id)
            .collect();
        if others.is_empty() {
            return true;
        }
        if others
            .iter()
            .any(|m| m.protocol_type != request.protocol_type)
        {
            return false;
        }
        request
            .protocols
            .iter()
            .any(|(name, _)| others.iter().all(|m| m.supports(name)))
    }

    fn prepare_rebalance(&mut self, now: Millis) -> Vec<Reply> {
        let mut replies = Vec::new();
        if self.state == GroupState::CompletingRebalance {
            for (_, ticket) in std::mem::take(&mut self.awaiting_sync) {
                replies.push(Reply::Sync(
                    ticket,
                    self.sync_reply(Some(GroupError::RebalanceInProgress), Bytes::new()),
                ));
            }
        }
        let was_empty = self.state == GroupState::Empty;
        self.state = GroupState::PreparingRebalance;
        let rebalance_timeout = self
            .members
            .values()
            .map(|m| m.rebalance_timeout_ms)
            .max()
            .unwrap_or(0);
        self.rebalance_deadline = now + rebalance_timeout;
        self.join_not_before = if was_empty {
            now + self.config.initial_rebalance_delay_ms
        } else {
            now
        };
        replies.extend(self.maybe_complete_join(now));
        replies
    }

    fn maybe_complete_join(&mut self, now: Millis) -> Vec<Reply> {
        if self.state != GroupState::PreparingRebalance {
            return Vec::new();
        }
        let all_joined = self
            .members
            .keys()
            .all(|m| self.awaiting_join.contains_key(m));
        if (all_joined && now >= self.join_not_before) || now >= self.rebalance_deadline {
            self.complete_join(now)
        } else {
            Vec::new()
        }
    }

    fn complete_join(&mut self, now: Millis) -> Vec<Reply> {
        let awaiting = &self.awaiting_join;
        self.members.retain(|id, _| awaiting.contains_key(id));
        self.generation_id += 1;
        if self.members.is_empty() {
            self.state = GroupState::Empty;
            self.protocol_name = None;
            self.protocol_type = None;
            self.leader = None;
            return Vec::new();
        }
        let first_joined = self
            .awaiting_join
            .iter()
            .min_by_key(|(_, ticket)| **ticket)
            .map(|(id, _)| id.clone());
        if !self
            .leader
            .as_ref()
            .is_some_and(|l| self.members.contains_key(l))
        {
            self.leader = first_joined;
        }
        self.protocol_type = self
            .members
            .values()
            .next()
            .map(|m| m.protocol_type.clone());
        self.protocol_name = self.select_protocol();
        self.state = GroupState::CompletingRebalance;
        for m in self.members.values_mut() {
            m.last_heard_ms = now;
            m.assignment = Bytes::new();
        }
        let waiting = std::mem::take(&mut self.awaiting_join);
        waiting
            .into_iter()
            .map(|(member_id, ticket)| {
                let is_leader = self.leader.as_deref() == Some(member_id.as_str());
                Reply::Join(ticket, self.join_reply(&member_id, is_leader))
            })
            .collect()
    }

    /// Kafka's vote: each member votes for its most preferred protocol among
    /// those every member supports; the most votes wins (ties: the leader's
    /// preference order).
    fn select_protocol(&self) -> Option<String> {
        let leader = self.leader.as_ref().and_then(|l| self.members.get(l))?;
        let candidates: Vec<&String> = leader
            .protocols
            .iter()
            .map(|(name, _)| name)
            .filter(|name| self.members.values().all(|m| m.supports(name)))
            .collect();
        let votes = |name: &String| {
            self.members
                .values()
                .filter(|m| {
                    m.protocols
                        .iter()
                        .map(|(n, _)| n)
                        .find(|n| candidates.contains(n))
                        == Some(name)
                })
                .count()
        };
        let mut best: Option<(&String, usize)> = None;
        for name in &candidates {
            let v = votes(name);
            if best.is_none_or(|(_, bv)| v > bv) {
                best = Some((name, v));
            }
        }
        best.map(|(name, _)| name.clone())
    }

    fn join_reply(&self, member_id: &str, include_members: bool) -> JoinReply {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        let members = if include_members {
            self.members
                .values()
                .map(|m| JoinedMember {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    metadata: m.metadata_for(&protocol),
                })
                .collect()
        } else {
            Vec::new()
        };
        JoinReply {
            error: None,
            generation_id: self.generation_id,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            member_id: member_id.to_string(),
            members,
        }
    }

    fn sync_reply(&self, error: Option<GroupError>, assignment: Bytes) -> SyncReply {
        SyncReply {
            error,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            assignment,
        }
    }
}
