//! A simulated three-node cluster: each node owns a log (a Vec of records),
//! a leader-epoch cache kept through its checkpoint text, a high watermark
//! and a leader or follower state machine; a controller holds the partition
//! registration; a network queue delivers one message at a time, in order,
//! dropping whatever involves a dead node. The harness plays the owner:
//! it performs every action the state machines return.
//!
//! Every high watermark any node reports is checked against what earlier
//! reports saw at those offsets, so an acknowledged-then-lost record fails
//! the test where it happens.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::*;

const A: ReplicaId = 1;
const B: ReplicaId = 2;
const C: ReplicaId = 3;
const CONTROLLER: ReplicaId = 0;
const ROUND_MS: Millis = 100;
const MAX_FETCH_RECORDS: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Record {
    leader_epoch: i32,
    value: u64,
}

#[derive(Debug)]
enum Role {
    Idle,
    Leader(PartitionReplicaState),
    Follower(FollowerState),
}

#[derive(Debug)]
struct Node {
    alive: bool,
    log: Vec<Record>,
    cache: LeaderEpochCache,
    /// What the owner last wrote to the leader-epoch-checkpoint file.
    checkpoint: String,
    high_watermark: i64,
    role: Role,
}

impl Node {
    fn log_end_offset(&self) -> i64 {
        self.log.len() as i64
    }
    fn save_cache(&mut self) {
        self.checkpoint = self.cache.to_checkpoint();
    }
}

#[derive(Debug)]
enum Msg {
    EpochRequest { current_leader_epoch: i32, leader_epoch: i32 },
    EpochResponse { current_leader_epoch: i32, answer: Option<EpochEndOffset> },
    FetchRequest { current_leader_epoch: i32, fetch_offset: i64 },
    FetchResponse { current_leader_epoch: i32, base_offset: i64, records: Vec<Record>, high_watermark: i64 },
    AlterPartition { leader_epoch: i32, isr: BTreeSet<ReplicaId>, version: i32 },
    AlterPartitionResponse(Result<PartitionRegistration>),
}

#[derive(Debug)]
struct Envelope {
    from: ReplicaId,
    to: ReplicaId,
    msg: Msg,
}

/// An acks=all produce waiting at a leader.
#[derive(Debug)]
struct Produce {
    leader: ReplicaId,
    required_offset: i64,
    values: Vec<u64>,
}

#[derive(Debug)]
struct Cluster {
    config: ReplicationConfig,
    nodes: BTreeMap<ReplicaId, Node>,
    controller: PartitionRegistration,
    network: VecDeque<Envelope>,
    now: Millis,
    next_value: u64,
    waiting: Vec<Produce>,
    acknowledged: Vec<u64>,
    /// Produces answered with an error: (values, error).
    failed: Vec<(Vec<u64>, Error)>,
    unacknowledged: Vec<u64>,
    /// Offset -> record, for every offset below any high watermark reported.
    committed: BTreeMap<i64, Record>,
}

impl Cluster {
    fn new(replicas: &[ReplicaId], min_insync_replicas: usize) -> Cluster {
        let nodes = replicas
            .iter()
            .map(|&id| {
                let node = Node {
                    alive: true,
                    log: Vec::new(),
                    cache: LeaderEpochCache::new(),
                    checkpoint: LeaderEpochCache::new().to_checkpoint(),
                    high_watermark: 0,
                    role: Role::Idle,
                };
                (id, node)
            })
            .collect();
        let mut cluster = Cluster {
            config: ReplicationConfig {
                min_insync_replicas,
                replica_lag_time_max_ms: 10_000,
            },
            nodes,
            controller: PartitionRegistration::new(replicas.to_vec()).expect("valid assignment"),
            network: VecDeque::new(),
            now: 0,
            next_value: 0,
            waiting: Vec::new(),
            acknowledged: Vec::new(),
            failed: Vec::new(),
            unacknowledged: Vec::new(),
            committed: BTreeMap::new(),
        };
        cluster.publish_registration();
        cluster
    }

    fn node(&mut self, id: ReplicaId) -> &mut Node {
        self.nodes.get_mut(&id).expect("known node")
    }

    fn leader_state(&self, id: ReplicaId) -> &PartitionReplicaState {
        match &self.nodes[&id].role {
            Role::Leader(s) => s,
            other => panic!("node {id} is not leading: {other:?}"),
        }
    }

