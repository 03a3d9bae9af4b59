//! KIP-848 server-side assignors: `uniform` (Kafka's default, balanced and
//! sticky) and `range` (contiguous ranges per topic, like the client range
//! assignor).
//!
//! Owns: computing a group's target assignment from the members'
//! subscriptions (already resolved to topic ids), the partition counts and
//! the current target. Must not: know about epochs, reconciliation or the
//! wire format; every member in the input appears in the output.

use std::collections::{BTreeMap, BTreeSet};

/// A topic's 16-byte id.
pub type TopicId = [u8; 16];
/// Partitions by topic id.
pub type Assignment = BTreeMap<TopicId, BTreeSet<i32>>;

/// The server-side assignors a member may name in ServerAssignor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assignor {
    Uniform,
    Range,
}

impl Assignor {
    /// The default (Kafka's group.consumer.assignors first entry).
    pub const DEFAULT: Assignor = Assignor::Uniform;

    pub fn from_name(name: &str) -> Option<Assignor> {
        match name {
            "uniform" => Some(Assignor::Uniform),
            "range" => Some(Assignor::Range),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Assignor::Uniform => "uniform",
            Assignor::Range => "range",
        }
    }

    /// The target assignment of every member in `subscriptions`.
    /// `partitions`: partition count by topic id (topics missing here are
    /// not assigned); `current`: the previous target (uniform keeps what it
    /// can of it).
    pub fn assign(
        self,
        subscriptions: &BTreeMap<String, BTreeSet<TopicId>>,
        partitions: &BTreeMap<TopicId, i32>,
        current: &BTreeMap<String, Assignment>,
    ) -> BTreeMap<String, Assignment> {
        match self {
            Assignor::Uniform => uniform(subscriptions, partitions, current),
            Assignor::Range => range(subscriptions, partitions),
        }
    }
}

fn empty_targets(
    subscriptions: &BTreeMap<String, BTreeSet<TopicId>>,
) -> BTreeMap<String, Assignment> {
    subscriptions
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect()
}

/// Per topic, its subscribers sorted by member id share the partitions in
/// contiguous ranges; the first `count % subscribers` get one more.
fn range(
    subscriptions: &BTreeMap<String, BTreeSet<TopicId>>,
    partitions: &BTreeMap<TopicId, i32>,
) -> BTreeMap<String, Assignment> {
    let mut targets = empty_targets(subscriptions);
    for (topic, &count) in partitions {
        let subscribers: Vec<&String> = subscriptions
            .iter()
            .filter(|(_, topics)| topics.contains(topic))
            .map(|(m, _)| m)
            .collect();
        if subscribers.is_empty() || count <= 0 {
            continue;
        }
        let n = subscribers.len() as i32;
        let (per, extra) = (count / n, count % n);
        let mut next = 0;
        for (i, member) in subscribers.into_iter().enumerate() {
            let take = per + i32::from((i as i32) < extra);
            if take > 0 {
                if let Some(target) = targets.get_mut(member) {
                    target.entry(*topic).or_default().extend(next..next + take);
                }
            }
            next += take;
        }
    }
    targets
}

/// Balanced and sticky: every partition keeps its current owner while that
/// owner is subscribed and below its fair share; the rest go to the least
/// loaded subscriber; then partitions move from the most to the least loaded
/// members until no eligible move narrows the gap below two.
fn uniform(
    subscriptions: &BTreeMap<String, BTreeSet<TopicId>>,
    partitions: &BTreeMap<TopicId, i32>,
    current: &BTreeMap<String, Assignment>,
) -> BTreeMap<String, Assignment> {
    let mut targets = empty_targets(subscriptions);
    let subscribed = |member: &str, topic: &TopicId| {
        subscriptions
            .get(member)
            .is_some_and(|topics| topics.contains(topic))
    };
    let all: Vec<(TopicId, i32)> = partitions
        .iter()
        .filter(|(topic, _)| subscriptions.values().any(|ts| ts.contains(*topic)))
        .flat_map(|(topic, &count)| (0..count.max(0)).map(move |p| (*topic, p)))
        .collect();
    let active = subscriptions.values().filter(|ts| !ts.is_empty()).count();
    if active == 0 {
        return targets;
    }
    let fair_share = all.len().div_ceil(active);
    let mut counts: BTreeMap<String, usize> = targets.keys().map(|m| (m.clone(), 0)).collect();
    let mut owner_of: BTreeMap<(TopicId, i32), &str> = BTreeMap::new();
    for (member, assignment) in current {
        for (topic, ps) in assignment {
            for p in ps {
                owner_of.insert((*topic, *p), member);
            }
        }
    }
    let mut unassigned = Vec::new();
    for &(topic, p) in &all {
        let keep = owner_of.get(&(topic, p)).copied().filter(|owner| {
            subscribed(owner, &topic) && counts.get(*owner).is_some_and(|c| *c < fair_share)
        });
        match keep {
            Some(owner) => give(&mut targets, &mut counts, owner, topic, p),
            None => unassigned.push((topic, p)),
        }
    }
    for (topic, p) in unassigned {
        let least = counts
            .iter()
            .filter(|(m, _)| subscribed(m, &topic))
            .min_by_key(|(m, c)| (**c, (*m).clone()))
            .map(|(m, _)| m.clone());
        if let Some(member) = least {
            give(&mut targets, &mut counts, &member, topic, p);
        }
    }
    rebalance(&mut targets, &mut counts, &subscribed, all.len());
    targets
}

fn give(
    targets: &mut BTreeMap<String, Assignment>,
    counts: &mut BTreeMap<String, usize>,
    member: &str,
    topic: TopicId,
    p: i32,
) {
    if let Some(target) = targets.get_mut(member) {
        target.entry(topic).or_default().insert(p);
    }
    if let Some(c) = counts.get_mut(member) {
        *c += 1;
    }
}

/// Moves single partitions from a member holding at least two more than the
/// least loaded one that subscribes to it; at most `limit` moves.
fn rebalance(
    targets: &mut BTreeMap<String, Assignment>,
    counts: &mut BTreeMap<String, usize>,
    subscribed: &dyn Fn(&str, &TopicId) -> bool,
    limit: usize,
) {
    for _ in 0..limit {
        let mut by_load: Vec<(usize, String)> =
            counts.iter().map(|(m, c)| (*c, m.clone())).collect();
        by_load.sort();
        let mv = by_load.iter().find_map(|(low, receiver)| {
            by_load.iter().rev().find_map(|(high, giver)| {
                if *high < low + 2 {
                    return None;
                }
                targets.get(giver)?.iter().find_map(|(topic, ps)| {
                    let p = ps.iter().next_back()?;
                    subscribed(receiver, topic)
                        .then(|| (giver.clone(), receiver.clone(), *topic, *p))
                })
            })
        });
        let Some((giver, receiver, topic, p)) = mv else {
            return;
        };
        if let Some(ps) = targets.get_mut(&giver).and_then(|t| t.get_mut(&topic)) {
            ps.remove(&p);
            if ps.is_empty() {
                if let Some(t) = targets.get_mut(&giver) {
                    t.remove(&topic);
                }
            }
        }
        if let Some(c) = counts.get_mut(&giver) {
            *c -= 1;
        }
        give(targets, counts, &receiver, topic, p);
    }
}
