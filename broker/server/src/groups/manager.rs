//! The driver around `chronik_coordinator::Group`: keeps every group, turns
//! delayed replies into answered requests, and feeds the clock.
//!
//! Owns: the group table, ticket → waiting-request routing (oneshot
//! channels), member id generation, and the 100 ms tick task that expires
//! silent members and times out rebalances. Must not: decode wire messages or
//! store offsets. Locking: one std `Mutex` held only for state-machine calls,
//! never across an await.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use chronik_coordinator::{
    CommitCheck, Group, GroupConfig, GroupError, GroupState, JoinReply, JoinRequest, Member,
    Millis, Reply, SyncReply, SyncRequest, Ticket,
};
use tokio::sync::oneshot;

const TICK: Duration = Duration::from_millis(100);

/// A read-only copy of a group for DescribeGroups / ListGroups.
#[derive(Debug, Clone)]
pub struct GroupSnapshot {
    pub group_id: String,
    pub state: GroupState,
    pub protocol_type: String,
    pub protocol_name: String,
    pub members: Vec<Member>,
}

#[derive(Debug)]
pub struct GroupManager {
    config: GroupConfig,
    epoch: Instant,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    groups: HashMap<String, Group>,
    waiting: HashMap<Ticket, oneshot::Sender<Reply>>,
    next_ticket: Ticket,
}

impl GroupManager {
    pub fn new(config: GroupConfig) -> Arc<GroupManager> {
        Arc::new(GroupManager {
            config,
            epoch: Instant::now(),
            inner: Mutex::new(Inner::default()),
        })
    }

    /// Runs the clock until the runtime stops.
    pub fn spawn_ticker(self: &Arc<Self>) {
        let manager = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(TICK);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                interval.tick().await;
                let Some(manager) = manager.upgrade() else {
                    return;
                };
                manager.tick();
            }
        });
    }

    fn now(&self) -> Millis {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave a group half-updated in
        // a way later calls can't handle; keep serving.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn tick(&self) {
        let now = self.now();
        let mut inner = self.lock();
        let mut replies = Vec::new();
        for group in inner.groups.values_mut() {
            if group.needs_ticks() || group.state() == GroupState::PreparingRebalance {
                replies.extend(group.tick(now));
            }
        }
        deliver(&mut inner, replies);
    }

    pub async fn join(&self, group_id: &str, request: JoinRequest) -> JoinReply {
        let member_id = request.member_id.clone();
        let fresh_member_id = format!("{}-{}", request.client_id, uuid::Uuid::new_v4());
        let rx = {
            let now = self.now();
            let mut inner = self.lock();
            let (ticket, rx) = register(&mut inner);
            let config = self.config;
            let group = inner
                .groups
                .entry(group_id.to_string())
                .or_insert_with(|| Group::new(group_id, config));
            if group.state() == GroupState::Dead {
                *group = Group::new(group_id, config);
            }
            let replies = group.join(ticket, request, fresh_member_id, now);
            deliver(&mut inner, replies);
            rx
        };
        match rx.await {
            Ok(Reply::Join(_, reply)) => reply,
            _ => JoinReply::error(GroupError::CoordinatorNotAvailable, &member_id),
        }
    }

    pub async fn sync(&self, group_id: &str, request: SyncRequest) -> SyncReply {
        let rx = {
            let now = self.now();
            let mut inner = self.lock();
            let (ticket, rx) = register(&mut inner);
            let Some(group) = inner.groups.get_mut(group_id) else {
                inner.waiting.remove(&ticket);
                return sync_error(GroupError::UnknownMemberId);
            };
            let replies = group.sync(ticket, request, now);
            deliver(&mut inner, replies);
            rx
        };
        match rx.await {
            Ok(Reply::Sync(_, reply)) => reply,
            _ => sync_error(GroupError::CoordinatorNotAvailable),
        }
    }

    pub fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        generation_id: i32,
    ) -> Result<(), GroupError> {
        let now = self.now();
        let mut inner = self.lock();
        match inner.groups.get_mut(group_id) {
            Some(group) => group.heartbeat(member_id, generation_id, now),
            None => Err(GroupError::UnknownMemberId),
        }
    }

    pub fn leave(&self, group_id: &str, member_id: &str) -> Result<(), GroupError> {
        let now = self.now();
        let mut inner = self.lock();
        let Some(group) = inner.groups.get_mut(group_id) else {
            return Err(GroupError::UnknownMemberId);
        };
        let (result, replies) = group.leave(member_id, now);
        deliver(&mut inner, replies);
        result
    }

    pub fn check_commit(&self, group_id: &str, member_id: &str, generation_id: i32) -> CommitCheck {
        let inner = self.lock();
        match inner.groups.get(group_id) {
            Some(group) => group.check_commit(member_id, generation_id),
            None if generation_id < 0 => CommitCheck::Ok,
            None => CommitCheck::Rejected(GroupError::IllegalGeneration),
        }
    }

    /// DeleteGroups: only groups without members may be deleted.
    pub fn delete(&self, group_id: &str) -> Result<(), GroupError> {
        let mut inner = self.lock();
        match inner.groups.get_mut(group_id) {
            Some(group) => {
                group.delete()?;
                inner.groups.remove(group_id);
                Ok(())
            }
            None => Ok(()),
        }
    }

    pub fn describe(&self, group_id: &str) -> Option<GroupSnapshot> {
        let inner = self.lock();
        inner.groups.get(group_id).map(snapshot)
    }

    pub fn list(&self) -> Vec<GroupSnapshot> {
        let inner = self.lock();
        let mut groups: Vec<GroupSnapshot> = inner.groups.values().map(snapshot).collect();
        groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        groups
    }
}

fn snapshot(group: &Group) -> GroupSnapshot {
    GroupSnapshot {
        group_id: group.group_id().to_string(),
        state: group.state(),
        protocol_type: group.protocol_type().unwrap_or_default().to_string(),
        protocol_name: group.protocol_name().unwrap_or_default().to_string(),
        members: group.members().cloned().collect(),
    }
}

fn register(inner: &mut Inner) -> (Ticket, oneshot::Receiver<Reply>) {
    inner.next_ticket += 1;
    let ticket = inner.next_ticket;
    let (tx, rx) = oneshot::channel();
    inner.waiting.insert(ticket, tx);
    (ticket, rx)
}

/// Hands each reply to the request waiting on its ticket. A requester that
/// went away (connection closed) simply doesn't receive it.
fn deliver(inner: &mut Inner, replies: Vec<Reply>) {
    for reply in replies {
        let ticket = match &reply {
            Reply::Join(t, _) | Reply::Sync(t, _) => *t,
        };
        if let Some(tx) = inner.waiting.remove(&ticket) {
            let _ = tx.send(reply);
        }
    }
}

fn sync_error(error: GroupError) -> SyncReply {
    SyncReply {
        error: Some(error),
        protocol_type: None,
        protocol_name: None,
        assignment: Default::default(),
    }
}
