//! `Cluster`: one node of the metadata quorum — the public face of the
//! crate. Starts raft and the node's tasks, serves the image, and routes
//! metadata changes to the controller.
//!
//! Owns: startup (store, listener, raft, bootstrap), the node's tasks and
//! their shutdown, and request routing: a change is handled locally when
//! this node is the controller, otherwise forwarded over the raft RPC
//! transport, retried while no controller is reachable (bounded by
//! `COMMAND_TIMEOUT`), and answered once applied locally (DescribeQuorum
//! is routed the same way but answered by the controller from its raft
//! state; this node adds the voters' raft listeners from its own
//! configuration). Must not: apply commands itself (the state machine
//! does) or decide liveness (the controller does).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use openraft::error::{InitializeError, RaftError};
use openraft::{Config, SnapshotPolicy};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::acl::{AclBinding, AclBindingFilter};
use crate::admission::Admission;
use crate::command::CommandResult;
use crate::config::ClusterConfig;
use crate::controller::Controller;
use crate::error::ClusterError;
use crate::image::{MetadataImage, PartitionImage, TopicImage};
use crate::monitor::LeaderMonitor;
use crate::network::{call_once, CallError, NetworkFactory};
use crate::quorum::{QuorumInfo, ReplicationClock};
use crate::raft_types::{raft_id, QuorumNode, Raft};
use crate::request::{
    AlterPartition, ControllerReply, ControllerRequest, CreatePartitions, CreateTopic,
    ElectionType, Reassignment,
};
use crate::rpc::{RpcRequest, RpcResponse};
use crate::rpc_server::{self, RpcHandler};
use crate::store_log::LogStore;
use crate::store_sm::StateMachineStore;
use crate::{heartbeat, observers, ControllerStatus};

/// How long a metadata change may take end to end, including waiting for
/// a controller to be elected.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause between attempts while no controller is reachable.
const RETRY_BACKOFF: Duration = Duration::from_millis(100);
/// Raft timings (ms): wide election timeouts, see `monitor` for why.
const RAFT_HEARTBEAT_MS: u64 = 200;
const RAFT_ELECTION_MIN_MS: u64 = 1000;
const RAFT_ELECTION_MAX_MS: u64 = 2000;

pub struct Cluster {
    config: ClusterConfig,
    raft: Raft,
    controller: Arc<Controller>,
    monitor: Arc<LeaderMonitor>,
    images: watch::Receiver<Arc<MetadataImage>>,
    /// The controller's applied index at this broker's last accepted heartbeat.
    heartbeat_accepted: watch::Receiver<Option<u64>>,
    heartbeats_stopped: heartbeat::Stopped,
    /// What this broker's heartbeats say of its data directory.
    log_dir: Arc<heartbeat::LogDirState>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    stopped: AtomicBool,
}

/// The raft address of node `id`: from the configuration when it is a
/// configured voter, else as the quorum's membership records it (voters
/// found through `controller.quorum.bootstrap.servers`, observers).
pub(crate) fn raft_addr_of(config: &ClusterConfig, raft: &Raft, id: i32) -> Option<String> {
    config
        .raft_addr(id)
        .or_else(|| observers::recorded_addr(raft, id))
}

/// The hosts the raft port admits first: the configured voters' and every
/// member's the membership records.
fn member_hosts(config: &ClusterConfig, raft: &Raft) -> crate::admission::MemberHosts {
    let configured: Vec<String> = config.peers.iter().map(|p| p.host.clone()).collect();
    let raft = raft.clone();
    Box::new(move || {
        let mut hosts = configured.clone();
        let metrics = raft.metrics();
        let recorded: Vec<String> = metrics
            .borrow()
            .membership_config
            .membership()
            .nodes()
            .filter_map(|(_, node)| observers::host_of(&node.addr))
            .collect();
        for host in recorded {
            if !hosts.contains(&host) {
                hosts.push(host);
            }
        }
        hosts
    })
}

