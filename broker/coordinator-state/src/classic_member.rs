//! Members of a KIP-848 consumer group that still speak the classic
//! protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup): members kept
//! from an upgraded classic group, and classic consumers joining a group
//! that has consumer-protocol members.
//!
//! Owns: the classic view of a consumer group's member — JoinGroup updates
//! the member's subscription and owned partitions, may bump the group
//! epoch, recomputes the target and reconciles the member, and answers at
//! generation = member epoch; SyncGroup hands out the member's assigned
//! partitions (the owner encodes them as ConsumerProtocolAssignment);
//! Heartbeat answers REBALANCE_IN_PROGRESS while the member must rejoin
//! (the group epoch moved past it, it must revoke, or partitions it waits
//! for are free), and a member told to rejoin must do so within its
//! rebalance timeout. Must not: decode the embedded protocol, do I/O or
//! read a clock.
//!
//! Simplified against Kafka: JoinGroup answers at once (Kafka may hold it
//! until the member's reconciliation settles); the reply names no leader,
//! so every classic member syncs as a follower; a member id the group does
//! not know is accepted as a new member (Kafka's MEMBER_ID_REQUIRED dance
//! is kept for v4+ joins without an id); a static member cannot replace
//! another with its instance id (UNRELEASED_INSTANCE_ID).

use bytes::Bytes;

use crate::assignor::Assignment;
use crate::consumer_group::{
    difference, flatten, ConsumerGroup, ConsumerMember, MemberState, TopicMetadata,
};
use crate::group::GroupConfig;
use crate::migration::{sorted, to_assignment, ClassicSubscription};
use crate::types::{
    GroupError, JoinReply, JoinRequest, Millis, SyncRequest, CONSUMER_PROTOCOL_TYPE,
};

/// What a classic member registered with JoinGroup.
#[derive(Debug, Clone)]
pub struct ClassicProtocol {
    pub session_timeout_ms: u64,
    /// (assignor name, subscription metadata), in the member's preference
    /// order; the first names the protocol the member is answered with.
    pub protocols: Vec<(String, Bytes)>,
    /// Set when a heartbeat first told the member to rejoin.
    rejoin_deadline_ms: Option<Millis>,
}

impl ClassicProtocol {
    pub(crate) fn new(session_timeout_ms: u64, protocols: Vec<(String, Bytes)>) -> Self {
        ClassicProtocol {
            session_timeout_ms,
            protocols,
            rejoin_deadline_ms: None,
        }
    }

    pub fn protocol_name(&self) -> &str {
        self.protocols.first().map_or("", |(name, _)| name.as_str())
    }

    /// The subscription metadata of the member's protocol.
    pub fn metadata(&self) -> Bytes {
        self.protocols
            .first()
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    pub(crate) fn rejoin_expired(&self, now: Millis) -> bool {
        self.rejoin_deadline_ms.is_some_and(|d| now > d)
    }
}

/// A successful SyncGroup of a classic member.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassicSync {
    pub protocol_name: String,
    /// The member's partitions, to be encoded as ConsumerProtocolAssignment.
    pub assignment: Assignment,
}

impl ConsumerGroup {
    /// JoinGroup of a classic member. `subscription`: the request's first
    /// protocol's metadata decoded, None when it is not a
    /// ConsumerProtocolSubscription (INCONSISTENT_GROUP_PROTOCOL).
    pub fn classic_join(
        &mut self,
        request: JoinRequest,
        subscription: Option<ClassicSubscription>,
        fresh_member_id: String,
        limits: &GroupConfig,
        metadata: &TopicMetadata,
        now: Millis,
    ) -> JoinReply {
        let reject = |error, member_id: &str| JoinReply::error(error, member_id);
        if request.session_timeout_ms < limits.min_session_timeout_ms
            || request.session_timeout_ms > limits.max_session_timeout_ms
        {
            return reject(GroupError::InvalidSessionTimeout, &request.member_id);
        }
        let Some(subscription) = subscription.filter(|_| {
            request.protocol_type == CONSUMER_PROTOCOL_TYPE && !request.protocols.is_empty()
        }) else {
            return reject(GroupError::InconsistentGroupProtocol, &request.member_id);
        };
        let member_id = match request.member_id.as_str() {
            "" if request.require_known_member_id => {
                return reject(GroupError::MemberIdRequired, &fresh_member_id)
            }
            "" => fresh_member_id,
            id => id.to_string(),
        };
        let instance_taken = request.group_instance_id.as_ref().is_some_and(|instance| {
            self.members
                .values()
                .any(|m| m.instance_id.as_ref() == Some(instance) && m.member_id != member_id)
        });
        if instance_taken {
            return reject(GroupError::UnreleasedInstanceId, &member_id);
        }
        let joined = match self.members.get(&member_id) {
            Some(m) if m.classic.is_none() => {
                return reject(GroupError::UnknownMemberId, &member_id)
            }
            Some(_) => false,
            None if self.members.len() >= self.config.max_size => {
                return reject(GroupError::GroupMaxSizeReached, &member_id)
            }
            None => {
                let member =
                    ConsumerMember::new(member_id.clone(), request.group_instance_id.clone(), now);
                self.members.insert(member_id.clone(), member);
                true
            }
        };
        let owned = to_assignment(&subscription.owned_partitions, metadata);
        let protocol_name = request.protocols[0].0.clone();
        let Some(member) = self.members.get_mut(&member_id) else {
            return reject(GroupError::UnknownMemberId, &member_id);
        };
        let names = sorted(&subscription.topics);
        let mut changed = joined || names != member.subscribed_topic_names;
        member.subscribed_topic_names = names;
        member.instance_id.clone_from(&request.group_instance_id);
        member.client_id = request.client_id;
        member.client_host = request.client_host;
        member.rebalance_timeout_ms = request.rebalance_timeout_ms.max(request.session_timeout_ms);
        member.last_heard_ms = now;
        member.classic = Some(ClassicProtocol::new(
            request.session_timeout_ms,
            request.protocols,
        ));
        changed |= self.refresh_subscriptions(metadata, &member_id, changed);
        if changed {
            self.group_epoch += 1;
        }
        if self.group_epoch > self.assignment_epoch {
            self.compute_target();
        }
        // The first pass may start a revocation the member's owned
        // partitions show is already done; the second completes it.
        self.reconcile(&member_id, Some(&owned), now);
        self.reconcile(&member_id, Some(&owned), now);
        let Some(member) = self.members.get(&member_id) else {
            return reject(GroupError::UnknownMemberId, &member_id);
        };
        JoinReply {
            error: None,
            generation_id: member.member_epoch,
            protocol_type: Some(CONSUMER_PROTOCOL_TYPE.to_string()),
            protocol_name: Some(protocol_name),
            leader: String::new(),
            member_id,
            members: Vec::new(),
        }
    }

