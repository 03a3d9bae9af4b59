//! This broker's replicas of every partition, kept in step with
//! the metadata quorum.
//!
//! Owns: the map of `Replica`s, applying each new `MetadataImage` (creating
//! local logs with the controller's topic ids, deleting removed topics,
//! leader/follower transitions), the replica fetcher tasks (one per leader
//! this broker follows, in `fetcher`), ISR proposals to the controller
//! (AlterPartition), the periodic ISR-shrink tick and the replication
//! counters. Must not: decode client requests — handlers call into `Replica`.
//!
//! Submodules: `partition` (one replica's role and state machines),
//! `identity` (who may fetch as a replica), `log_dir` (the data directory
//! offline and back),
//! `fetcher` (Fetch/OffsetForLeaderEpoch from the leader), `leader_client`
//! (a minimal Kafka client over one TCP connection), `epoch_file`
//! (leader-epoch checkpoints), `throttle` (replication throttles).

mod epoch_file;
mod fetcher;
pub mod high_watermark;
pub mod identity;
pub mod leader_client;
pub mod log_dir;
mod partition;
pub mod purgatory;
pub mod read_replica;
pub mod throttle;
pub mod write;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use chronik_log::LogManager;
use chronik_metadata::{AlterPartition, Cluster, MetadataImage, TopicImage};
use chronik_replication::{LeaderAction, Millis, ReplicationConfig};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{info, warn};

pub use partition::{checkpoint_path, FollowerStep, Replica, Transition};

use crate::replica::purgatory::Purgatory;

/// Topic config naming the smallest ISR that accepts acks=all.
pub const MIN_INSYNC_REPLICAS: &str = "min.insync.replicas";

/// Replication counters exported as metrics.
#[derive(Debug, Default)]
pub struct ReplicationStats {
    pub leader_changes: AtomicU64,
    pub isr_shrinks: AtomicU64,
    pub isr_expands: AtomicU64,
    pub records_replicated: AtomicU64,
}

type LeaderListener = Box<dyn Fn(&Replica) + Send + Sync>;

/// The partitions a follower fetches from one leader.
type FollowedPartitions = BTreeSet<(String, i32)>;

struct Fetcher {
    task: JoinHandle<()>,
    partitions: FollowedPartitions,
}

pub struct ReplicaManager {
    pub node_id: i32,
    pub cluster: Arc<Cluster>,
    log: Arc<LogManager>,
    /// By topic, then partition: a lookup by `&str` allocates nothing
    /// (every Fetch looks up each partition it names).
    replicas: RwLock<HashMap<String, HashMap<i32, Arc<Replica>>>>,
    default_min_insync: usize,
    replica_lag_time_max_ms: Millis,
    purgatory: Arc<Purgatory>,
    start: Instant,
    /// One fetcher task per leader followed, with the partitions it was
    /// started for.
    fetchers: Mutex<HashMap<i32, Fetcher>>,
    /// Set by `stop_fetchers` (controlled shutdown): no fetcher starts again.
    fetching_stopped: AtomicBool,
    /// One `sync` at a time (the follow loop and handlers that apply the
    /// image they just changed).
    sync_lock: Mutex<()>,
    pub stats: ReplicationStats,
    /// Leader and follower replication throttles (Kafka's quotas).
    pub throttle: throttle::ReplicationThrottle,
    leader_listeners: Mutex<Vec<LeaderListener>>,
    /// The security protocol of connections to other brokers.
    pub inter_broker: Arc<crate::security::client::InterBrokerSecurity>,
}

impl std::fmt::Debug for ReplicaManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaManager")
            .field("node_id", &self.node_id)
            .finish()
    }
}

impl ReplicaManager {
    pub fn new(
        node_id: i32,
        cluster: Arc<Cluster>,
        log: Arc<LogManager>,
        default_min_insync: usize,
        replica_lag_time_max_ms: u64,
        purgatory: Arc<Purgatory>,
        inter_broker: Arc<crate::security::client::InterBrokerSecurity>,
    ) -> Arc<ReplicaManager> {
        Arc::new(ReplicaManager {
            node_id,
            cluster,
            log,
            replicas: RwLock::new(HashMap::new()),
            default_min_insync: default_min_insync.max(1),
            replica_lag_time_max_ms,
            purgatory,
            start: Instant::now(),
            fetchers: Mutex::new(HashMap::new()),
            fetching_stopped: AtomicBool::new(false),
            sync_lock: Mutex::new(()),
            stats: ReplicationStats::default(),
            throttle: throttle::ReplicationThrottle::new(node_id),
            leader_listeners: Mutex::new(Vec::new()),
            inter_broker,
        })
    }