/// Between two rounds of join requests.
const JOIN_BACKOFF: Duration = Duration::from_millis(300);
/// An observer with no heartbeat accepted for this long asks to join again
/// (it was unregistered while alive, or its address changed).
const REJOIN_AFTER: Duration = Duration::from_secs(3);

/// A broker that is not a controller asks the quorum, through each of
/// `join_addrs` in turn, to add it as an observer: at start, and again
/// whenever no heartbeat has been accepted for `REJOIN_AFTER` (a live
/// broker that was unregistered comes back, as a combined node does at its
/// next heartbeat). Asking is a no-op for a member whose address is
/// unchanged; refusals are logged at most every 10 s.
fn spawn_join(
    config: ClusterConfig,
    raft: Raft,
    mut accepted: watch::Receiver<Option<u64>>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let own = raft_id(config.node_id);
        let addrs = config.join_addrs();
        let request = RpcRequest::Controller(ControllerRequest::AddObserver {
            node_id: config.node_id,
            raft_addr: config.own_raft_addr(),
            directory_id: Some(config.directory_id),
        });
        let credentials = config.credentials();
        let mut last_warning: Option<Instant> = None;
        let mut attempt = 0usize;
        let mut joined = false;
        loop {
            if joined {
                match tokio::time::timeout(REJOIN_AFTER, accepted.changed()).await {
                    Ok(Ok(())) => continue,
                    Ok(Err(_)) => return,
                    Err(_) => {}
                }
                // A controller added as a voter (AddRaftVoter) has joined for good.
                let is_voter = raft
                    .metrics()
                    .borrow()
                    .membership_config
                    .membership()
                    .voter_ids()
                    .any(|v| v == own);
                if is_voter {
                    continue;
                }
            }
            let addr = &addrs[attempt % addrs.len()];
            attempt += 1;
            let outcome = match call_once(addr, &credentials, &request, COMMAND_TIMEOUT).await {
                Ok(RpcResponse::Controller(ControllerReply::Applied { .. })) => {
                    // The leader replicates the membership to us next.
                    let mut metrics = raft.metrics();
                    let _ = tokio::time::timeout(
                        Duration::from_secs(5),
                        metrics.wait_for(|m| {
                            m.membership_config.membership().get_node(&own).is_some()
                        }),
                    )
                    .await;
                    if !joined {
                        tracing::info!(
                            node_id = config.node_id,
                            "following the metadata quorum as an observer"
                        );
                    }
                    joined = true;
                    accepted.mark_unchanged();
                    continue;
                }
                // Not the leader: the next address may be.
                Ok(RpcResponse::Controller(ControllerReply::NotController { .. })) => None,
                Ok(RpcResponse::Controller(ControllerReply::Failed(e))) => Some(e.to_string()),
                Ok(other) => Some(format!("answered {other:?}")),
                Err(e) => Some(e.to_string()),
            };
            if let Some(why) = outcome {
                if last_warning.is_none_or(|at| at.elapsed() >= Duration::from_secs(10)) {
                    tracing::warn!(node_id = config.node_id, controller = %addr, "joining the metadata quorum as an observer: {why}");
                    last_warning = Some(Instant::now());
                }
            }
            if attempt.is_multiple_of(addrs.len()) {
                tokio::time::sleep(JOIN_BACKOFF).await;
            }
        }
    })
}

