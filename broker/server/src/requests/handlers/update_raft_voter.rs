//! UpdateRaftVoter (KIP-853, v0): a voter records its directory id and raft
//! listener in the voter set (Kafka's controllers send it to the leader
//! at start; Chronik's do so over the raft port, and this handler lets an
//! operator do it through a broker). Forwarded to the active controller
//! (`chronik_metadata` `voters`): an id that does not vote, or another
//! directory id than the one recorded, is VOTER_NOT_FOUND. The answer
//! names the current leader and epoch.
//!
//! Owns: the request's checks (shared with AddRaftVoter) and the answer.
//! Must not: change the membership itself (`Cluster::update_raft_voter`).

use chronik_metadata::Cluster;
use chronik_protocol::Response;
use kafka_protocol::messages::update_raft_voter_response::CurrentLeader;
use kafka_protocol::messages::{BrokerId, UpdateRaftVoterRequest, UpdateRaftVoterResponse};

use super::add_raft_voter::{forward, VoterChange};
use super::Handled;

pub async fn handle(cluster: &Cluster, request: UpdateRaftVoterRequest) -> Option<Handled> {
    let (id, directory) = request.voter();
    let result = forward(cluster, &request, |addr| {
        cluster.update_raft_voter(id, *directory.as_bytes(), addr)
    })
    .await;
    if let Err((_, message)) = &result {
        tracing::info!(
            voter = request.voter_id,
            "UpdateRaftVoter refused: {message}"
        );
    }
    let (leader, epoch) = cluster.leader();
    let response = UpdateRaftVoterResponse::default()
        .with_error_code(result.as_ref().err().map_or(0, |(e, _)| e.code()))
        .with_current_leader(
            CurrentLeader::default()
                .with_leader_id(BrokerId(leader.unwrap_or(-1)))
                .with_leader_epoch(i32::try_from(epoch).unwrap_or(i32::MAX)),
        );
    Handled::new(Response::UpdateRaftVoter(response), result.is_err())
}
