//! AddRaftVoter (KIP-853, v0; `kafka-metadata-quorum.sh add-controller`,
//! Admin.addRaftVoter): a controller that follows the metadata log as an
//! observer becomes a voter. Forwarded to the active controller, which
//! checks Kafka's rules (`chronik_metadata` `voters`): one change at a
//! time and a caught-up observer with that directory id, else
//! REQUEST_TIMED_OUT; an id that already votes is DUPLICATE_VOTER.
//!
//! Owns: what this broker checks before forwarding — the cluster id
//! (INCONSISTENT_CLUSTER_ID), the voter id and directory id, and the
//! listeners (at most `MAX_LISTENERS`; the one named `CONTROLLER`, or the
//! only one, is the voter's raft address), each refused with
//! INVALID_REQUEST — shared with UpdateRaftVoter. Must not: change the
//! membership itself (`Cluster::add_raft_voter`).

use chronik_metadata::Cluster;
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{AddRaftVoterRequest, AddRaftVoterResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handled;
use crate::requests::errors::cluster::cluster_error_code;

/// A voter names at most this many listeners (Kafka's have one or two).
pub(super) const MAX_LISTENERS: usize = 16;
/// The listener name of the voters' raft endpoints (DescribeQuorum's).
const RAFT_LISTENER: &str = "CONTROLLER";

pub async fn handle(cluster: &Cluster, request: AddRaftVoterRequest) -> Option<Handled> {
    let (id, directory) = request.voter();
    let result = forward(cluster, &request, |addr| {
        cluster.add_raft_voter(id, *directory.as_bytes(), addr)
    })
    .await;
    let response = match &result {
        Ok(()) => AddRaftVoterResponse::default(),
        Err((error, message)) => {
            tracing::info!(voter = request.voter_id, "AddRaftVoter refused: {message}");
            AddRaftVoterResponse::default()
                .with_error_code(error.code())
                .with_error_message(Some(StrBytes::from_string(message.clone())))
        }
    };
    Handled::new(Response::AddRaftVoter(response), result.is_err())
}

/// A refusal: the error and its message.
pub(super) type Refusal = (ResponseError, String);

/// What AddRaftVoter and UpdateRaftVoter name alike: the cluster, the
/// voter (id, directory id) and its listeners (name, host, port).
pub(super) trait VoterChange {
    fn cluster_id(&self) -> Option<&str>;
    fn voter(&self) -> (i32, uuid::Uuid);
    fn endpoints(&self) -> Vec<(&str, &str, u16)>;
}

macro_rules! voter_change {
    ($($request:ty),*) => {$(
        impl VoterChange for $request {
            fn cluster_id(&self) -> Option<&str> {
                self.cluster_id.as_deref()
            }
            fn voter(&self) -> (i32, uuid::Uuid) {
                (self.voter_id, self.voter_directory_id)
            }
            fn endpoints(&self) -> Vec<(&str, &str, u16)> {
                let listeners = self.listeners.iter();
                listeners.map(|l| (l.name.as_str(), l.host.as_str(), l.port)).collect()
            }
        }
    )*};
}
voter_change!(
    AddRaftVoterRequest,
    kafka_protocol::messages::UpdateRaftVoterRequest
);

/// What AddRaftVoter and UpdateRaftVoter share: the checks before
/// forwarding — the cluster id, the voter (id, directory id) and its
/// listeners, at most `MAX_LISTENERS` — then `change` (the controller's
/// add or update) with the voter's raft address; the refusal or the
/// controller's error.
pub(super) async fn forward<Change>(
    cluster: &Cluster,
    request: &impl VoterChange,
    change: impl FnOnce(String) -> Change,
) -> Result<(), Refusal>
where
    Change: std::future::Future<Output = Result<(), chronik_metadata::ClusterError>>,
{
    check_cluster_id(cluster, request.cluster_id())?;
    let (voter_id, directory_id) = request.voter();
    check_voter(voter_id, directory_id)?;
    let endpoints = request.endpoints();
    let addr = raft_addr(endpoints.iter().copied())?;
    change(addr)
        .await
        .map_err(|e| (cluster_error_code(&e), e.to_string()))
}

/// Kafka's raft client answers a request naming another cluster with
/// INCONSISTENT_CLUSTER_ID; a null cluster id is not checked.
pub(super) fn check_cluster_id(cluster: &Cluster, requested: Option<&str>) -> Result<(), Refusal> {
    let Some(requested) = requested else {
        return Ok(());
    };
    match cluster.image().cluster_id.as_deref() {
        Some(ours) if ours != requested => Err((
            ResponseError::InconsistentClusterId,
            format!(
                "The clusterId in the request ({requested}) does not match that found on the server ({ours})"
            ),
        )),
        _ => Ok(()),
    }
}

pub(super) fn check_voter(voter_id: i32, directory_id: uuid::Uuid) -> Result<(), Refusal> {
    if voter_id < 0 {
        return Err((
            ResponseError::InvalidRequest,
            format!("Invalid voter id {voter_id}: it must be non-negative"),
        ));
    }
    if directory_id.is_nil() {
        return Err((
            ResponseError::InvalidRequest,
            format!("Voter {voter_id} has no directory id (it is the zero Uuid)"),
        ));
    }
    Ok(())
}

/// The voter's raft address (`host:port`) from its listeners: the one
/// named `CONTROLLER`, else the only one.
pub(super) fn raft_addr<'a>(
    listeners: impl ExactSizeIterator<Item = (&'a str, &'a str, u16)> + Clone,
) -> Result<String, Refusal> {
    let count = listeners.len();
    if count > MAX_LISTENERS {
        return Err((
            ResponseError::InvalidRequest,
            format!("{count} listeners (a voter names at most {MAX_LISTENERS})"),
        ));
    }
    let chosen = listeners
        .clone()
        .find(|(name, _, _)| *name == RAFT_LISTENER)
        .or_else(|| listeners.clone().next().filter(|_| count == 1));
    let Some((name, host, port)) = chosen else {
        return Err((
            ResponseError::InvalidRequest,
            format!(
                "The request's {count} listeners do not include the endpoint for the default listener {RAFT_LISTENER}"
            ),
        ));
    };
    if host.is_empty() || host.len() > 255 || port == 0 {
        return Err((
            ResponseError::InvalidRequest,
            format!("Listener {name} has no usable endpoint ({host:?} port {port})"),
        ));
    }
    Ok(chronik_metadata::host_port(host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_controller_listener_and_bounds_the_list() {
        let one = [("CONTROLLER", "127.0.0.6", 9093)];
        assert_eq!(
            raft_addr(one.iter().copied()).expect("ok"),
            "127.0.0.6:9093"
        );
        let other = [("RAFT", "::1", 9093)];
        assert_eq!(raft_addr(other.iter().copied()).expect("ok"), "[::1]:9093");
        let two = [("A", "h", 1), ("CONTROLLER", "c", 2)];
        assert_eq!(raft_addr(two.iter().copied()).expect("ok"), "c:2");
        let unnamed = [("A", "h", 1), ("B", "c", 2)];
        assert_eq!(
            raft_addr(unnamed.iter().copied()).map_err(|e| e.0),
            Err(ResponseError::InvalidRequest)
        );
        let many: Vec<(&str, &str, u16)> = (0..=MAX_LISTENERS)
            .map(|_| ("CONTROLLER", "h", 1))
            .collect();
        assert_eq!(
            raft_addr(many.iter().copied()).map_err(|e| e.0),
            Err(ResponseError::InvalidRequest)
        );
        let no_port = [("CONTROLLER", "h", 0)];
        assert!(raft_addr(no_port.iter().copied()).is_err());
        assert!(check_voter(-1, uuid::Uuid::from_bytes([1; 16])).is_err());
        assert!(check_voter(1, uuid::Uuid::nil()).is_err());
        assert!(check_voter(1, uuid::Uuid::from_bytes([1; 16])).is_ok());
    }
}
