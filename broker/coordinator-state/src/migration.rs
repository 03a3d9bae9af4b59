//! Online migration between a classic group and a KIP-848 consumer group
//! with the same id, governed by Kafka's `group.consumer.migration.policy`.
//!
//! Owns: the policy, the upgrade (a Stable classic group of protocol type
//! "consumer" whose members' subscriptions and assignments all decode
//! becomes a consumer group whose members keep speaking the classic
//! protocol, keeping their partitions and generation as member epoch) and
//! the downgrade (a consumer group left with classic members only becomes
//! a classic group that must rebalance). Must
//! not: decode the embedded ConsumerProtocol (the owner passes the decoded
//! subscriptions and assignments in), do I/O or read a clock.
//!
//! Conversions of empty groups happen regardless of the policy (the owner
//! drops the empty group); these rules are for groups with members. A
//! refused upgrade is GROUP_ID_NOT_FOUND, as Kafka answers.
//!
//! Simplified against Kafka: a downgraded group's members start without
//! their assignment bytes (they rejoin at once, and a rebalance clears them
//! anyway); a downgrade happens whenever a consumer group is left with
//! classic members only (Kafka checks when the last consumer-protocol
//! member leaves or is fenced, which is the only way to get there).

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use crate::assignor::Assignment;
use crate::classic_member::ClassicProtocol;
use crate::consumer_group::{
    ConsumerGroup, ConsumerGroupConfig, ConsumerMember, MemberState, TopicMetadata,
};
use crate::group::{Group, GroupConfig, GroupState};
use crate::member::Member;
use crate::types::{GroupError, Millis, CONSUMER_PROTOCOL_TYPE};

/// Kafka's `group.consumer.migration.policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrationPolicy {
    /// Upgrade and downgrade (Kafka 4.x's default).
    Bidirectional,
    Upgrade,
    Downgrade,
    Disabled,
}

impl MigrationPolicy {
    pub fn from_name(name: &str) -> Option<MigrationPolicy> {
        match name.to_ascii_lowercase().as_str() {
            "bidirectional" => Some(MigrationPolicy::Bidirectional),
            "upgrade" => Some(MigrationPolicy::Upgrade),
            "downgrade" => Some(MigrationPolicy::Downgrade),
            "disabled" => Some(MigrationPolicy::Disabled),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            MigrationPolicy::Bidirectional => "bidirectional",
            MigrationPolicy::Upgrade => "upgrade",
            MigrationPolicy::Downgrade => "downgrade",
            MigrationPolicy::Disabled => "disabled",
        }
    }

    pub fn upgrade_enabled(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Bidirectional | MigrationPolicy::Upgrade
        )
    }

    pub fn downgrade_enabled(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Bidirectional | MigrationPolicy::Downgrade
        )
    }
}

/// Partitions by topic name, as the embedded ConsumerProtocol carries them.
pub type NamedPartitions = BTreeMap<String, BTreeSet<i32>>;

/// A classic member's ConsumerProtocolSubscription, decoded by the owner.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClassicSubscription {
    pub topics: Vec<String>,
    /// What a cooperative client still owns (v1+); empty for eager ones.
    pub owned_partitions: NamedPartitions,
}

/// What the owner decoded of one classic member for an upgrade: its
/// subscription to the group's protocol and the assignment it was given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DecodedClassicMember {
    pub subscription: ClassicSubscription,
    pub assignment: NamedPartitions,
}

/// `named` as topic ids, dropping topics `metadata` does not know and
/// partitions beyond their count.
pub(crate) fn to_assignment(named: &NamedPartitions, metadata: &TopicMetadata) -> Assignment {
    let mut out = Assignment::new();
    for (topic, partitions) in named {
        let Some((id, count)) = metadata.topics.get(topic) else {
            continue;
        };
        let valid: BTreeSet<i32> = partitions
            .iter()
            .copied()
            .filter(|p| (0..*count).contains(p))
            .collect();
        if !valid.is_empty() {
            out.entry(*id).or_default().extend(valid);
        }
    }
    out
}

