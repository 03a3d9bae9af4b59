//! This broker's replicas of every partition, kept in step with the
//! metadata quorum: `ReplicaManager` is the map of `Replica`s and the handle
//! the other jobs of this room share. The jobs apart, each in its file:
//!
//! - `image_sync` — applying each new `MetadataImage` (local logs with the
//!   controller's topic ids, removed topics deleted, leader/follower
//!   transitions) and the follow loop;
//! - `write` — `WritePath`, the one way records enter a partition led here
//!   (one deadline for the append turn, KIP-890 verification, the append,
//!   the fsync wait and the ISR wait; DeleteRecords' log start move);
//! - `isr` — what a leader's state machine asks for (ISR proposals to the
//!   controller, purgatory wake-ups), the follower-fetch record that ends
//!   acks=all waits, the ISR-shrink tick and the replication counters;
//! - `fetchers` and `fetcher` — one replica fetcher task per leader followed;
//! - `throttle` — replication throttles (Kafka's replication quotas);
//! - `partition` (one replica's role and state machines), `identity` (who
//!   may fetch as a replica), `log_dir` (the data directory offline and
//!   back), `leader_client` (a minimal Kafka client over one TCP connection
//!   to another broker), `epoch_file` (leader-epoch checkpoints),
//!   `high_watermark` (what consumers may read), `read_replica` (KIP-392's
//!   selector), `purgatory` (requests parked on partitions).
//!
//! Owns: the map and the handle's fields, none of them public: the metadata
//! quorum is reached from outside through `Cluster`, not through this type.
//! Must not: decode client requests — handlers call into `Replica` and the
//! write path.

mod epoch_file;
mod fetcher;
mod fetchers;
pub mod high_watermark;
pub mod identity;
mod image_sync;
pub mod isr;
pub mod leader_client;
pub mod log_dir;
mod partition;
pub mod purgatory;
pub mod read_replica;
pub mod throttle;
pub mod write;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use chronik_log::LogManager;
use chronik_metadata::{Cluster, TopicImage};
use chronik_replication::{Millis, ReplicationConfig};
use tokio::time::Instant;

pub use isr::ReplicationStats;
pub use partition::{checkpoint_path, FollowerStep, Replica, Transition};

use crate::replica::purgatory::Purgatory;
use crate::replica::throttle::ReplicationThrottle;
use crate::security::client::InterBrokerSecurity;

/// Topic config naming the smallest ISR that accepts acks=all.
pub const MIN_INSYNC_REPLICAS: &str = "min.insync.replicas";

type LeaderListener = Box<dyn Fn(&Replica) + Send + Sync>;

pub struct ReplicaManager {
    node_id: i32,
    cluster: Arc<Cluster>,
    log: Arc<LogManager>,
    /// By topic, then partition: a lookup by `&str` allocates nothing
    /// (every Fetch looks up each partition it names).
    replicas: RwLock<HashMap<String, HashMap<i32, Arc<Replica>>>>,
    default_min_insync: usize,
    replica_lag_time_max_ms: Millis,
    purgatory: Arc<Purgatory>,
    start: Instant,
    fetchers: fetchers::FollowerFetchers,
    /// One `sync` at a time (the follow loop and handlers that apply the
    /// image they just changed).
    sync_lock: Mutex<()>,
    stats: ReplicationStats,
    /// Leader and follower replication throttles (Kafka's quotas), shared
    /// with the Fetch handler's leader side.
    throttle: Arc<ReplicationThrottle>,
    leader_listeners: Mutex<Vec<LeaderListener>>,
    /// The security protocol of connections to other brokers.
    inter_broker: Arc<InterBrokerSecurity>,
}

impl std::fmt::Debug for ReplicaManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaManager")
            .field("node_id", &self.node_id)
            .finish()
    }
}

/// What a `ReplicaManager` is built from.
pub struct ReplicaDeps {
    pub node_id: i32,
    pub cluster: Arc<Cluster>,
    pub log: Arc<LogManager>,
    pub default_min_insync: usize,
    pub replica_lag_time_max_ms: u64,
    pub purgatory: Arc<Purgatory>,
    pub throttle: Arc<ReplicationThrottle>,
    pub inter_broker: Arc<InterBrokerSecurity>,
}

impl ReplicaManager {
    pub fn new(deps: ReplicaDeps) -> Arc<ReplicaManager> {
        Arc::new(ReplicaManager {
            node_id: deps.node_id,
            cluster: deps.cluster,
            log: deps.log,
            replicas: RwLock::new(HashMap::new()),
            default_min_insync: deps.default_min_insync.max(1),
            replica_lag_time_max_ms: deps.replica_lag_time_max_ms,
            purgatory: deps.purgatory,
            start: Instant::now(),
            fetchers: fetchers::FollowerFetchers::default(),
            sync_lock: Mutex::new(()),
            stats: ReplicationStats::default(),
            throttle: deps.throttle,
            leader_listeners: Mutex::new(Vec::new()),
            inter_broker: deps.inter_broker,
        })
    }

    /// This broker's id.
    pub fn node_id(&self) -> i32 {
        self.node_id
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

    /// Whether this broker's data directory is offline (nothing is fetched
    /// meanwhile: followers could not append).
    pub fn log_dir_offline(&self) -> bool {
        self.log.dir_health().is_offline()
    }

    /// Times the data directory went offline since the process started.
    pub fn log_dir_failures(&self) -> u64 {
        self.log.dir_health().failures()
    }
}
