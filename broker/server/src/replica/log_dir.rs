//! This broker's data directory going offline and coming back, without a
//! restart.
//!
//! Owns: the watch loop (`spawn`). When a write or fsync fails in the data
//! directory (`chronik_log::LogDirHealth`), the loop reports it to the
//! controller in the broker's heartbeat (as KRaft brokers report offline log
//! directories); the controller moves this broker's leaderships to other ISR
//! members and takes it out of the ISRs (a partition no other live ISR
//! member can lead stays with it: readable, its writes refused). Once this
//! node's own image shows that, the loop probes the directory every
//! `PROBE_INTERVAL`; when it takes writes again, `LogManager::reopen_dir`
//! recovers the logs (cut back to their durable offsets), every replica
//! starts again as a follower (OffsetForLeaderEpoch, truncation, fetch), and
//! the heartbeat reports the directory online: the leaders put it back in
//! their ISRs once it has caught up, and a partition it kept leading is led
//! again under the new leader epoch the controller gives it. Must not:
//! write logs itself, or reopen while it leads a partition the controller
//! could have moved.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, error, info};

use super::ReplicaManager;

/// How often the loop looks at the directory's health.
const TICK: Duration = Duration::from_millis(100);
/// How often an offline directory is probed for writability.
const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// Runs the loop until the process ends.
pub fn spawn(manager: Arc<ReplicaManager>) {
    tokio::spawn(async move {
        let mut reported_offline = false;
        let mut last_probe: Option<Instant> = None;
        let mut ticker = tokio::time::interval(TICK);
        loop {
            ticker.tick().await;
            let health = manager.log.dir_health();
            if !health.is_offline() {
                continue;
            }
            if !reported_offline {
                error!(data_dir = %manager.log.data_dir().display(), reason = health.reason().unwrap_or_default(),
                    "log directory offline: reporting it to the controller, which moves this broker's leaderships and ISR places; \
                     it is probed every second and reopened once writable");
                manager.cluster.report_log_dir_offline(true);
                reported_offline = true;
            }
            if !moved_off(&manager) || last_probe.is_some_and(|t| t.elapsed() < PROBE_INTERVAL) {
                continue;
            }
            last_probe = Some(Instant::now());
            let log = manager.log.clone();
            match tokio::task::spawn_blocking(move || log.reopen_dir()).await {
                Ok(Ok(reopened)) => {
                    manager.restart_as_follower().await;
                    manager.cluster.report_log_dir_offline(false);
                    reported_offline = false;
                    info!(data_dir = %manager.log.data_dir().display(), partitions = reopened.partitions,
                        truncated_to_durable_offset = reopened.truncated,
                        "log directory writable again: logs recovered, catching up as a follower to rejoin the ISRs");
                }
                Ok(Err(e)) => debug!(error = %e, "log directory still not writable"),
                Err(e) => debug!(error = %e, "reopening the log directory panicked"),
            }
        }
    });
}

/// The controller has taken the offline directory into account and this
/// node applied it: registered as offline, and leading only partitions the
/// image leaves it (no other live ISR member could take them; their new
/// leader epoch when the directory is back makes followers truncate).
fn moved_off(manager: &ReplicaManager) -> bool {
    let image = manager.cluster.image();
    let acknowledged = image
        .brokers
        .get(&manager.node_id)
        .is_some_and(|b| b.log_dir_offline);
    acknowledged
        && manager.all_replicas().iter().all(|r| {
            r.leader_isr().is_none()
                || image
                    .partition(&r.topic, r.partition)
                    .is_some_and(|p| p.leader == manager.node_id)
        })
}
