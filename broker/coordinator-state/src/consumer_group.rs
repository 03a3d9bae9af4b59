//! One KIP-848 consumer group ("new" protocol, ConsumerGroupHeartbeat):
//! membership, the group epoch, the target assignment and each member's
//! reconciliation toward it.
//!
//! Owns: validating a heartbeat, member epochs and fencing, subscription
//! resolution (names and regular expressions against the topic metadata the
//! owner passes in), bumping the group epoch when membership, subscriptions
//! or the subscribed topics' partition counts change, computing the target
//! assignment (`assignor`), and handing partitions over only once their
//! previous owner no longer owns them. Must not: do I/O, read a clock or
//! know the wire format. Members are stored by the owner (`stored`).
//!
//! Reconciliation: a member at epoch E whose target (at the assignment
//! epoch T > E) drops partitions keeps epoch E and is told to give them up
//! (UnrevokedPartitions); once a heartbeat reports them no longer owned it
//! moves to epoch T and receives the partitions of its target that no other
//! member still holds; partitions still held elsewhere arrive on a later
//! heartbeat (UnreleasedPartitions).

use std::collections::{BTreeMap, BTreeSet};

use regex::{Regex, RegexBuilder};

use crate::assignor::{Assignment, Assignor, TopicId};
pub use crate::consumer_member::{ConsumerMember, MemberState};
use crate::migration::MigrationPolicy;
use crate::types::{GroupError, Millis};

/// Longest member id, instance id, rack id, assignor name or topic name a
/// heartbeat may carry.
pub const MAX_STRING_BYTES: usize = 1024;
/// Most topic names one member may subscribe to.
pub const MAX_SUBSCRIBED_TOPICS: usize = 10_000;
/// Longest SubscribedTopicRegex pattern.
pub const MAX_REGEX_BYTES: usize = 1024;
/// Bound of a compiled regular expression (RegexBuilder::size_limit).
pub const REGEX_SIZE_LIMIT: usize = 256 * 1024;

/// Broker-wide settings (Kafka's `group.consumer.*` configs).
#[derive(Debug, Clone, Copy)]
pub struct ConsumerGroupConfig {
    pub session_timeout_ms: u64,
    pub heartbeat_interval_ms: u64,
    /// Kafka's default is unbounded; Chronik bounds it.
    pub max_size: usize,
    /// group.consumer.migration.policy: which online conversions between
    /// classic and consumer groups are allowed (`migration`).
    pub migration_policy: MigrationPolicy,
}

impl Default for ConsumerGroupConfig {
    fn default() -> Self {
        ConsumerGroupConfig {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            max_size: 1_000,
            migration_policy: MigrationPolicy::Bidirectional,
        }
    }
}

/// The topics a heartbeat may subscribe to, as of one metadata version
/// (the owner's; subscriptions are re-resolved for every member only when
/// it changes).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TopicMetadata {
    pub version: u64,
    /// name → (id, partition count)
    pub topics: BTreeMap<String, (TopicId, i32)>,
}

/// A ConsumerGroupHeartbeat, independent of the wire version.
#[derive(Debug, Clone, Default)]
pub struct HeartbeatRequest {
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// -1: unchanged.
    pub rebalance_timeout_ms: i32,
    /// None: unchanged.
    pub subscribed_topic_names: Option<Vec<String>>,
    /// None: unchanged; Some(""): no regex.
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    /// The partitions the member owns; None: unchanged since last time.
    pub owned: Option<Assignment>,
    pub client_id: String,
    pub client_host: String,
    /// v1+: the client generates its member id; joining without one is
    /// INVALID_REQUEST.
    pub client_member_id: bool,
    /// The topics this member's regex may resolve to: those its principal
    /// may DESCRIBE (Kafka's rule), as of this heartbeat. None: no
    /// authorizer, every topic.
    pub regex_topics_allowed: Option<std::sync::Arc<BTreeSet<String>>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HeartbeatReply {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// Partitions the member may own now; None when unchanged.
    pub assignment: Option<Assignment>,
}

/// ConsumerGroupDescribe's group states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerGroupState {
    Empty,
    Reconciling,
    Stable,
}

impl ConsumerGroupState {
    pub fn kafka_name(self) -> &'static str {
        match self {
            ConsumerGroupState::Empty => "Empty",
            ConsumerGroupState::Reconciling => "Reconciling",
            ConsumerGroupState::Stable => "Stable",
        }
    }
}

