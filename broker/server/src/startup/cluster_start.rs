//! Start-up: every broker is a node of a metadata quorum — of one when
//! `--peers` is not given. Joins the quorum, waits until this broker is
//! registered (so the first Metadata answer already lists every live
//! broker), agrees on the cluster id, adopts the topics of a data directory
//! written without a quorum, makes sure `__consumer_offsets` exists
//! cluster-wide, creates the local logs of the current image and starts the
//! replica manager. The Kafka listener serves only after this returns;
//! until then `join_diagnosis` logs why not.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use chronik_log::LogManager;
use chronik_metadata::{
    Cluster, ClusterConfig, ClusterError, ClusterSecret, CreateTopic, DEFAULT_HEARTBEAT_INTERVAL,
};
use tracing::info;

use crate::config::Config;
use crate::coordinators::groups::OFFSETS_TOPIC;
use crate::coordinators::share::SHARE_STATE_TOPIC;
use crate::coordinators::txn::TXN_TOPIC;
use crate::replica::purgatory::Purgatory;
use crate::replica::throttle::ReplicationThrottle;
use crate::replica::{ReplicaDeps, ReplicaManager};
use crate::startup::join_diagnosis::JoinDiagnosis;

/// How long a node waits for the quorum (and, on the very first start, for
/// enough brokers to host `__consumer_offsets`) before giving up.
const START_TIMEOUT: Duration = Duration::from_secs(300);

/// What joining the cluster yields.
pub struct Joined {
    pub replicas: Arc<ReplicaManager>,
    /// The metadata quorum joined.
    pub cluster: Arc<Cluster>,
    /// Replication throttles, shared by the fetchers and the Fetch handler.
    pub throttle: Arc<ReplicationThrottle>,
    /// The host and port put in Metadata responses.
    pub advertised: (String, u16),
    /// The quorum's cluster id (the same on every node).
    pub cluster_id: String,
}

/// Joins the quorum. `kafka_port` is the port clients are given (the
/// advertised one, else the bound listener's). `meta` is this node's
/// meta.properties: its cluster id is this node's proposal (the quorum's
/// choice replaces it on disk when they differ), its directory id is
/// recorded with this node's place in the quorum.
pub async fn start(
    config: &Config,
    log: &Arc<LogManager>,
    purgatory: &Arc<Purgatory>,
    meta: &crate::startup::meta_properties::MetaProperties,
    kafka_port: u16,
    bound: &[(crate::security::ListenerConfig, std::net::SocketAddr)],
    security: &crate::security::Security,
) -> anyhow::Result<Joined> {
    let inter_broker = security.inter_broker.clone();
    let secret = security.cluster_secret.clone();
    let raw = config.peers.as_str();
    let peers = cluster_peers(config)?;
    // Other nodes dial these ports; a quorum of one is dialled by nobody.
    if !config.single_voter() && (kafka_port == 0 || config.raft_listen.port() == 0) {
        bail!("a cluster of several nodes needs fixed ports: --listen and --raft-listen must not use port 0");
    }
    let host = match peers.iter().find(|p| p.node_id == config.node_id) {
        Some(me) => {
            if let Some((host, _)) = &config.advertise {
                if host != &me.host {
                    tracing::warn!(advertise = host, peer_host = me.host, "--advertise host differs from this node's --peers host; clients are given the --peers host");
                }
            }
            me.host.clone()
        }
        None => config.host.clone(),
    };
    let advertised = (host.clone(), kafka_port);
    let listeners = match config.security.named {
        true => advertised_listeners(config, bound, &advertised),
        // `--listen`: registered as before, host and port alone.
        false => Default::default(),
    };
    let controller_security = crate::security::controller_listener::load(
        config.controller_protocol,
        &config.security,
        !config.single_voter(),
    )?;
    let cluster_config = ClusterConfig {
        listeners,
        kafka_port,
        ..cluster_config(
            config,
            peers.clone(),
            host,
            secret,
            controller_security,
            meta.directory_id,
        )
    };
    let new_quorum = !cluster_config.metadata_dir().exists();
    let unadopted: Vec<String> = log.topics().iter().map(|t| t.name.clone()).collect();
    if new_quorum && !config.single_voter() && !unadopted.is_empty() {
        bail!(
            "{} holds {} topics ({}) written without a metadata quorum, and joining a quorum of several nodes would \
             delete them. Start this broker once without --peers to adopt them into a quorum of one, or give \
             it an empty --data-dir.",
            config.data_dir.display(),
            unadopted.len(),
            unadopted.join(", "),
        );
    }
    // Kafka's offsets.topic.replication.factor is 3; fewer in a combined
    // cluster of fewer nodes.
    let internal_replication = match config.roles.controller {
        true => peers.len().min(3),
        false => 3,
    };
    let diagnosis = JoinDiagnosis::start(&cluster_config);
    let cluster = Cluster::start(cluster_config)
        .await
        .context("starting the metadata quorum")?;
    info!(
        node_id = config.node_id,
        peers = raw,
        "waiting for the metadata quorum (the Kafka listeners refuse connections until this node has joined)"
    );
    diagnosis.waiting_for("waiting to be registered by the metadata quorum's controller");
    cluster
        .wait_ready(START_TIMEOUT)
        .await
        .context("joining the metadata quorum")?;
    diagnosis.waiting_for("agreeing on the cluster id");
    let cluster_id = adopt_cluster_id(config, &cluster, &meta.cluster_id).await?;
    if new_quorum {
        diagnosis.waiting_for("adopting this data directory's topics");
        adopt_local_topics(&cluster, log).await?;
    }
    for topic in [OFFSETS_TOPIC, TXN_TOPIC, SHARE_STATE_TOPIC] {
        diagnosis.waiting_for(format!(
            "creating {topic}, which needs {} live brokers",
            internal_replication
        ));
        let configs =
            crate::coordinators::internal_topic::internal_topic_configs(config.segment_bytes);
        ensure_internal_topic(&cluster, topic, internal_replication, configs).await?;
    }
    diagnosis.waiting_for("creating the local logs of the metadata image");

    let throttle = Arc::new(ReplicationThrottle::new(config.node_id));
    let manager = ReplicaManager::new(ReplicaDeps {
        node_id: config.node_id,
        cluster: cluster.clone(),
        log: log.clone(),
        default_min_insync: usize::try_from(config.min_insync_replicas).unwrap_or(1),
        replica_lag_time_max_ms: config.replica_lag_time_max_ms,
        purgatory: purgatory.clone(),
        throttle: throttle.clone(),
        inter_broker,
    });
    let image = cluster.image();
    let first = manager.clone();
    tokio::task::spawn_blocking(move || first.sync(&image))
        .await
        .context("initial metadata sync panicked")?;
    drop(diagnosis);
    info!(
        brokers = cluster.image().live_brokers().count(),
        cluster_id, "joined the cluster"
    );
    Ok(Joined {
        replicas: manager,
        cluster,
        throttle,
        advertised,
        cluster_id,
    })
}

