//! Kafka's replication protocol for one partition, as pure state machines.
//!
//! Followers fetch from the leader with Fetch + their replica id; the leader
//! tracks each follower's log end offset, keeps the in-sync replica set
//! (ISR) and advances the high watermark to the minimum log end offset over
//! it; lagging followers leave the ISR and rejoin once caught up; ISR
//! changes go through the controller (KIP-497 AlterPartition) before they
//! count; leader epochs are recorded per offset range so that a replica
//! following a new leader cuts off exactly the records that never reached
//! the high watermark (KIP-101 OffsetForLeaderEpoch); elections are clean.
//!
//! Nothing here does I/O, reads a clock, spawns a task or knows the wire
//! format (raft-rs style): the owner — the server's partition manager and
//! replica fetcher — feeds events with the time in milliseconds and performs
//! the actions that come back (`LeaderAction`, `FollowerAction`), and writes
//! the checkpoints these types render. Tests drive the machines with tables
//! of steps and a simulated three-node network.
//!
//! Layout:
//! - `epoch_cache`  — `LeaderEpochCache`: (epoch, start offset) entries,
//!   OffsetForLeaderEpoch lookups, truncation, checkpoint text.
//! - `registration` — `PartitionRegistration` (replicas, ISR, leader,
//!   epochs) and the controller's AlterPartition check.
//! - `election`     — clean leader election among live ISR members.
//! - `isr`          — the leader's committed ISR and its in-flight change.
//! - `leader`       — `PartitionReplicaState`: follower progress, ISR
//!   expand/shrink, high watermark, acks=all and min.insync.replicas.
//! - `follower`     — `FollowerState` and `truncation_offset`.
//! - `error`        — the crate's `Error`.
//!
//! Not thread-safe by design: each partition's state lives under the lock
//! (or on the task) that owns its log.

mod election;
mod epoch_cache;
mod error;
mod follower;
mod isr;
mod leader;
mod registration;

pub use election::{choose_leader, elect_leader};
pub use epoch_cache::{
    decode_checkpoint, encode_checkpoint, EpochEndOffset, EpochEntry, LeaderEpochCache,
    CHECKPOINT_FILE_NAME,
};
pub use error::{Error, Result};
pub use follower::{truncation_offset, FollowerAction, FollowerPhase, FollowerState, Truncation};
pub use isr::{IsrState, PendingIsrChange};
pub use leader::{FollowerFetchState, LeaderAction, PartitionReplicaState, ReplicationConfig};
pub use registration::PartitionRegistration;

/// A broker id, as Kafka's replica ids are (int32).
pub type ReplicaId = i32;
/// Milliseconds on the owner's monotonic clock.
pub type Millis = u64;

/// Kafka's UNDEFINED_EPOCH, for the owner's wire mapping of `None`.
pub const UNDEFINED_EPOCH: i32 = -1;
/// Kafka's UNDEFINED_EPOCH_OFFSET, for the owner's wire mapping of `None`.
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

#[cfg(test)]
#[rustfmt::skip]
mod tests;
