//! A share group's membership (KIP-932, ShareGroupHeartbeat v1): members
//! with client-chosen ids join with epoch 0, heartbeat with their current
//! epoch and leave with -1; the group epoch rises on every change of
//! members, subscriptions or the subscribed topics' partitions, and each
//! member is then given the new assignment at its next heartbeat. Share
//! groups have no revocation: a partition may be given to several members
//! at once, since records, not partitions, are what members hold.
//!
//! Owns: members and their liveness (`group.share.session.timeout.ms`),
//! `group.share.max.size`, the group epoch, and the `simple` assignor
//! (`simple_assignment`). Must not: know the wire format, topics' names
//! beyond the subscription, or share-partition state (`share_partition`).

use std::collections::{BTreeMap, BTreeSet};

use crate::assignor::{Assignment, TopicId};
use crate::consumer_group::{TopicMetadata, MAX_STRING_BYTES, MAX_SUBSCRIBED_TOPICS};
use crate::{GroupError, Millis};

/// The group's membership settings (broker defaults, or the group's own
/// `share.session.timeout.ms` / `share.heartbeat.interval.ms`).
#[derive(Debug, Clone, Copy)]
pub struct ShareGroupConfig {
    pub session_timeout_ms: Millis,
    pub heartbeat_interval_ms: i32,
    /// `group.share.max.size`.
    pub max_size: usize,
}

impl Default for ShareGroupConfig {
    /// Kafka 4.3's broker defaults.
    fn default() -> ShareGroupConfig {
        ShareGroupConfig {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            max_size: 200,
        }
    }
}

/// One member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareMember {
    pub member_id: String,
    pub member_epoch: i32,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: BTreeSet<String>,
    pub assignment: Assignment,
    deadline: Millis,
}

/// A ShareGroupHeartbeat, independent of the wire.
#[derive(Debug, Clone, Default)]
pub struct ShareHeartbeat {
    pub member_id: String,
    pub member_epoch: i32,
    pub rack_id: Option<String>,
    /// None: unchanged since the last heartbeat.
    pub subscribed_topic_names: Option<Vec<String>>,
    pub client_id: String,
    pub client_host: String,
}

/// What a heartbeat is answered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareHeartbeatReply {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// Some when the member's assignment is new to it.
    pub assignment: Option<Assignment>,
}

/// Kafka's share-group states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareGroupState {
    Empty,
    Stable,
}

impl ShareGroupState {
    pub fn kafka_name(self) -> &'static str {
        match self {
            ShareGroupState::Empty => "Empty",
            ShareGroupState::Stable => "Stable",
        }
    }
}

/// One share group.
#[derive(Debug, Clone)]
pub struct ShareGroup {
    group_id: String,
    group_epoch: i32,
    assignment_epoch: i32,
    members: BTreeMap<String, ShareMember>,
    /// The subscribed topics' partition counts the assignment was computed
    /// for (a change of any other topic leaves the group alone).
    assigned_partitions: BTreeMap<TopicId, i32>,
    config: ShareGroupConfig,
}

impl ShareGroup {
    pub fn new(group_id: &str, config: ShareGroupConfig) -> ShareGroup {
        ShareGroup {
            group_id: group_id.to_string(),
            group_epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            assigned_partitions: BTreeMap::new(),
            config,
        }
    }

    pub fn group_id(&self) -> &str {
        &self.group_id
    }

    pub fn group_epoch(&self) -> i32 {
        self.group_epoch
    }

    pub fn assignment_epoch(&self) -> i32 {
        self.assignment_epoch
    }

    pub fn members(&self) -> impl Iterator<Item = &ShareMember> {
        self.members.values()
    }

    pub fn has_member(&self, member_id: &str) -> bool {
        self.members.contains_key(member_id)
    }

    pub fn state(&self) -> ShareGroupState {
        if self.members.is_empty() {
            ShareGroupState::Empty
        } else {
            ShareGroupState::Stable
        }
    }

    pub fn set_config(&mut self, config: ShareGroupConfig) {
        self.config = config;
    }

    /// Every topic some member subscribes to.
    pub fn subscribed_topics(&self) -> BTreeSet<String> {
        self.members
            .values()
            .flat_map(|m| m.subscribed_topic_names.iter().cloned())
            .collect()
    }

