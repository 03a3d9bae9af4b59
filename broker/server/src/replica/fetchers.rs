//! The replica fetcher tasks of this broker as a follower: one per leader
//! followed, with the partitions it was started for (`fetcher::run` is the
//! task's loop), and the stop of them all for controlled shutdown.
//!
//! Owns: which fetcher runs for which leader. Must not: fetch (the task
//! does) or decide what is followed (the image's roles do).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::task::JoinHandle;

use super::{fetcher, ReplicaManager};

/// The partitions a follower fetches from one leader.
pub type FollowedPartitions = BTreeSet<(String, i32)>;

struct Fetcher {
    task: JoinHandle<()>,
    partitions: FollowedPartitions,
}

#[derive(Default)]
pub struct FollowerFetchers {
    running: Mutex<HashMap<i32, Fetcher>>,
    /// Set by `stop` (controlled shutdown): no fetcher starts again.
    stopped: AtomicBool,
}

impl FollowerFetchers {
    /// Aborts every running fetcher (the next `ensure` starts fresh ones).
    pub fn abort_all(&self) {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        for (_, fetcher) in running.drain() {
            fetcher.task.abort();
        }
    }

    /// Aborts every fetcher for good.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        self.abort_all();
    }

    /// One fetcher per leader followed. A leader that gained partitions
    /// (this broker just became their follower) gets a fresh fetcher: the
    /// running one may be parked in a long poll (up to its max wait) that
    /// does not name them, and acks=all on the new leader waits for them.
    pub fn ensure(
        &self,
        manager: &Arc<ReplicaManager>,
        leaders: &BTreeMap<i32, FollowedPartitions>,
    ) {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if self.stopped.load(Ordering::Acquire) {
            return;
        }
        running.retain(|_, f| !f.task.is_finished());
        for (&leader, partitions) in leaders {
            if leader == manager.node_id {
                continue;
            }
            if let Some(current) = running.get_mut(&leader) {
                if partitions.is_subset(&current.partitions) {
                    current.partitions.clone_from(partitions);
                    continue;
                }
                current.task.abort();
            }
            let task = tokio::spawn(fetcher::run(manager.clone(), leader));
            running.insert(
                leader,
                Fetcher {
                    task,
                    partitions: partitions.clone(),
                },
            );
        }
    }
}

impl ReplicaManager {
    /// Stops every replica fetcher for good: a broker in controlled
    /// shutdown has been fenced and must not fetch (a fenced follower that
    /// keeps fetching would ask its leaders to put it back in their ISRs).
    pub fn stop_fetchers(&self) {
        self.fetchers.stop();
    }
}