    /// SyncGroup of a classic member: its partitions at its member epoch.
    pub fn classic_sync(
        &mut self,
        request: &SyncRequest,
        now: Millis,
    ) -> Result<ClassicSync, GroupError> {
        let member = self.touch_classic(&request.member_id, request.generation_id, now)?;
        let protocol_name = member
            .classic
            .as_ref()
            .map(|c| c.protocol_name().to_string())
            .unwrap_or_default();
        let type_mismatch = request
            .protocol_type
            .as_ref()
            .is_some_and(|t| t != CONSUMER_PROTOCOL_TYPE);
        let name_mismatch = request
            .protocol_name
            .as_ref()
            .is_some_and(|n| *n != protocol_name);
        if type_mismatch || name_mismatch {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        Ok(ClassicSync {
            protocol_name,
            assignment: member.assigned.clone(),
        })
    }

    /// Heartbeat of a classic member: REBALANCE_IN_PROGRESS while it must
    /// rejoin.
    pub fn classic_heartbeat(
        &mut self,
        member_id: &str,
        generation_id: i32,
        now: Millis,
    ) -> Result<(), GroupError> {
        let member = self.touch_classic(member_id, generation_id, now)?;
        let (rebalance_timeout_ms, epoch, state) = (
            member.rebalance_timeout_ms,
            member.member_epoch,
            member.state,
        );
        let must_rejoin = epoch != self.assignment_epoch
            || state == MemberState::UnrevokedPartitions
            || (state == MemberState::UnreleasedPartitions && self.released_for(member_id));
        if !must_rejoin {
            return Ok(());
        }
        if let Some(classic) = self
            .members
            .get_mut(member_id)
            .and_then(|m| m.classic.as_mut())
        {
            classic
                .rejoin_deadline_ms
                .get_or_insert(now + rebalance_timeout_ms);
        }
        Err(GroupError::RebalanceInProgress)
    }

    /// LeaveGroup of a classic member.
    pub fn classic_leave(&mut self, member_id: &str) -> Result<(), GroupError> {
        if self
            .members
            .get(member_id)
            .is_none_or(|m| m.classic.is_none())
        {
            return Err(GroupError::UnknownMemberId);
        }
        self.members.remove(member_id);
        self.membership_changed();
        Ok(())
    }

    /// The classic member `member_id` at `generation_id`, marked heard
    /// from: UNKNOWN_MEMBER_ID for no such classic member,
    /// ILLEGAL_GENERATION for another generation.
    fn touch_classic(
        &mut self,
        member_id: &str,
        generation_id: i32,
        now: Millis,
    ) -> Result<&ConsumerMember, GroupError> {
        let member = self
            .members
            .get_mut(member_id)
            .filter(|m| m.classic.is_some())
            .ok_or(GroupError::UnknownMemberId)?;
        if member.member_epoch != generation_id {
            return Err(GroupError::IllegalGeneration);
        }
        member.last_heard_ms = now;
        Ok(&*member)
    }

    /// Whether some partition of `member_id`'s target that it does not
    /// hold yet is now free.
    fn released_for(&self, member_id: &str) -> bool {
        let Some(member) = self.members.get(member_id) else {
            return false;
        };
        let wanted = difference(&self.target_of(member_id), &member.assigned);
        let held = self.held_by_others(member_id, &wanted);
        let free = flatten(&wanted).any(|tp| !held.contains(&tp));
        free
    }
}