/// A controller that is a voter makes sure the membership records its
/// directory id and raft address (Kafka's voters send UpdateRaftVoter at
/// start): checked every `REGISTER_BACKOFF`, sent through the controller
/// when missing, refusals logged once each.
fn spawn_register_voter(cluster: std::sync::Weak<Cluster>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut last_refusal: Option<String> = None;
        loop {
            tokio::time::sleep(crate::voters::REGISTER_BACKOFF).await;
            let Some(cluster) = cluster.upgrade() else {
                return;
            };
            let config = &cluster.config;
            let own = raft_id(config.node_id);
            let wanted = QuorumNode::new(config.own_raft_addr(), Some(config.directory_id));
            let registered = {
                let metrics = cluster.raft.metrics();
                let m = metrics.borrow();
                let membership = m.membership_config.membership();
                let voter = membership.voter_ids().any(|v| v == own);
                // Only the directory id is filled in: an address recorded
                // differently (a host name for an IP) is the operator's.
                !voter
                    || membership
                        .get_node(&own)
                        .is_some_and(|n| n.directory_id == wanted.directory_id)
            };
            if registered {
                continue;
            }
            let addr = crate::cluster::raft_addr_of(config, &cluster.raft, config.node_id)
                .unwrap_or(wanted.addr);
            match cluster
                .update_raft_voter(config.node_id, config.directory_id, addr)
                .await
            {
                Ok(()) => {
                    tracing::info!(
                        node_id = config.node_id,
                        directory_id = %crate::voters::uuid_string(&config.directory_id),
                        "recorded this controller's directory id in the metadata quorum's voter set"
                    );
                }
                Err(e) => {
                    let why = e.to_string();
                    if last_refusal.as_deref() != Some(why.as_str()) {
                        tracing::warn!(
                            node_id = config.node_id,
                            "recording this controller's directory id: {why}"
                        );
                        last_refusal = Some(why);
                    }
                }
            }
        }
    })
}

fn raft_config() -> anyhow::Result<Config> {
    let config = Config {
        cluster_name: "chronik-metadata".to_string(),
        heartbeat_interval: RAFT_HEARTBEAT_MS,
        election_timeout_min: RAFT_ELECTION_MIN_MS,
        election_timeout_max: RAFT_ELECTION_MAX_MS,
        install_snapshot_timeout: 2000,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(1000),
        max_in_snapshot_log_to_keep: 100,
        snapshot_max_chunk_size: 1 << 20,
        ..Default::default()
    };
    config.validate().context("raft config")
}

