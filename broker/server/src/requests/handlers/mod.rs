//! Kafka API handlers: one file per API, each turning a typed request into a
//! typed response against the few managers it uses (the replicas, the log,
//! groups, offsets, transactions, the authorizer, config, ...), and
//! `handle`, the dispatch. `dispatch` is the one place under `requests/`
//! that names `Broker`: it takes it apart and lends each handler its parts
//! (fetch, produce and ConsumerGroupHeartbeat get a borrowing `*Deps` struct).
//!
//! Owns: the per-API semantics and the request's error codes for what the
//! API itself decides (the failures of lower layers map in
//! `requests::errors` and `replica::write`). Must not: touch sockets or
//! framing, or check ACLs (`requests::authorize` does, before).

mod add_offsets_to_txn;
mod add_partitions_to_txn;
mod add_raft_voter;
mod alter_client_quotas;
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
mod describe_client_quotas;
mod describe_cluster;
mod describe_configs;
mod describe_groups;
mod describe_log_dirs;
mod describe_quorum;
mod describe_topic_partitions;
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
mod remove_raft_voter;
pub mod sasl_authenticate;
pub mod sasl_handshake;
mod sync_group;
mod txn_offset_commit;
mod unregister_broker;
mod update_features;
mod update_raft_voter;
mod write_txn_markers;

use std::sync::Arc;

use chronik_protocol::{DecodedRequest, Request, Response};

use crate::broker::Broker;
use crate::infra::append_order::AppendTurn;
use crate::quotas::PollTime;
use crate::requests::{authorize, quota_gate};

pub use crate::security::request_context::RequestContext;

/// A response plus whether any of its error codes is non-zero (for
/// metrics), and the throttle its handler gave (the controller mutation
/// quota's; `quota_gate::settle` adds the others).
#[derive(Debug)]
pub struct Handled {
    pub response: Response,
    pub has_error: bool,
    pub throttle_ms: u64,
}

impl Handled {
    fn new(response: Response, has_error: bool) -> Option<Handled> {
        Some(Handled {
            response,
            has_error,
            throttle_ms: 0,
        })
    }

    fn throttled(mut handled: Option<Handled>, throttle_ms: u64) -> Option<Handled> {
        if let Some(h) = handled.as_mut() {
            h.throttle_ms = throttle_ms;
        }
        handled
    }
}

/// What `handle` gives the connection: the answer (None: none is sent,
/// acks=0) and how long to mute the channel for the client's quotas.
pub struct Answer {
    pub handled: Option<Handled>,
    pub throttle_ms: u64,
}

/// Runs the handler for `request` (`request_bytes` long on the wire) on
/// behalf of `context` (its peer, listener and principal), behind the
/// authorizer (`authorize`), and settles its client quotas
/// (`quota_gate`).
pub async fn handle(
    broker: &Arc<Broker>,
    request: DecodedRequest,
    context: &RequestContext,
    turn: AppendTurn,
    request_bytes: usize,
) -> Answer {
    let version = request.version();
    let client_id = request
        .header
        .client_id
        .as_ref()
        .map(|c| c.to_string())
        .unwrap_or_default();
    let gate = authorize::GateDeps {
        authorizer: &broker.authorizer,
        replicas: &broker.replicas,
        log: &broker.log,
    };
    let (body, after) = match authorize::admit(gate, context, version, request.body) {
        authorize::Admission::Refused(response) => {
            return Answer {
                handled: Handled::new(response, true),
                throttle_ms: 0,
            }
        }
        authorize::Admission::Admitted(body, after) => (body, after),
    };
    let charge = quota_gate::charge_of(&body, version, request_bytes);
    let user = context.principal.name.as_str();
    // A client with a quota: one request at a time on this connection,
    // each after the previous one's throttle.
    let mut quota_turn = None;
    if !charge.is_exempt() && broker.quotas.applies_to(user, &client_id) {
        let held = context.quota_turn.clone().lock_owned().await;
        if let Some(until) = *held {
            tokio::time::sleep_until(until).await;
        }
        quota_turn = Some(held);
    }
    let (mut handled, busy) =
        PollTime::new(dispatch(broker, version, &client_id, body, context, turn)).await;
    if let Some(handled) = handled.as_mut() {
        if after.apply(gate, context, version, &mut handled.response) {
            handled.has_error = true;
        }
    }
    let throttle_ms = quota_gate::settle(
        &broker.quotas,
        &charge,
        (user, &client_id),
        handled.as_mut(),
        busy,
    );
    if let Some(mut held) = quota_turn {
        *held = Some(tokio::time::Instant::now() + std::time::Duration::from_millis(throttle_ms));
    }
    Answer {
        handled,
        throttle_ms,
    }
}

