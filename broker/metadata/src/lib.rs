//! Chronik's metadata quorum and controller (KRaft's role): the voters
//! (controllers, usually three) replicate a log of metadata commands with
//! openraft, and brokers that are not controllers follow it as observers
//! (raft learners); the raft leader is
//! the controller, which registers and fences brokers, creates and deletes
//! topics, assigns replicas, elects partition leaders (cleanly, from the
//! ISR) and validates ISR changes (KIP-497 AlterPartition). Every node
//! applies the same commands to its in-memory `MetadataImage`, which the
//! server reads to answer Metadata and to drive its partitions.
//!
//! Layout:
//! - `config`      — `Roles`, `Peer`, `parse_peers`, `ClusterConfig`.
//! - `image`       — `MetadataImage` and its brokers, topics, partitions.
//! - `request`     — `CreateTopic`, `AlterPartition`, heartbeats, and the
//!   forwarded controller request/reply.
//! - `command`     — raft commands and their deterministic `apply`.
//! - `reassign`    — KIP-455 reassignments and KIP-460 elections of one partition.
//! - `features`    — feature levels (metadata.version, kraft.version,
//!   eligible.leader.replicas.version) and UpdateFeatures' checks.
//! - `elr`         — KIP-966 eligible leader replicas of one partition.
//! - `quorum`      — DescribeQuorum: the leader's view of every voter's replication.
//! - `quotas`      — client quotas (Kafka's ClientQuotaRecord): entities, values, checks.
//! - `error`       — `ClusterError` (each variant names its Kafka error).
//! - `raft_types`  — openraft's type configuration.
//! - `store_log`   — the durable raft log and vote.
//! - `store_sm`    — the state machine and its snapshots.
//! - `acl`         — Kafka ACL bindings, filters and their changes to the image.
//! - `acl_rules`   — access decisions from those ACLs (Kafka's StandardAuthorizer rules).
//! - `peer_auth`   — the cluster secret and the handshake every raft connection opens with.
//! - `transport`   — what the raft port speaks beneath it: cleartext or mutual TLS.
//! - `admission`   — connection places on the raft port (voters' addresses first).
//! - `rpc`         — frames and messages of the raft RPC transport.
//! - `network`     — outgoing RPCs (openraft's network, controller calls).
//! - `rpc_server`  — incoming RPCs.
//! - `monitor`     — raft leadership view and the election watchdog.
//! - `controller`  — liveness, fencing, replica assignment, proposals.
//! - `leader_balance` — which partitions automatic preferred elections move back.
//! - `observers`   — brokers that are not controllers: raft learners that follow the log.
//! - `voters`      — KIP-853: adding, removing and updating voters (controllers).
//! - `heartbeat`   — this broker's heartbeat to the controller.
//! - `cluster`     — `Cluster`: startup, routing, shutdown.
//!
//! Timing (defaults): a dead broker is fenced `broker_session_timeout`
//! (4 s) after its last heartbeat, plus up to one fencer tick (250 ms). A
//! dead controller is replaced once the followers' leader lease (2 s) and
//! an election timeout (1–2 s) have passed, i.e. after 3–4 s; the watchdog
//! forces an election after 3–4 s without a leader, so split votes do not
//! stall it. While there is no controller, changes wait (up to
//! `COMMAND_TIMEOUT`, 10 s) and then fail with `Unavailable`; the image
//! stays readable throughout.

pub mod acl;
pub mod acl_rules;
mod admission;
mod cluster;
mod command;
mod config;
mod controller;
mod elr;
#[cfg(test)]
mod elr_tests;
mod error;
pub mod features;
mod heartbeat;
mod image;
pub mod leader_balance;
mod monitor;
mod network;
mod observers;
pub mod peer_auth;
mod placement;
mod quorum;
pub mod quotas;
mod raft_types;
mod reassign;
mod request;
pub mod rpc;
mod rpc_server;
mod store_log;
mod store_sm;
#[cfg(test)]
mod test_images;
mod transport;
mod voters;

pub use cluster::{Cluster, COMMAND_TIMEOUT};
pub use command::{validate_topic_name, NO_LEADER};
pub use config::{
    host_port, parse_peers, ClusterConfig, Peer, Roles, DEFAULT_BROKER_SESSION_TIMEOUT,
    DEFAULT_HEARTBEAT_INTERVAL,
};
pub use controller::check_partition_growth;
pub use error::ClusterError;
pub use image::{
    BrokerImage, Endpoint, ListenerEndpoints, MetadataImage, PartitionImage, ScramCredentialImage,
    TopicImage,
};
pub use network::{connect_from, Credentials, OpenError};
pub use peer_auth::ClusterSecret;
pub use placement::{check_added_partitions, check_manual_assignment};
pub use quorum::{QuorumInfo, VoterEndpoint, VoterState};
pub use request::{AlterPartition, CreatePartitions, CreateTopic, ElectionType, Reassignment};
pub use transport::{ControllerSecurity, RaftStream};
pub use voters::uuid_string;

/// A snapshot of this node's view of the controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerStatus {
    pub is_controller: bool,
    pub controller_id: Option<i32>,
    pub raft_term: u64,
    /// Unfenced brokers in the applied image.
    pub live_brokers: usize,
}