impl ConsumerGroup {
    /// The upgrade of a classic group with members, for a joining
    /// ConsumerGroupHeartbeat. `decoded`: each member's subscription and
    /// assignment, None where they did not decode (or carry a custom
    /// assignor's user data, which Kafka refuses to migrate). Refused with
    /// GROUP_ID_NOT_FOUND unless the policy allows upgrades, the group is a
    /// Stable "consumer" group with room for one more member, and every
    /// member decoded.
    pub fn from_classic(
        classic: &Group,
        decoded: &BTreeMap<String, Option<DecodedClassicMember>>,
        config: ConsumerGroupConfig,
        metadata: &TopicMetadata,
        now: Millis,
    ) -> Result<ConsumerGroup, GroupError> {
        let refuse = Err(GroupError::GroupIdNotFound);
        if !config.migration_policy.upgrade_enabled()
            || classic.protocol_type() != Some(CONSUMER_PROTOCOL_TYPE)
            || classic.state() != GroupState::Stable
            || classic.members().count() >= config.max_size
        {
            return refuse;
        }
        let mut group = ConsumerGroup::new(classic.group_id(), config);
        let generation = classic.generation_id();
        group.group_epoch = generation;
        group.assignment_epoch = generation;
        let mut taken: BTreeSet<([u8; 16], i32)> = BTreeSet::new();
        for m in classic.members() {
            let Some(Some(d)) = decoded.get(&m.member_id) else {
                return refuse;
            };
            let mut member =
                ConsumerMember::new(m.member_id.clone(), m.group_instance_id.clone(), now);
            member.client_id.clone_from(&m.client_id);
            member.client_host.clone_from(&m.client_host);
            member.rebalance_timeout_ms = m.rebalance_timeout_ms;
            member.subscribed_topic_names = sorted(&d.subscription.topics);
            member.member_epoch = generation;
            member.previous_member_epoch = generation;
            member.state = MemberState::Stable;
            // A partition two classic assignments name goes to the first
            // member only: no partition is ever owned twice.
            let mut assigned = to_assignment(&d.assignment, metadata);
            for (topic, partitions) in assigned.iter_mut() {
                partitions.retain(|p| taken.insert((*topic, *p)));
            }
            assigned.retain(|_, ps| !ps.is_empty());
            member.assigned = assigned.clone();
            member.classic = Some(ClassicProtocol::new(
                m.session_timeout_ms,
                m.protocols.clone(),
            ));
            group.target.insert(m.member_id.clone(), assigned);
            group.members.insert(m.member_id.clone(), member);
        }
        group.refresh_subscriptions(metadata, "", false);
        Ok(group)
    }

    /// Whether the group should become a classic group again: the policy
    /// allows downgrades and every member left speaks the classic protocol.
    pub fn should_downgrade(&self) -> bool {
        self.config.migration_policy.downgrade_enabled()
            && !self.members.is_empty()
            && self.members.values().all(|m| m.classic.is_some())
    }

    /// The classic group this one becomes on a downgrade: the classic
    /// members, rebalancing, at the newest generation one of them holds
    /// (Kafka converts at the group epoch from before the leave that
    /// triggers the downgrade, which is the epoch of its stable members),
    /// so they are told REBALANCE_IN_PROGRESS rather than ILLEGAL_GENERATION.
    pub fn into_classic(self, config: GroupConfig, now: Millis) -> Group {
        let generation = self
            .members
            .values()
            .filter(|m| m.classic.is_some())
            .map(|m| m.member_epoch)
            .max()
            .unwrap_or(self.group_epoch);
        let members = self
            .members
            .into_values()
            .filter_map(|m| {
                let classic = m.classic?;
                Some(Member {
                    member_id: m.member_id,
                    group_instance_id: m.instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    session_timeout_ms: classic.session_timeout_ms,
                    rebalance_timeout_ms: m.rebalance_timeout_ms.max(classic.session_timeout_ms),
                    protocol_type: CONSUMER_PROTOCOL_TYPE.to_string(),
                    protocols: classic.protocols,
                    assignment: Bytes::new(),
                    last_heard_ms: now,
                })
            })
            .collect();
        Group::converted(&self.group_id, config, generation, members, now)
    }
}

pub(crate) fn sorted(names: &[String]) -> Vec<String> {
    let mut names = names.to_vec();
    names.sort();
    names.dedup();
    names
}