/// The quorum configuration of this node: `host` is its own, `peers` the
/// voters (`cluster_peers`), `security` what its raft port speaks
/// (`controller_listener::load`); no Kafka listeners (a broker adds its own).
pub fn cluster_config(
    config: &Config,
    peers: Vec<chronik_metadata::Peer>,
    host: String,
    secret: ClusterSecret,
    security: chronik_metadata::ControllerSecurity,
    directory_id: [u8; 16],
) -> ClusterConfig {
    ClusterConfig {
        node_id: config.node_id,
        roles: config.roles,
        peers,
        bootstrap_servers: config.bootstrap_servers.clone(),
        host,
        listeners: Default::default(),
        kafka_port: 0,
        raft_port: config.raft_listen.port(),
        raft_listen: config.raft_listen,
        data_dir: config.data_dir.clone(),
        broker_session_timeout: Duration::from_millis(config.broker_session_timeout_ms),
        heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
        secret,
        security,
        leader_balance: config.leader_balance.clone(),
        rack: config.broker_rack.clone(),
        directory_id,
        default_min_insync_replicas: i32::from(config.min_insync_replicas),
    }
}

/// The voters, from `--peers` (none for a broker that is not a controller
/// and finds the quorum through `--controller-quorum-bootstrap-servers`).
/// A controller must be among them, a broker that is not one must not.
pub fn cluster_peers(config: &Config) -> anyhow::Result<Vec<chronik_metadata::Peer>> {
    let raw = config.peers.as_str();
    let peers = match raw.trim().is_empty() {
        true => Vec::new(),
        false => chronik_metadata::parse_peers(raw).map_err(|e| anyhow::anyhow!("--peers: {e}"))?,
    };
    let listed = peers.iter().any(|p| p.node_id == config.node_id);
    match (config.roles.controller, listed) {
        // A new controller: it follows the log as an observer until
        // AddRaftVoter (`kafka-metadata-quorum.sh add-controller`) adds it.
        (true, false) if !config.bootstrap_servers.is_empty() => Ok(peers),
        (true, false) => bail!(
            "--node-id {} has the controller role (--process-roles {}) but is not among the voters --peers {raw:?}",
            config.node_id,
            config.roles
        ),
        (false, true) => bail!(
            "--node-id {} is among the voters --peers {raw:?} but --process-roles {} has no controller role: \
             a broker that is not a controller needs a node id of its own",
            config.node_id,
            config.roles
        ),
        _ => Ok(peers),
    }
}