    /// Handles a heartbeat at `now`, with the cluster's topics.
    pub fn heartbeat(
        &mut self,
        request: ShareHeartbeat,
        topics: &TopicMetadata,
        now: Millis,
    ) -> Result<ShareHeartbeatReply, GroupError> {
        if request.member_id.is_empty() || request.member_id.len() > MAX_STRING_BYTES {
            return Err(GroupError::InvalidRequest);
        }
        if let Some(names) = &request.subscribed_topic_names {
            if names.len() > MAX_SUBSCRIBED_TOPICS
                || names
                    .iter()
                    .any(|n| n.is_empty() || n.len() > MAX_STRING_BYTES)
            {
                return Err(GroupError::InvalidRequest);
            }
        }
        if request
            .rack_id
            .as_ref()
            .is_some_and(|r| r.len() > MAX_STRING_BYTES)
        {
            return Err(GroupError::InvalidRequest);
        }
        match request.member_epoch {
            -1 => {
                if self.members.remove(&request.member_id).is_some() {
                    self.bump_and_assign(topics);
                }
                return Ok(ShareHeartbeatReply {
                    member_id: request.member_id,
                    member_epoch: -1,
                    heartbeat_interval_ms: 0,
                    assignment: None,
                });
            }
            0 => {
                let names = match &request.subscribed_topic_names {
                    Some(n) if !n.is_empty() => n.clone(),
                    _ => return Err(GroupError::InvalidRequest),
                };
                if !self.members.contains_key(&request.member_id)
                    && self.members.len() >= self.config.max_size
                {
                    return Err(GroupError::GroupMaxSizeReached);
                }
                let member = ShareMember {
                    member_id: request.member_id.clone(),
                    member_epoch: 0,
                    rack_id: request.rack_id.clone(),
                    client_id: request.client_id.clone(),
                    client_host: request.client_host.clone(),
                    subscribed_topic_names: names.into_iter().collect(),
                    assignment: Assignment::new(),
                    deadline: 0,
                };
                self.members.insert(request.member_id.clone(), member);
                self.bump_and_assign(topics);
            }
            epoch if epoch > 0 => {
                let Some(member) = self.members.get_mut(&request.member_id) else {
                    return Err(GroupError::UnknownMemberId);
                };
                if epoch != member.member_epoch {
                    return Err(GroupError::FencedMemberEpoch);
                }
                let mut changed = false;
                if let Some(names) = request.subscribed_topic_names {
                    let names: BTreeSet<String> = names.into_iter().collect();
                    if names != member.subscribed_topic_names {
                        member.subscribed_topic_names = names;
                        changed = true;
                    }
                }
                if request.rack_id.is_some() {
                    member.rack_id = request.rack_id;
                }
                if changed || self.subscribed_partitions(topics) != self.assigned_partitions {
                    self.bump_and_assign(topics);
                }
            }
            _ => return Err(GroupError::InvalidRequest),
        }
        let interval = self.config.heartbeat_interval_ms;
        let deadline = now.saturating_add(self.config.session_timeout_ms);
        let group_epoch = self.group_epoch;
        let Some(member) = self.members.get_mut(&request.member_id) else {
            return Err(GroupError::UnknownMemberId);
        };
        member.deadline = deadline;
        let assignment = if member.member_epoch != group_epoch || request.member_epoch == 0 {
            member.member_epoch = group_epoch;
            Some(member.assignment.clone())
        } else {
            None
        };
        Ok(ShareHeartbeatReply {
            member_id: member.member_id.clone(),
            member_epoch: member.member_epoch,
            heartbeat_interval_ms: interval,
            assignment,
        })
    }

    /// Removes members whose session ran out by `now`; returns their ids.
    pub fn tick(&mut self, now: Millis, topics: &TopicMetadata) -> Vec<String> {
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| m.deadline <= now)
            .map(|m| m.member_id.clone())
            .collect();
        if !expired.is_empty() {
            for id in &expired {
                self.members.remove(id);
            }
            self.bump_and_assign(topics);
        }
        expired
    }

    fn subscribed_partitions(&self, topics: &TopicMetadata) -> BTreeMap<TopicId, i32> {
        self.subscribed_topics()
            .iter()
            .filter_map(|n| topics.topics.get(n).copied())
            .collect()
    }

    fn bump_and_assign(&mut self, topics: &TopicMetadata) {
        self.group_epoch += 1;
        self.assignment_epoch = self.group_epoch;
        self.assigned_partitions = self.subscribed_partitions(topics);
        let subscriptions: BTreeMap<String, BTreeSet<TopicId>> = self
            .members
            .values()
            .map(|m| {
                let ids = m
                    .subscribed_topic_names
                    .iter()
                    .filter_map(|n| topics.topics.get(n).map(|(id, _)| *id))
                    .collect();
                (m.member_id.clone(), ids)
            })
            .collect();
        let partitions: BTreeMap<TopicId, i32> = topics.topics.values().copied().collect();
        let mut targets = simple_assignment(&subscriptions, &partitions);
        for (id, member) in self.members.iter_mut() {
            member.assignment = targets.remove(id).unwrap_or_default();
        }
    }
}

/// Kafka's share-group `simple` assignor, balanced per topic: with no more
/// subscribers than partitions, partition i goes to subscriber i mod M;
/// with more, subscriber j gets partition j mod P, so every member has
/// work and a partition is shared by ⌈M/P⌉ or ⌊M/P⌋ members.
pub fn simple_assignment(
    subscriptions: &BTreeMap<String, BTreeSet<TopicId>>,
    partitions: &BTreeMap<TopicId, i32>,
) -> BTreeMap<String, Assignment> {
    let mut targets: BTreeMap<String, Assignment> = subscriptions
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    for (topic, &count) in partitions {
        let subscribers: Vec<&String> = subscriptions
            .iter()
            .filter(|(_, ts)| ts.contains(topic))
            .map(|(m, _)| m)
            .collect();
        if subscribers.is_empty() || count <= 0 {
            continue;
        }
        let m = subscribers.len() as i64;
        let p = i64::from(count);
        let pairs: Vec<(usize, i32)> = if m <= p {
            (0..p).map(|i| ((i % m) as usize, i as i32)).collect()
        } else {
            (0..m).map(|j| (j as usize, (j % p) as i32)).collect()
        };
        for (member, partition) in pairs {
            if let Some(target) = targets.get_mut(subscribers[member]) {
                target.entry(*topic).or_default().insert(partition);
            }
        }
    }
    targets
}
