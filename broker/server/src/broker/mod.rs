//! The broker's shared state, handed to every connection, and the request
//! dispatcher (`dispatch`) that takes it apart and lends each handler only
//! the managers it uses; nothing under `requests/` names it.
//!
//! Owns: the log manager, the metadata quorum (`Cluster`), the replica
//! manager and the write path, metrics, the advertised endpoint, the
//! cluster id (the quorum's, persisted in `<data-dir>/meta.properties` by
//! `startup::meta_properties`), the produce-memory budget and the purgatory
//! where requests wait on partitions. Must not: speak the wire protocol.

pub mod dispatch;

use std::sync::Arc;

use chronik_log::LogManager;
use chronik_metadata::Cluster;
use tokio::sync::Semaphore;

use crate::config::Config;
use crate::coordinators::groups::{GroupManager, OffsetStore};
use crate::coordinators::producer_ids::ProducerIdAllocator;
use crate::coordinators::txn::TxnCoordinator;
use crate::infra::metrics::Metrics;
use crate::replica::purgatory::Purgatory;
use crate::replica::throttle::ReplicationThrottle;
use crate::replica::write::WritePath;
use crate::replica::ReplicaManager;
use crate::requests::fetch_sessions::FetchSessionCache;
use crate::security::authorizer::Authorizer;

/// Every manager a request may reach. Shared as `Arc<Broker>`.
pub struct Broker {
    pub config: Config,
    pub log: Arc<LogManager>,
    pub metrics: Arc<Metrics>,
    /// The host and port put in Metadata responses.
    pub advertised: (String, u16),
    pub cluster_id: String,
    /// The metadata quorum (of one without `--peers`): the image, and the
    /// controller's operations.
    pub cluster: Arc<Cluster>,
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
    /// This broker's replicas, kept in step with the quorum.
    pub replicas: Arc<ReplicaManager>,
    /// The one way records enter a partition led here.
    pub writes: Arc<WritePath>,
    /// Replication throttles (the leader side is the Fetch handler's).
    pub throttle: Arc<ReplicationThrottle>,
    /// ACL checks (off unless `--authorizer-class-name` is set).
    pub authorizer: Authorizer,
    /// SCRAM credentials (bootstrap file and the quorum's), shared with
    /// the SASL listeners.
    pub scram: Arc<crate::security::sasl::scram::ScramCredentials>,
    /// Client quotas from the metadata quorum, and their measures.
    pub quotas: Arc<crate::quotas::ClientQuotaManager>,
    /// Share groups (KIP-932): membership, share-partitions, sessions and
    /// the share coordinator's state.
    pub share: Arc<crate::coordinators::share::ShareCoordinator>,
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
