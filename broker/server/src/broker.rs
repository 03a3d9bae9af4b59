//! The broker's shared state, handed to every connection. The request
//! dispatcher (`requests::handlers::dispatch`) takes it apart and lends each
//! handler only the managers it uses; nothing else under `requests/` names it.
//!
//! Owns: the log manager, the replica manager, metrics, the advertised endpoint, the cluster id
//! (the quorum's, persisted in `<data-dir>/meta.properties`), the produce-memory budget and
//! the purgatory where requests wait on partitions. Must not: speak the wire protocol.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use chronik_log::LogManager;
use tokio::sync::Semaphore;

use crate::coordinators::groups::{GroupManager, OffsetStore};
use crate::coordinators::producer_ids::ProducerIdAllocator;
use crate::coordinators::txn::TxnCoordinator;
use crate::infra::metrics::Metrics;
use crate::replica::purgatory::Purgatory;
use crate::replica::ReplicaManager;
use crate::requests::fetch_sessions::FetchSessionCache;
use crate::security::authorizer::Authorizer;
use crate::startup::config::Config;

/// Every manager a request may reach. Shared as `Arc<Broker>`.
pub struct Broker {
    pub config: Config,
    pub log: Arc<LogManager>,
    pub metrics: Arc<Metrics>,
    /// The host and port put in Metadata responses.
    pub advertised: (String, u16),
    pub cluster_id: String,
    /// Requests waiting on partitions (durability, the ISR, data to fetch),
    /// woken per partition as it progresses.
    pub purgatory: Arc<Purgatory>,
    /// Bytes of requests that may be held in memory at once; a connection
    /// stops reading when it cannot get permits for its next frame.
    pub produce_memory: Arc<Semaphore>,
    /// The budget of frames read before a SASL connection has logged in
    /// (`PRE_AUTH_MEMORY_BYTES`): apart from `produce_memory`, so
    /// connections that never authenticate cannot stall those that did
    /// (Kafka's pre-authentication reads do not draw on its memory pool).
    pub pre_auth_memory: Arc<Semaphore>,
    /// Consumer groups coordinated by this broker.
    pub groups: Arc<GroupManager>,
    /// Committed offsets, durable in `__consumer_offsets`.
    pub offsets: Arc<OffsetStore>,
    /// Incremental fetch sessions (KIP-227).
    pub fetch_sessions: FetchSessionCache,
    /// The transaction coordinator (answers while this broker leads
    /// `__transaction_state`-0).
    pub txn: Arc<TxnCoordinator>,
    pub producer_ids: Arc<ProducerIdAllocator>,
    /// The metadata quorum (of one without `--peers`) and this broker's replicas.
    pub replicas: Arc<ReplicaManager>,
    /// ACL checks (off unless `--authorizer-class-name` is set).
    pub authorizer: Authorizer,
    /// SCRAM credentials (bootstrap file and the quorum's), shared with
    /// the SASL listeners.
    pub scram: Arc<crate::security::sasl::scram::ScramCredentials>,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("node_id", &self.config.node_id)
            .field("advertised", &self.advertised)
            .finish()
    }
}

impl Broker {
    /// In-flight request memory currently taken, in bytes.
    pub fn produce_memory_in_use(&self) -> usize {
        self.config
            .produce_profile
            .in_flight_bytes()
            .saturating_sub(self.produce_memory.available_permits())
    }
}

/// Reads `cluster.id` from `<data_dir>/meta.properties`, creating the file
/// with a fresh id on first start, and checks the stored node id matches.
pub fn load_or_create_cluster_id(data_dir: &Path, node_id: i32) -> anyhow::Result<String> {
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("creating data dir {}", data_dir.display()))?;
    let path = data_dir.join("meta.properties");
    if let Ok(text) = std::fs::read_to_string(&path) {
        let mut cluster_id = None;
        for line in text.lines() {
            match line.split_once('=') {
                Some(("cluster.id", v)) => cluster_id = Some(v.trim().to_string()),
                Some(("node.id", v)) if v.trim() != node_id.to_string() => anyhow::bail!(
                    "{} belongs to node.id {} but this broker is --node-id {node_id}",
                    path.display(),
                    v.trim()
                ),
                _ => {}
            }
        }
        return cluster_id.with_context(|| format!("{} has no cluster.id", path.display()));
    }
    let cluster_id = uuid::Uuid::new_v4().simple().to_string();
    store_cluster_id(data_dir, node_id, &cluster_id)?;
    Ok(cluster_id)
}

/// Writes `<data_dir>/meta.properties` (atomically) with `cluster_id`.
pub fn store_cluster_id(data_dir: &Path, node_id: i32, cluster_id: &str) -> anyhow::Result<()> {
    let path = data_dir.join("meta.properties");
    chronik_log::write_atomically(
        &path,
        format!("version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n").as_bytes(),
    )
    .with_context(|| format!("writing {}", path.display()))
}