    fn send(&mut self, from: ReplicaId, to: ReplicaId, msg: Msg) {
        self.network.push_back(Envelope { from, to, msg });
    }

    /// Every live node applies the controller's registration: the leader
    /// first (so followers' first requests find it leading).
    fn publish_registration(&mut self) {
        let reg = self.controller.clone();
        let leader = reg.leader.expect("an elected leader");
        let mut order = vec![leader];
        order.extend(reg.replicas.iter().copied().filter(|&r| r != leader));
        for id in order {
            if self.nodes[&id].alive {
                self.apply_registration(id, &reg);
            }
        }
    }

    fn apply_registration(&mut self, id: ReplicaId, reg: &PartitionRegistration) {
        let (config, now) = (self.config, self.now);
        let node = self.node(id);
        let leo = node.log_end_offset();
        if reg.leader == Some(id) {
            // Kafka's makeLeader: the new epoch starts at our log end.
            if node.cache.assign(reg.leader_epoch, leo).expect("valid epoch") {
                node.save_cache();
            }
            let (state, actions) = PartitionReplicaState::become_leader(config, reg, id, leo, node.high_watermark, now).expect("become leader");
            node.role = Role::Leader(state);
            self.perform_leader(id, actions);
        } else {
            let leader = reg.leader.expect("an elected leader");
            let (state, actions) = FollowerState::become_follower(id, leader, reg.leader_epoch, &node.cache, leo, node.high_watermark);
            node.role = Role::Follower(state);
            self.perform_follower(id, actions);
        }
    }

    /// The client side of acks=all: refused up front below min ISR,
    /// otherwise appended and left waiting. Returns the required offset.
    fn produce(&mut self, leader: ReplicaId, count: usize) -> i64 {
        let values: Vec<u64> = (0..count as u64).map(|i| self.next_value + i).collect();
        self.next_value += count as u64;
        let node = self.node(leader);
        let Role::Leader(state) = &mut node.role else { panic!("produce to a non-leader {leader}") };
        state.check_min_isr().expect("enough in-sync replicas");
        let leader_epoch = state.leader_epoch();
        let base = node.log.len() as i64;
        if node.cache.assign(leader_epoch, base).expect("valid epoch") {
            node.checkpoint = node.cache.to_checkpoint();
        }
        node.log.extend(values.iter().map(|&value| Record { leader_epoch, value }));
        let required_offset = node.log.len() as i64;
        let Role::Leader(state) = &mut node.role else { unreachable!() };
        let actions = state.append(required_offset).expect("append");
        self.waiting.push(Produce { leader, required_offset, values });
        self.perform_leader(leader, actions);
        required_offset
    }

    fn perform_leader(&mut self, id: ReplicaId, actions: Vec<LeaderAction>) {
        for action in actions {
            match action {
                LeaderAction::HighWatermarkAdvanced(hw) => self.report_high_watermark(id, hw),
                LeaderAction::FollowerLogStartOffsetAdvanced(_) => {}
                LeaderAction::IsrChanged { leader_epoch, isr, version } => {
                    self.send(id, CONTROLLER, Msg::AlterPartition { leader_epoch, isr, version })
                }
            }
        }
        self.answer_waiting_produces(id);
    }

    fn answer_waiting_produces(&mut self, id: ReplicaId) {
        let Role::Leader(state) = &self.nodes[&id].role else { return };
        let mut still_waiting = Vec::new();
        for p in std::mem::take(&mut self.waiting) {
            if p.leader != id {
                still_waiting.push(p);
                continue;
            }
            match state.acks_all_satisfied(p.required_offset) {
                Ok(true) => self.acknowledged.extend(p.values),
                Ok(false) => still_waiting.push(p),
                Err(e) => self.failed.push((p.values, e)),
            }
        }
        self.waiting = still_waiting;
    }

    fn perform_follower(&mut self, id: ReplicaId, actions: Vec<FollowerAction>) {
        for action in actions {
            match action {
                FollowerAction::SendOffsetForLeaderEpoch { leader_id, current_leader_epoch, leader_epoch } => {
                    self.send(id, leader_id, Msg::EpochRequest { current_leader_epoch, leader_epoch })
                }
                FollowerAction::Truncate { offset } => {
                    let node = self.node(id);
                    node.log.truncate(offset as usize);
                    node.high_watermark = node.high_watermark.min(offset);
                    if node.cache.truncate_from_end(offset) {
                        node.save_cache();
                    }
                }
                FollowerAction::SendFetch { leader_id, current_leader_epoch, fetch_offset } => {
                    self.send(id, leader_id, Msg::FetchRequest { current_leader_epoch, fetch_offset })
                }
                FollowerAction::HighWatermarkAdvanced(hw) => self.report_high_watermark(id, hw),
            }
        }
    }

