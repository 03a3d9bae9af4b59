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

/// How often idle share sessions are looked for.
const SESSION_REAP: std::time::Duration = std::time::Duration::from_secs(10);

impl ShareCoordinator {
    /// Evicts share sessions idle past `sessions::IDLE_EVICTION`, releasing
    /// what their members held (a client that vanished without closing).
    pub fn spawn_session_reaper(self: &Arc<Self>) {
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(SESSION_REAP);
            loop {
                interval.tick().await;
                let Some(me) = me.upgrade() else {
                    return;
                };
                for ((group, member), held) in me.sessions.evict_idle() {
                    me.partitions.release_member(&group, &member, &held).await;
                }
            }
        });
    }

    /// A client connection ended: the share sessions it used are closed and
    /// what their members held is released (in a task; nothing to do for
    /// a connection without share sessions).
    pub fn connection_closed(&self, connection: u64) {
        if !self.sessions.on_connection(connection) {
            return;
        }
        let closed = self.sessions.close_connection(connection);
        let partitions = self.partitions.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                for ((group, member), held) in closed {
                    partitions.release_member(&group, &member, &held).await;
                }
            });
        }
    }
}

/// Whether the cluster has share groups on (`share.version` >= 1).
pub fn enabled(cluster: &chronik_metadata::Cluster) -> bool {
    chronik_metadata::features::share_groups_enabled(&cluster.image().features)
}
