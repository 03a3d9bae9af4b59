//! Brokers that are not controllers: they follow the quorum's log as
//! non-voting observers (raft learners), as KRaft brokers fetch the
//! metadata log without voting.
//!
//! Owns: the controller's side of joining (`add`: a learner is added to the
//! raft membership, or its address updated), leaving (`remove`, after
//! UnregisterBroker), the bound on their number, and the host an observer
//! may register at (`registered_host`). The broker's side (asking to join)
//! is `Cluster::join_as_observer`. Must not: register brokers (the
//! heartbeat does) or touch the voters.

use std::collections::{BTreeMap, BTreeSet};

use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
use openraft::ChangeMembers;

use crate::command::CommandResult;
use crate::error::ClusterError;
use crate::raft_types::{kafka_id, raft_id, QuorumNode, Raft};
use crate::request::ControllerReply;

/// Observers the quorum keeps at most: each is a replication stream the
/// controller leader feeds, so a holder of the cluster secret must not be
/// able to add them without end.
pub const MAX_OBSERVERS: usize = 128;
/// How long one membership change may take.
const CHANGE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Adds node `node_id` at raft address `addr` as an observer (or records
/// its new address). Only the leader can; others answer `NotController`.
pub async fn add(
    raft: &Raft,
    voters: &BTreeSet<i32>,
    node_id: i32,
    addr: String,
    directory_id: Option<[u8; 16]>,
) -> ControllerReply {
    if node_id < 0 {
        return failed(format!("node id {node_id} is negative"));
    }
    if voters.contains(&node_id) {
        return failed(format!(
            "node id {node_id} is a voter of the metadata quorum; a broker that is not a controller needs an id of its own"
        ));
    }
    if addr.is_empty() || addr.len() > 255 || host_of(&addr).is_none() {
        return failed(format!("{addr:?} is not a raft address (host:port)"));
    }
    let id = raft_id(node_id);
    let (known, observers) = {
        let metrics = raft.metrics();
        let m = metrics.borrow();
        let membership = m.membership_config.membership();
        let voter_ids: BTreeSet<u64> = membership.voter_ids().collect();
        let known = membership.get_node(&id).cloned();
        let observers = membership
            .nodes()
            .filter(|(nid, _)| !voter_ids.contains(nid))
            .count();
        (known, observers)
    };
    let node = QuorumNode::new(addr.clone(), directory_id);
    let change = match known {
        Some(current) if current == node => {
            // Already an observer here: nothing to commit.
            let applied = raft.metrics().borrow().last_applied.map_or(0, |l| l.index);
            return ControllerReply::Applied {
                log_index: applied,
                result: CommandResult::Done,
            };
        }
        Some(_) => ChangeMembers::SetNodes(BTreeMap::from([(id, node)])),
        None if observers >= MAX_OBSERVERS => {
            return failed(format!(
                "the quorum already has {observers} observers (at most {MAX_OBSERVERS}); unregister a broker first"
            ))
        }
        None => ChangeMembers::AddNodes(BTreeMap::from([(id, node)])),
    };
    tracing::info!(
        broker = node_id,
        addr,
        "adding an observer of the metadata quorum"
    );
    change_membership(raft, change, true).await
}

/// Removes node `node_id` from the observers (nothing when it is none).
pub async fn remove(raft: &Raft, node_id: i32) -> ControllerReply {
    let id = raft_id(node_id);
    let is_observer = {
        let metrics = raft.metrics();
        let m = metrics.borrow();
        let membership = m.membership_config.membership();
        membership.get_node(&id).is_some() && !membership.voter_ids().any(|v| v == id)
    };
    if !is_observer {
        let applied = raft.metrics().borrow().last_applied.map_or(0, |l| l.index);
        return ControllerReply::Applied {
            log_index: applied,
            result: CommandResult::Done,
        };
    }
    tracing::info!(
        broker = node_id,
        "removing an observer of the metadata quorum"
    );
    change_membership(raft, ChangeMembers::RemoveNodes(BTreeSet::from([id])), true).await
}

/// The host member `node_id` joined with (what it may register at, when
/// it is no voter configured on the controller: an observer, or a voter
/// added with AddRaftVoter); `None` when it is no member.
pub fn registered_host(raft: &Raft, node_id: i32) -> Option<String> {
    let metrics = raft.metrics();
    let m = metrics.borrow();
    let membership = m.membership_config.membership();
    membership
        .get_node(&raft_id(node_id))
        .and_then(|n| host_of(&n.addr))
}

/// The raft address the membership records for `node_id` (voter or observer).
pub fn recorded_addr(raft: &Raft, node_id: i32) -> Option<String> {
    let metrics = raft.metrics();
    let m = metrics.borrow();
    m.membership_config
        .membership()
        .get_node(&raft_id(node_id))
        .map(|n| n.addr.clone())
}

/// Commits one membership change (both steps of openraft's joint
/// consensus when voters change); shared with `voters`. A change while
/// another is uncommitted is REQUEST_TIMED_OUT, as Kafka answers it.
pub(crate) async fn change_membership(
    raft: &Raft,
    change: ChangeMembers<u64, QuorumNode>,
    retain: bool,
) -> ControllerReply {
    match tokio::time::timeout(CHANGE_TIMEOUT, raft.change_membership(change, retain)).await {
        Ok(Ok(response)) => ControllerReply::Applied {
            log_index: response.log_id.index,
            result: CommandResult::Done,
        },
        Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(forward)))) => {
            ControllerReply::NotController {
                leader: forward.leader_id.and_then(kafka_id),
            }
        }
        Ok(Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(
            ChangeMembershipError::InProgress(e),
        )))) => ControllerReply::Failed(ClusterError::VoterChangeTimedOut(format!(
            "Request timed out waiting for leader to handle previous add or remove voter request ({e})"
        ))),
        Ok(Err(e)) => ControllerReply::Failed(ClusterError::Unavailable(format!(
            "changing the quorum's membership: {e}"
        ))),
        Err(_) => ControllerReply::Failed(ClusterError::Timeout),
    }
}

fn failed(why: String) -> ControllerReply {
    ControllerReply::Failed(ClusterError::InvalidRequest(why))
}

/// The host of `host:port` (a bracketed IPv6 literal loses its brackets).
pub(crate) fn host_of(addr: &str) -> Option<String> {
    let (host, port) = addr.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (!host.is_empty()).then(|| host.to_string())
}

#[cfg(test)]
mod tests {
    use super::host_of;

    #[test]
    fn hosts_of_raft_addresses() {
        assert_eq!(host_of("127.0.0.4:9093").as_deref(), Some("127.0.0.4"));
        assert_eq!(host_of("[::1]:9093").as_deref(), Some("::1"));
        assert_eq!(
            host_of("broker-4.chronik:9093").as_deref(),
            Some("broker-4.chronik")
        );
        assert_eq!(host_of("no-port"), None);
        assert_eq!(host_of(":9093"), None);
        assert_eq!(host_of("h:port"), None);
    }
}
