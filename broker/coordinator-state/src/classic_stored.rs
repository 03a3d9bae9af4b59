//! A classic group as its coordinator stores it, and the group rebuilt from
//! that after a restart or a coordinator failover — so members carry on at
//! their generation instead of rejoining and rebalancing.
//!
//! Owns: the stored form (`StoredClassicGroup`, `StoredClassicMember`: the
//! fields of Kafka's GroupMetadataValue), which states are stored (Kafka
//! writes a group when a generation completes — the leader's SyncGroup — and
//! when it becomes Empty; a rebalance in progress leaves the last stored
//! generation standing), and rebuilding a group from it (Stable with
//! members, else Empty; every session restarts at the load, as Kafka's
//! loader does). Must not: encode bytes (the owner writes the records).

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::group::{Group, GroupConfig, GroupState};
use crate::member::Member;
use crate::types::Millis;

/// A classic group's GroupMetadataValue, as one value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredClassicGroup {
    /// Kafka's protocolType: empty for an Empty group.
    pub protocol_type: String,
    pub generation_id: i32,
    pub protocol_name: Option<String>,
    pub leader: Option<String>,
    pub members: Vec<StoredClassicMember>,
}

/// One member of a GroupMetadataValue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredClassicMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: u64,
    pub session_timeout_ms: u64,
    /// The member's metadata for the group's protocol.
    pub subscription: Bytes,
    pub assignment: Bytes,
}

impl Group {
    /// What the log should hold for this group: None while a rebalance is
    /// in progress (PreparingRebalance, CompletingRebalance) or once it is
    /// Dead (the owner writes a tombstone for a group it dropped).
    pub fn stored(&self) -> Option<StoredClassicGroup> {
        if !matches!(self.state, GroupState::Stable | GroupState::Empty) {
            return None;
        }
        let protocol = self.protocol_name.clone().unwrap_or_default();
        Some(StoredClassicGroup {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation_id: self.generation_id,
            protocol_name: self.protocol_name.clone(),
            leader: self.leader.clone(),
            members: self
                .members
                .values()
                .map(|m| StoredClassicMember {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: m.metadata_for(&protocol),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        })
    }

    /// The group `stored` describes, as loaded at `now`: Stable at its
    /// generation when it has members (each supporting the group's protocol
    /// with its stored subscription, its session starting now), else Empty.
    /// A leader that is not a member (a damaged record) falls to the first
    /// member.
    pub fn restore(
        group_id: &str,
        stored: &StoredClassicGroup,
        config: GroupConfig,
        now: Millis,
    ) -> Group {
        let mut group = Group::new(group_id, config);
        group.generation_id = stored.generation_id;
        let protocol = stored.protocol_name.clone().unwrap_or_default();
        group.members = stored
            .members
            .iter()
            .map(|m| {
                let member = Member {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    session_timeout_ms: m.session_timeout_ms,
                    rebalance_timeout_ms: m.rebalance_timeout_ms.max(m.session_timeout_ms),
                    protocol_type: stored.protocol_type.clone(),
                    protocols: vec![(protocol.clone(), m.subscription.clone())],
                    assignment: m.assignment.clone(),
                    last_heard_ms: now,
                };
                (m.member_id.clone(), member)
            })
            .collect::<BTreeMap<_, _>>();
        if group.members.is_empty() {
            return group;
        }
        group.state = GroupState::Stable;
        group.protocol_type = Some(stored.protocol_type.clone());
        group.protocol_name = stored.protocol_name.clone();
        group.leader = stored
            .leader
            .clone()
            .filter(|l| group.members.contains_key(l))
            .or_else(|| group.members.keys().next().cloned());
        group
    }
}
