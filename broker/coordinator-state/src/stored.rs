//! A KIP-848 group as its coordinator stores it, and the group rebuilt from
//! that after a restart or a coordinator failover — so members keep their
//! epochs and assignments instead of rejoining at epoch 0.
//!
//! Owns: the stored form (`StoredConsumerGroup`, `StoredMember`: the fields
//! of Kafka's ConsumerGroupMetadata, ConsumerGroupPartitionMetadata,
//! ConsumerGroupTargetAssignmentMetadata, ConsumerGroupMemberMetadata,
//! ConsumerGroupTargetAssignmentMember and ConsumerGroupCurrentMemberAssignment
//! records), taking it from a live group and rebuilding a group from it
//! (sessions and revocation deadlines re-armed from the load time). A
//! classic-protocol member of a consumer group is stored like the others
//! plus Kafka's ClassicMemberMetadata (its session timeout and supported
//! protocols), so the new coordinator answers its Heartbeat, SyncGroup and
//! OffsetCommit at its generation (= member epoch). Must not: encode bytes
//! (the owner writes the records).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bytes::Bytes;

use crate::assignor::{Assignment, Assignor, TopicId};
use crate::classic_member::ClassicProtocol;
use crate::consumer_group::{compile_regex, ConsumerGroup, ConsumerGroupConfig};
use crate::consumer_member::{ConsumerMember, MemberState};
use crate::types::Millis;

/// A group's stored records, as one value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StoredConsumerGroup {
    /// ConsumerGroupMetadata.
    pub group_epoch: i32,
    /// ConsumerGroupTargetAssignmentMetadata.
    pub assignment_epoch: i32,
    /// ConsumerGroupPartitionMetadata: partition counts of the subscribed topics.
    pub partitions: BTreeMap<TopicId, i32>,
    pub members: BTreeMap<String, StoredMember>,
}

/// One consumer-protocol member's stored records.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMember {
    // ConsumerGroupMemberMetadata
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: u64,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    /// The topics the regex matched among those the member's principal may
    /// DESCRIBE; None when no authorizer filtered them. A restored member's
    /// regex keeps resolving to these (fail closed) until its next heartbeat
    /// brings the current set.
    pub regex_matched_allowed: Option<BTreeSet<String>>,
    pub server_assignor: Option<String>,
    /// The subscription resolved to topic ids (Chronik's field: with it a
    /// restored group resolves to the same ids and keeps its epoch).
    pub subscribed_ids: BTreeSet<TopicId>,
    /// A static member that left with epoch -2 and may come back.
    pub departed: bool,
    /// ConsumerGroupTargetAssignmentMember.
    pub target: Assignment,
    // ConsumerGroupCurrentMemberAssignment
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    pub assigned: Assignment,
    pub revoking: Assignment,
    /// ClassicMemberMetadata: set for a member speaking the classic protocol.
    pub classic: Option<StoredClassicProtocol>,
}

/// Kafka's ClassicMemberMetadata of a consumer group's classic member.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredClassicProtocol {
    pub session_timeout_ms: u64,
    /// (assignor name, subscription metadata), in the member's preference order.
    pub protocols: Vec<(String, Bytes)>,
}

impl ConsumerGroup {
    /// What this group stores: every member, classic ones included.
    pub fn stored(&self) -> StoredConsumerGroup {
        StoredConsumerGroup {
            group_epoch: self.group_epoch,
            assignment_epoch: self.assignment_epoch,
            partitions: self.partitions.clone(),
            members: self
                .members
                .values()
                .map(|m| (m.member_id.clone(), self.stored_member(m)))
                .collect(),
        }
    }

    /// `member_id`'s stored records, None for an unknown member.
    pub fn stored_member_of(&self, member_id: &str) -> Option<StoredMember> {
        self.members.get(member_id).map(|m| self.stored_member(m))
    }

    fn stored_member(&self, m: &ConsumerMember) -> StoredMember {
        StoredMember {
            instance_id: m.instance_id.clone(),
            rack_id: m.rack_id.clone(),
            client_id: m.client_id.clone(),
            client_host: m.client_host.clone(),
            rebalance_timeout_ms: m.rebalance_timeout_ms,
            subscribed_topic_names: m.subscribed_topic_names.clone(),
            subscribed_topic_regex: m.subscribed_topic_regex.clone(),
            regex_matched_allowed: m.regex_allowed.as_ref().map(|allowed| {
                allowed
                    .iter()
                    .filter(|name| m.regex.as_ref().is_some_and(|r| r.is_match(name)))
                    .cloned()
                    .collect()
            }),
            server_assignor: m.server_assignor.map(|a| a.name().to_string()),
            subscribed_ids: m.subscribed_ids.clone(),
            departed: m.departed,
            target: self.target_of(&m.member_id),
            member_epoch: m.member_epoch,
            previous_member_epoch: m.previous_member_epoch,
            state: m.state,
            assigned: m.assigned.clone(),
            revoking: m.revoking.clone(),
            classic: m.classic.as_ref().map(|c| StoredClassicProtocol {
                session_timeout_ms: c.session_timeout_ms,
                protocols: c.protocols.clone(),
            }),
        }
    }

    /// The group `stored` describes, as loaded at `now`: every member's
    /// session starts again, a member still revoking has its rebalance
    /// timeout again, and subscriptions are resolved again on the next
    /// heartbeat (to the same ids unless the topics changed meanwhile).
    pub fn restore(
        group_id: &str,
        stored: &StoredConsumerGroup,
        config: ConsumerGroupConfig,
        now: Millis,
    ) -> ConsumerGroup {
        let mut group = ConsumerGroup::new(group_id, config);
        group.group_epoch = stored.group_epoch;
        group.assignment_epoch = stored.assignment_epoch;
        group.partitions = stored.partitions.clone();
        for (member_id, s) in &stored.members {
            let mut m = ConsumerMember::new(member_id.clone(), s.instance_id.clone(), now);
            m.rack_id.clone_from(&s.rack_id);
            m.client_id.clone_from(&s.client_id);
            m.client_host.clone_from(&s.client_host);
            m.rebalance_timeout_ms = s.rebalance_timeout_ms;
            m.subscribed_topic_names
                .clone_from(&s.subscribed_topic_names);
            m.subscribed_topic_regex
                .clone_from(&s.subscribed_topic_regex);
            // A stored pattern compiled when it was accepted; one that no
            // longer does (a hostile or damaged record) matches nothing.
            m.regex = s
                .subscribed_topic_regex
                .as_deref()
                .and_then(|p| compile_regex(p).ok());
            m.regex_allowed = s.regex_matched_allowed.clone().map(Arc::new);
            m.server_assignor = s.server_assignor.as_deref().and_then(Assignor::from_name);
            m.subscribed_ids.clone_from(&s.subscribed_ids);
            m.departed = s.departed;
            m.member_epoch = s.member_epoch;
            m.previous_member_epoch = s.previous_member_epoch;
            m.state = s.state;
            m.assigned.clone_from(&s.assigned);
            m.revoking.clone_from(&s.revoking);
            m.classic = s
                .classic
                .as_ref()
                .map(|c| ClassicProtocol::new(c.session_timeout_ms, c.protocols.clone()));
            if s.state == MemberState::UnrevokedPartitions {
                m.revoke_deadline_ms = Some(now + s.rebalance_timeout_ms);
            }
            group.members.insert(member_id.clone(), m);
            if !s.target.is_empty() {
                group.target.insert(member_id.clone(), s.target.clone());
            }
        }
        group
    }
}
