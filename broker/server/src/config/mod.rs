//! Command-line and environment configuration of `chronik-server`: a room
//! of its own, below the requests and the dispatcher that read it and above
//! the rooms whose settings it names (security, quotas, replica).
//!
//! Owns: the clap `Args` (every flag also a `CHRONIK_*` env var), the named
//! WAL and produce profiles from the seeds, the plain `Config` start-up
//! receives, and the slices handlers are lent (`limits`, `slices`). Must
//! not: read the environment anywhere else.

pub mod limits;
pub mod slices;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use chronik_coordinator_state::MigrationPolicy;
use clap::{Parser, ValueEnum};

/// Group-commit profile: how long an acknowledged batch may wait for fsync.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WalProfile {
    /// No fsync on the produce path (like stock Kafka): acks follow the page cache.
    None,
    /// fdatasync at most 2 ms after the first unflushed append.
    Low,
    /// 10 ms.
    Medium,
    /// 50 ms.
    High,
    /// 100 ms.
    Ultra,
}

impl WalProfile {
    /// The group commit's maximum wait, or `None` when fsync is off.
    pub fn max_wait(self) -> Option<Duration> {
        match self {
            WalProfile::None => None,
            WalProfile::Low => Some(Duration::from_millis(2)),
            WalProfile::Medium => Some(Duration::from_millis(10)),
            WalProfile::High => Some(Duration::from_millis(50)),
            WalProfile::Ultra => Some(Duration::from_millis(100)),
        }
    }
}

/// Produce profile: the bound on request bytes held in memory at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProduceProfile {
    /// 16 MiB.
    LowLatency,
    /// 32 MiB.
    Balanced,
    /// 128 MiB.
    HighThroughput,
    /// 512 MiB.
    Extreme,
}

impl ProduceProfile {
    pub fn in_flight_bytes(self) -> usize {
        const MIB: usize = 1024 * 1024;
        match self {
            ProduceProfile::LowLatency => 16 * MIB,
            ProduceProfile::Balanced => 32 * MIB,
            ProduceProfile::HighThroughput => 128 * MIB,
            ProduceProfile::Extreme => 512 * MIB,
        }
    }
}

