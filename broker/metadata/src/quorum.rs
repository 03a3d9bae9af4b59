//! KRaft's DescribeQuorum for the metadata quorum
//! (`kafka-metadata-quorum.sh describe --status / --replication`): the
//! raft leader's view of every voter's replication.
//!
//! Owns: `QuorumInfo` / `VoterState` (the controller's serializable answer,
//! forwarded to whichever node was asked, with every voter's directory id
//! and raft listener as the membership records them), `ReplicationClock` (per voter,
//! the leader's wall-clock time of its last acknowledged AppendEntries —
//! heartbeats included — and of the last one that found the voter caught
//! up with the leader's log; `network` records, Kafka's rules of
//! `ReplicaState.updateFetchState` decide), and `describe`, which builds
//! the answer from the leader's raft state. Must not: propose commands or
//! change raft state — describing only reads.
//!
//! Offsets are Kafka's: raft log index i is offset i, so a log end offset
//! is the last index + 1 and the high watermark the committed index + 1.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use openraft::{RaftMetrics, ServerState};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::error::ClusterError;
use crate::raft_types::{kafka_id, NodeId, QuorumNode, Raft};
use crate::request::ControllerReply;

/// Kafka's "unknown" for offsets and timestamps.
pub const UNKNOWN: i64 = -1;

/// One voter as the leader sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VoterState {
    pub node_id: i32,
    /// One past the last raft index the voter is known to hold (`UNKNOWN`
    /// before its first acknowledgement in this term).
    pub log_end_offset: i64,
    /// Leader wall clock (ms since the epoch) of the voter's last
    /// acknowledged AppendEntries; the leader's own is now.
    pub last_fetch_timestamp: i64,
    /// Leader wall clock of the last acknowledgement that found the voter
    /// holding the leader's whole log; the leader's own is now.
    pub last_caught_up_timestamp: i64,
    /// KIP-853: the id of its metadata directory (`None`: not reported,
    /// Kafka's zero Uuid).
    #[serde(default)]
    pub directory_id: Option<[u8; 16]>,
}

/// Where a voter's raft listener is (Kafka's DescribeQuorum v2 `nodes`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VoterEndpoint {
    pub node_id: i32,
    pub host: String,
    pub port: u16,
}

/// The metadata quorum as its leader (the controller) describes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumInfo {
    pub leader_id: i32,
    /// The raft term.
    pub leader_epoch: u64,
    /// One past the committed raft index.
    pub high_watermark: i64,
    /// By node id, the leader included.
    pub voters: Vec<VoterState>,
    /// The brokers that follow the log without voting (raft learners), by
    /// node id.
    #[serde(default)]
    pub observers: Vec<VoterState>,
    /// The voters' raft listeners, as the membership records them.
    #[serde(default)]
    pub endpoints: Vec<VoterEndpoint>,
}

/// What the leader has seen of one voter in its current term.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Contact {
    last_fetch_ms: Option<i64>,
    pub(crate) last_caught_up_ms: Option<i64>,
    /// The leader's last log index when the voter last acknowledged.
    leader_end_at_last_fetch: Option<u64>,
}

#[derive(Default)]
struct ClockState {
    term: u64,
    voters: BTreeMap<NodeId, Contact>,
}

/// Per voter, when the leader last heard from it and when it was last
/// caught up (see the module header). Reset when a new term's
/// acknowledgements arrive: each leadership starts knowing nothing, as
/// Kafka's `LeaderState` does.
#[derive(Default)]
pub struct ReplicationClock {
    state: Mutex<ClockState>,
    /// This node's raft metrics: the leader's own last log index.
    metrics: OnceLock<watch::Receiver<RaftMetrics<NodeId, QuorumNode>>>,
}

impl ReplicationClock {
    /// Gives the clock this node's raft metrics (once raft is built).
    pub fn watch(&self, metrics: watch::Receiver<RaftMetrics<NodeId, QuorumNode>>) {
        let _ = self.metrics.set(metrics);
    }

    /// `node` acknowledged an AppendEntries of leader term `term`: it holds
    /// the leader's log through index `matched` (`None`: nothing yet).
    pub fn acknowledged(&self, term: u64, node: NodeId, matched: Option<u64>) {
        let leader_end = self.metrics.get().and_then(|m| m.borrow().last_log_index);
        self.record(term, node, matched, leader_end, now_ms());
    }

