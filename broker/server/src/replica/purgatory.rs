//! Delayed operations keyed by partition (Kafka's purgatory): a Produce
//! waiting for durability or for the ISR, a Fetch waiting for data, a
//! DeleteRecords waiting for the replicas' log starts — each watches only
//! the partitions it names and is woken only when one of those makes
//! progress (its log end, durable offset, high watermark or role).
//!
//! Owns: the watcher lists (one per partition, keyed by the partition log's
//! identity), waking them, and `park_until`, the one wait loop every
//! delayed operation uses. Must not: decide whether an operation is
//! complete — the waiter's own condition says, re-checked when woken.
//!
//! A waiter registers (`watch`) before it checks its condition; a wake-up
//! that lands between the check and the wait is kept as the watcher's
//! permit, so none is lost. Lists drop the entries of finished waiters as
//! they grow, and on every wake.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use chronik_log::PartitionLog;
use tokio::sync::Notify;
use tokio::time::Instant;

/// The longest a request parks here whatever wait it asks for (a Fetch's
/// max_wait_ms, a DeleteRecords' timeout_ms), so none parks forever.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// A partition's identity for as long as its log lives (a deleted and
/// re-created topic gets new logs; `wake_all` covers the change).
type Key = usize;

fn key(log: &PartitionLog) -> Key {
    std::ptr::from_ref(log) as usize
}

#[derive(Debug, Default)]
pub struct Purgatory {
    watchers: Mutex<HashMap<Key, Vec<Weak<Notify>>>>,
}

/// One waiting operation's registration: woken when any of its partitions
/// progresses. Dropping it unregisters (lazily).
#[derive(Debug)]
struct Watch {
    notify: Arc<Notify>,
}

impl Watch {
    /// Resolves at the next wake-up (at once if one came since the last).
    async fn progressed(&self) {
        self.notify.notified().await;
    }
}

impl Purgatory {
    pub fn new() -> Purgatory {
        Purgatory::default()
    }

    /// Registers a waiter on `partitions`; call before checking the
    /// condition it waits for.
    fn watch<'a>(&self, partitions: impl IntoIterator<Item = &'a PartitionLog>) -> Watch {
        let notify = Arc::new(Notify::new());
        let mut watchers = self.watchers.lock().unwrap_or_else(|e| e.into_inner());
        for log in partitions {
            let list = watchers.entry(key(log)).or_default();
            if list.len() == list.capacity() {
                // About to grow: drop finished waiters first (amortised).
                list.retain(|w| w.strong_count() > 0);
            }
            list.push(Arc::downgrade(&notify));
        }
        Watch { notify }
    }

    /// Parks a delayed operation until `ready()` says it is complete
    /// (true) or `deadline` passes (false). `ready` runs at once; only if
    /// the operation must wait is it registered on `partitions()` (a
    /// request answered at once costs no registration), then `ready` runs
    /// again — no progress between the first check and the registration is
    /// lost — and after every wake-up, and a last time at the deadline.
    pub async fn park_until(
        &self,
        deadline: Instant,
        partitions: impl FnOnce() -> Vec<Arc<PartitionLog>>,
        mut ready: impl FnMut() -> bool,
    ) -> bool {
        if ready() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        let logs = partitions();
        let watch = self.watch(logs.iter().map(|l| &**l));
        loop {
            if ready() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::select! {
                () = watch.progressed() => {}
                _ = tokio::time::sleep_until(deadline) => {}
            }
        }
    }

    /// `log` progressed: wakes every waiter watching it.
    pub fn wake(&self, log: &PartitionLog) {
        let mut watchers = self.watchers.lock().unwrap_or_else(|e| e.into_inner());
        let Some(list) = watchers.get_mut(&key(log)) else {
            return;
        };
        list.retain(|w| match w.upgrade() {
            Some(notify) => {
                notify.notify_one();
                true
            }
            None => false,
        });
        if list.is_empty() {
            watchers.remove(&key(log));
        }
    }

    /// Every partition may have changed (roles applied, topics deleted):
    /// wakes every waiter.
    pub fn wake_all(&self) {
        let mut watchers = self.watchers.lock().unwrap_or_else(|e| e.into_inner());
        watchers.retain(|_, list| {
            list.retain(|w| match w.upgrade() {
                Some(notify) => {
                    notify.notify_one();
                    true
                }
                None => false,
            });
            !list.is_empty()
        });
    }
}
