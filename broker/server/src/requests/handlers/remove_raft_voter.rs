//! RemoveRaftVoter (KIP-853, v0; `kafka-metadata-quorum.sh
//! remove-controller --controller-id N --controller-directory-id D`,
//! Admin.removeRaftVoter): a voter leaves the metadata quorum. Forwarded
//! to the active controller (`chronik_metadata` `voters`): an id and
//! directory id the voter set does not hold is VOTER_NOT_FOUND, a change
//! while another is under way REQUEST_TIMED_OUT, the last voter is never
//! removed (INVALID_REQUEST). Removing the active controller works: it
//! steps down once the change commits and the others elect a new one.
//!
//! Owns: the cluster-id check (INCONSISTENT_CLUSTER_ID) and the answer.
//! Must not: change the membership itself (`Cluster::remove_raft_voter`).

use chronik_metadata::Cluster;
use chronik_protocol::Response;
use kafka_protocol::messages::{RemoveRaftVoterRequest, RemoveRaftVoterResponse};
use kafka_protocol::protocol::StrBytes;

use super::add_raft_voter::check_cluster_id;
use super::Handled;
use crate::requests::errors::cluster::cluster_error_code;

pub async fn handle(cluster: &Cluster, request: RemoveRaftVoterRequest) -> Option<Handled> {
    let result = match check_cluster_id(cluster, request.cluster_id.as_deref()) {
        Ok(()) => cluster
            .remove_raft_voter(request.voter_id, *request.voter_directory_id.as_bytes())
            .await
            .map_err(|e| (cluster_error_code(&e), e.to_string())),
        Err(refusal) => Err(refusal),
    };
    let response = match &result {
        Ok(()) => RemoveRaftVoterResponse::default(),
        Err((error, message)) => {
            tracing::info!(
                voter = request.voter_id,
                "RemoveRaftVoter refused: {message}"
            );
            RemoveRaftVoterResponse::default()
                .with_error_code(error.code())
                .with_error_message(Some(StrBytes::from_string(message.clone())))
        }
    };
    Handled::new(Response::RemoveRaftVoter(response), result.is_err())
}