/// `chronik-server`: a durable, Kafka-compatible broker.
#[derive(Debug, Parser)]
#[command(name = "chronik-server", version, about)]
pub struct Args {
    /// Address the Kafka listener binds (port 0 picks a free port): the
    /// single PLAINTEXT listener. Default 0.0.0.0:9092. `--listeners`
    /// (security group below) is the alternative for several listeners.
    #[arg(long, env = "CHRONIK_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// host:port clients are told to connect to (Metadata). Defaults to the
    /// bound listen address, with 0.0.0.0 replaced by 127.0.0.1.
    #[arg(long, env = "CHRONIK_ADVERTISE")]
    pub advertise: Option<String>,
    /// Directory holding topic partitions, checkpoints and broker metadata.
    #[arg(long, env = "CHRONIK_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    /// Group-commit fsync profile: none | low (2 ms) | medium (10 ms) | high (50 ms) | ultra (100 ms).
    #[arg(
        long,
        env = "CHRONIK_WAL_PROFILE",
        value_enum,
        default_value = "medium"
    )]
    pub wal_profile: WalProfile,
    /// In-flight produce memory: low-latency (16 MiB) | balanced (32 MiB) | high-throughput (128 MiB) | extreme (512 MiB).
    #[arg(
        long,
        env = "CHRONIK_PRODUCE_PROFILE",
        value_enum,
        default_value = "balanced"
    )]
    pub produce_profile: ProduceProfile,
    /// Address of the HTTP endpoint serving /metrics, /health and /ready.
    /// Default: port 9644 on this broker's own host (the --advertise host,
    /// else the Kafka --listen address, else this node's --peers host, else
    /// 127.0.0.1), never every interface unless asked (0.0.0.0:9644).
    #[arg(long, env = "CHRONIK_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// Create unknown topics when a client's Metadata request asks for them.
    #[arg(long, env = "CHRONIK_AUTO_CREATE_TOPICS", default_value_t = true, action = clap::ArgAction::Set)]
    pub auto_create_topics: bool,
    /// Partition count of auto-created topics and of CreateTopics with num_partitions = -1.
    #[arg(long, env = "CHRONIK_DEFAULT_PARTITIONS", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub default_partitions: u32,
    /// This broker's node id (Kafka's node.id).
    #[arg(long, env = "CHRONIK_NODE_ID", default_value_t = 1)]
    pub node_id: i32,
    /// Largest request frame accepted (Kafka's socket.request.max.bytes).
    #[arg(long, env = "CHRONIK_MAX_REQUEST_BYTES", default_value_t = 100 * 1024 * 1024,
          value_parser = clap::value_parser!(u32).range(1024..=1_073_741_824))]
    pub max_request_bytes: u32,
    /// Default segment.bytes for new topics.
    #[arg(long, env = "CHRONIK_SEGMENT_BYTES", default_value_t = 1024 * 1024 * 1024)]
    pub segment_bytes: u64,
    /// Default retention.ms for new topics (-1 = keep forever).
    #[arg(long, env = "CHRONIK_RETENTION_MS", default_value_t = 7 * 24 * 3600 * 1000, allow_hyphen_values = true)]
    pub retention_ms: i64,
    /// Default retention.bytes per partition for new topics (-1 = unlimited).
    #[arg(long, env = "CHRONIK_RETENTION_BYTES", default_value_t = -1, allow_hyphen_values = true)]
    pub retention_bytes: i64,
    /// How long the first rebalance of an empty group waits for more members
    /// (Kafka's group.initial.rebalance.delay.ms).
    #[arg(
        long,
        env = "CHRONIK_GROUP_INITIAL_REBALANCE_DELAY_MS",
        default_value_t = 3000
    )]
    pub group_initial_rebalance_delay_ms: u64,
    /// Smallest session timeout a group member may ask for (group.min.session.timeout.ms).
    #[arg(
        long,
        env = "CHRONIK_GROUP_MIN_SESSION_TIMEOUT_MS",
        default_value_t = 6000
    )]
    pub group_min_session_timeout_ms: u64,
    /// KIP-848 consumer groups: a member that sends no ConsumerGroupHeartbeat
    /// for this long is removed (Kafka's group.consumer.session.timeout.ms).
    #[arg(
        long,
        env = "CHRONIK_GROUP_CONSUMER_SESSION_TIMEOUT_MS",
        default_value_t = 45_000
    )]
    pub group_consumer_session_timeout_ms: u64,
    /// KIP-848 consumer groups: the heartbeat interval members are told to
    /// use (Kafka's group.consumer.heartbeat.interval.ms).
    #[arg(
        long,
        env = "CHRONIK_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS",
        default_value_t = 5_000
    )]
    pub group_consumer_heartbeat_interval_ms: u64,
    /// KIP-848 consumer groups: most members per group; more are refused
    /// with GROUP_MAX_SIZE_REACHED (Kafka's group.consumer.max.size, which
    /// Kafka leaves unbounded; Chronik bounds the memory a group can take).
    #[arg(long, env = "CHRONIK_GROUP_CONSUMER_MAX_SIZE", default_value_t = 1000)]
    pub group_consumer_max_size: usize,
    /// Online conversion of groups with members between the classic and the
    /// KIP-848 protocol (Kafka's group.consumer.migration.policy):
    /// bidirectional, upgrade, downgrade or disabled.
    #[arg(long, env = "CHRONIK_GROUP_CONSUMER_MIGRATION_POLICY", default_value = "bidirectional",
          value_parser = parse_migration_policy)]
    pub group_consumer_migration_policy: MigrationPolicy,
    /// Seconds between retention checks.
    #[arg(long, env = "CHRONIK_RETENTION_CHECK_SECS", default_value_t = 30)]
    pub retention_check_secs: u64,
    /// Log cleaner threads compacting cleanup.policy=compact topics (Kafka's
    /// log.cleaner.threads); 0 turns compaction off.
    #[arg(long, env = "CHRONIK_LOG_CLEANER_THREADS", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(0..=64))]
    pub log_cleaner_threads: u32,
    /// Memory for the cleaners' key maps, shared by all cleaner threads (Kafka's
    /// log.cleaner.dedupe.buffer.size): 24 bytes per distinct key cleaned in one pass.
    #[arg(long, env = "CHRONIK_LOG_CLEANER_DEDUPE_BUFFER_SIZE", default_value_t = 128 * 1024 * 1024,
          value_parser = clap::value_parser!(u64).range(4096..=(1u64 << 40)))]
    pub log_cleaner_dedupe_buffer_size: u64,
    /// How long a cleaner thread sleeps when no log needs cleaning (Kafka's log.cleaner.backoff.ms).
    #[arg(long, env = "CHRONIK_LOG_CLEANER_BACKOFF_MS", default_value_t = 15_000,
          value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub log_cleaner_backoff_ms: u64,
    /// Every voter of the metadata quorum, this node included,
    /// as `ID@HOST,...` (e.g. `1@127.0.0.1,2@127.0.0.2,3@127.0.0.3`). Node N
    /// is reached at HOST:<--listen port> (Kafka) and HOST:<--raft-listen
    /// port> (raft): every node uses the same ports, as pods do. Unset = a
    /// quorum of one: this node alone (`ID@<its own host>`).
    #[arg(long, env = "CHRONIK_PEERS")]
    pub peers: Option<String>,
    /// Kafka's process.roles: `broker`, `controller` or `broker,controller`.
    /// A controller is a voter of the metadata quorum (listed in --peers);
    /// a broker that is not one follows the quorum as an observer, found
    /// through --peers (the voters) or --controller-quorum-bootstrap-servers.
    /// A controller-only node serves no Kafka clients.
    #[arg(long, env = "CHRONIK_PROCESS_ROLES", default_value = "broker,controller",
          value_parser = parse_roles)]
    pub process_roles: chronik_metadata::Roles,
    /// Kafka's controller.quorum.bootstrap.servers: the controllers' raft
    /// addresses (`HOST:PORT,...`) a broker that is not a controller joins
    /// through, when --peers is not given; a controller not among --peers
    /// joins through them as an observer and waits to be added as a voter
    /// (KIP-853 AddRaftVoter, `kafka-metadata-quorum.sh add-controller`).
    #[arg(long, env = "CHRONIK_CONTROLLER_QUORUM_BOOTSTRAP_SERVERS")]
    pub controller_quorum_bootstrap_servers: Option<String>,
    /// Address the metadata-quorum (raft) listener binds. Default: port 9093
    /// on this node's --peers host; without --peers (a quorum of one, which
    /// no other node dials) an ephemeral port on its own host.
    #[arg(long, env = "CHRONIK_RAFT_LISTEN")]
    pub raft_listen: Option<SocketAddr>,
    /// Kafka's broker.rack: the rack (or zone) this broker is in. Replicas
    /// of new topics and partitions are spread over racks, Metadata and
    /// DescribeCluster show it, and with --replica-selector-class a
    /// consumer whose client.rack matches fetches from this broker when it
    /// follows (KIP-392).
    #[arg(long, env = "CHRONIK_BROKER_RACK", value_parser = parse_rack)]
    pub broker_rack: Option<String>,
    /// Kafka's replica.selector.class: `org.apache.kafka.common.replica.RackAwareReplicaSelector`
    /// (or `RackAwareReplicaSelector`) tells a consumer that gives
    /// client.rack to fetch from the in-sync replica in its rack (KIP-392);
    /// unset (Kafka's default), consumers fetch from leaders.
    #[arg(long, env = "CHRONIK_REPLICA_SELECTOR_CLASS", value_parser = parse_replica_selector)]
    pub replica_selector_class: Option<crate::replica::read_replica::ReplicaSelector>,
    /// Replication factor of auto-created topics and of CreateTopics with
    /// replication_factor = -1 (Kafka's default.replication.factor).
    #[arg(long, env = "CHRONIK_DEFAULT_REPLICATION_FACTOR", default_value_t = 1,
          value_parser = clap::value_parser!(i16).range(1..=16))]
    pub default_replication_factor: i16,
    /// Default min.insync.replicas of new topics: acks=all fails with
    /// NOT_ENOUGH_REPLICAS while the ISR is smaller.
    #[arg(long, env = "CHRONIK_MIN_INSYNC_REPLICAS", default_value_t = 1,
          value_parser = clap::value_parser!(i16).range(1..=16))]
    pub min_insync_replicas: i16,
    /// A follower that has not caught up for this long leaves the ISR
    /// (Kafka's replica.lag.time.max.ms).
    #[arg(
        long,
        env = "CHRONIK_REPLICA_LAG_TIME_MAX_MS",
        default_value_t = 10_000
    )]
    pub replica_lag_time_max_ms: u64,
    /// Samples a client quota's rate is measured over (Kafka's
    /// quota.window.num).
    #[arg(long, env = "CHRONIK_QUOTA_WINDOW_NUM", default_value_t = 11,
          value_parser = clap::value_parser!(u32).range(2..=1000))]
    pub quota_window_num: u32,
    /// Length of one such sample (Kafka's quota.window.size.seconds).
    #[arg(long, env = "CHRONIK_QUOTA_WINDOW_SIZE_SECONDS", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub quota_window_size_seconds: u32,
    /// The controller fences a broker that has not heartbeated for this long
    /// and moves its leaderships to other in-sync replicas
    /// (Kafka's broker.session.timeout.ms).
    #[arg(long, env = "CHRONIK_BROKER_SESSION_TIMEOUT_MS", default_value_t = 4_000,
          value_parser = clap::value_parser!(u64).range(500..=600_000))]
    pub broker_session_timeout_ms: u64,
    /// Kafka's auto.leader.rebalance.enable: the controller gives partitions
    /// back to their preferred (first) replica when a broker leads too few
    /// of those it is preferred for.
    #[arg(long, env = "CHRONIK_AUTO_LEADER_REBALANCE_ENABLE", default_value_t = true,
          action = clap::ArgAction::Set)]
    pub auto_leader_rebalance_enable: bool,
    /// Kafka's leader.imbalance.per.broker.percentage: the share of a
    /// broker's preferred partitions led elsewhere that triggers a rebalance.
    #[arg(long, env = "CHRONIK_LEADER_IMBALANCE_PER_BROKER_PERCENTAGE", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(0..=100))]
    pub leader_imbalance_per_broker_percentage: u32,
    /// Kafka's leader.imbalance.check.interval.seconds.
    #[arg(long, env = "CHRONIK_LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS", default_value_t = 300,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub leader_imbalance_check_interval_seconds: u64,
    /// The file holding the secret every voter must prove on
    /// the raft port (created, random and mode 0600, when missing — nodes
    /// on one host pointing at one path share it; elsewhere copy it or
    /// mount one Secret). Default: `<data-dir>/cluster.secret`.
    #[arg(long, env = "CHRONIK_CLUSTER_SECRET_FILE")]
    pub cluster_secret_file: Option<PathBuf>,
    /// Connection, request, fetch, partition and decompression bounds (`limits`).
    #[command(flatten)]
    pub limits: crate::config::limits::LimitArgs,
    /// ACL authorization (`authorization`).
    #[command(flatten)]
    pub authorizer: crate::security::authorizer::AuthorizerArgs,
    /// Listeners, TLS and SASL (`security::args`).
    #[command(flatten)]
    pub security: crate::security::args::SecurityArgs,
    /// What the raft port speaks (`controller_listener`).
    #[command(flatten)]
    pub controller_listener: crate::security::controller_listener::ControllerListenerArgs,
}