    /// The no-loss check: the records below a reported high watermark must
    /// be the ones earlier reports saw there.
    fn report_high_watermark(&mut self, id: ReplicaId, hw: i64) {
        let node = self.node(id);
        node.high_watermark = hw;
        let log = node.log.clone();
        for offset in 0..hw {
            let record = log[offset as usize];
            let seen = *self.committed.entry(offset).or_insert(record);
            assert_eq!(record, seen, "node {id} reports high watermark {hw} but offset {offset} changed");
        }
    }

    fn deliver(&mut self, env: Envelope) {
        let alive = |id: ReplicaId, nodes: &BTreeMap<ReplicaId, Node>| id == CONTROLLER || nodes[&id].alive;
        if !alive(env.from, &self.nodes) || !alive(env.to, &self.nodes) {
            return;
        }
        let (from, to, now) = (env.from, env.to, self.now);
        match env.msg {
            Msg::AlterPartition { leader_epoch, isr, version } => {
                let result = self.controller.alter_partition(from, leader_epoch, version, isr);
                if let Ok(reg) = &result {
                    self.controller = reg.clone();
                }
                self.send(CONTROLLER, from, Msg::AlterPartitionResponse(result));
            }
            Msg::AlterPartitionResponse(result) => {
                let Role::Leader(state) = &mut self.node(to).role else { return };
                let actions = match result {
                    Ok(reg) if reg.leader_epoch == state.leader_epoch() => {
                        state.isr_committed(reg.leader_epoch, reg.isr, reg.partition_epoch).expect("fresh commit")
                    }
                    _ => {
                        state.isr_change_failed();
                        Vec::new()
                    }
                };
                self.perform_leader(to, actions);
            }
            Msg::EpochRequest { current_leader_epoch, leader_epoch } => {
                let node = self.node(to);
                let Role::Leader(state) = &node.role else { panic!("epoch request to non-leader {to}") };
                state.validate_leader_epoch(Some(current_leader_epoch)).expect("current epoch");
                let answer = node.cache.end_offset_for(leader_epoch, node.log_end_offset());
                self.send(to, from, Msg::EpochResponse { current_leader_epoch, answer });
            }
            Msg::EpochResponse { current_leader_epoch, answer } => {
                let node = self.node(to);
                let Role::Follower(state) = &mut node.role else { return };
                if state.leader_epoch() != current_leader_epoch {
                    return;
                }
                let actions = state.on_epoch_end_offset(&node.cache, answer).expect("truncating");
                self.perform_follower(to, actions);
            }
            Msg::FetchRequest { current_leader_epoch, fetch_offset } => {
                let node = self.node(to);
                let Role::Leader(state) = &mut node.role else { panic!("fetch to non-leader {to}") };
                state.validate_leader_epoch(Some(current_leader_epoch)).expect("current epoch");
                let actions = state.follower_fetch(from, fetch_offset, now).expect("valid fetch");
                self.perform_leader(to, actions);
                let node = self.node(to);
                let Role::Leader(state) = &node.role else { unreachable!() };
                let end = (fetch_offset as usize + MAX_FETCH_RECORDS).min(node.log.len());
                let records = node.log[fetch_offset as usize..end].to_vec();
                let high_watermark = state.high_watermark();
                self.send(to, from, Msg::FetchResponse { current_leader_epoch, base_offset: fetch_offset, records, high_watermark });
            }
            Msg::FetchResponse { current_leader_epoch, base_offset, records, high_watermark } => {
                let node = self.node(to);
                let Role::Follower(state) = &mut node.role else { return };
                if state.leader_epoch() != current_leader_epoch {
                    return;
                }
                assert_eq!(base_offset, node.log.len() as i64, "follower {to} fetched at its log end");
                for (i, r) in records.iter().enumerate() {
                    if node.cache.assign(r.leader_epoch, base_offset + i as i64).expect("valid epoch") {
                        node.checkpoint = node.cache.to_checkpoint();
                    }
                    node.log.push(*r);
                }
                let Role::Follower(state) = &mut node.role else { unreachable!() };
                let actions = state.on_fetch_response(node.log.len() as i64, high_watermark).expect("fetching");
                self.perform_follower(to, actions);
            }
        }
    }

