//! Kafka API handlers: one file per API, each turning a typed request into a
//! typed response against the broker's state, and `handle`, the dispatch.
//!
//! Owns: the per-API semantics and the request's error codes for what the
//! API itself decides (the failures of lower layers map in
//! `requests::errors` and `replica::write`). Must not: touch sockets or
//! framing, or check ACLs (`requests::authorize` does, before).

mod add_offsets_to_txn;
mod add_partitions_to_txn;
mod alter_configs;
mod alter_partition_reassignments;
mod alter_user_scram_credentials;
mod api_versions;
mod consumer_group_describe;
mod consumer_group_heartbeat;
mod create_acls;
mod create_partitions;
pub(crate) mod create_topics;
mod delete_acls;
mod delete_groups;
mod delete_records;
mod delete_topics;
mod describe_acls;
mod describe_cluster;
mod describe_configs;
mod describe_groups;
mod describe_log_dirs;
mod describe_quorum;
mod describe_transactions;
mod describe_user_scram_credentials;
mod elect_leaders;
mod end_txn;
mod fetch;
mod find_coordinator;
mod heartbeat;
mod init_producer_id;
mod join_group;
mod leave_group;
mod list_groups;
mod list_offsets;
mod list_partition_reassignments;
mod list_transactions;
mod metadata;
mod offset_commit;
mod offset_delete;
mod offset_fetch;
mod offset_for_leader_epoch;
mod produce;
pub mod sasl_authenticate;
pub mod sasl_handshake;
mod sync_group;
mod txn_offset_commit;
mod unregister_broker;
mod write_txn_markers;

use std::sync::Arc;

use chronik_protocol::{DecodedRequest, Request, Response};

use crate::broker::Broker;
use crate::requests::append_order::AppendTurn;
use crate::requests::authorize;

pub use crate::security::request_context::RequestContext;

/// A response plus whether any of its error codes is non-zero (for metrics).
#[derive(Debug)]
pub struct Handled {
    pub response: Response,
    pub has_error: bool,
}

impl Handled {
    fn new(response: Response, has_error: bool) -> Option<Handled> {
        Some(Handled {
            response,
            has_error,
        })
    }
}

/// Runs the handler for `request` on behalf of `context` (its peer,
/// listener and principal), behind the authorizer (`authorize`). `None`
/// means no response is sent (acks=0).
pub async fn handle(
    broker: &Arc<Broker>,
    request: DecodedRequest,
    context: &RequestContext,
    turn: AppendTurn,
) -> Option<Handled> {
    let version = request.version();
    let client_id = request
        .header
        .client_id
        .as_ref()
        .map(|c| c.to_string())
        .unwrap_or_default();
    let (body, after) = match authorize::admit(broker, context, version, request.body) {
        authorize::Admission::Refused(response) => return Handled::new(response, true),
        authorize::Admission::Admitted(body, after) => (body, after),
    };
    let mut handled = dispatch(broker, version, &client_id, body, context, turn).await?;
    if after.apply(broker, context, version, &mut handled.response) {
        handled.has_error = true;
    }
    Some(handled)
}