/// The effective configuration, as the server uses it.
#[derive(Debug, Clone)]
pub struct Config {
    /// The inter-broker listener's bind address and advertised endpoint
    /// (with `--listen`, the only listener).
    pub listen: SocketAddr,
    pub advertise: Option<(String, u16)>,
    /// Every listener, TLS and SASL settings.
    pub security: crate::security::SecurityConfig,
    pub data_dir: PathBuf,
    pub wal_profile: WalProfile,
    pub produce_profile: ProduceProfile,
    pub metrics_listen: SocketAddr,
    pub auto_create_topics: bool,
    pub default_partitions: u32,
    pub node_id: i32,
    pub max_request_bytes: usize,
    pub segment_bytes: u64,
    pub retention_ms: i64,
    pub retention_bytes: i64,
    pub retention_check_interval: Duration,
    pub log_cleaner: chronik_log::CleanerConfig,
    pub group_initial_rebalance_delay_ms: u64,
    pub group_min_session_timeout_ms: u64,
    pub group_consumer_session_timeout_ms: u64,
    pub group_consumer_heartbeat_interval_ms: u64,
    pub group_consumer_max_size: usize,
    pub group_consumer_migration_policy: MigrationPolicy,
    /// The voters of the metadata quorum, `ID@HOST,...`: `--peers`, or this
    /// node alone when it is not given and it is a controller (empty for a
    /// broker that finds the quorum through `bootstrap_servers`).
    pub peers: String,
    /// Kafka's process.roles.
    pub roles: chronik_metadata::Roles,
    /// Kafka's controller.quorum.bootstrap.servers (raft addresses).
    pub bootstrap_servers: Vec<String>,
    /// This node's own host: the --advertise host, else the Kafka --listen
    /// address, else its --peers host, else 127.0.0.1.
    pub host: String,
    pub raft_listen: SocketAddr,
    pub default_replication_factor: i16,
    pub min_insync_replicas: i16,
    pub replica_lag_time_max_ms: u64,
    /// Client quotas' rate windows (quota.window.num, quota.window.size.seconds).
    pub quota_window: crate::quotas::QuotaWindow,
    pub broker_session_timeout_ms: u64,
    pub leader_balance: chronik_metadata::leader_balance::LeaderBalance,
    /// Kafka's broker.rack.
    pub broker_rack: Option<String>,
    /// Kafka's replica.selector.class (`None`: consumers read from leaders).
    pub replica_selector: Option<crate::replica::read_replica::ReplicaSelector>,
    pub cluster_secret_file: PathBuf,
    /// What the raft port speaks beneath the cluster-secret handshake.
    pub controller_protocol: crate::security::controller_listener::ControllerProtocol,
    pub limits: crate::config::limits::Limits,
    /// `None`: no authorizer (every request allowed).
    pub authorizer: Option<chronik_metadata::acl_rules::AuthorizerConfig>,
}