    /// Milliseconds since this manager started (the state machines' clock).
    pub fn now(&self) -> Millis {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    pub fn replica(&self, topic: &str, partition: i32) -> Option<Arc<Replica>> {
        let map = self.replicas.read().unwrap_or_else(|e| e.into_inner());
        map.get(topic)?.get(&partition).cloned()
    }

    pub fn all_replicas(&self) -> Vec<Arc<Replica>> {
        let map = self.replicas.read().unwrap_or_else(|e| e.into_inner());
        map.values().flat_map(|t| t.values().cloned()).collect()
    }

    /// Called (on the metadata task) each time this broker becomes leader
    /// of a partition.
    pub fn on_leadership(&self, listener: LeaderListener) {
        self.leader_listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(listener);
    }

    /// The replication settings of `topic`.
    fn config_for(&self, topic: &TopicImage) -> ReplicationConfig {
        let min_insync = topic
            .configs
            .get(MIN_INSYNC_REPLICAS)
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(self.default_min_insync)
            .max(1);
        ReplicationConfig {
            min_insync_replicas: min_insync,
            replica_lag_time_max_ms: self.replica_lag_time_max_ms,
        }
    }

    /// Performs what a leader's state machine asked for.
    pub fn perform(self: &Arc<Self>, replica: &Arc<Replica>, actions: Vec<LeaderAction>) {
        for action in actions {
            match action {
                LeaderAction::HighWatermarkAdvanced(_)
                | LeaderAction::FollowerLogStartOffsetAdvanced(_) => {
                    self.purgatory.wake(&replica.log);
                }
                LeaderAction::IsrChanged {
                    leader_epoch,
                    isr,
                    version,
                } => {
                    self.propose_isr(replica.clone(), leader_epoch, isr, version);
                }
            }
        }
    }

    fn propose_isr(
        self: &Arc<Self>,
        replica: Arc<Replica>,
        leader_epoch: i32,
        isr: BTreeSet<i32>,
        version: i32,
    ) {
        let manager = self.clone();
        let before = replica.leader_isr().map_or(0, |(n, _)| n);
        tokio::spawn(async move {
            let request = AlterPartition {
                topic: replica.topic.clone(),
                partition: replica.partition,
                leader_id: manager.node_id,
                leader_epoch,
                partition_epoch: version,
                new_isr: isr.iter().copied().collect(),
            };
            match manager.cluster.alter_partition(request).await {
                Ok(image) => {
                    let counter = if image.isr.len() > before {
                        &manager.stats.isr_expands
                    } else {
                        &manager.stats.isr_shrinks
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                    info!(topic = replica.topic, partition = replica.partition, isr = ?image.isr, "ISR changed");
                    let config = manager
                        .cluster
                        .image()
                        .topics
                        .get(&replica.topic)
                        .map(|t| manager.config_for(t))
                        .unwrap_or_default();
                    let (_, actions) =
                        replica.apply(&image, manager.node_id, config, manager.now());
                    manager.perform(&replica, actions);
                }
                Err(e) => {
                    warn!(topic = replica.topic, partition = replica.partition, error = %e, "AlterPartition refused");
                    replica.isr_change_failed();
                }
            }
        });
    }

    /// Applies `image`: local logs for its topics, roles for its partitions,
    /// fetchers for the leaders followed.
    pub fn sync(self: &Arc<Self>, image: &MetadataImage) {
        let _one_at_a_time = self.sync_lock.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.now();
        let mut followed: BTreeMap<i32, FollowedPartitions> = BTreeMap::new();
        for topic in image.topics.values() {
            let local = match self.ensure_local_topic(topic) {
                Some(t) => t,
                None => continue,
            };
            let config = self.config_for(topic);
            for p in &topic.partitions {
                let Some(log) = local.partition(p.partition) else {
                    continue;
                };
                let replica = {
                    let mut map = self.replicas.write().unwrap_or_else(|e| e.into_inner());
                    map.entry(topic.name.clone())
                        .or_default()
                        .entry(p.partition)
                        .or_insert_with(|| Arc::new(Replica::open(&topic.name, log.clone())))
                        .clone()
                };
                let (transition, actions) = replica.apply(p, self.node_id, config, now);
                if transition == Transition::BecameLeader {
                    self.stats.leader_changes.fetch_add(1, Ordering::Relaxed);
                    for listener in self
                        .leader_listeners
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .iter()
                    {
                        listener(&replica);
                    }
                }
                self.perform(&replica, actions);
                if let Some((leader, _)) = replica.follower_step() {
                    followed
                        .entry(leader)
                        .or_default()
                        .insert((topic.name.clone(), p.partition));
                }
            }
        }
        self.remove_deleted_topics(image);
        self.ensure_fetchers(&followed);
        // Roles may have changed anywhere: parked requests re-check.
        self.purgatory.wake_all();
    }

    fn ensure_local_topic(&self, topic: &TopicImage) -> Option<Arc<chronik_log::TopicLog>> {
        let log_configs: BTreeMap<String, String> = topic
            .configs
            .iter()
            .filter(|(k, _)| k.as_str() != MIN_INSYNC_REPLICAS)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let partitions = u32::try_from(topic.partitions.len()).unwrap_or(0);
        if let Some(t) = self.log.topic(&topic.name) {
            if t.topic_id == topic.topic_id {
                return Some(self.follow_topic_changes(t, partitions, log_configs));
            }
            // Same name, different id: the topic was deleted and re-created
            // while this broker was away.
            warn!(
                topic = topic.name,
                "local topic has a stale id; replacing it"
            );
            self.forget_topic(&topic.name);
            if let Err(e) = self.log.delete_topic(&topic.name) {
                warn!(topic = topic.name, error = %e, "cannot delete stale local topic");
                return None;
            }
        }
        match self
            .log
            .create_topic_with_id(&topic.name, partitions, log_configs, topic.topic_id)
        {
            Ok(t) => Some(t),
            Err(e) => {
                warn!(topic = topic.name, error = %e, "cannot create local log for topic");
                None
            }
        }
    }

    /// Brings an existing local topic to the quorum's partition count
    /// (CreatePartitions) and config overrides (AlterConfigs). A failure is
    /// logged and the local topic kept as it is; the next image retries.
    fn follow_topic_changes(
        &self,
        local: Arc<chronik_log::TopicLog>,
        partitions: u32,
        log_configs: BTreeMap<String, String>,
    ) -> Arc<chronik_log::TopicLog> {
        let mut local = local;
        if (local.partition_count() as u64) < u64::from(partitions) {
            match self.log.add_partitions(&local.name, partitions) {
                Ok(grown) => local = grown,
                Err(e) => {
                    warn!(topic = local.name, error = %e, "cannot add partitions to local log")
                }
            }
        }
        if local.overrides != log_configs {
            match self.log.set_topic_overrides(&local.name, log_configs) {
                Ok(altered) => local = altered,
                Err(e) => {
                    warn!(topic = local.name, error = %e, "cannot apply altered topic configs")
                }
            }
        }
        local
    }

    fn forget_topic(&self, name: &str) {
        let mut map = self.replicas.write().unwrap_or_else(|e| e.into_inner());
        map.remove(name);
    }

    fn remove_deleted_topics(&self, image: &MetadataImage) {
        for local in self.log.topics() {
            if !image.topics.contains_key(&local.name) {
                info!(
                    topic = local.name,
                    "topic deleted in the cluster; removing local log"
                );
                self.forget_topic(&local.name);
                if let Err(e) = self.log.delete_topic(&local.name) {
                    warn!(topic = local.name, error = %e, "cannot delete local topic");
                }
            }
        }
    }

    /// Whether this broker's data directory is offline (nothing is fetched
    /// meanwhile: followers could not append).
    pub fn log_dir_offline(&self) -> bool {
        self.log.dir_health().is_offline()
    }

    /// Times the data directory went offline since the process started.
    pub fn log_dir_failures(&self) -> u64 {
        self.log.dir_health().failures()
    }

    /// After the data directory was reopened (its logs cut back): every
    /// replica forgets its role and takes it again from the latest image,
    /// a follower from the start (OffsetForLeaderEpoch, truncation, fetch)
    /// with fresh fetchers.
    pub async fn restart_as_follower(self: &Arc<Self>) {
        {
            let mut fetchers = self.fetchers.lock().unwrap_or_else(|e| e.into_inner());
            for (_, fetcher) in fetchers.drain() {
                fetcher.task.abort();
            }
        }
        for replica in self.all_replicas() {
            replica.forget_role();
        }
        self.apply_latest().await;
    }

    /// Stops every replica fetcher for good: a broker in controlled
    /// shutdown has been fenced and must not fetch (a fenced follower that
    /// keeps fetching would ask its leaders to put it back in their ISRs).
    pub fn stop_fetchers(&self) {
        self.fetching_stopped.store(true, Ordering::Release);
        let mut fetchers = self.fetchers.lock().unwrap_or_else(|e| e.into_inner());
        for (_, fetcher) in fetchers.drain() {
            fetcher.task.abort();
        }
    }

    /// One fetcher per leader followed. A leader that gained partitions
    /// (this broker just became their follower) gets a fresh fetcher: the
    /// running one may be parked in a long poll (up to its max wait) that
    /// does not name them, and acks=all on the new leader waits for them.
    fn ensure_fetchers(self: &Arc<Self>, leaders: &BTreeMap<i32, FollowedPartitions>) {
        let mut fetchers = self.fetchers.lock().unwrap_or_else(|e| e.into_inner());
        if self.fetching_stopped.load(Ordering::Acquire) {
            return;
        }
        fetchers.retain(|_, f| !f.task.is_finished());
        for (&leader, partitions) in leaders {
            if leader == self.node_id {
                continue;
            }
            if let Some(running) = fetchers.get_mut(&leader) {
                if partitions.is_subset(&running.partitions) {
                    running.partitions.clone_from(partitions);
                    continue;
                }
                running.task.abort();
            }
            let manager = self.clone();
            let task = tokio::spawn(fetcher::run(manager, leader));
            fetchers.insert(
                leader,
                Fetcher {
                    task,
                    partitions: partitions.clone(),
                },
            );
        }
    }

    /// Applies the latest image now, before answering a request that just
    /// changed it (CreateTopics, DeleteTopics, auto-creation): the client's
    /// next request finds the local logs and roles in place.
    pub async fn apply_latest(self: &Arc<Self>) {
        let image = self.cluster.image();
        let manager = self.clone();
        let _ = tokio::task::spawn_blocking(move || manager.sync(&image)).await;
    }

    /// Follows the metadata quorum until the process ends; also runs the
    /// ISR-shrink tick and the data directory's watch (`log_dir`).
    pub fn spawn(self: &Arc<Self>) {
        log_dir::spawn(self.clone());
        let manager = self.clone();
        tokio::spawn(async move {
            let mut images = manager.cluster.subscribe();
            loop {
                let image = images.borrow_and_update().clone();
                let m = manager.clone();
                // Topic creation touches the file system.
                let _ = tokio::task::spawn_blocking(move || m.sync(&image)).await;
                if images.changed().await.is_err() {
                    return;
                }
            }
        });
        let manager = self.clone();
        let period = Duration::from_millis((self.replica_lag_time_max_ms / 2).clamp(100, 1000));
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(period);
            loop {
                ticker.tick().await;
                let now = manager.now();
                for replica in manager.all_replicas() {
                    let actions = replica.tick(now);
                    manager.perform(&replica, actions);
                }
            }
        });
    }

    /// Partitions this broker leads whose ISR is smaller than their replica
    /// set, and partitions without a leader (from the quorum's image).
    pub fn under_replicated_and_offline(&self) -> (i64, i64) {
        let under = self
            .all_replicas()
            .iter()
            .filter_map(|r| r.leader_isr())
            .filter(|(isr, replicas)| isr < replicas)
            .count();
        let image = self.cluster.image();
        let offline = image
            .topics
            .values()
            .flat_map(|t| t.partitions.iter())
            .filter(|p| p.leader < 0)
            .count();
        (
            i64::try_from(under).unwrap_or(0),
            i64::try_from(offline).unwrap_or(0),
        )
    }
}