/// The handler of each API. The peer address checks replica fetches and
/// marker writes; the listener picks the endpoints Metadata answers with.
async fn dispatch(
    broker: &Arc<Broker>,
    version: i16,
    client_id: &str,
    request: Request,
    context: &RequestContext,
    turn: AppendTurn,
) -> Option<Handled> {
    let peer = context.peer;
    let listener = &*context.listener;
    match request {
        Request::ApiVersions(r) => api_versions::handle(version, r),
        Request::Metadata(r) => metadata::handle(broker, version, r, listener).await,
        Request::CreateTopics(r) => create_topics::handle(broker, version, r).await,
        Request::DeleteTopics(r) => delete_topics::handle(broker, version, r).await,
        Request::CreatePartitions(r) => create_partitions::handle(broker, version, r).await,
        Request::AlterConfigs(r) => alter_configs::handle(broker, version, r).await,
        Request::IncrementalAlterConfigs(r) => {
            alter_configs::handle_incremental(broker, version, r).await
        }
        Request::DescribeCluster(r) => describe_cluster::handle(broker, version, r, listener),
        Request::DescribeLogDirs(r) => describe_log_dirs::handle(broker, version, r),
        Request::OffsetDelete(r) => offset_delete::handle(broker, version, r).await,
        Request::DeleteRecords(r) => delete_records::handle(broker, version, r).await,
        Request::DescribeConfigs(r) => describe_configs::handle(broker, version, r),
        Request::ListOffsets(r) => list_offsets::handle(broker, version, r),
        Request::Produce(r) => produce::handle(broker, version, r, turn).await,
        Request::Fetch(r) => fetch::handle(broker, version, r, peer).await,
        Request::FindCoordinator(r) => find_coordinator::handle(broker, version, r, listener),
        Request::JoinGroup(r) => join_group::handle(broker, version, client_id, r).await,
        Request::SyncGroup(r) => sync_group::handle(broker, version, r).await,
        Request::Heartbeat(r) => heartbeat::handle(broker, version, r),
        Request::LeaveGroup(r) => leave_group::handle(broker, version, r),
        Request::OffsetCommit(r) => offset_commit::handle(broker, version, r).await,
        Request::OffsetFetch(r) => offset_fetch::handle(broker, version, r),
        Request::ListGroups(r) => list_groups::handle(broker, version, r),
        Request::DescribeGroups(r) => describe_groups::handle(broker, version, r),
        Request::DeleteGroups(r) => delete_groups::handle(broker, version, r).await,
        Request::InitProducerId(r) => init_producer_id::handle(broker, version, r).await,
        Request::AddPartitionsToTxn(r) => add_partitions_to_txn::handle(broker, version, r).await,
        Request::AddOffsetsToTxn(r) => add_offsets_to_txn::handle(broker, version, r).await,
        Request::EndTxn(r) => end_txn::handle(broker, version, r).await,
        Request::TxnOffsetCommit(r) => txn_offset_commit::handle(broker, version, r).await,
        Request::WriteTxnMarkers(r) => write_txn_markers::handle(broker, version, r, peer).await,
        Request::DescribeTransactions(r) => describe_transactions::handle(broker, version, r),
        Request::ListTransactions(r) => list_transactions::handle(broker, version, r),
        Request::OffsetForLeaderEpoch(r) => offset_for_leader_epoch::handle(broker, version, r),
        Request::ConsumerGroupHeartbeat(r) => {
            consumer_group_heartbeat::handle(broker, version, r, client_id, context)
        }
        Request::ConsumerGroupDescribe(r) => consumer_group_describe::handle(broker, version, r),
        Request::DescribeAcls(r) => describe_acls::handle(broker, r),
        Request::CreateAcls(r) => create_acls::handle(broker, r).await,
        Request::DeleteAcls(r) => delete_acls::handle(broker, r).await,
        Request::SaslHandshake(r) => sasl_handshake::handle(version, r),
        Request::SaslAuthenticate(r) => sasl_authenticate::handle(version, r),
        Request::DescribeUserScramCredentials(r) => {
            describe_user_scram_credentials::handle(broker, version, r)
        }
        Request::AlterUserScramCredentials(r) => {
            alter_user_scram_credentials::handle(broker, version, r).await
        }
        Request::AlterPartitionReassignments(r) => {
            alter_partition_reassignments::handle(broker, version, r).await
        }
        Request::ListPartitionReassignments(r) => {
            list_partition_reassignments::handle(broker, version, r)
        }
        Request::ElectLeaders(r) => elect_leaders::handle(broker, version, r).await,
        Request::DescribeQuorum(r) => describe_quorum::handle(broker, version, r).await,
        Request::UnregisterBroker(r) => unregister_broker::handle(broker, version, r).await,
    }
}