impl Config {
    /// Whether this node is a cluster of one: a controller that is the
    /// only voter (no `--peers`, or only itself).
    pub fn single_voter(&self) -> bool {
        self.roles.controller && !self.peers.contains(',') && self.bootstrap_servers.is_empty()
    }
}

impl TryFrom<Args> for Config {
    type Error = anyhow::Error;

    fn try_from(args: Args) -> anyhow::Result<Config> {
        let legacy_advertise = args.advertise.as_deref().map(parse_host_port).transpose()?;
        let cluster_secret_file = args
            .cluster_secret_file
            .clone()
            .unwrap_or_else(|| args.data_dir.join("cluster.secret"));
        let peers_given = args
            .peers
            .as_deref()
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_string);
        let own_peer_host = own_peer_host(peers_given.as_deref(), args.node_id);
        let roles = args.process_roles;
        let bootstrap_servers: Vec<String> = args
            .controller_quorum_bootstrap_servers
            .as_deref()
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        if !roles.controller && peers_given.is_none() && bootstrap_servers.is_empty() {
            anyhow::bail!(
                "--process-roles {roles}: a broker that is not a controller needs --peers (the voters) \
                 or --controller-quorum-bootstrap-servers"
            );
        }
        // A controller with bootstrap servers and not among --peers is a new
        // one: it follows the log as an observer until AddRaftVoter adds it.
        let joining_controller =
            roles.controller && !bootstrap_servers.is_empty() && own_peer_host.is_none();
        // Other nodes dial this one (TLS between brokers needs a truststore).
        let several_voters = peers_given.as_deref().is_some_and(|p| p.contains(','))
            || !roles.controller
            || joining_controller;
        let security = crate::security::SecurityConfig::from_args(
            &args.security,
            args.listen,
            legacy_advertise,
            several_voters,
        )?;
        let controller_protocol = crate::security::controller_listener::resolve(
            args.controller_listener
                .controller_listener_security_protocol,
            &args.security.listener_security_protocol_map,
            &security,
            roles.broker,
            several_voters,
        )?;
        let (listen, advertise) = {
            let inter_broker = security.inter_broker();
            (inter_broker.bind, inter_broker.advertised.clone())
        };
        let own_host = advertise
            .as_ref()
            .map(|(host, _)| host.clone())
            .or_else(|| (!listen.ip().is_unspecified()).then(|| listen.ip().to_string()))
            .or_else(|| own_peer_host.clone())
            .unwrap_or_else(|| "127.0.0.1".to_string());
        let metrics_listen = match args.metrics_listen {
            Some(addr) => addr,
            None => resolve(&own_host, DEFAULT_METRICS_PORT)?,
        };
        let raft_listen = match (args.raft_listen, &own_peer_host, &peers_given) {
            (Some(addr), _, _) => addr,
            (None, None, _) if !roles.controller || joining_controller => {
                resolve(&own_host, DEFAULT_RAFT_PORT)?
            }
            (None, Some(host), _) => resolve(host, DEFAULT_RAFT_PORT)?,
            (None, None, Some(_)) => SocketAddr::from(([127, 0, 0, 1], DEFAULT_RAFT_PORT)),
            (None, None, None) => resolve(&own_host, 0)?,
        };
        let peers =
            peers_given.unwrap_or_else(|| match (roles.controller, own_host.contains(':')) {
                _ if joining_controller => String::new(),
                (false, _) => String::new(),
                (true, true) => format!("{}@[{own_host}]", args.node_id),
                (true, false) => format!("{}@{own_host}", args.node_id),
            });
        let limits = crate::config::limits::Limits::from(&args.limits);
        let authorizer = args.authorizer.config()?;
        Ok(Config {
            listen,
            advertise,
            security,
            data_dir: args.data_dir,
            wal_profile: args.wal_profile,
            produce_profile: args.produce_profile,
            metrics_listen,
            auto_create_topics: args.auto_create_topics,
            default_partitions: args.default_partitions,
            node_id: args.node_id,
            max_request_bytes: args.max_request_bytes as usize,
            segment_bytes: args.segment_bytes,
            retention_ms: args.retention_ms,
            retention_bytes: args.retention_bytes,
            retention_check_interval: Duration::from_secs(args.retention_check_secs.max(1)),
            log_cleaner: chronik_log::CleanerConfig {
                threads: args.log_cleaner_threads as usize,
                dedupe_buffer_size: usize::try_from(args.log_cleaner_dedupe_buffer_size)
                    .unwrap_or(usize::MAX),
                backoff: Duration::from_millis(args.log_cleaner_backoff_ms),
                max_decompressed_batch_bytes: limits.max_decompressed_batch_bytes,
            },
            group_initial_rebalance_delay_ms: args.group_initial_rebalance_delay_ms,
            group_min_session_timeout_ms: args.group_min_session_timeout_ms,
            group_consumer_session_timeout_ms: args.group_consumer_session_timeout_ms.max(1),
            group_consumer_heartbeat_interval_ms: args.group_consumer_heartbeat_interval_ms.max(1),
            group_consumer_max_size: args.group_consumer_max_size.max(1),
            group_consumer_migration_policy: args.group_consumer_migration_policy,
            peers,
            roles,
            bootstrap_servers,
            host: own_host,
            raft_listen,
            default_replication_factor: args.default_replication_factor,
            min_insync_replicas: args.min_insync_replicas,
            replica_lag_time_max_ms: args.replica_lag_time_max_ms,
            quota_window: crate::quotas::QuotaWindow {
                samples: args.quota_window_num,
                sample_ms: u64::from(args.quota_window_size_seconds) * 1000,
            },
            broker_session_timeout_ms: args.broker_session_timeout_ms,
            leader_balance: chronik_metadata::leader_balance::LeaderBalance {
                enabled: args.auto_leader_rebalance_enable,
                imbalance_percentage: args.leader_imbalance_per_broker_percentage,
                check_interval: std::time::Duration::from_secs(
                    args.leader_imbalance_check_interval_seconds,
                ),
            },
            broker_rack: args.broker_rack,
            replica_selector: args.replica_selector_class,
            cluster_secret_file,
            controller_protocol,
            limits,
            authorizer,
        })
    }
}

