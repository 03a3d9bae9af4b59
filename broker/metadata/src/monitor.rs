//! Watches this node's raft state: who the controller is, how often it
//! changed, and the election watchdog.
//!
//! Owns: `ControllerStatus` fields taken from raft metrics, the leader
//! change counter, and the watchdog. openraft 0.9 draws each node's
//! election timeout once, so two survivors of a dead leader can split
//! their votes in lockstep forever; when this voter has heard from no
//! leader for `WATCHDOG_AFTER` plus a random jitter (different on every
//! node and every round), it starts an election itself
//! (`raft.trigger().elect()`), which breaks the tie. Must not: change
//! metadata.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use openraft::{RaftMetrics, ServerState};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::raft_types::{kafka_id, NodeId, Raft};

/// No leader heard from for this long (plus jitter): force an election.
const WATCHDOG_AFTER: Duration = Duration::from_secs(3);
/// Upper bound of the random extra wait, so survivors don't fire together.
const WATCHDOG_JITTER_MS: u64 = 1000;
const WATCHDOG_TICK: Duration = Duration::from_millis(250);

struct MonitorState {
    is_controller: bool,
    controller_id: Option<i32>,
    term: u64,
    /// (leader, term) last seen, to count changes.
    last_leader: Option<(NodeId, u64)>,
    /// Last time this node was leader or accepted an AppendEntries.
    last_contact: Instant,
}

pub struct LeaderMonitor {
    node_id: NodeId,
    state: Mutex<MonitorState>,
    leader_changes: AtomicU64,
}

/// The part of `ControllerStatus` that comes from raft.
pub struct RaftView {
    pub is_controller: bool,
    pub controller_id: Option<i32>,
    pub raft_term: u64,
}

impl LeaderMonitor {
    pub fn new(node_id: NodeId) -> Self {
        LeaderMonitor {
            node_id,
            state: Mutex::new(MonitorState {
                is_controller: false,
                controller_id: None,
                term: 0,
                last_leader: None,
                last_contact: Instant::now(),
            }),
            leader_changes: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MonitorState> {
        // Plain values only: a poisoned lock still holds usable data.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A leader's AppendEntries was accepted (called by the RPC server).
    pub fn note_leader_contact(&self) {
        self.lock().last_contact = Instant::now();
    }

    pub fn view(&self) -> RaftView {
        let state = self.lock();
        RaftView {
            is_controller: state.is_controller,
            controller_id: state.controller_id,
            raft_term: state.term,
        }
    }

    pub fn leader_changes(&self) -> u64 {
        self.leader_changes.load(Ordering::Relaxed)
    }

    fn observe(&self, m: &RaftMetrics<NodeId, crate::raft_types::QuorumNode>) {
        let mut state = self.lock();
        let leading = m.state == ServerState::Leader && m.current_leader == Some(self.node_id);
        state.is_controller = leading;
        state.controller_id = m.current_leader.and_then(kafka_id);
        state.term = m.current_term;
        if leading {
            state.last_contact = Instant::now();
        }
        if let Some(leader) = m.current_leader {
            if state.last_leader != Some((leader, m.current_term)) {
                state.last_leader = Some((leader, m.current_term));
                self.leader_changes.fetch_add(1, Ordering::Relaxed);
                tracing::info!(
                    node_id = self.node_id,
                    controller = leader,
                    term = m.current_term,
                    is_controller = leading,
                    "metadata quorum leader (controller) changed"
                );
            }
        }
    }

    /// Whether the watchdog should start an election now.
    fn leaderless_for(
        &self,
        m: &RaftMetrics<NodeId, crate::raft_types::QuorumNode>,
        limit: Duration,
    ) -> Option<Duration> {
        let is_voter = m.membership_config.voter_ids().any(|id| id == self.node_id);
        if !is_voter || m.state == ServerState::Leader || m.state == ServerState::Shutdown {
            return None;
        }
        let elapsed = self.lock().last_contact.elapsed();
        (elapsed > limit).then_some(elapsed)
    }

    /// Follows raft metrics and runs the watchdog until aborted.
    pub fn spawn(self: std::sync::Arc<Self>, raft: Raft) -> JoinHandle<()> {
        tokio::spawn(async move {
            let mut metrics = raft.metrics();
            let mut tick = tokio::time::interval(WATCHDOG_TICK);
            let mut limit = watchdog_limit();
            loop {
                tokio::select! {
                    changed = metrics.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        let m = metrics.borrow_and_update().clone();
                        self.observe(&m);
                    }
                    _ = tick.tick() => {
                        let m = metrics.borrow().clone();
                        self.observe(&m);
                        // Observers (brokers that are not controllers) never elect.
                        let voter = m.membership_config.membership().voter_ids().any(|v| v == m.id);
                        if let Some(elapsed) = self.leaderless_for(&m, limit).filter(|_| voter) {
                            tracing::warn!(
                                node_id = self.node_id,
                                term = m.current_term,
                                ?elapsed,
                                "no metadata quorum leader heard from: starting an election"
                            );
                            if raft.trigger().elect().await.is_err() {
                                return;
                            }
                            self.note_leader_contact();
                            limit = watchdog_limit();
                        }
                    }
                }
            }
        })
    }
}

fn watchdog_limit() -> Duration {
    let random = u64::from_le_bytes(
        uuid::Uuid::new_v4().as_bytes()[..8]
            .try_into()
            .unwrap_or([0; 8]),
    );
    WATCHDOG_AFTER + Duration::from_millis(random % WATCHDOG_JITTER_MS)
}
