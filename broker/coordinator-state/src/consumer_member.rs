//! One member of a KIP-848 consumer group: its subscription, epochs,
//! reconciliation state and liveness — consumer-protocol members and
//! classic-protocol ones alike (`classic` is set for the latter).
//!
//! Owns: the member's record and its expiry rule. Must not: decide
//! assignments or epochs (that is the group's, `consumer_group`).

use std::collections::BTreeSet;

use regex::Regex;

use crate::assignor::{Assignment, Assignor, TopicId};
use crate::classic_member::ClassicProtocol;
use crate::types::Millis;

/// Where a member is in its reconciliation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    Stable,
    /// Must give up `revoking` before moving to the assignment epoch.
    UnrevokedPartitions,
    /// At the assignment epoch, waiting for partitions others still own.
    UnreleasedPartitions,
}

#[derive(Debug, Clone)]
pub struct ConsumerMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: u64,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub(crate) regex: Option<Regex>,
    /// The topics the regex may match (those the member's principal may
    /// DESCRIBE); None: every topic (no authorizer).
    pub(crate) regex_allowed: Option<std::sync::Arc<std::collections::BTreeSet<String>>>,
    pub server_assignor: Option<Assignor>,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    /// Partitions the member may own.
    pub assigned: Assignment,
    /// Partitions it must give up (UnrevokedPartitions).
    pub revoking: Assignment,
    /// The subscribed topics, resolved against the last metadata.
    pub(crate) subscribed_ids: BTreeSet<TopicId>,
    pub(crate) last_heard_ms: Millis,
    pub(crate) revoke_deadline_ms: Option<Millis>,
    /// A static member that left with epoch -2: kept (with its assignment)
    /// until its session expires or its instance id rejoins.
    pub(crate) departed: bool,
    /// Set for a member that speaks the classic protocol (JoinGroup,
    /// SyncGroup, Heartbeat) inside this group (`classic_member`).
    pub classic: Option<ClassicProtocol>,
}

impl ConsumerMember {
    /// Whether `topic` is one of the member's subscribed names or matches
    /// its subscribed regex (and may be described by it: Kafka resolves a
    /// regex only over the topics the member may DESCRIBE).
    pub fn subscribes_to(&self, topic: &str) -> bool {
        self.subscribed_topic_names
            .binary_search_by(|n| n.as_str().cmp(topic))
            .is_ok()
            || (self.regex.as_ref().is_some_and(|r| r.is_match(topic))
                && self
                    .regex_allowed
                    .as_ref()
                    .is_none_or(|allowed| allowed.contains(topic)))
    }

    /// A member that just joined: epoch 0, nothing subscribed or assigned.
    pub(crate) fn new(member_id: String, instance_id: Option<String>, now: Millis) -> Self {
        ConsumerMember {
            member_id,
            instance_id,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            rebalance_timeout_ms: 0,
            subscribed_topic_names: Vec::new(),
            subscribed_topic_regex: None,
            regex: None,
            regex_allowed: None,
            server_assignor: None,
            member_epoch: 0,
            previous_member_epoch: 0,
            state: MemberState::Stable,
            assigned: Assignment::new(),
            revoking: Assignment::new(),
            subscribed_ids: BTreeSet::new(),
            last_heard_ms: now,
            revoke_deadline_ms: None,
            departed: false,
            classic: None,
        }
    }

    /// Whether the member's session or its deadline to revoke (or, for a
    /// classic member, to rejoin) passed.
    pub(crate) fn expired(&self, now: Millis, session_timeout_ms: u64) -> bool {
        let session = self
            .classic
            .as_ref()
            .map_or(session_timeout_ms, |c| c.session_timeout_ms);
        now.saturating_sub(self.last_heard_ms) > session
            || self.revoke_deadline_ms.is_some_and(|d| now > d)
            || self.classic.as_ref().is_some_and(|c| c.rejoin_expired(now))
    }
}