/// Parses `host:port` (host may be a name, an IPv4 address or `[v6]`).
const DEFAULT_METRICS_PORT: u16 = 9644;
const DEFAULT_RAFT_PORT: u16 = 9093;

/// A rack id: what Kafka puts in a broker's registration and a consumer's
/// client.rack — short, printable, no whitespace.
fn parse_rack(s: &str) -> Result<String, String> {
    const MAX_RACK_LEN: usize = 255;
    if s.is_empty() || s.len() > MAX_RACK_LEN {
        return Err(format!("a rack is 1 to {MAX_RACK_LEN} characters"));
    }
    if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("a rack has no whitespace or control characters".to_string());
    }
    Ok(s.to_string())
}

fn parse_replica_selector(
    s: &str,
) -> Result<crate::replica::read_replica::ReplicaSelector, String> {
    crate::replica::read_replica::ReplicaSelector::from_class_name(s)
}

fn parse_roles(s: &str) -> Result<chronik_metadata::Roles, String> {
    chronik_metadata::Roles::parse(s)
}

/// This node's host in `--peers` ("1@h1,2@h2"), if it is listed.
fn own_peer_host(peers: Option<&str>, node_id: i32) -> Option<String> {
    peers?.split(',').map(str::trim).find_map(|item| {
        let (id, host) = item.split_once('@')?;
        (id.trim().parse::<i32>().ok()? == node_id).then(|| {
            host.trim()
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string()
        })
    })
}

