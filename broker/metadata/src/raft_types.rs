//! openraft's type configuration for the metadata quorum.
//!
//! Owns: `TypeConfig`, the membership's `QuorumNode` and the aliases the
//! storage and network modules share. Raft node ids are the brokers'
//! (non-negative) Kafka node ids.

use std::io::Cursor;

use serde::{Deserialize, Serialize};

use crate::command::{Command, CommandResult};

openraft::declare_raft_types!(
    /// The metadata quorum's raft types: commands in, results out,
    /// snapshots are a serialized `MetadataImage` held in memory.
    pub TypeConfig:
        D = Command,
        R = CommandResult,
        NodeId = u64,
        Node = QuorumNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

pub type NodeId = u64;
pub type Entry = openraft::Entry<TypeConfig>;
pub type LogId = openraft::LogId<NodeId>;
pub type Vote = openraft::Vote<NodeId>;
pub type StorageError = openraft::StorageError<NodeId>;
pub type StoredMembership = openraft::StoredMembership<NodeId, QuorumNode>;
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, QuorumNode>;
pub type Raft = openraft::Raft<TypeConfig>;

/// Kafka node ids are non-negative i32s (checked by `parse_peers`).
pub fn raft_id(node_id: i32) -> NodeId {
    u64::try_from(node_id).unwrap_or(u64::MAX)
}

/// The inverse of `raft_id`; `None` for ids no broker can have.
pub fn kafka_id(id: NodeId) -> Option<i32> {
    i32::try_from(id).ok()
}

/// A member of the quorum as its membership records it: where its raft
/// port is and (KIP-853) the directory id of its metadata log directory,
/// the Uuid in its `meta.properties` (`None`: not reported yet, Kafka's
/// zero directory id of a static voter). Serialized as openraft's
/// `BasicNode` was, plus the optional id, so logs written before it read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumNode {
    pub addr: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory_id: Option<[u8; 16]>,
}

impl QuorumNode {
    pub fn new(addr: String, directory_id: Option<[u8; 16]>) -> Self {
        QuorumNode { addr, directory_id }
    }
}

impl std::fmt::Display for QuorumNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.addr)
    }
}
