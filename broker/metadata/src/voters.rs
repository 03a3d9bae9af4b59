//! KIP-853's dynamic voter set on the controller: AddRaftVoter,
//! RemoveRaftVoter and UpdateRaftVoter turned into openraft membership
//! changes, with Kafka's safety rules and errors (its `AddVoterHandler`,
//! `RemoveVoterHandler` and `UpdateVoterHandler`).
//!
//! Owns: one voter change at a time (a second, or one while the last
//! membership entry is uncommitted, is REQUEST_TIMED_OUT as in Kafka), the
//! checks before a change (a new voter is an observer already following
//! the log with the directory id it is added with, from the address it is
//! added at, and caught up: its last caught-up time within
//! `MAX_CATCH_UP_LAG_MS`; a removed voter is named by id and directory id;
//! the last voter is never removed) and the voters' directory ids
//! (`QuorumNode::directory_id`). Must not: touch observers other than by
//! promoting one, or propose metadata commands. The leader that removes
//! itself steps down once the change commits (openraft does; the voters
//! left elect a new one).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use openraft::ChangeMembers;

use crate::command::CommandResult;
use crate::error::ClusterError;
use crate::observers::change_membership;
use crate::quorum::{now_ms, ReplicationClock};
use crate::raft_types::{raft_id, NodeId, QuorumNode, Raft};
use crate::request::ControllerReply;

/// A new voter must have held the leader's whole log this recently
/// (Kafka's `controller.quorum.fetch.timeout.ms` default, which its
/// `LeaderState.isReplicaCaughtUp` uses).
pub const MAX_CATCH_UP_LAG_MS: i64 = 2_000;

/// Kafka's `ReplicaKey` rendering, for messages.
pub fn replica_key(node_id: i32, directory_id: Option<[u8; 16]>) -> String {
    format!(
        "ReplicaKey(id={node_id}, directoryId={})",
        directory_id.map_or_else(|| "<undefined>".to_string(), |d| uuid_string(&d))
    )
}