/// `host:port` as a socket address to bind (a DNS name resolves to this
/// host's address for it, as a pod's own name does).
fn resolve(host: &str, port: u16) -> anyhow::Result<SocketAddr> {
    use std::net::ToSocketAddrs;
    (host, port)
        .to_socket_addrs()
        .map_err(|e| anyhow::anyhow!("cannot resolve {host} to bind port {port}: {e}"))?
        .next()
        .ok_or_else(|| anyhow::anyhow!("{host} resolves to no address to bind port {port}"))
}

pub fn parse_host_port(s: &str) -> anyhow::Result<(String, u16)> {
    let (host, port) = s
        .rsplit_once(':')
        .ok_or_else(|| anyhow::anyhow!("--advertise {s:?} must be host:port"))?;
    let port: u16 = port
        .parse()
        .map_err(|e| anyhow::anyhow!("--advertise {s:?}: bad port: {e}"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() || port == 0 {
        anyhow::bail!("--advertise {s:?} needs a non-empty host and a non-zero port");
    }
    Ok((host.to_string(), port))
}

/// `--group-consumer-migration-policy`: Kafka's values, any case.
fn parse_migration_policy(value: &str) -> Result<MigrationPolicy, String> {
    MigrationPolicy::from_name(value)
        .ok_or_else(|| format!("{value}: expected bidirectional, upgrade, downgrade or disabled"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_advertised_addresses() {
        assert_eq!(
            parse_host_port("broker-0.chronik:9092").expect("ok"),
            ("broker-0.chronik".into(), 9092)
        );
        assert_eq!(
            parse_host_port("[::1]:19092").expect("ok"),
            ("::1".into(), 19092)
        );
        assert!(parse_host_port("no-port").is_err());
        assert!(parse_host_port("host:0").is_err());
    }

    #[test]
    fn the_migration_policy_takes_kafkas_values() {
        let policy = |flags: &[&str]| {
            Args::try_parse_from([&["chronik-server"], flags].concat())
                .map(|a| a.group_consumer_migration_policy)
        };
        assert_eq!(policy(&[]).ok(), Some(MigrationPolicy::Bidirectional));
        let upgrade = policy(&["--group-consumer-migration-policy", "UPGRADE"]);
        assert_eq!(upgrade.ok(), Some(MigrationPolicy::Upgrade));
        assert!(policy(&["--group-consumer-migration-policy", "both"]).is_err());
    }

    #[test]
    fn profiles_match_the_seed_names_and_sizes() {
        let args = Args::parse_from([
            "chronik-server",
            "--wal-profile",
            "ultra",
            "--produce-profile",
            "high-throughput",
        ]);
        assert_eq!(
            args.wal_profile.max_wait(),
            Some(Duration::from_millis(100))
        );
        assert_eq!(args.produce_profile.in_flight_bytes(), 128 * 1024 * 1024);
        assert_eq!(WalProfile::None.max_wait(), None);
    }

    /// The raft and metrics ports bind this node's own host unless told
    /// otherwise, never every interface by default.
    #[test]
    fn raft_and_metrics_bind_the_nodes_own_host_by_default() {
        let config = |flags: &[&str]| {
            let mut argv = vec!["chronik-server"];
            argv.extend_from_slice(flags);
            Config::try_from(Args::parse_from(argv)).expect("config")
        };
        let addr = |s: &str| s.parse::<SocketAddr>().expect("addr");
        let alone = config(&[]);
        assert_eq!(alone.metrics_listen, addr("127.0.0.1:9644"));
        assert_eq!(
            (alone.peers.as_str(), alone.raft_listen),
            ("1@127.0.0.1", addr("127.0.0.1:0")),
            "a quorum of one"
        );
        assert!(alone.single_voter());
        assert_eq!(
            config(&["--advertise", "127.0.0.5:9092"]).metrics_listen,
            addr("127.0.0.5:9644")
        );
        let node = config(&["--node-id", "2", "--peers", "1@127.0.0.1,2@127.0.0.2"]);
        assert_eq!(
            (node.raft_listen, node.metrics_listen),
            (addr("127.0.0.2:9093"), addr("127.0.0.2:9644"))
        );
        assert_eq!(
            node.cluster_secret_file,
            node.data_dir.join("cluster.secret")
        );
        let explicit = config(&[
            "--node-id",
            "2",
            "--peers",
            "1@127.0.0.1,2@127.0.0.2",
            "--raft-listen",
            "0.0.0.0:19093",
            "--metrics-listen",
            "0.0.0.0:9644",
        ]);
        assert_eq!(
            (explicit.raft_listen, explicit.metrics_listen),
            (addr("0.0.0.0:19093"), addr("0.0.0.0:9644"))
        );
    }
}
