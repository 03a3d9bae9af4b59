//! openraft's type configuration for the metadata quorum.
//!
//! Owns: `TypeConfig` and the aliases the storage and network modules
//! share. Raft node ids are the brokers' (non-negative) Kafka node ids.

use std::io::Cursor;

use crate::command::{Command, CommandResult};

openraft::declare_raft_types!(
    /// The metadata quorum's raft types: commands in, results out,
    /// snapshots are a serialized `MetadataImage` held in memory.
    pub TypeConfig:
        D = Command,
        R = CommandResult,
        NodeId = u64,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

pub type NodeId = u64;
pub type Entry = openraft::Entry<TypeConfig>;
pub type LogId = openraft::LogId<NodeId>;
pub type Vote = openraft::Vote<NodeId>;
pub type StorageError = openraft::StorageError<NodeId>;
pub type StoredMembership = openraft::StoredMembership<NodeId, openraft::BasicNode>;
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, openraft::BasicNode>;
pub type Raft = openraft::Raft<TypeConfig>;

/// Kafka node ids are non-negative i32s (checked by `parse_peers`).
pub fn raft_id(node_id: i32) -> NodeId {
    u64::try_from(node_id).unwrap_or(u64::MAX)
}

/// The inverse of `raft_id`; `None` for ids no broker can have.
pub fn kafka_id(id: NodeId) -> Option<i32> {
    i32::try_from(id).ok()
}