/// The handler of each API. The peer address checks replica fetches and
/// marker writes; the listener picks the endpoints Metadata answers with.
async fn dispatch(
    broker: &Broker,
    version: i16,
    client_id: &str,
    request: Request,
    context: &RequestContext,
    turn: AppendTurn,
) -> Option<Handled> {
    let Broker {
        config,
        log,
        metrics,
        advertised,
        cluster_id,
        purgatory,
        groups,
        offsets,
        fetch_sessions,
        txn,
        producer_ids,
        replicas,
        authorizer,
        scram,
        quotas,
        ..
    } = broker;
    let user = context.principal.name.as_str();
    let peer = context.peer;
    let listener = &*context.listener;
    match request {
        Request::ApiVersions(r) => api_versions::handle(replicas, version, r),
        Request::Metadata(r) => {
            metadata::handle(replicas, config, cluster_id, version, r, listener).await
        }
        // KIP-599: strict from CreateTopics v6, DeleteTopics v5,
        // CreatePartitions v3 (refused topics answer THROTTLING_QUOTA_EXCEEDED).
        Request::CreateTopics(r) => {
            let mutations = quotas.mutations(user, client_id, version >= 6);
            let handled =
                create_topics::handle(replicas, log, config, version, r, &mutations).await;
            Handled::throttled(handled, mutations.throttle_ms())
        }
        Request::DeleteTopics(r) => {
            let mutations = quotas.mutations(user, client_id, version >= 5);
            let handled = delete_topics::handle(replicas, log, version, r, &mutations).await;
            Handled::throttled(handled, mutations.throttle_ms())
        }
        Request::CreatePartitions(r) => {
            let mutations = quotas.mutations(user, client_id, version >= 3);
            let handled = create_partitions::handle(replicas, config, version, r, &mutations).await;
            Handled::throttled(handled, mutations.throttle_ms())
        }
        Request::AlterConfigs(r) => alter_configs::handle(replicas, log, version, r).await,
        Request::IncrementalAlterConfigs(r) => {
            alter_configs::handle_incremental(replicas, log, version, r).await
        }
        Request::DescribeCluster(r) => {
            describe_cluster::handle(replicas, cluster_id, version, r, listener)
        }
        Request::DescribeLogDirs(r) => describe_log_dirs::handle(replicas, log, version, r),
        Request::OffsetDelete(r) => offset_delete::handle(groups, offsets, version, r).await,
        Request::DeleteRecords(r) => {
            delete_records::handle(replicas, log, purgatory, version, r).await
        }
        Request::DescribeConfigs(r) => {
            describe_configs::handle(replicas, log, config, advertised, version, r)
        }
        Request::ListOffsets(r) => list_offsets::handle(replicas, log, config, version, r),
        Request::Produce(r) => {
            produce::handle(
                &produce::ProduceDeps {
                    replicas,
                    log,
                    txn,
                    config,
                    metrics,
                },
                version,
                r,
                turn,
            )
            .await
        }
        Request::Fetch(r) => {
            fetch::handle(
                &fetch::FetchDeps {
                    replicas,
                    log,
                    fetch_sessions,
                    purgatory,
                    config,
                    metrics,
                },
                version,
                r,
                peer,
            )
            .await
        }
        Request::FindCoordinator(r) => find_coordinator::handle(replicas, version, r, listener),
        Request::JoinGroup(r) => join_group::handle(replicas, groups, version, client_id, r).await,
        Request::SyncGroup(r) => sync_group::handle(replicas, groups, version, r).await,
        Request::Heartbeat(r) => heartbeat::handle(groups, version, r),
        Request::LeaveGroup(r) => leave_group::handle(groups, version, r),
        Request::OffsetCommit(r) => {
            offset_commit::handle(replicas, groups, offsets, version, r).await
        }
        Request::OffsetFetch(r) => offset_fetch::handle(groups, offsets, version, r),
        Request::ListGroups(r) => list_groups::handle(groups, offsets, version, r),
        Request::DescribeGroups(r) => describe_groups::handle(groups, offsets, version, r),
        Request::DeleteGroups(r) => delete_groups::handle(groups, offsets, version, r).await,
        Request::InitProducerId(r) => init_producer_id::handle(txn, producer_ids, version, r).await,
        Request::AddPartitionsToTxn(r) => {
            add_partitions_to_txn::handle(replicas, txn, version, r).await
        }
        Request::AddOffsetsToTxn(r) => add_offsets_to_txn::handle(txn, version, r).await,
        Request::EndTxn(r) => end_txn::handle(txn, version, r).await,
        Request::TxnOffsetCommit(r) => {
            txn_offset_commit::handle(replicas, groups, offsets, version, r).await
        }
        Request::WriteTxnMarkers(r) => {
            write_txn_markers::handle(replicas, offsets, version, r, peer).await
        }
        Request::DescribeTransactions(r) => describe_transactions::handle(txn, version, r),
        Request::ListTransactions(r) => list_transactions::handle(txn, version, r),
        Request::OffsetForLeaderEpoch(r) => {
            offset_for_leader_epoch::handle(replicas, log, version, r)
        }
        Request::ConsumerGroupHeartbeat(r) => {
            consumer_group_heartbeat::handle(
                &consumer_group_heartbeat::HeartbeatDeps {
                    replicas,
                    groups,
                    offsets,
                    authorizer,
                },
                version,
                r,
                client_id,
                context,
            )
            .await
        }
        Request::ConsumerGroupDescribe(r) => {
            consumer_group_describe::handle(replicas, groups, offsets, version, r)
        }
        Request::DescribeAcls(r) => describe_acls::handle(replicas, authorizer, r),
        Request::CreateAcls(r) => create_acls::handle(replicas, authorizer, r).await,
        Request::DeleteAcls(r) => delete_acls::handle(replicas, authorizer, r).await,
        Request::SaslHandshake(r) => sasl_handshake::handle(version, r),
        Request::SaslAuthenticate(r) => sasl_authenticate::handle(version, r),
        Request::DescribeUserScramCredentials(r) => {
            describe_user_scram_credentials::handle(scram, version, r)
        }
        Request::AlterUserScramCredentials(r) => {
            alter_user_scram_credentials::handle(replicas, scram, version, r).await
        }
        Request::AlterPartitionReassignments(r) => {
            alter_partition_reassignments::handle(replicas, version, r).await
        }
        Request::ListPartitionReassignments(r) => {
            list_partition_reassignments::handle(replicas, version, r)
        }
        Request::ElectLeaders(r) => elect_leaders::handle(replicas, version, r).await,
        Request::DescribeQuorum(r) => describe_quorum::handle(replicas, version, r).await,
        Request::UnregisterBroker(r) => unregister_broker::handle(replicas, version, r).await,
        Request::AddRaftVoter(r) => add_raft_voter::handle(replicas, r).await,
        Request::RemoveRaftVoter(r) => remove_raft_voter::handle(replicas, r).await,
        Request::UpdateRaftVoter(r) => update_raft_voter::handle(replicas, r).await,
        Request::UpdateFeatures(r) => update_features::handle(replicas, version, r).await,
        Request::DescribeTopicPartitions(r) => {
            describe_topic_partitions::handle(replicas, version, r)
        }
        Request::DescribeClientQuotas(r) => describe_client_quotas::handle(replicas, version, r),
        Request::AlterClientQuotas(r) => {
            alter_client_quotas::handle(replicas, quotas, version, r).await
        }
    }
}