    /// Delivers every message queued at the start of the round, then lets
    /// time pass and ticks the leader.
    fn round(&mut self) {
        for _ in 0..self.network.len() {
            if let Some(env) = self.network.pop_front() {
                self.deliver(env);
            }
        }
        self.now += ROUND_MS;
        let leaders: Vec<ReplicaId> = self.nodes.iter().filter(|(_, n)| matches!(n.role, Role::Leader(_))).map(|(&id, _)| id).collect();
        let now = self.now;
        for id in leaders {
            let Role::Leader(state) = &mut self.node(id).role else { unreachable!() };
            let actions = state.tick(now);
            self.perform_leader(id, actions);
        }
    }

    fn run_until(&mut self, what: &str, done: impl Fn(&Cluster) -> bool) {
        for _ in 0..200 {
            if done(self) {
                return;
            }
            self.round();
        }
        panic!("not reached after 200 rounds: {what}\n{self:#?}");
    }

    /// Delivers only messages to or from `id`, oldest first, until `done`
    /// (every other message waits in the queue).
    fn deliver_involving_until(&mut self, id: ReplicaId, what: &str, done: impl Fn(&Cluster) -> bool) {
        for _ in 0..20 {
            if done(self) {
                return;
            }
            let i = self.network.iter().position(|e| e.from == id || e.to == id).expect("a message for the node");
            let env = self.network.remove(i).expect("in range");
            self.deliver(env);
        }
        panic!("not reached delivering to and from {id}: {what}");
    }

    /// Crash: volatile state and in-flight messages are gone; the log, the
    /// checkpoint and the high watermark stay on disk. Produces waiting at
    /// it are never answered.
    fn kill(&mut self, id: ReplicaId) {
        let node = self.node(id);
        node.alive = false;
        node.role = Role::Idle;
        node.cache = LeaderEpochCache::new();
        self.network.retain(|e| e.from != id && e.to != id);
        let (lost, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.waiting).into_iter().partition(|p| p.leader == id);
        self.unacknowledged.extend(lost.into_iter().flat_map(|p| p.values));
        self.waiting = kept;
    }

    /// Restart: the epoch cache is read back from its checkpoint text.
    fn restart(&mut self, id: ReplicaId) {
        let node = self.node(id);
        node.alive = true;
        node.cache = LeaderEpochCache::from_checkpoint(&node.checkpoint).expect("checkpoint parses");
        let reg = self.controller.clone();
        self.apply_registration(id, &reg);
    }

    /// The controller notices dead brokers and elects cleanly.
    fn fail_over(&mut self) {
        let live: BTreeSet<ReplicaId> = self.nodes.iter().filter(|(_, n)| n.alive).map(|(&id, _)| id).collect();
        self.controller = elect_leader(&self.controller, &live).expect("a live isr member");
        self.publish_registration();
    }

    fn values(&self, id: ReplicaId) -> Vec<u64> {
        self.nodes[&id].log.iter().map(|r| r.value).collect()
    }
}

