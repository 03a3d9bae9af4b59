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
/// members until no eligible move narrows a gap of two or more. Members are
/// indexed and kept ordered by load, so a homogeneous group costs about
/// O(partitions · log members).
fn uniform(
    subscriptions: &BTreeMap<String, BTreeSet<TopicId>>,
    partitions: &BTreeMap<TopicId, i32>,
    current: &BTreeMap<String, Assignment>,
) -> BTreeMap<String, Assignment> {
    let subs: Vec<&BTreeSet<TopicId>> = subscriptions.values().collect();
    let index: BTreeMap<&str, usize> = subscriptions
        .keys()
        .enumerate()
        .map(|(i, m)| (m.as_str(), i))
        .collect();
    let all: Vec<(TopicId, i32)> = partitions
        .iter()
        .filter(|(topic, _)| subs.iter().any(|ts| ts.contains(*topic)))
        .flat_map(|(topic, &count)| (0..count.max(0)).map(move |p| (*topic, p)))
        .collect();
    let mut targets = Loads::new(subs.len());
    let active = subs.iter().filter(|ts| !ts.is_empty()).count();
    if active > 0 {
        let fair_share = all.len().div_ceil(active);
        let mut owner_of: BTreeMap<(TopicId, i32), usize> = BTreeMap::new();
        for (member, assignment) in current {
            if let Some(&i) = index.get(member.as_str()) {
                for (topic, ps) in assignment {
                    owner_of.extend(ps.iter().map(|p| ((*topic, *p), i)));
                }
            }
        }
        let mut unassigned = Vec::new();
        for &(topic, p) in &all {
            match owner_of.get(&(topic, p)) {
                Some(&i) if subs[i].contains(&topic) && targets.count(i) < fair_share => {
                    targets.give(i, topic, p)
                }
                _ => unassigned.push((topic, p)),
            }
        }
        for (topic, p) in unassigned {
            if let Some(i) = targets.least_loaded(|i| subs[i].contains(&topic)) {
                targets.give(i, topic, p);
            }
        }
        for _ in 0..all.len() {
            if !targets.move_one(&subs) {
                break;
            }
        }
    }
    subscriptions
        .keys()
        .cloned()
        .zip(targets.assignments)
        .collect()
}

/// Members' assignments by index, and the members ordered by load.
struct Loads {
    assignments: Vec<Assignment>,
    counts: Vec<usize>,
    by_load: BTreeSet<(usize, usize)>,
}

impl Loads {
    fn new(members: usize) -> Loads {
        Loads {
            assignments: vec![Assignment::new(); members],
            counts: vec![0; members],
            by_load: (0..members).map(|i| (0, i)).collect(),
        }
    }

    fn count(&self, i: usize) -> usize {
        self.counts[i]
    }

    fn set_count(&mut self, i: usize, count: usize) {
        self.by_load.remove(&(self.counts[i], i));
        self.counts[i] = count;
        self.by_load.insert((count, i));
    }

    fn give(&mut self, i: usize, topic: TopicId, p: i32) {
        self.assignments[i].entry(topic).or_default().insert(p);
        self.set_count(i, self.counts[i] + 1);
    }

    fn take(&mut self, i: usize, topic: TopicId, p: i32) {
        if let Some(ps) = self.assignments[i].get_mut(&topic) {
            ps.remove(&p);
            if ps.is_empty() {
                self.assignments[i].remove(&topic);
            }
        }
        self.set_count(i, self.counts[i].saturating_sub(1));
    }

    fn least_loaded(&self, eligible: impl Fn(usize) -> bool) -> Option<usize> {
        self.by_load.iter().map(|&(_, i)| i).find(|&i| eligible(i))
    }

    /// Moves one partition from a member holding at least two more than a
    /// less loaded member subscribed to it; false when there is none.
    fn move_one(&mut self, subs: &[&BTreeSet<TopicId>]) -> bool {
        let found = self.by_load.iter().find_map(|&(low, receiver)| {
            self.by_load
                .iter()
                .rev()
                .take_while(|&&(high, _)| high >= low + 2)
                .find_map(|&(_, giver)| {
                    self.assignments[giver]
                        .iter()
                        .filter(|(topic, _)| subs[receiver].contains(*topic))
                        .find_map(|(topic, ps)| ps.iter().next_back().map(|p| (*topic, *p)))
                        .map(|(topic, p)| (giver, receiver, topic, p))
                })
        });
        match found {
            Some((giver, receiver, topic, p)) => {
                self.take(giver, topic, p);
                self.give(receiver, topic, p);
                true
            }
            None => false,
        }
    }
}
