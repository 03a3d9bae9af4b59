//! Share groups (KIP-932, queues for Kafka) on the broker side.
//!
//! - `groups`      — membership on the group coordinator: ShareGroupHeartbeat, describe, list, delete.
//! - `sessions`    — share sessions on partition leaders (epochs, limits, idle eviction).
//! - `partitions`  — the share-partition manager on partition leaders: acquire, acknowledge, lock expiry.
//! - `persister`   — the share-group state RPCs, asked in-process or of the remote share coordinator.
//! - `state_store` — the share coordinator's store in `__share_group_state` (acks=all, fenced writers).
//! - `records`     — that topic's record encoding.
//! - `config`      — the `share.*` group configs: names, bounds, defaults, a group's settings.
//!
//! The state machines are pure: `chronik_coordinator_state::share_group`
//! and `::share_partition`. Share groups answer only while `share.version`
//! is 1 (a new cluster's level, as in Kafka 4.2+); otherwise every share
//! API answers UNSUPPORTED_VERSION at once.

pub mod config;
pub mod groups;
pub mod partitions;
pub mod persister;
pub mod records;
pub mod sessions;
pub mod state_store;

use std::sync::Arc;

pub use state_store::SHARE_STATE_TOPIC;

/// Everything share groups need, shared by the handlers.
#[derive(Debug)]
pub struct ShareCoordinator {
    pub groups: Arc<groups::ShareGroups>,
    pub partitions: Arc<partitions::SharePartitions>,
    pub sessions: sessions::ShareSessions,
    pub persister: Arc<persister::SharePersister>,
}

/// Whether the cluster has share groups on (`share.version` >= 1).
pub fn enabled(cluster: &chronik_metadata::Cluster) -> bool {
    chronik_metadata::features::share_groups_enabled(&cluster.image().features)
}