#[test]
fn failover_loses_nothing_below_any_high_watermark_and_the_old_leader_truncates_its_divergent_tail() {
    let mut cluster = Cluster::new(&[A, B, C], 2);

    // Epoch 0, leader A: five records reach every replica and are acknowledged.
    let required = cluster.produce(A, 5);
    cluster.run_until("first produce acknowledged", |c| c.acknowledged.len() == 5);
    assert_eq!(cluster.leader_state(A).high_watermark(), required);

    // Three more reach B only (C's fetch is held back), then two more reach
    // nobody before A crashes.
    cluster.produce(A, 3);
    cluster.deliver_involving_until(B, "B has 5..8", |c| c.nodes[&B].log.len() == 8);
    assert_eq!((cluster.nodes[&B].log.len(), cluster.nodes[&C].log.len()), (8, 5));
    assert_eq!(cluster.leader_state(A).high_watermark(), 5, "C lacks 5..8");
    cluster.produce(A, 2);
    assert_eq!(cluster.nodes[&A].log.len(), 10);
    let divergent: Vec<u64> = cluster.values(A)[8..].to_vec();
    cluster.kill(A);
    assert_eq!(cluster.unacknowledged, (5..10).collect::<Vec<u64>>(), "acks=all never answered for 5..10");

    // Clean election: B is the first live ISR member in replica order.
    cluster.fail_over();
    assert_eq!((cluster.controller.leader, cluster.controller.leader_epoch), (Some(B), 1));
    assert_eq!(cluster.controller.isr, BTreeSet::from([B, C]), "the dead leader left the isr");
    assert_eq!(cluster.nodes[&B].cache.entries(), [EpochEntry { epoch: 0, start_offset: 0 }, EpochEntry { epoch: 1, start_offset: 8 }]);

    // C truncates nothing (it is behind), catches up, and the high watermark
    // moves to 8 — records 5..8 survive though never acknowledged.
    cluster.run_until("C caught up", |c| c.leader_state(B).high_watermark() == 8);
    let required = cluster.produce(B, 3);
    cluster.run_until("second produce acknowledged", |c| c.acknowledged.len() == 8);
    assert_eq!(cluster.leader_state(B).high_watermark(), required);

    // A returns as a follower of B in epoch 1: B says epoch 0 ended at 8, so
    // A drops offsets 8 and 9, fetches B's records and rejoins the ISR.
    cluster.restart(A);
    assert!(matches!(cluster.nodes[&A].role, Role::Follower(_)));
    cluster.run_until("A back in the isr", |c| c.controller.isr.len() == 3 && c.leader_state(B).isr().committed().len() == 3);
    cluster.run_until("every replica knows the high watermark", |c| c.nodes.values().all(|n| n.high_watermark == 11));

    // No acknowledged record and nothing below any reported high watermark
    // is lost; every log is the same; the divergent tail is gone everywhere.
    let reference = cluster.values(B);
    for id in [A, B, C] {
        let log = cluster.values(id);
        assert_eq!(log, reference, "node {id}'s log");
        for v in &cluster.acknowledged {
            assert!(log.contains(v), "acknowledged value {v} missing on node {id}");
        }
        for v in &divergent {
            assert!(!log.contains(v), "divergent value {v} survived on node {id}");
        }
        for (&offset, record) in &cluster.committed {
            assert_eq!(cluster.nodes[&id].log[offset as usize], *record, "committed offset {offset} on node {id}");
        }
        assert_eq!(cluster.nodes[&id].cache, cluster.nodes[&B].cache, "node {id}'s epoch cache");
    }
    assert_eq!(cluster.committed.len(), 11);
    assert_eq!(cluster.acknowledged, [0, 1, 2, 3, 4, 10, 11, 12]);
    assert!(cluster.waiting.is_empty() && cluster.failed.is_empty());
}

#[test]
fn a_silent_follower_is_shrunk_out_and_acks_all_stops_at_min_isr() {
    let mut cluster = Cluster::new(&[A, B, C], 2);
    cluster.produce(A, 2);
    cluster.run_until("acknowledged", |c| c.acknowledged.len() == 2);
    cluster.kill(C);
    cluster.produce(A, 1);
    cluster.run_until("C shrunk out", |c| c.controller.isr == BTreeSet::from([A, B]));
    cluster.run_until("acknowledged by A and B", |c| c.acknowledged.len() == 3);
    // A dead follower level with an idle leader counts as caught up (the
    // controller fences dead brokers); a write leaves it behind.
    cluster.kill(B);
    cluster.produce(A, 1);
    cluster.run_until("B shrunk out", |c| c.controller.isr == BTreeSet::from([A]));
    cluster.run_until("the waiting produce answered", |c| c.waiting.is_empty());
    assert_eq!(
        cluster.failed,
        [(vec![3], Error::NotEnoughReplicasAfterAppend { required_offset: 4, isr_size: 1, min_insync_replicas: 2 })],
        "appended, then the isr fell below min.insync.replicas"
    );
    let node = &cluster.nodes[&A];
    let Role::Leader(state) = &node.role else { panic!("A leads") };
    assert_eq!(state.check_min_isr(), Err(Error::NotEnoughReplicas { isr_size: 1, min_insync_replicas: 2 }));
    // B comes back, catches up and restores acks=all.
    cluster.restart(B);
    cluster.run_until("B back in the isr", |c| c.controller.isr == BTreeSet::from([A, B]) && c.leader_state(A).check_min_isr().is_ok());
    cluster.produce(A, 1);
    cluster.run_until("acknowledged again", |c| c.acknowledged.len() == 4);
    assert_eq!(cluster.acknowledged, [0, 1, 2, 4]);
    assert_eq!(cluster.values(B), cluster.values(A), "B caught up, including the failed produce's record");
}