#[derive(Debug)]
pub struct ConsumerGroup {
    pub(crate) group_id: String,
    pub(crate) config: ConsumerGroupConfig,
    pub(crate) group_epoch: i32,
    pub(crate) assignment_epoch: i32,
    pub(crate) members: BTreeMap<String, ConsumerMember>,
    pub(crate) target: BTreeMap<String, Assignment>,
    /// Partition counts of every topic some member subscribes to.
    pub(crate) partitions: BTreeMap<TopicId, i32>,
    /// The metadata version every member's subscription was resolved at.
    pub(crate) resolved_version: Option<u64>,
}

impl ConsumerGroup {
    pub fn new(group_id: &str, config: ConsumerGroupConfig) -> ConsumerGroup {
        ConsumerGroup {
            group_id: group_id.to_string(),
            config,
            group_epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            partitions: BTreeMap::new(),
            resolved_version: None,
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
    pub fn members(&self) -> impl Iterator<Item = &ConsumerMember> {
        self.members.values()
    }
    /// Partition counts of every topic some member subscribes to.
    pub fn subscribed_partitions(&self) -> &BTreeMap<TopicId, i32> {
        &self.partitions
    }
    pub fn has_members(&self) -> bool {
        !self.members.is_empty()
    }
    pub fn target_of(&self, member_id: &str) -> Assignment {
        self.target.get(member_id).cloned().unwrap_or_default()
    }
    /// The assignor members ask for most (ties: by name), else the default.
    pub fn assignor(&self) -> Assignor {
        let mut votes: BTreeMap<&'static str, (usize, Assignor)> = BTreeMap::new();
        for a in self.members.values().filter_map(|m| m.server_assignor) {
            votes.entry(a.name()).or_insert((0, a)).0 += 1;
        }
        votes
            .values()
            .max_by_key(|(n, a)| (*n, std::cmp::Reverse(a.name())))
            .map_or(Assignor::DEFAULT, |(_, a)| *a)
    }

    pub fn state(&self) -> ConsumerGroupState {
        if self.members.is_empty() {
            ConsumerGroupState::Empty
        } else if self
            .members
            .values()
            .all(|m| m.state == MemberState::Stable && m.member_epoch == self.assignment_epoch)
        {
            ConsumerGroupState::Stable
        } else {
            ConsumerGroupState::Reconciling
        }
    }

    /// ConsumerGroupHeartbeat. `fresh_member_id` is used when a v0 member
    /// joins without an id; `metadata` is the cluster's current topics.
    pub fn heartbeat(
        &mut self,
        request: HeartbeatRequest,
        fresh_member_id: String,
        metadata: &TopicMetadata,
        now: Millis,
    ) -> Result<HeartbeatReply, GroupError> {
        let regex = validate(&request)?;
        let joined = match request.member_epoch {
            -1 | -2 => return self.leave(&request, now),
            0 => self.join(&request, fresh_member_id.clone(), regex.clone(), now)?,
            _ => self.check_epoch(&request).map(|()| false)?,
        };
        let member_id = if request.member_id.is_empty() {
            fresh_member_id
        } else {
            request.member_id.clone()
        };
        let Some(member) = self.members.get_mut(&member_id) else {
            return Err(GroupError::UnknownMemberId);
        };
        let before = member.assigned.clone();
        let epoch_before = member.member_epoch;
        let (subscription_changed, re_resolve) = update_subscription(member, &request, regex);
        let mut changed = subscription_changed | joined;
        member.last_heard_ms = now;
        if request.rebalance_timeout_ms >= 0 {
            member.rebalance_timeout_ms = u64::try_from(request.rebalance_timeout_ms).unwrap_or(0);
        }
        member.client_id.clone_from(&request.client_id);
        member.client_host.clone_from(&request.client_host);
        changed |= self.refresh_subscriptions(metadata, &member_id, changed | re_resolve);
        if changed {
            self.group_epoch += 1;
        }
        if self.group_epoch > self.assignment_epoch {
            self.compute_target();
        }
        self.reconcile(&member_id, request.owned.as_ref(), now);
        let member = self
            .members
            .get(&member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        let resend = request.member_epoch == 0 || request.member_epoch != epoch_before;
        Ok(HeartbeatReply {
            member_id,
            member_epoch: member.member_epoch,
            heartbeat_interval_ms: i32::try_from(self.config.heartbeat_interval_ms)
                .unwrap_or(i32::MAX),
            assignment: (resend || member.assigned != before).then(|| member.assigned.clone()),
        })
    }

    /// Advances time: members silent for the session timeout, and members
    /// that did not revoke within their rebalance timeout, are removed.
    pub fn tick(&mut self, now: Millis) {
        let session = self.config.session_timeout_ms;
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| m.expired(now, session))
            .map(|m| m.member_id.clone())
            .collect();
        if expired.is_empty() {
            return;
        }
        for member_id in expired {
            self.members.remove(&member_id);
        }
        self.membership_changed();
    }

    /// OffsetCommit from (member, epoch): epoch < 0 is a commit from outside
    /// the group (admin, manual assignment), allowed only while it is empty.
    pub fn check_commit(&self, member_id: &str, member_epoch: i32) -> Result<(), GroupError> {
        if member_epoch < 0 {
            return match self.members.is_empty() {
                true => Ok(()),
                false => Err(GroupError::UnknownMemberId),
            };
        }
        self.check_member_epoch(member_id, member_epoch)
    }

    /// OffsetFetch v9 from (member, epoch); no member id is an admin fetch.
    pub fn check_fetch(
        &self,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), GroupError> {
        match member_id {
            None | Some("") if member_epoch < 0 => Ok(()),
            _ => self.check_member_epoch(member_id.unwrap_or_default(), member_epoch),
        }
    }

    fn check_member_epoch(&self, member_id: &str, member_epoch: i32) -> Result<(), GroupError> {
        let member = self
            .members
            .get(member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        match member.member_epoch == member_epoch {
            true => Ok(()),
            // A classic member's epoch is its generation.
            false if member.classic.is_some() => Err(GroupError::IllegalGeneration),
            false => Err(GroupError::StaleMemberEpoch),
        }
    }

    fn leave(
        &mut self,
        request: &HeartbeatRequest,
        now: Millis,
    ) -> Result<HeartbeatReply, GroupError> {
        let member = self
            .members
            .get_mut(&request.member_id)
            .filter(|m| m.classic.is_none())
            .ok_or(GroupError::UnknownMemberId)?;
        if request.member_epoch == -2 {
            member.departed = true;
            member.last_heard_ms = now;
        } else {
            self.members.remove(&request.member_id);
            self.membership_changed();
        }
        Ok(HeartbeatReply {
            member_id: request.member_id.clone(),
            member_epoch: request.member_epoch,
            heartbeat_interval_ms: 0,
            assignment: None,
        })
    }

    /// Epoch 0: a new member, a known one rejoining, or a static member
    /// replacing its departed predecessor (inheriting its assignment).
    /// True when the group has a new member.
    fn join(
        &mut self,
        request: &HeartbeatRequest,
        fresh_member_id: String,
        regex: Option<Regex>,
        now: Millis,
    ) -> Result<bool, GroupError> {
        let member_id = if request.member_id.is_empty() {
            fresh_member_id
        } else {
            request.member_id.clone()
        };
        let predecessor = request.instance_id.as_ref().and_then(|instance| {
            self.members
                .values()
                .find(|m| m.instance_id.as_ref() == Some(instance) && m.member_id != member_id)
        });
        if let Some(previous) = predecessor {
            if !previous.departed {
                return Err(GroupError::UnreleasedInstanceId);
            }
            let previous_id = previous.member_id.clone();
            if let Some(mut member) = self.members.remove(&previous_id) {
                member.member_id.clone_from(&member_id);
                member.departed = false;
                self.members.insert(member_id.clone(), member);
            }
            if let Some(target) = self.target.remove(&previous_id) {
                self.target.insert(member_id, target);
            }
            return Ok(false);
        }
        if let Some(member) = self.members.get_mut(&member_id) {
            if member.classic.is_some() {
                return Err(GroupError::UnknownMemberId);
            }
            member.departed = false;
            return Ok(false);
        }
        if self.members.len() >= self.config.max_size {
            return Err(GroupError::GroupMaxSizeReached);
        }
        let mut member = ConsumerMember::new(member_id.clone(), request.instance_id.clone(), now);
        member.regex = regex;
        self.members.insert(member_id, member);
        Ok(true)
    }

    /// A heartbeat at epoch > 0 must carry the member's epoch, or its
    /// previous one when the answer that moved it on was lost (then it may
    /// own nothing beyond what it is assigned).
    fn check_epoch(&self, request: &HeartbeatRequest) -> Result<(), GroupError> {
        let member = self
            .members
            .get(&request.member_id)
            .filter(|m| m.classic.is_none())
            .ok_or(GroupError::UnknownMemberId)?;
        if request.member_epoch == member.member_epoch {
            return Ok(());
        }
        let lost_reply = request.member_epoch == member.previous_member_epoch
            && request
                .owned
                .as_ref()
                .is_some_and(|owned| is_subset(owned, &member.assigned));
        match lost_reply {
            true => Ok(()),
            false => Err(GroupError::FencedMemberEpoch),
        }
    }

    pub(crate) fn membership_changed(&mut self) {
        let live: BTreeSet<&String> = self.members.keys().collect();
        self.target.retain(|m, _| live.contains(m));
        self.group_epoch += 1;
        self.compute_target();
    }

    /// Resolves subscriptions against `metadata` — every member's when the
    /// metadata version changed, else `member_id`'s when its subscription
    /// did (`member_changed`), else nothing — and the subscribed topics'
    /// partition counts; true when any of them changed.
    pub(crate) fn refresh_subscriptions(
        &mut self,
        metadata: &TopicMetadata,
        member_id: &str,
        member_changed: bool,
    ) -> bool {
        let everyone = self.resolved_version != Some(metadata.version);
        if !everyone && !member_changed {
            return false;
        }
        let mut changed = false;
        for member in self.members.values_mut() {
            if !everyone && member.member_id != member_id {
                continue;
            }
            let ids: BTreeSet<TopicId> = metadata
                .topics
                .iter()
                .filter(|(name, _)| member.subscribes_to(name))
                .map(|(_, (id, _))| *id)
                .collect();
            changed |= ids != member.subscribed_ids;
            member.subscribed_ids = ids;
        }
        let subscribed: BTreeSet<&TopicId> = self
            .members
            .values()
            .flat_map(|m| &m.subscribed_ids)
            .collect();
        let partitions: BTreeMap<TopicId, i32> = metadata
            .topics
            .values()
            .filter(|(id, _)| subscribed.contains(id))
            .map(|(id, count)| (*id, *count))
            .collect();
        changed |= partitions != self.partitions;
        self.partitions = partitions;
        self.resolved_version = Some(metadata.version);
        changed
    }

    pub(crate) fn compute_target(&mut self) {
        let subscriptions: BTreeMap<String, BTreeSet<TopicId>> = self
            .members
            .values()
            .map(|m| (m.member_id.clone(), m.subscribed_ids.clone()))
            .collect();
        self.target = self
            .assignor()
            .assign(&subscriptions, &self.partitions, &self.target);
        self.assignment_epoch = self.group_epoch;
    }

    /// Moves `member_id` toward its target (see the module header).
    pub(crate) fn reconcile(&mut self, member_id: &str, owned: Option<&Assignment>, now: Millis) {
        let target = self.target_of(member_id);
        let assignment_epoch = self.assignment_epoch;
        let Some(member) = self.members.get_mut(member_id) else {
            return;
        };
        if member.state == MemberState::UnrevokedPartitions {
            let still_owned = owned.is_none_or(|o| intersects(o, &member.revoking));
            if still_owned {
                return;
            }
            member.revoking.clear();
            member.revoke_deadline_ms = None;
            member.state = MemberState::Stable;
        }
        if member.state == MemberState::Stable && member.member_epoch == assignment_epoch {
            return;
        }
        let revoke = difference(&member.assigned, &target);
        if !revoke.is_empty() {
            member.assigned = intersection(&member.assigned, &target);
            member.revoking = revoke;
            member.state = MemberState::UnrevokedPartitions;
            member.revoke_deadline_ms = Some(now + member.rebalance_timeout_ms);
            return;
        }
        let wanted = difference(&target, &member.assigned);
        let held_by_others = self.held_by_others(member_id, &wanted);
        let Some(member) = self.members.get_mut(member_id) else {
            return;
        };
        for (topic, p) in flatten(&wanted) {
            if !held_by_others.contains(&(topic, p)) {
                member.assigned.entry(topic).or_default().insert(p);
            }
        }
        if member.member_epoch != assignment_epoch {
            member.previous_member_epoch = member.member_epoch;
            member.member_epoch = assignment_epoch;
        }
        member.state = match held_by_others.is_empty() {
            true => MemberState::Stable,
            false => MemberState::UnreleasedPartitions,
        };
    }
}

impl ConsumerGroup {
    /// Which of `wanted` members other than `member_id` still own (or are
    /// still revoking).
    pub(crate) fn held_by_others(
        &self,
        member_id: &str,
        wanted: &Assignment,
    ) -> BTreeSet<(TopicId, i32)> {
        if wanted.is_empty() {
            return BTreeSet::new();
        }
        self.members
            .values()
            .filter(|m| m.member_id != member_id)
            .flat_map(|m| flatten(&m.assigned).chain(flatten(&m.revoking)))
            .filter(|(topic, p)| wanted.get(topic).is_some_and(|ps| ps.contains(p)))
            .collect()
    }
}

/// The request's own checks (Kafka's INVALID_REQUEST rules, the bounds,
/// the assignor name); returns the compiled regex when one is given.
fn validate(request: &HeartbeatRequest) -> Result<Option<Regex>, GroupError> {
    let too_long = |s: &Option<String>| s.as_ref().is_some_and(|s| s.len() > MAX_STRING_BYTES);
    if request.member_id.len() > MAX_STRING_BYTES
        || too_long(&request.instance_id)
        || too_long(&request.rack_id)
        || too_long(&request.server_assignor)
        || request.member_epoch < -2
        || request.instance_id.as_deref() == Some("")
        || (request.member_epoch == -2 && request.instance_id.is_none())
        || (request.member_epoch != 0 && request.member_id.is_empty())
    {
        return Err(GroupError::InvalidRequest);
    }
    if let Some(names) = &request.subscribed_topic_names {
        if names.len() > MAX_SUBSCRIBED_TOPICS || names.iter().any(|n| n.len() > MAX_STRING_BYTES) {
            return Err(GroupError::InvalidRequest);
        }
    }
    if request.member_epoch == 0 {
        let subscribes =
            request.subscribed_topic_names.is_some() || request.subscribed_topic_regex.is_some();
        if (request.client_member_id && request.member_id.is_empty())
            || request.rebalance_timeout_ms < 0
            || !subscribes
            || request.owned.as_ref().is_none_or(|o| !o.is_empty())
        {
            return Err(GroupError::InvalidRequest);
        }
    }
    if let Some(name) = &request.server_assignor {
        Assignor::from_name(name).ok_or(GroupError::UnsupportedAssignor)?;
    }
    match request.subscribed_topic_regex.as_deref() {
        None | Some("") => Ok(None),
        Some(pattern) if pattern.len() > MAX_REGEX_BYTES => {
            Err(GroupError::InvalidRegularExpression)
        }
        Some(pattern) => compile_regex(pattern)
            .map(Some)
            .map_err(|_| GroupError::InvalidRegularExpression),
    }
}

/// A SubscribedTopicRegex as Kafka matches it: on the whole topic name,
/// bounded in size.
pub(crate) fn compile_regex(pattern: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(&format!("^(?:{pattern})$"))
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build()
}

/// Applies the subscription fields the request carries: (whether the
/// subscription changed, whether the member's regex must be resolved again
/// because the topics it may match changed — a change of the group only if
/// the resolution differs).
fn update_subscription(
    member: &mut ConsumerMember,
    request: &HeartbeatRequest,
    regex: Option<Regex>,
) -> (bool, bool) {
    let mut changed = false;
    if let Some(names) = &request.subscribed_topic_names {
        let mut names = names.clone();
        names.sort();
        names.dedup();
        changed |= names != member.subscribed_topic_names;
        member.subscribed_topic_names = names;
    }
    if let Some(pattern) = &request.subscribed_topic_regex {
        let pattern = Some(pattern.clone()).filter(|p| !p.is_empty());
        changed |= pattern != member.subscribed_topic_regex;
        member.subscribed_topic_regex = pattern;
        member.regex = regex;
    }
    // the ACLs (or the topics) may have changed what the regex may match
    let re_resolve = member.regex.is_some() && request.regex_topics_allowed != member.regex_allowed;
    member
        .regex_allowed
        .clone_from(&request.regex_topics_allowed);
    if let Some(name) = &request.server_assignor {
        let assignor = Assignor::from_name(name);
        changed |= assignor != member.server_assignor;
        member.server_assignor = assignor;
    }
    if request.instance_id.is_some() {
        member.instance_id.clone_from(&request.instance_id);
    }
    if request.rack_id.is_some() {
        member.rack_id.clone_from(&request.rack_id);
    }
    (changed, re_resolve)
}

pub(crate) fn flatten(a: &Assignment) -> impl Iterator<Item = (TopicId, i32)> + '_ {
    a.iter()
        .flat_map(|(topic, ps)| ps.iter().map(move |p| (*topic, *p)))
}

fn filter_by(a: &Assignment, b: &Assignment, keep_if_in_b: bool) -> Assignment {
    let mut out = Assignment::new();
    for (topic, p) in flatten(a) {
        let in_b = b.get(&topic).is_some_and(|ps| ps.contains(&p));
        if in_b == keep_if_in_b {
            out.entry(topic).or_default().insert(p);
        }
    }
    out
}

pub(crate) fn difference(a: &Assignment, b: &Assignment) -> Assignment {
    filter_by(a, b, false)
}

fn intersection(a: &Assignment, b: &Assignment) -> Assignment {
    filter_by(a, b, true)
}

fn intersects(a: &Assignment, b: &Assignment) -> bool {
    !intersection(a, b).is_empty()
}

fn is_subset(a: &Assignment, b: &Assignment) -> bool {
    difference(a, b).is_empty()
}