impl Cluster {
    /// Binds `raft_listen`, opens (or creates) the raft store, starts raft
    /// with every peer as a voter (the lowest node id bootstraps an empty
    /// cluster), the heartbeat loop and the controller. Returns once
    /// listening; `wait_ready` waits for this broker's registration.
    pub async fn start(config: ClusterConfig) -> anyhow::Result<Arc<Cluster>> {
        config.validate().map_err(anyhow::Error::msg)?;
        let dir = config.metadata_dir();
        let (image_tx, images) = watch::channel(Arc::new(MetadataImage::default()));
        let opened = {
            let dir = dir.clone();
            tokio::task::spawn_blocking(move || {
                let log_store = LogStore::open(&dir).context("opening the raft log")?;
                let state_machine =
                    StateMachineStore::open(&dir, image_tx).context("opening the raft snapshot")?;
                anyhow::Ok((log_store, state_machine))
            })
        };
        let (log_store, state_machine) = opened
            .await?
            .with_context(|| format!("metadata quorum store in {}", dir.display()))?;
        let listener = TcpListener::bind(config.raft_listen)
            .await
            .with_context(|| format!("binding raft listener {}", config.raft_listen))?;

        let own_id = raft_id(config.node_id);
        let peers: BTreeMap<u64, String> = config
            .peers
            .iter()
            .filter_map(|p| Some((raft_id(p.node_id), config.raft_addr(p.node_id)?)))
            .collect();
        let clock = Arc::new(ReplicationClock::default());
        let network = NetworkFactory {
            own_id,
            peers: peers.clone(),
            credentials: config.credentials(),
            clock: clock.clone(),
        };
        let raft = Raft::new(
            own_id,
            Arc::new(raft_config()?),
            network,
            log_store,
            state_machine,
        )
        .await
        .context("starting raft")?;
        clock.watch(raft.metrics());

        let monitor = Arc::new(LeaderMonitor::new(own_id));
        let controller = Arc::new(Controller::new(
            raft.clone(),
            images.clone(),
            config.broker_session_timeout,
            config
                .peers
                .iter()
                .map(|p| (p.node_id, p.host.clone()))
                .collect(),
            clock,
            (config.node_id, config.default_min_insync_replicas),
        ));
        let (accepted_tx, heartbeat_accepted) = watch::channel(None);
        let handler = Arc::new(RpcHandler {
            raft: raft.clone(),
            controller: controller.clone(),
            monitor: monitor.clone(),
            secret: config.secret.clone(),
            security: config.security.clone(),
            voters: config.voter_ids(),
            admission: Arc::new(Admission::new(member_hosts(&config, &raft))),
        });
        let fencer_tick = (config.heartbeat_interval / 2).min(Duration::from_millis(250));
        let heartbeats_stopped = heartbeat::Stopped::default();
        let log_dir = Arc::new(heartbeat::LogDirState::default());
        let mut tasks = vec![
            rpc_server::spawn(listener, handler),
            monitor.clone().spawn(raft.clone()),
            controller.clone().spawn_fencer(fencer_tick),
            controller
                .clone()
                .spawn_leader_balancer(config.leader_balance.clone()),
        ];
        if config.roles.broker {
            tasks.push(heartbeat::spawn(
                config.clone(),
                raft.clone(),
                controller.clone(),
                accepted_tx,
                heartbeats_stopped.clone(),
                log_dir.clone(),
            ));
        }
        // A broker that is not a controller, or a controller not among the
        // configured voters (one to be added with AddRaftVoter), follows
        // the log as an observer first.
        if config.own_peer().is_none() {
            tasks.push(spawn_join(
                config.clone(),
                raft.clone(),
                heartbeat_accepted.clone(),
            ));
        }
        let cluster = Arc::new(Cluster {
            config,
            raft,
            controller,
            monitor,
            images,
            heartbeat_accepted,
            heartbeats_stopped,
            log_dir,
            tasks: Mutex::new(tasks),
            stopped: AtomicBool::new(false),
        });
        if let Err(e) = cluster.bootstrap(peers).await {
            cluster.shutdown().await;
            return Err(e);
        }
        if cluster.config.roles.controller {
            let task = spawn_register_voter(Arc::downgrade(&cluster));
            cluster
                .tasks
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(task);
        }
        tracing::info!(
            node_id = cluster.config.node_id,
            process_roles = %cluster.config.roles,
            raft_listen = %cluster.config.raft_listen,
            peers = ?cluster.config.peers,
            data_dir = %cluster.config.data_dir.display(),
            session_timeout = ?cluster.config.broker_session_timeout,
            heartbeat_interval = ?cluster.config.heartbeat_interval,
            "metadata quorum node started"
        );
        Ok(cluster)
    }

    /// The lowest node id initializes an empty cluster with every peer as
    /// a voter; initializing twice with the same voters is harmless.
    async fn bootstrap(&self, peers: BTreeMap<u64, String>) -> anyhow::Result<()> {
        let lowest = self.config.peers.iter().map(|p| p.node_id).min();
        if lowest != Some(self.config.node_id) || self.raft.is_initialized().await? {
            return Ok(());
        }
        let own = raft_id(self.config.node_id);
        let members: BTreeMap<u64, QuorumNode> = peers
            .into_iter()
            .map(|(id, addr)| {
                let directory_id = (id == own).then_some(self.config.directory_id);
                (id, QuorumNode::new(addr, directory_id))
            })
            .collect();
        match self.raft.initialize(members).await {
            Ok(()) => {
                tracing::info!(
                    node_id = self.config.node_id,
                    "initialized the metadata quorum"
                );
                Ok(())
            }
            Err(RaftError::APIError(InitializeError::NotAllowed(_))) => Ok(()),
            Err(e) => Err(e).context("initializing the metadata quorum"),
        }
    }

