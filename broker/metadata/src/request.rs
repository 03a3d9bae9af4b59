//! What callers ask the controller for, and what travels to it when the
//! caller's node is not the controller.
//!
//! Owns: the public `CreateTopic` / `CreatePartitions` / `AlterPartition` requests, the
//! broker `Heartbeat`, the forwarded `ControllerRequest` and its
//! `ControllerReply`. Must not: decide anything — `controller` turns
//! requests into commands, `command` applies them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::acl::{AclBinding, AclBindingFilter};
use crate::command::CommandResult;
use crate::error::ClusterError;

/// CreateTopics for one topic. `partitions` and `replication_factor` must
/// be concrete (>= 1): the server substitutes its defaults for Kafka's -1.
/// With `assignments` (Kafka's manual assignment, `--replica-assignment`)
/// they must match it: `assignments[p]` is partition p's replica list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateTopic {
    pub name: String,
    pub partitions: i32,
    pub replication_factor: i16,
    pub configs: BTreeMap<String, String>,
    /// The id of a topic that already exists in this broker's log (adopted
    /// into a new quorum of one); `None`: the controller draws one.
    #[serde(default)]
    pub topic_id: Option<[u8; 16]>,
    /// Replica lists chosen by the caller; empty: the controller places
    /// the replicas.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assignments: Vec<Vec<i32>>,
}

/// CreatePartitions for one topic: grow it to `total` partitions, the new
/// ones with the topic's replication factor, placed by the controller or,
/// with `assignments`, by the caller (one replica list per new partition).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatePartitions {
    pub topic: String,
    pub total: i32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assignments: Vec<Vec<i32>>,
}

/// KIP-497 AlterPartition from a partition leader: its proposed ISR,
/// based on the registration it knows (`leader_epoch`, `partition_epoch`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlterPartition {
    pub topic: String,
    pub partition: i32,
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub new_isr: Vec<i32>,
}

/// KIP-455 for one partition: move it to `target` (replica ids, the first
/// preferred as leader), or cancel its reassignment (`None`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reassignment {
    pub topic: String,
    pub partition: i32,
    pub target: Option<Vec<i32>>,
}

/// KIP-460's election types (ElectLeaders `election_type` 0 and 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ElectionType {
    /// The first replica leads again, if it is a live ISR member.
    Preferred,
    /// A leaderless partition gets any live replica as leader, even one
    /// outside the ISR (records only the old ISR held are lost).
    Unclean,
}

/// A broker's liveness signal to the controller (Kafka's
/// BrokerHeartbeat, with the registration's endpoint folded in).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    pub node_id: i32,
    pub host: String,
    pub port: u16,
    /// Every advertised listener (absent from brokers that predate them).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub listeners: crate::image::ListenerEndpoints,
    /// The broker's data directory is offline (Kafka's heartbeat reports
    /// its offline log directories, KIP-858): it must lead nothing and
    /// leave the ISRs until it reports the directory back.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub log_dir_offline: bool,
    /// Its `--broker-rack` (Kafka's `broker.rack`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rack: Option<String>,
}

/// A request only the controller (raft leader) can serve.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerRequest {
    CreateTopic(CreateTopic),
    DeleteTopic(String),
    CreatePartitions(CreatePartitions),
    /// Replaces a topic's config overrides with `configs` (the server has
    /// validated them and merged an incremental change into the full set).
    AlterTopicConfigs {
        topic: String,
        configs: BTreeMap<String, String>,
    },
    AlterPartition(AlterPartition),
    /// Adds/replaces and removes SCRAM credentials (validated by the server).
    AlterScramCredentials {
        upsertions: Vec<(String, String, crate::image::ScramCredentialImage)>,
        deletions: Vec<(String, String)>,
    },
    Heartbeat(Heartbeat),
    /// Proposes a cluster id; the first one committed stays.
    InitClusterId(String),
    /// Kafka's controlled shutdown: the broker is about to stop, so its
    /// partitions get new leaders from their ISRs and it leaves every ISR
    /// it shares with a live broker now, not after the session timeout.
    ControlledShutdown {
        node_id: i32,
    },
    CreateAcls(Vec<AclBinding>),
    DeleteAcls(Vec<AclBindingFilter>),
    /// Replaces one broker resource's dynamic configs (validated by the
    /// server): a broker id, or `""` for the cluster default.
    AlterBrokerConfigs {
        resource: String,
        configs: BTreeMap<String, String>,
    },
    /// Replaces one group's configs (validated by the server).
    AlterGroupConfigs {
        group: String,
        configs: BTreeMap<String, String>,
    },
    AlterPartitionReassignments(Vec<Reassignment>),
    /// AlterClientQuotas' accepted entries (checked again by the
    /// controller, `quotas::check_alteration`).
    AlterClientQuotas(Vec<crate::quotas::QuotaAlteration>),
    ElectLeaders {
        election: ElectionType,
        partitions: Vec<(String, i32)>,
    },
    /// A broker that is not a controller asks to follow the quorum's log
    /// as an observer, reached at `raft_addr` (`observers::add`); never
    /// proposed as a command (a raft membership change).
    AddObserver {
        node_id: i32,
        raft_addr: String,
        /// Its metadata directory's id (absent from nodes that predate them).
        #[serde(default)]
        directory_id: Option<[u8; 16]>,
    },
    /// KIP-853 AddRaftVoter: observer `node_id`, following the log with
    /// `directory_id` from `raft_addr`, becomes a voter (`voters::add`).
    AddVoter {
        node_id: i32,
        directory_id: [u8; 16],
        raft_addr: String,
    },
    /// KIP-853 RemoveRaftVoter: voter (`node_id`, `directory_id`) leaves
    /// the voter set (`voters::remove`).
    RemoveVoter {
        node_id: i32,
        directory_id: [u8; 16],
    },
    /// KIP-853 UpdateRaftVoter: a voter records its directory id and raft
    /// address (each controller sends it at start; `voters::update`).
    UpdateVoter {
        node_id: i32,
        directory_id: [u8; 16],
        raft_addr: String,
    },
    /// KRaft's DescribeQuorum: answered from the leader's raft state
    /// (`ControllerReply::Quorum`), never proposed.
    DescribeQuorum,
    /// Kafka's UnregisterBroker: the broker's registration is removed (a
    /// live broker registers again at its next heartbeat).
    UnregisterBroker {
        node_id: i32,
    },
    /// UpdateFeatures: (name, level, upgrade type) in request order;
    /// `validate_only` checks without recording.
    UpdateFeatures {
        updates: Vec<(String, i16, crate::features::UpgradeType)>,
        validate_only: bool,
    },
}

/// The controller's answer to a `ControllerRequest`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerReply {
    /// Committed and applied on the controller at `log_index` (for a
    /// heartbeat that needed no command: the controller's applied index).
    /// A rejection decided by the state machine is `CommandResult::Rejected`.
    Applied {
        log_index: u64,
        result: CommandResult,
    },
    /// This node is not the controller; `leader` is its best guess.
    NotController { leader: Option<i32> },
    /// Rejected before proposing (validation), or the quorum failed.
    Failed(ClusterError),
    /// The answer to `DescribeQuorum` (nothing was proposed).
    Quorum(crate::quorum::QuorumInfo),
}