    /// Kafka's `ReplicaState.updateFetchState`: caught up now when the
    /// voter holds the leader's current log end; caught up as of its
    /// previous acknowledgement when it now holds what the leader had then.
    fn record(
        &self,
        term: u64,
        node: NodeId,
        matched: Option<u64>,
        leader_end: Option<u64>,
        now: i64,
    ) {
        let mut state = self.lock();
        if term < state.term {
            return;
        }
        if term > state.term {
            state.term = term;
            state.voters.clear();
        }
        let contact = state.voters.entry(node).or_default();
        if matched >= leader_end {
            contact.last_caught_up_ms = contact.last_caught_up_ms.max(Some(now));
        } else if let Some(previous) = contact.last_fetch_ms {
            if matched >= contact.leader_end_at_last_fetch {
                contact.last_caught_up_ms = contact.last_caught_up_ms.max(Some(previous));
            }
        }
        contact.leader_end_at_last_fetch = leader_end;
        contact.last_fetch_ms = contact.last_fetch_ms.max(Some(now));
    }

    /// What is known of `node` in term `term` (nothing for another term).
    pub(crate) fn contact(&self, term: u64, node: NodeId) -> Contact {
        let state = self.lock();
        if state.term != term {
            return Contact::default();
        }
        state.voters.get(&node).copied().unwrap_or_default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ClockState> {
        // Plain values only: a poisoned lock still holds usable data.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The leader's raft state `build` describes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct LeaderView {
    leader: NodeId,
    term: u64,
    last_log_index: Option<u64>,
    committed: Option<u64>,
    voters: Vec<NodeId>,
    observers: Vec<NodeId>,
    /// Per follower, the last index it is known to hold.
    matched: BTreeMap<NodeId, Option<u64>>,
    /// Every member's recorded raft address and directory id.
    nodes: BTreeMap<NodeId, QuorumNode>,
}

/// Describes the quorum if this node leads it (`ControllerReply::Quorum`);
/// otherwise `NotController` with the leader it knows of.
pub async fn describe(raft: &Raft, clock: &ReplicationClock) -> ControllerReply {
    let committed = match raft
        .with_raft_state(|st| st.committed.map(|c| c.index))
        .await
    {
        Ok(committed) => committed,
        Err(e) => return ControllerReply::Failed(ClusterError::Unavailable(e.to_string())),
    };
    let view = {
        let metrics = raft.metrics();
        let m = metrics.borrow();
        if m.state != ServerState::Leader {
            return ControllerReply::NotController {
                leader: m.current_leader.and_then(kafka_id),
            };
        }
        LeaderView {
            leader: m.id,
            term: m.current_term,
            last_log_index: m.last_log_index,
            // Applied entries are committed: never report less.
            committed: committed.max(m.last_applied.map(|a| a.index)),
            voters: m.membership_config.voter_ids().collect(),
            observers: m
                .membership_config
                .membership()
                .nodes()
                .map(|(id, _)| *id)
                .filter(|id| {
                    !m.membership_config
                        .membership()
                        .voter_ids()
                        .any(|v| v == *id)
                })
                .collect(),
            matched: m
                .replication
                .as_ref()
                .map(|r| r.iter().map(|(id, l)| (*id, l.map(|l| l.index))).collect())
                .unwrap_or_default(),
            nodes: m
                .membership_config
                .membership()
                .nodes()
                .map(|(id, node)| (*id, node.clone()))
                .collect(),
        }
    };
    ControllerReply::Quorum(build(&view, clock, now_ms()))
}

fn build(view: &LeaderView, clock: &ReplicationClock, now: i64) -> QuorumInfo {
    let offset = |index: Option<u64>| {
        index.map_or(UNKNOWN, |i| {
            i64::try_from(i).unwrap_or(i64::MAX - 1).saturating_add(1)
        })
    };
    let directory_id = |id: NodeId| view.nodes.get(&id).and_then(|n| n.directory_id);
    let follower = |id: NodeId, node_id: i32| {
        let contact = clock.contact(view.term, id);
        VoterState {
            node_id,
            log_end_offset: view.matched.get(&id).map_or(UNKNOWN, |m| offset(*m)),
            last_fetch_timestamp: contact.last_fetch_ms.unwrap_or(UNKNOWN),
            last_caught_up_timestamp: contact.last_caught_up_ms.unwrap_or(UNKNOWN),
            directory_id: directory_id(id),
        }
    };
    let mut observers: Vec<VoterState> = view
        .observers
        .iter()
        .filter_map(|&id| Some(follower(id, kafka_id(id)?)))
        .collect();
    observers.sort_by_key(|o| o.node_id);
    let mut voters: Vec<VoterState> = view
        .voters
        .iter()
        .filter_map(|&id| {
            let node_id = kafka_id(id)?;
            Some(if id == view.leader {
                VoterState {
                    node_id,
                    log_end_offset: offset(view.last_log_index),
                    last_fetch_timestamp: now,
                    last_caught_up_timestamp: now,
                    directory_id: directory_id(id),
                }
            } else {
                follower(id, node_id)
            })
        })
        .collect();
    voters.sort_by_key(|v| v.node_id);
    let endpoints = view
        .voters
        .iter()
        .filter_map(|id| {
            let node_id = kafka_id(*id)?;
            let addr = &view.nodes.get(id)?.addr;
            let (host, port) = addr.rsplit_once(':')?;
            Some(VoterEndpoint {
                node_id,
                host: host
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_string(),
                port: port.parse().ok()?,
            })
        })
        .collect();
    QuorumInfo {
        leader_id: kafka_id(view.leader).unwrap_or(-1),
        leader_epoch: view.term,
        high_watermark: offset(view.committed).max(0),
        voters,
        observers,
        endpoints,
    }
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caught_up_follows_kafkas_fetch_rules() {
        let clock = ReplicationClock::default();
        // Holds the leader's end: caught up at once.
        clock.record(1, 2, Some(10), Some(10), 1_000);
        let c = clock.contact(1, 2);
        assert_eq!(
            (c.last_fetch_ms, c.last_caught_up_ms),
            (Some(1_000), Some(1_000))
        );
        // Behind the new end, and behind what the leader had before: not.
        clock.record(1, 2, Some(9), Some(20), 2_000);
        let c = clock.contact(1, 2);
        assert_eq!(
            (c.last_fetch_ms, c.last_caught_up_ms),
            (Some(2_000), Some(1_000))
        );
        // Reaches the end of the previous acknowledgement (20): caught up
        // as of then, not now.
        clock.record(1, 2, Some(20), Some(30), 3_000);
        let c = clock.contact(1, 2);
        assert_eq!(
            (c.last_fetch_ms, c.last_caught_up_ms),
            (Some(3_000), Some(2_000))
        );
        // A stale term's acknowledgement changes nothing; a new term starts over.
        clock.record(0, 2, Some(30), Some(30), 4_000);
        assert_eq!(clock.contact(1, 2).last_fetch_ms, Some(3_000));
        clock.record(2, 3, Some(30), Some(30), 5_000);
        assert_eq!(clock.contact(2, 2), Contact::default());
        assert_eq!(clock.contact(1, 3), Contact::default());
        assert_eq!(clock.contact(2, 3).last_caught_up_ms, Some(5_000));
    }

    #[test]
    fn describes_voters_as_kafka_offsets() {
        let clock = ReplicationClock::default();
        clock.record(4, 2, Some(41), Some(41), 900);
        let view = LeaderView {
            leader: 1,
            term: 4,
            last_log_index: Some(41),
            committed: Some(41),
            voters: vec![3, 1, 2],
            observers: vec![5, 4],
            matched: BTreeMap::from([(2, Some(41)), (3, None), (4, Some(40))]),
            nodes: BTreeMap::from([
                (1, QuorumNode::new("127.0.0.1:9093".into(), Some([1; 16]))),
                (2, QuorumNode::new("[::2]:9093".into(), None)),
            ]),
        };
        let info = build(&view, &clock, 1_000);
        // Observers are described as voters are, by node id.
        assert_eq!(
            info.observers
                .iter()
                .map(|o| (o.node_id, o.log_end_offset))
                .collect::<Vec<_>>(),
            [(4, 41), (5, UNKNOWN)]
        );
        assert_eq!(
            (info.leader_id, info.leader_epoch, info.high_watermark),
            (1, 4, 42)
        );
        assert_eq!(
            info.voters,
            vec![
                VoterState {
                    node_id: 1,
                    log_end_offset: 42,
                    last_fetch_timestamp: 1_000,
                    last_caught_up_timestamp: 1_000,
                    directory_id: Some([1; 16]),
                },
                VoterState {
                    node_id: 2,
                    log_end_offset: 42,
                    last_fetch_timestamp: 900,
                    last_caught_up_timestamp: 900,
                    directory_id: None,
                },
                VoterState {
                    node_id: 3,
                    log_end_offset: UNKNOWN,
                    last_fetch_timestamp: UNKNOWN,
                    last_caught_up_timestamp: UNKNOWN,
                    directory_id: None,
                },
            ]
        );
        // The voters' recorded raft listeners (node 3 has none recorded).
        assert_eq!(
            info.endpoints,
            vec![
                VoterEndpoint {
                    node_id: 1,
                    host: "127.0.0.1".into(),
                    port: 9093
                },
                VoterEndpoint {
                    node_id: 2,
                    host: "::2".into(),
                    port: 9093
                },
            ]
        );
    }
}
