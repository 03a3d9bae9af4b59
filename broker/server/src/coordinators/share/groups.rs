//! Share groups' membership on the group coordinator (the leader of
//! `__consumer_offsets`-0): ShareGroupHeartbeat, ShareGroupDescribe, and the
//! share groups in ListGroups and DeleteGroups.
//!
//! Owns: the share-group table (`chronik_coordinator_state::share_group`
//! per group), refusing a group id that a classic or consumer group holds
//! (GROUP_ID_NOT_FOUND, as Kafka), the member-expiry tick. Must not: touch
//! share-partition state (leaders keep it; offsets live with the share
//! coordinator). Membership is kept in memory: after a coordinator
//! failover members are answered UNKNOWN_MEMBER_ID and rejoin with epoch
//! 0, as Kafka's clients do; acknowledged delivery state is unaffected.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chronik_coordinator_state::share_group::{
    ShareGroup, ShareHeartbeat, ShareHeartbeatReply, ShareMember,
};
use chronik_coordinator_state::{GroupError, TopicMetadata};
use chronik_metadata::Cluster;

use super::config::settings_of;
use crate::coordinators::groups::offset_store::now_ms;
use crate::coordinators::groups::{GroupManager, OffsetStore};

const TICK: Duration = Duration::from_millis(500);
/// Most share groups one coordinator holds.
pub const MAX_SHARE_GROUPS: usize = 10_000;

/// A read-only copy of a share group (ShareGroupDescribe, ListGroups).
#[derive(Debug, Clone)]
pub struct ShareGroupSnapshot {
    pub group_id: String,
    pub state: &'static str,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub members: Vec<ShareMember>,
}

pub struct ShareGroups {
    groups: Mutex<HashMap<String, ShareGroup>>,
    offsets: Arc<OffsetStore>,
    classic: Arc<GroupManager>,
    cluster: Arc<Cluster>,
}

impl std::fmt::Debug for ShareGroups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShareGroups").finish()
    }
}

impl ShareGroups {
    pub fn new(
        offsets: Arc<OffsetStore>,
        classic: Arc<GroupManager>,
        cluster: Arc<Cluster>,
    ) -> Arc<ShareGroups> {
        Arc::new(ShareGroups {
            groups: Mutex::new(HashMap::new()),
            offsets,
            classic,
            cluster,
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, ShareGroup>> {
        self.groups.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS unless this broker
    /// coordinates groups now.
    pub fn readable(&self) -> Result<(), kafka_protocol::error::ResponseError> {
        self.offsets.readable()
    }

    pub fn exists(&self, group_id: &str) -> bool {
        self.lock().contains_key(group_id)
    }

    /// A ShareGroupHeartbeat.
    pub fn heartbeat(
        &self,
        group_id: &str,
        request: ShareHeartbeat,
        topics: &TopicMetadata,
    ) -> Result<ShareHeartbeatReply, GroupError> {
        if self.classic.exists(group_id) {
            return Err(GroupError::GroupIdNotFound);
        }
        let settings = settings_of(&self.cluster.image(), group_id);
        let now = u64::try_from(now_ms()).unwrap_or(0);
        let mut groups = self.lock();
        if !groups.contains_key(group_id) {
            if request.member_epoch != 0 {
                return Err(GroupError::UnknownMemberId);
            }
            if groups.len() >= MAX_SHARE_GROUPS {
                return Err(GroupError::CoordinatorNotAvailable);
            }
            groups.insert(
                group_id.to_string(),
                ShareGroup::new(group_id, settings.group),
            );
        }
        let group = groups
            .get_mut(group_id)
            .ok_or(GroupError::CoordinatorNotAvailable)?;
        group.set_config(settings.group);
        group.heartbeat(request, topics, now)
    }

    pub fn describe(&self, group_id: &str) -> Option<ShareGroupSnapshot> {
        self.lock().get(group_id).map(snapshot_of)
    }

    /// Every share group: (id, state).
    pub fn list(&self) -> Vec<(String, &'static str)> {
        let mut all: Vec<_> = self
            .lock()
            .values()
            .map(|g| (g.group_id().to_string(), g.state().kafka_name()))
            .collect();
        all.sort();
        all
    }

    /// DeleteGroups of a share group: NON_EMPTY_GROUP while it has
    /// members. Ok(false) when `group_id` is not a share group here.
    pub fn delete(&self, group_id: &str) -> Result<bool, GroupError> {
        let mut groups = self.lock();
        match groups.get(group_id) {
            None => Ok(false),
            Some(g) if g.members().next().is_some() => Err(GroupError::NonEmptyGroup),
            Some(_) => {
                groups.remove(group_id);
                Ok(true)
            }
        }
    }

    /// Remembers an empty share group (AlterShareGroupOffsets on a group
    /// that has none yet), as Kafka's coordinator creates it.
    pub fn ensure(&self, group_id: &str) -> Result<(), GroupError> {
        if self.classic.exists(group_id) {
            return Err(GroupError::GroupIdNotFound);
        }
        let settings = settings_of(&self.cluster.image(), group_id);
        let mut groups = self.lock();
        if !groups.contains_key(group_id) {
            if groups.len() >= MAX_SHARE_GROUPS {
                return Err(GroupError::CoordinatorNotAvailable);
            }
            groups.insert(
                group_id.to_string(),
                ShareGroup::new(group_id, settings.group),
            );
        }
        Ok(())
    }

    pub fn spawn_ticker(self: &Arc<Self>, topics: impl Fn() -> TopicMetadata + Send + 'static) {
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(TICK);
            loop {
                interval.tick().await;
                let Some(me) = me.upgrade() else {
                    return;
                };
                let now = u64::try_from(now_ms()).unwrap_or(0);
                let md = topics();
                for g in me.lock().values_mut() {
                    let expired = g.tick(now, &md);
                    if !expired.is_empty() {
                        tracing::info!(
                            group = g.group_id(),
                            ?expired,
                            "share-group members expired"
                        );
                    }
                }
            }
        });
    }
}

fn snapshot_of(g: &ShareGroup) -> ShareGroupSnapshot {
    ShareGroupSnapshot {
        group_id: g.group_id().to_string(),
        state: g.state().kafka_name(),
        group_epoch: g.group_epoch(),
        assignment_epoch: g.assignment_epoch(),
        members: g.members().cloned().collect(),
    }
}
