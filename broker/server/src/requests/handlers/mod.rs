//! Kafka API handlers: one file per API, each turning a typed request into a
//! typed response against the few managers it uses (the metadata quorum as
//! `Cluster`, the replicas, the write path, the log, groups, offsets,
//! transactions, the authorizer, a slice of the config, ...). The dispatcher
//! (`broker::dispatch`) takes `Broker` apart and lends each handler its
//! parts (fetch, produce, DeleteRecords and ConsumerGroupHeartbeat get a
//! borrowing `*Deps` struct); nothing under `requests/` names `Broker`.
//!
//! Owns: the per-API semantics and the request's error codes for what the
//! API itself decides (the failures of lower layers map in
//! `requests::errors` and `replica::write`), and `Handled`, what a handler
//! gives back. Must not: touch sockets or framing, write a log (the write
//! path does), or check ACLs (`requests::authorize` does, before).

pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod add_raft_voter;
pub mod alter_client_quotas;
pub mod alter_configs;
pub mod alter_partition_reassignments;
pub mod alter_user_scram_credentials;
pub mod api_versions;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod create_acls;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_acls;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_acls;
pub mod describe_client_quotas;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_quorum;
pub mod describe_topic_partitions;
pub mod describe_transactions;
pub mod describe_user_scram_credentials;
pub mod elect_leaders;
pub mod end_txn;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod list_partition_reassignments;
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod remove_raft_voter;
pub mod sasl_authenticate;
pub mod sasl_handshake;
pub mod share_acknowledge;
pub mod share_fetch;
pub mod share_group_describe;
pub mod share_group_heartbeat;
pub mod share_group_offsets;
pub mod share_group_state;
pub mod sync_group;
pub mod txn_offset_commit;
pub mod unregister_broker;
pub mod update_features;
pub mod update_raft_voter;
pub mod write_txn_markers;

use chronik_protocol::Response;

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
    pub(crate) fn new(response: Response, has_error: bool) -> Option<Handled> {
        Some(Handled {
            response,
            has_error,
            throttle_ms: 0,
        })
    }

    pub(crate) fn throttled(mut handled: Option<Handled>, throttle_ms: u64) -> Option<Handled> {
        if let Some(h) = handled.as_mut() {
            h.throttle_ms = throttle_ms;
        }
        handled
    }
}