/// Every listener's advertised endpoint, registered with the quorum: the
/// inter-broker one is `inter_broker` (this node's --peers host), others
/// their `--advertised-listeners` entry, else the bound address with a
/// wildcard host replaced by this node's host.
fn advertised_listeners(
    config: &Config,
    bound: &[(crate::security::ListenerConfig, std::net::SocketAddr)],
    inter_broker: &(String, u16),
) -> chronik_metadata::ListenerEndpoints {
    let inter_broker_name = &config.security.inter_broker().name;
    bound
        .iter()
        .map(|(listener, addr)| {
            let (host, port) = if &listener.name == inter_broker_name {
                inter_broker.clone()
            } else if let Some(advertised) = &listener.advertised {
                advertised.clone()
            } else if addr.ip().is_unspecified() {
                (inter_broker.0.clone(), addr.port())
            } else {
                (addr.ip().to_string(), addr.port())
            };
            (
                listener.name.clone(),
                chronik_metadata::Endpoint { host, port },
            )
        })
        .collect()
}

/// A data directory written by a broker without a quorum (before every
/// broker had one): its topics enter the new quorum of one with their own
/// ids, partition counts and configs, so nothing is re-created or deleted.
async fn adopt_local_topics(cluster: &Cluster, log: &LogManager) -> anyhow::Result<()> {
    for topic in log.topics() {
        if cluster.image().topics.contains_key(&topic.name) {
            continue;
        }
        let request = CreateTopic {
            name: topic.name.clone(),
            partitions: i32::try_from(topic.partition_count()).unwrap_or(i32::MAX),
            replication_factor: 1,
            configs: topic.overrides.clone(),
            topic_id: Some(topic.topic_id),
            assignments: Vec::new(),
        };
        match cluster.create_topic(request).await {
            Ok(_) | Err(ClusterError::TopicAlreadyExists(_)) => {
                info!(
                    topic = topic.name,
                    partitions = topic.partition_count(),
                    "adopted a topic of this data directory into the metadata quorum"
                );
            }
            Err(e) => bail!(
                "adopting topic {} into the metadata quorum: {e}",
                topic.name
            ),
        }
    }
    Ok(())
}

/// The quorum's cluster id, proposing this node's own when the quorum has
/// none yet (a new cluster, or one whose nodes each kept their own id
/// before the quorum chose one). meta.properties is rewritten to match.
async fn adopt_cluster_id(
    config: &Config,
    cluster: &Cluster,
    local: &str,
) -> anyhow::Result<String> {
    let chosen = cluster
        .cluster_id(local)
        .await
        .context("agreeing on the cluster id")?;
    if chosen != local {
        info!(
            previous = local,
            cluster_id = chosen,
            "adopting the quorum's cluster id in meta.properties"
        );
        crate::startup::meta_properties::store_cluster_id(
            &config.data_dir,
            config.node_id,
            &chosen,
        )?;
    }
    Ok(chosen)
}

/// The raft port's shared secret (`--cluster-secret-file`), created when
/// missing. Loaded once at start: the raft port and the SCRAM answers for
/// unknown users (`Security::load`) key on it.
pub fn load_secret(config: &Config) -> anyhow::Result<ClusterSecret> {
    let path = &config.cluster_secret_file;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    let (secret, created) = ClusterSecret::load_or_create(path)
        .with_context(|| format!("cluster secret {}", path.display()))?;
    if created && !config.single_voter() {
        tracing::warn!(path = %path.display(), "created a new cluster secret: every voter must use this same file \
            (--cluster-secret-file), or the raft port refuses it");
    } else if created {
        info!(path = %path.display(), "created the cluster secret");
    } else {
        info!(path = %path.display(), "cluster secret loaded");
    }
    Ok(secret)
}

/// Creates the internal `topic` (`__consumer_offsets`,
/// `__transaction_state`: 1 partition, replication factor min(3, voters))
/// unless it exists. On a cluster's very first start this waits until that
/// many brokers are live.
async fn ensure_internal_topic(
    cluster: &Cluster,
    topic: &str,
    replication: usize,
    configs: std::collections::BTreeMap<String, String>,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + START_TIMEOUT;
    let replication_factor = i16::try_from(replication.clamp(1, 3)).unwrap_or(3);
    let mut logged = false;
    while !cluster.image().topics.contains_key(topic) {
        let request = CreateTopic {
            name: topic.to_string(),
            partitions: 1,
            replication_factor,
            configs: configs.clone(),
            topic_id: None,
            assignments: Vec::new(),
        };
        match cluster.create_topic(request).await {
            Ok(_) | Err(ClusterError::TopicAlreadyExists(_)) => break,
            Err(e) => {
                if !logged {
                    info!(error = %e, "waiting for {replication_factor} live brokers to create {topic}");
                    logged = true;
                }
                if tokio::time::Instant::now() > deadline {
                    bail!("could not create {topic}: {e}");
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        }
    }
    Ok(())
}
