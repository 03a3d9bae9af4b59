//! The request dispatcher: runs the handler of a decoded request behind the
//! authorizer (`requests::authorize`) and the client quotas
//! (`requests::quota_gate`), lending each handler only the parts of
//! `Broker` it uses — the metadata quorum as `&Cluster`, the replicas, the
//! write path, a slice of the config (`config::slices`, `Limits`), ...
//!
//! Owns: that lending, and the order around a handler (admission, the
//! quota turn, the poll-time measure, the after-check, the quota
//! settlement). Must not: decide what an API answers (its handler does).

use std::sync::Arc;

use chronik_protocol::{DecodedRequest, Request};

use super::Broker;
use crate::infra::append_order::AppendTurn;
use crate::quotas::PollTime;
use crate::requests::handlers::*;
use crate::requests::{authorize, quota_gate};

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
        cluster: &broker.cluster,
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
        cluster,
        purgatory,
        groups,
        offsets,
        fetch_sessions,
        txn,
        producer_ids,
        replicas,
        writes,
        throttle,
        authorizer,
        scram,
        quotas,
        share,
        ..
    } = broker;
    let cluster: &chronik_metadata::Cluster = cluster;
    let user = context.principal.name.as_str();
    let peer = context.peer;
    let listener = &*context.listener;
    let limits = &config.limits;
    match request {
        Request::ApiVersions(r) => api_versions::handle(cluster, version, r),
        Request::Metadata(r) => {
            metadata::handle(
                (replicas, cluster),
                config.topic_creation(),
                cluster_id,
                version,
                r,
                listener,
            )
            .await
        }
        // KIP-599: strict from CreateTopics v6, DeleteTopics v5,
        // CreatePartitions v3 (refused topics answer THROTTLING_QUOTA_EXCEEDED).
        Request::CreateTopics(r) => {
            let mutations = quotas.mutations(user, client_id, version >= 6);
            let handled = create_topics::handle(
                (replicas, cluster),
                log,
                config.topic_creation(),
                version,
                r,
                &mutations,
            )
            .await;
            Handled::throttled(handled, mutations.throttle_ms())
        }
        Request::DeleteTopics(r) => {
            let mutations = quotas.mutations(user, client_id, version >= 5);
            let handled =
                delete_topics::handle((replicas, cluster), log, version, r, &mutations).await;
            Handled::throttled(handled, mutations.throttle_ms())
        }
        Request::CreatePartitions(r) => {
            let mutations = quotas.mutations(user, client_id, version >= 3);
            let handled =
                create_partitions::handle((replicas, cluster), limits, version, r, &mutations)
                    .await;
            Handled::throttled(handled, mutations.throttle_ms())
        }
        Request::AlterConfigs(r) => {
            alter_configs::handle((replicas, cluster), log, version, r).await
        }
        Request::IncrementalAlterConfigs(r) => {
            alter_configs::handle_incremental((replicas, cluster), log, version, r).await
        }
        Request::DescribeCluster(r) => {
            describe_cluster::handle(cluster, cluster_id, version, r, listener)
        }
        Request::DescribeLogDirs(r) => {
            describe_log_dirs::handle((replicas, cluster), log, version, r)
        }
        Request::OffsetDelete(r) => offset_delete::handle(groups, offsets, version, r).await,
        Request::DeleteRecords(r) => {
            delete_records::handle(
                &delete_records::DeleteRecordsDeps {
                    replicas,
                    cluster,
                    writes,
                    log,
                    purgatory,
                },
                version,
                r,
            )
            .await
        }
        Request::DescribeConfigs(r) => {
            describe_configs::handle(cluster, log, config, advertised, version, r)
        }
        Request::ListOffsets(r) => list_offsets::handle(replicas, log, limits, version, r),
        Request::Produce(r) => {
            produce::handle(
                &produce::ProduceDeps {
                    writes,
                    replicas,
                    cluster,
                    log,
                    txn,
                    limits,
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
                    cluster,
                    throttle,
                    log,
                    fetch_sessions,
                    purgatory,
                    limits,
                    read_replicas: config.read_replicas(),
                    metrics,
                },
                version,
                r,
                peer,
            )
            .await
        }
        Request::FindCoordinator(r) => find_coordinator::handle(cluster, version, r, listener),
        Request::JoinGroup(r) => join_group::handle(cluster, groups, version, client_id, r).await,
        Request::SyncGroup(r) => sync_group::handle(cluster, groups, version, r).await,
        Request::Heartbeat(r) => heartbeat::handle(groups, version, r),
        Request::LeaveGroup(r) => leave_group::handle(groups, version, r),
        Request::OffsetCommit(r) => {
            offset_commit::handle(cluster, groups, offsets, version, r).await
        }
        Request::OffsetFetch(r) => offset_fetch::handle(groups, offsets, version, r),
        Request::ListGroups(r) => list_groups::handle((groups, &share.groups), offsets, version, r),
        Request::DescribeGroups(r) => describe_groups::handle(groups, offsets, version, r),
        Request::DeleteGroups(r) => {
            delete_groups::handle((groups, share), offsets, version, r).await
        }
        Request::InitProducerId(r) => init_producer_id::handle(txn, producer_ids, version, r).await,
        Request::AddPartitionsToTxn(r) => {
            add_partitions_to_txn::handle(cluster, txn, version, r).await
        }
        Request::AddOffsetsToTxn(r) => add_offsets_to_txn::handle(txn, version, r).await,
        Request::EndTxn(r) => end_txn::handle(txn, version, r).await,
        Request::TxnOffsetCommit(r) => {
            txn_offset_commit::handle(cluster, groups, offsets, version, r).await
        }
        Request::WriteTxnMarkers(r) => {
            write_txn_markers::handle(writes, offsets, version, r, peer).await
        }
        Request::DescribeTransactions(r) => describe_transactions::handle(txn, version, r),
        Request::ListTransactions(r) => list_transactions::handle(txn, version, r),
        Request::OffsetForLeaderEpoch(r) => {
            offset_for_leader_epoch::handle(replicas, log, version, r)
        }
        Request::ConsumerGroupHeartbeat(r) => {
            consumer_group_heartbeat::handle(
                &consumer_group_heartbeat::HeartbeatDeps {
                    cluster,
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
            consumer_group_describe::handle(cluster, groups, offsets, version, r)
        }
        Request::DescribeAcls(r) => describe_acls::handle(cluster, authorizer, r),
        Request::CreateAcls(r) => create_acls::handle(cluster, authorizer, r).await,
        Request::DeleteAcls(r) => delete_acls::handle(cluster, authorizer, r).await,
        Request::SaslHandshake(r) => sasl_handshake::handle(version, r),
        Request::SaslAuthenticate(r) => sasl_authenticate::handle(version, r),
        Request::DescribeUserScramCredentials(r) => {
            describe_user_scram_credentials::handle(scram, version, r)
        }
        Request::AlterUserScramCredentials(r) => {
            alter_user_scram_credentials::handle(cluster, scram, version, r).await
        }
        Request::AlterPartitionReassignments(r) => {
            alter_partition_reassignments::handle((replicas, cluster), version, r).await
        }
        Request::ListPartitionReassignments(r) => {
            list_partition_reassignments::handle(cluster, version, r)
        }
        Request::ElectLeaders(r) => elect_leaders::handle((replicas, cluster), version, r).await,
        Request::DescribeQuorum(r) => describe_quorum::handle(cluster, version, r).await,
        Request::UnregisterBroker(r) => {
            unregister_broker::handle((replicas, cluster), version, r).await
        }
        Request::AddRaftVoter(r) => add_raft_voter::handle(cluster, r).await,
        Request::RemoveRaftVoter(r) => remove_raft_voter::handle(cluster, r).await,
        Request::UpdateRaftVoter(r) => update_raft_voter::handle(cluster, r).await,
        Request::UpdateFeatures(r) => {
            update_features::handle((replicas, cluster), version, r).await
        }
        Request::DescribeTopicPartitions(r) => {
            describe_topic_partitions::handle(cluster, version, r)
        }
        Request::DescribeClientQuotas(r) => describe_client_quotas::handle(cluster, version, r),
        Request::ShareGroupHeartbeat(r) => {
            share_group_heartbeat::handle((cluster, groups), share, r, client_id, context)
        }
        Request::ShareGroupDescribe(r) => share_group_describe::handle(cluster, share, r),
        Request::ShareFetch(r) => {
            let connection = context.connection_id;
            share_fetch::handle((cluster, limits), share, (version, connection), r).await
        }
        Request::ShareAcknowledge(r) => {
            let connection = context.connection_id;
            share_acknowledge::handle(cluster, share, (version, connection), r).await
        }
        Request::InitializeShareGroupState(r) => share_group_state::initialize(share, r).await,
        Request::ReadShareGroupState(r) => share_group_state::read(share, r),
        Request::WriteShareGroupState(r) => share_group_state::write(share, r).await,
        Request::DeleteShareGroupState(r) => share_group_state::delete(share, r).await,
        Request::ReadShareGroupStateSummary(r) => share_group_state::summary(share, r),
        Request::DescribeShareGroupOffsets(r) => {
            share_group_offsets::describe((replicas, cluster), share, r.0).await
        }
        Request::AlterShareGroupOffsets(r) => share_group_offsets::alter(cluster, share, r).await,
        Request::DeleteShareGroupOffsets(r) => share_group_offsets::delete(cluster, share, r).await,
        Request::AlterClientQuotas(r) => {
            alter_client_quotas::handle(cluster, quotas, version, r).await
        }
    }
}