    /// Waits until the applied image has this node registered and unfenced
    /// and the controller has accepted one of its heartbeats.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<(), ClusterError> {
        let deadline = Instant::now() + timeout;
        let mut images = self.images.clone();
        let mut accepted = self.heartbeat_accepted.clone();
        loop {
            let accepted_at = *accepted.borrow_and_update();
            let image = images.borrow_and_update().clone();
            if accepted_at.is_some_and(|index| image.applied_index >= index)
                && image.is_live(self.config.node_id)
            {
                return Ok(());
            }
            tokio::select! {
                _ = images.changed() => {}
                _ = accepted.changed() => {}
                () = tokio::time::sleep_until(deadline) => {
                    return Err(match self.monitor.view().controller_id {
                        None => ClusterError::Unavailable("no controller elected".to_string()),
                        Some(_) => ClusterError::Timeout,
                    });
                }
            }
        }
    }

    /// This node's id.
    pub fn node_id(&self) -> i32 {
        self.config.node_id
    }

    /// The latest applied image.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.images.borrow().clone()
    }

    /// Every applied image from now on (intermediate ones may be skipped).
    pub fn subscribe(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.images.clone()
    }

    pub fn status(&self) -> ControllerStatus {
        let view = self.monitor.view();
        ControllerStatus {
            is_controller: view.is_controller,
            controller_id: view.controller_id,
            raft_term: view.raft_term,
            live_brokers: self.image().live_brokers().count(),
        }
    }

    /// Raft leader (controller) changes this node has seen, the first
    /// election included.
    pub fn leader_changes(&self) -> u64 {
        self.monitor.leader_changes()
    }

    /// The quorum's cluster id. When none is set yet, proposes `proposed`
    /// (this node's candidate); whichever proposal commits first is the
    /// cluster's id for good, and every node reports it.
    pub async fn cluster_id(&self, proposed: &str) -> Result<String, ClusterError> {
        if let Some(id) = self.image().cluster_id.clone() {
            return Ok(id);
        }
        self.submit(ControllerRequest::InitClusterId(proposed.to_string()))
            .await?;
        self.image()
            .cluster_id
            .clone()
            .ok_or_else(|| ClusterError::Unavailable("the cluster id was not applied".to_string()))
    }

    /// Kafka's controlled shutdown. Stops this broker's heartbeats, asks
    /// the controller to move its leaderships now (its partitions get new
    /// leaders from their ISRs, and it leaves the ISRs it shares with live
    /// brokers) and returns once this node's image shows that. The broker
    /// stays listed until the controller fences it for silence; the node
    /// stays in the quorum (raft) until `shutdown`.
    /// Reports this broker's data directory offline (or back online) in
    /// its heartbeats, from the next one, sent now: the controller moves
    /// its leaderships and ISR places (or lets it lead and rejoin again).
    pub fn report_log_dir_offline(&self, offline: bool) {
        self.log_dir.set(offline);
    }

    pub async fn controlled_shutdown(&self) -> Result<(), ClusterError> {
        *self.heartbeats_stopped.lock().await = true;
        let node_id = self.config.node_id;
        self.submit(ControllerRequest::ControlledShutdown { node_id })
            .await?;
        if self.image().is_live(node_id) {
            // A heartbeat sent before the stop reached the controller after
            // the command and registered this broker again: once more.
            self.submit(ControllerRequest::ControlledShutdown { node_id })
                .await?;
        }
        Ok(())
    }

    pub async fn create_topic(&self, req: CreateTopic) -> Result<TopicImage, ClusterError> {
        match self.submit(ControllerRequest::CreateTopic(req)).await? {
            CommandResult::Topic(topic) => Ok(topic),
            other => Err(unexpected(other)),
        }
    }

    pub async fn create_partitions(
        &self,
        req: CreatePartitions,
    ) -> Result<TopicImage, ClusterError> {
        match self
            .submit(ControllerRequest::CreatePartitions(req))
            .await?
        {
            CommandResult::Topic(topic) => Ok(topic),
            other => Err(unexpected(other)),
        }
    }

    /// Replaces `topic`'s config overrides with `configs`.
    pub async fn alter_topic_configs(
        &self,
        topic: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<TopicImage, ClusterError> {
        let request = ControllerRequest::AlterTopicConfigs {
            topic: topic.to_string(),
            configs,
        };
        match self.submit(request).await? {
            CommandResult::Topic(topic) => Ok(topic),
            other => Err(unexpected(other)),
        }
    }

    /// Adds ACLs on every node (validated first; the whole request or nothing).
    pub async fn create_acls(&self, bindings: Vec<AclBinding>) -> Result<(), ClusterError> {
        self.submit(ControllerRequest::CreateAcls(bindings))
            .await
            .map(drop)
    }

    /// Removes the ACLs each filter matches; per filter, what it removed.
    pub async fn delete_acls(
        &self,
        filters: Vec<AclBindingFilter>,
    ) -> Result<Vec<Vec<AclBinding>>, ClusterError> {
        match self.submit(ControllerRequest::DeleteAcls(filters)).await? {
            CommandResult::DeletedAcls(removed) => Ok(removed),
            other => Err(unexpected(other)),
        }
    }

    /// Adds or replaces SCRAM credentials `(user, mechanism, credential)`
    /// and removes `(user, mechanism)` pairs, in one committed command.
    pub async fn alter_scram_credentials(
        &self,
        upsertions: Vec<(String, String, crate::image::ScramCredentialImage)>,
        deletions: Vec<(String, String)>,
    ) -> Result<(), ClusterError> {
        let request = ControllerRequest::AlterScramCredentials {
            upsertions,
            deletions,
        };
        self.submit(request).await.map(drop)
    }

    /// Replaces the dynamic configs of broker resource `resource` (a
    /// broker id, or `""` for every broker's default).
    pub async fn alter_broker_configs(
        &self,
        resource: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<(), ClusterError> {
        let request = ControllerRequest::AlterBrokerConfigs {
            resource: resource.to_string(),
            configs,
        };
        self.submit(request).await.map(drop)
    }

    /// Replaces `group`'s configs (empty: removes them).
    pub async fn alter_group_configs(
        &self,
        group: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<(), ClusterError> {
        let request = ControllerRequest::AlterGroupConfigs {
            group: group.to_string(),
            configs,
        };
        self.submit(request).await.map(drop)
    }

    /// AlterClientQuotas: applies checked alterations, all or none.
    pub async fn alter_client_quotas(
        &self,
        alterations: Vec<crate::quotas::QuotaAlteration>,
    ) -> Result<(), ClusterError> {
        self.submit(ControllerRequest::AlterClientQuotas(alterations))
            .await
            .map(drop)
    }

    /// KIP-455: starts, replaces or cancels reassignments; per
    /// reassignment, in order, `None` when the controller applied it.
    pub async fn alter_partition_reassignments(
        &self,
        reassignments: Vec<Reassignment>,
    ) -> Result<Vec<Option<ClusterError>>, ClusterError> {
        let request = ControllerRequest::AlterPartitionReassignments(reassignments);
        match self.submit(request).await? {
            CommandResult::PerPartition(results) => Ok(results),
            other => Err(unexpected(other)),
        }
    }

    /// UpdateFeatures: checks `updates` (name, level, upgrade type) against
    /// the finalized levels and, unless `validate_only`, records them.
    pub async fn update_features(
        &self,
        updates: Vec<(String, i16, crate::features::UpgradeType)>,
        validate_only: bool,
    ) -> Result<(), ClusterError> {
        self.submit(ControllerRequest::UpdateFeatures {
            updates,
            validate_only,
        })
        .await
        .map(drop)
    }

    /// KIP-460: elections of `partitions`; per partition, in order, `None`
    /// when it got the leader the election type asks for.
    pub async fn elect_leaders(
        &self,
        election: ElectionType,
        partitions: Vec<(String, i32)>,
    ) -> Result<Vec<Option<ClusterError>>, ClusterError> {
        let request = ControllerRequest::ElectLeaders {
            election,
            partitions,
        };
        match self.submit(request).await? {
            CommandResult::PerPartition(results) => Ok(results),
            other => Err(unexpected(other)),
        }
    }

    /// Kafka's UnregisterBroker: removes broker `node_id`'s registration
    /// (`BrokerIdNotRegistered` when the image has none). A live broker
    /// registers again at its next heartbeat.
    pub async fn unregister_broker(&self, node_id: i32) -> Result<(), ClusterError> {
        self.submit(ControllerRequest::UnregisterBroker { node_id })
            .await
            .map(drop)
    }

    /// KIP-853 AddRaftVoter: observer `node_id` (following the log with
    /// `directory_id` from `raft_addr`) becomes a voter (`voters::add`).
    pub async fn add_raft_voter(
        &self,
        node_id: i32,
        directory_id: [u8; 16],
        raft_addr: String,
    ) -> Result<(), ClusterError> {
        self.submit(ControllerRequest::AddVoter {
            node_id,
            directory_id,
            raft_addr,
        })
        .await
        .map(drop)
    }

    /// KIP-853 RemoveRaftVoter (`voters::remove`); removing the active
    /// controller makes it step down once the change commits.
    pub async fn remove_raft_voter(
        &self,
        node_id: i32,
        directory_id: [u8; 16],
    ) -> Result<(), ClusterError> {
        self.submit(ControllerRequest::RemoveVoter {
            node_id,
            directory_id,
        })
        .await
        .map(drop)
    }

    /// KIP-853 UpdateRaftVoter: records voter `node_id`'s directory id and
    /// raft address (`voters::update`).
    pub async fn update_raft_voter(
        &self,
        node_id: i32,
        directory_id: [u8; 16],
        raft_addr: String,
    ) -> Result<(), ClusterError> {
        self.submit(ControllerRequest::UpdateVoter {
            node_id,
            directory_id,
            raft_addr,
        })
        .await
        .map(drop)
    }

    /// The raft leader (controller) id and term this node knows.
    pub fn leader(&self) -> (Option<i32>, u64) {
        let view = self.monitor.view();
        (view.controller_id, view.raft_term)
    }

    /// KRaft's DescribeQuorum: the controller's view of every voter's
    /// replication (nothing is proposed), with the voters' raft listeners.
    pub async fn describe_quorum(&self) -> Result<QuorumInfo, ClusterError> {
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        match self
            .route(&ControllerRequest::DescribeQuorum, deadline)
            .await?
        {
            ControllerReply::Quorum(info) => Ok(info),
            ControllerReply::Failed(e) => Err(e),
            other => Err(unexpected_reply(&other)),
        }
    }

    pub async fn delete_topic(&self, name: &str) -> Result<(), ClusterError> {
        self.submit(ControllerRequest::DeleteTopic(name.to_string()))
            .await
            .map(drop)
    }

    pub async fn alter_partition(
        &self,
        req: AlterPartition,
    ) -> Result<PartitionImage, ClusterError> {
        match self.submit(ControllerRequest::AlterPartition(req)).await? {
            CommandResult::Partition(partition) => Ok(partition),
            other => Err(unexpected(other)),
        }
    }

    /// Routes `request` to the controller until it is applied here, the
    /// controller rejects it, or `COMMAND_TIMEOUT` passes.
    async fn submit(&self, request: ControllerRequest) -> Result<CommandResult, ClusterError> {
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        match self.route(&request, deadline).await? {
            ControllerReply::Applied { log_index, result } => {
                self.wait_applied(log_index, deadline).await?;
                match result {
                    CommandResult::Rejected(e) => Err(e),
                    result => Ok(result),
                }
            }
            ControllerReply::Failed(e) => Err(e),
            other => Err(unexpected_reply(&other)),
        }
    }

    /// The controller's answer to `request`, by `deadline`. Retries only
    /// when the request was certainly not delivered (no controller known,
    /// could not connect, the target is not the controller).
    async fn route(
        &self,
        request: &ControllerRequest,
        deadline: Instant,
    ) -> Result<ControllerReply, ClusterError> {
        loop {
            if self.stopped.load(Ordering::Acquire) {
                return Err(ClusterError::Unavailable(
                    "cluster node shut down".to_string(),
                ));
            }
            let controller_id = self.monitor.view().controller_id;
            let reply = match controller_id {
                None => None,
                Some(id) if id == self.config.node_id => {
                    Some(self.controller.handle(request.clone()).await)
                }
                Some(id) => self.forward(id, request, deadline).await?,
            };
            match reply {
                Some(ControllerReply::NotController { .. }) | None => {}
                Some(reply) => return Ok(reply),
            }
            if Instant::now() + RETRY_BACKOFF >= deadline {
                return Err(match controller_id {
                    None => ClusterError::Unavailable("no controller elected".to_string()),
                    Some(_) => ClusterError::NotController,
                });
            }
            tokio::time::sleep(RETRY_BACKOFF).await;
        }
    }

    /// Sends `request` to controller `id`. `Ok(None)`: not delivered, retry.
    async fn forward(
        &self,
        id: i32,
        request: &ControllerRequest,
        deadline: Instant,
    ) -> Result<Option<ControllerReply>, ClusterError> {
        let Some(addr) = raft_addr_of(&self.config, &self.raft, id) else {
            return Ok(None);
        };
        let remaining = deadline.saturating_duration_since(Instant::now());
        let rpc = RpcRequest::Controller(request.clone());
        match call_once(&addr, &self.config.credentials(), &rpc, remaining).await {
            Ok(RpcResponse::Controller(reply)) => Ok(Some(reply)),
            Ok(other) => Err(ClusterError::Unavailable(format!(
                "controller {id} answered {other:?}"
            ))),
            Err(CallError::Connect(e)) => {
                tracing::debug!(controller = id, error = %e, "controller unreachable; retrying");
                Ok(None)
            }
            Err(CallError::Timeout { sent: false }) => Ok(None),
            Err(e) => {
                tracing::warn!(controller = id, error = %e, "forwarding to the controller failed");
                Err(ClusterError::Timeout)
            }
        }
    }

    /// Waits until this node's image includes `log_index`.
    async fn wait_applied(&self, log_index: u64, deadline: Instant) -> Result<(), ClusterError> {
        let mut images = self.images.clone();
        let applied = tokio::time::timeout_at(
            deadline,
            images.wait_for(|image| image.applied_index >= log_index),
        )
        .await
        .map(|waited| waited.is_ok());
        match applied {
            Ok(true) => Ok(()),
            Ok(false) => Err(ClusterError::Unavailable(
                "state machine stopped".to_string(),
            )),
            Err(_) => Err(ClusterError::Timeout),
        }
    }

    /// Stops answering RPCs, stops every task and raft. Idempotent.
    pub async fn shutdown(&self) {
        if self.stopped.swap(true, Ordering::AcqRel) {
            return;
        }
        let tasks: Vec<JoinHandle<()>> =
            std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|e| e.into_inner()));
        for task in &tasks {
            task.abort();
        }
        for task in tasks {
            let _ = task.await;
        }
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(error = %e, "raft did not shut down cleanly");
        }
        tracing::info!(
            node_id = self.config.node_id,
            "metadata quorum node stopped"
        );
    }
}

impl Drop for Cluster {
    /// Dropping without `shutdown` still stops the node's own tasks;
    /// only `shutdown` also stops raft.
    fn drop(&mut self) {
        for task in self
            .tasks
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            task.abort();
        }
    }
}

fn unexpected(result: CommandResult) -> ClusterError {
    ClusterError::Unavailable(format!("unexpected controller result {result:?}"))
}

fn unexpected_reply(reply: &ControllerReply) -> ClusterError {
    ClusterError::Unavailable(format!("unexpected controller reply {reply:?}"))
}