/// Kafka's Uuid text: URL-safe base64 without padding.
pub fn uuid_string(bytes: &[u8; 16]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Serializes voter changes on the controller.
#[derive(Default)]
pub struct VoterChanges {
    busy: tokio::sync::Mutex<()>,
}

/// The membership as the leader sees it.
struct View {
    voters: BTreeSet<NodeId>,
    nodes: BTreeMap<NodeId, QuorumNode>,
    term: u64,
    /// The log index of the latest membership entry.
    membership_index: Option<u64>,
    joint: bool,
}

fn view(raft: &Raft) -> View {
    let metrics = raft.metrics();
    let m = metrics.borrow();
    let membership = m.membership_config.membership();
    View {
        voters: membership.voter_ids().collect(),
        nodes: membership
            .nodes()
            .map(|(id, node)| (*id, node.clone()))
            .collect(),
        term: m.current_term,
        membership_index: m.membership_config.log_id().map(|l| l.index),
        joint: membership.get_joint_config().len() > 1,
    }
}

fn voter_keys(view: &View) -> String {
    let keys: Vec<String> = view
        .voters
        .iter()
        .filter_map(|id| {
            let node_id = i32::try_from(*id).ok()?;
            Some(replica_key(
                node_id,
                view.nodes.get(id).and_then(|n| n.directory_id),
            ))
        })
        .collect();
    format!("[{}]", keys.join(", "))
}

fn timed_out(message: String) -> ControllerReply {
    ControllerReply::Failed(ClusterError::VoterChangeTimedOut(message))
}

impl VoterChanges {
    /// Checks Kafka's preconditions shared by every change: none under way,
    /// the latest membership entry committed. Returns the view to act on.
    async fn begin(
        &self,
        raft: &Raft,
    ) -> Result<(tokio::sync::MutexGuard<'_, ()>, View), ControllerReply> {
        let Ok(guard) = self.busy.try_lock() else {
            return Err(timed_out(
                "Request timed out waiting for leader to handle previous add or remove voter request"
                    .to_string(),
            ));
        };
        let committed = raft
            .with_raft_state(|st| st.committed.map(|c| c.index))
            .await
            .map_err(|e| ControllerReply::Failed(ClusterError::Unavailable(e.to_string())))?;
        let view = view(raft);
        if view.joint || view.membership_index > committed {
            return Err(timed_out(format!(
                "Request timed out waiting for voters to commit the latest voter change at {:?} with HWM {}",
                view.membership_index,
                committed.map_or(0, |c| c + 1)
            )));
        }
        Ok((guard, view))
    }

    /// AddRaftVoter: promotes observer `node_id` to voter.
    pub async fn add(
        &self,
        raft: &Raft,
        clock: &ReplicationClock,
        node_id: i32,
        directory_id: [u8; 16],
        raft_addr: String,
    ) -> ControllerReply {
        let (_guard, view) = match self.begin(raft).await {
            Ok(begun) => begun,
            Err(reply) => return reply,
        };
        let key = replica_key(node_id, Some(directory_id));
        let id = raft_id(node_id);
        if view.voters.contains(&id) {
            return ControllerReply::Failed(ClusterError::DuplicateVoter(format!(
                "The voter id for {key} is already part of the set of voters {}.",
                voter_keys(&view)
            )));
        }
        let Some(node) = view.nodes.get(&id) else {
            return timed_out(format!(
                "New voter {key} is not ready to receive requests: it does not follow the metadata quorum \
                 (start it with --controller-quorum-bootstrap-servers first)"
            ));
        };
        if node.addr != raft_addr {
            return ControllerReply::Failed(ClusterError::InvalidRequest(format!(
                "New voter {key}: its listener {raft_addr} is not the raft address it follows the quorum from ({})",
                node.addr
            )));
        }
        let contact = clock.contact(view.term, id);
        let caught_up = contact
            .last_caught_up_ms
            .is_some_and(|at| at >= now_ms() - MAX_CATCH_UP_LAG_MS);
        if node.directory_id != Some(directory_id) || !caught_up {
            let why = match node.directory_id {
                Some(d) if d != directory_id => format!(
                    " (node {node_id} follows with directory id {})",
                    uuid_string(&d)
                ),
                _ => String::new(),
            };
            return timed_out(format!(
                "Aborted add voter operation for {key} since it is lagging behind{why}"
            ));
        }
        tracing::info!(voter = node_id, directory_id = %uuid_string(&directory_id), addr = raft_addr,
            "adding a voter to the metadata quorum");
        change_membership(raft, ChangeMembers::AddVoterIds(BTreeSet::from([id])), true).await
    }

    /// RemoveRaftVoter: voter (`node_id`, `directory_id`) leaves the voters
    /// and the membership.
    pub async fn remove(
        &self,
        raft: &Raft,
        node_id: i32,
        directory_id: [u8; 16],
    ) -> ControllerReply {
        let (_guard, view) = match self.begin(raft).await {
            Ok(begun) => begun,
            Err(reply) => return reply,
        };
        let id = raft_id(node_id);
        let recorded = view
            .nodes
            .get(&id)
            .and_then(|n| n.directory_id)
            .unwrap_or_default();
        let key = replica_key(node_id, Some(directory_id));
        if !view.voters.contains(&id) || recorded != directory_id {
            return ControllerReply::Failed(ClusterError::VoterNotFound(format!(
                "Cannot remove voter {key} from the set of voters {}",
                voter_keys(&view)
            )));
        }
        if view.voters.len() == 1 {
            return ControllerReply::Failed(ClusterError::InvalidRequest(format!(
                "Cannot remove voter {key}: it is the only voter of the metadata quorum"
            )));
        }
        tracing::info!(voter = node_id, directory_id = %uuid_string(&directory_id),
            "removing a voter from the metadata quorum");
        change_membership(
            raft,
            ChangeMembers::RemoveVoters(BTreeSet::from([id])),
            false,
        )
        .await
    }

    /// UpdateRaftVoter: voter `node_id` records its directory id (once:
    /// another than the recorded one is VOTER_NOT_FOUND) and raft address.
    pub async fn update(
        &self,
        raft: &Raft,
        node_id: i32,
        directory_id: [u8; 16],
        raft_addr: String,
    ) -> ControllerReply {
        let (_guard, view) = match self.begin(raft).await {
            Ok(begun) => begun,
            Err(reply) => return reply,
        };
        let id = raft_id(node_id);
        let key = replica_key(node_id, Some(directory_id));
        let recorded = view.nodes.get(&id);
        let known = recorded.and_then(|n| n.directory_id);
        if !view.voters.contains(&id) || known.is_some_and(|d| d != directory_id) {
            return ControllerReply::Failed(ClusterError::VoterNotFound(format!(
                "Voter key {key} not found in the voter set {}",
                voter_keys(&view)
            )));
        }
        let node = QuorumNode::new(raft_addr, Some(directory_id));
        if recorded == Some(&node) {
            let applied = raft.metrics().borrow().last_applied.map_or(0, |l| l.index);
            return ControllerReply::Applied {
                log_index: applied,
                result: CommandResult::Done,
            };
        }
        tracing::info!(voter = node_id, directory_id = %uuid_string(&directory_id), addr = node.addr,
            "updating a voter of the metadata quorum");
        change_membership(
            raft,
            ChangeMembers::SetNodes(BTreeMap::from([(id, node)])),
            true,
        )
        .await
    }
}

/// How long a voter waits between attempts to record its directory id.
pub const REGISTER_BACKOFF: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_kafkas_replica_keys() {
        let id = [0u8; 16];
        assert_eq!(uuid_string(&id), "AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(
            replica_key(3, Some(id)),
            "ReplicaKey(id=3, directoryId=AAAAAAAAAAAAAAAAAAAAAA)"
        );
        assert_eq!(
            replica_key(3, None),
            "ReplicaKey(id=3, directoryId=<undefined>)"
        );
    }
}
