//! This broker's heartbeat to the controller (Kafka's BrokerHeartbeat,
//! which also registers the broker's endpoint).
//!
//! Owns: the heartbeat loop. Every `heartbeat_interval` it sends
//! `Heartbeat{node_id, host, port}` to the current raft leader — directly
//! to the local controller when that is this node — and records the
//! controller's applied index from the latest accepted heartbeat, which
//! `Cluster::wait_ready` waits for. The heartbeat also carries whether the
//! broker's data directory is offline (`LogDirState`, set by the broker);
//! a change is sent at once, not a tick later. Must not: decide liveness
//! (the controller does).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::ClusterConfig;
use crate::controller::Controller;
use crate::network::call_once;
use crate::raft_types::{kafka_id, Raft};
use crate::request::{ControllerReply, ControllerRequest, Heartbeat};
use crate::rpc::{RpcRequest, RpcResponse};

/// Set (under its lock) when the broker begins a controlled shutdown: the
/// loop sends nothing more, and no heartbeat is in flight once the setter
/// holds the lock — so none can register the broker again after the
/// controller has fenced it.
pub type Stopped = Arc<tokio::sync::Mutex<bool>>;

/// Whether this broker's data directory is offline, as its heartbeats
/// report it; `set` wakes the loop so the controller learns at once.
#[derive(Debug, Default)]
pub struct LogDirState {
    offline: std::sync::atomic::AtomicBool,
    changed: tokio::sync::Notify,
}

impl LogDirState {
    pub fn set(&self, offline: bool) {
        use std::sync::atomic::Ordering;
        if self.offline.swap(offline, Ordering::AcqRel) != offline {
            self.changed.notify_one();
        }
    }
    pub fn is_offline(&self) -> bool {
        self.offline.load(std::sync::atomic::Ordering::Acquire)
    }
}

/// Spawns the loop; `accepted` receives the controller's applied index
/// after every accepted heartbeat.
pub fn spawn(
    config: ClusterConfig,
    raft: Raft,
    controller: Arc<Controller>,
    accepted: watch::Sender<Option<u64>>,
    stopped: Stopped,
    log_dir: Arc<LogDirState>,
) -> JoinHandle<()> {
    let host = config.own_host().to_string();
    let heartbeat = Heartbeat {
        node_id: config.node_id,
        host,
        port: config.kafka_port,
        listeners: config.listeners.clone(),
        log_dir_offline: false,
        rack: config.rack.clone(),
    };
    let credentials = config.credentials();
    // A heartbeat that needs a registration waits for a raft commit.
    let call_timeout = config.heartbeat_interval.max(Duration::from_secs(1));
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(config.heartbeat_interval);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = interval.tick() => {}
                () = log_dir.changed.notified() => {}
            }
            let stopped = stopped.lock().await;
            if *stopped {
                return;
            }
            let leader = raft.metrics().borrow().current_leader.and_then(kafka_id);
            let request = ControllerRequest::Heartbeat(Heartbeat {
                log_dir_offline: log_dir.is_offline(),
                ..heartbeat.clone()
            });
            let reply = match leader {
                None => {
                    // No leader yet (a quorum electing, or just started):
                    // heartbeat as soon as one is known, not a tick later.
                    drop(stopped);
                    let mut metrics = raft.metrics();
                    let _ =
                        tokio::time::timeout(config.heartbeat_interval, metrics.changed()).await;
                    interval.reset_immediately();
                    continue;
                }
                Some(id) if id == config.node_id => controller.handle(request).await,
                Some(id) => {
                    let Some(addr) = crate::cluster::raft_addr_of(&config, &raft, id) else {
                        continue;
                    };
                    match call_once(
                        &addr,
                        &credentials,
                        &RpcRequest::Controller(request),
                        call_timeout,
                    )
                    .await
                    {
                        Ok(RpcResponse::Controller(reply)) => reply,
                        Ok(other) => {
                            tracing::debug!(
                                controller = id,
                                ?other,
                                "unexpected heartbeat response"
                            );
                            continue;
                        }
                        Err(e) => {
                            tracing::debug!(controller = id, error = %e, "heartbeat failed");
                            continue;
                        }
                    }
                }
            };
            drop(stopped);
            match reply {
                ControllerReply::Applied { log_index, .. } => {
                    accepted.send_replace(Some(log_index));
                }
                other => tracing::debug!(?other, "heartbeat not accepted"),
            }
        }
    })
}
