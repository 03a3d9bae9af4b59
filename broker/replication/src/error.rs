//! The replication crate's one error type.
//!
//! Owns: every refusal the state machines report, each variant carrying the
//! values involved so a log line explains itself. Must not: know Kafka error
//! codes — the server's handlers map variants to codes (the doc comment of
//! each variant names the code it usually becomes).

use std::collections::BTreeSet;

use thiserror::Error;

use crate::ReplicaId;

pub type Result<T> = std::result::Result<T, Error>;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    /// A leader-epoch entry with a negative epoch or start offset (Kafka
    /// throws IllegalArgumentException for these).
    #[error("invalid leader epoch entry: epoch {epoch}, start offset {start_offset} (both must be >= 0)")]
    InvalidEpochEntry { epoch: i32, start_offset: i64 },

    /// The leader-epoch-checkpoint text does not parse; `line` is 1-based.
    #[error("malformed leader-epoch checkpoint at line {line}: {reason}")]
    MalformedCheckpoint { line: usize, reason: String },

    /// A partition registration (replicas, ISR, leader) that breaks the
    /// rules in `PartitionRegistration::validate`.
    #[error("invalid partition registration (replicas {replicas:?}, isr {isr:?}, leader {leader:?}): {reason}")]
    InvalidRegistration {
        replicas: Vec<ReplicaId>,
        isr: BTreeSet<ReplicaId>,
        leader: Option<ReplicaId>,
        reason: &'static str,
    },

    /// A configuration value out of range.
    #[error("invalid value {value} for {name}: {reason}")]
    InvalidConfig {
        name: &'static str,
        value: i64,
        reason: &'static str,
    },

    /// The state was built for a replica that is not the registration's
    /// leader (NOT_LEADER_OR_FOLLOWER).
    #[error("replica {replica_id} is not the leader; the registration names {leader:?}")]
    NotLeader {
        replica_id: ReplicaId,
        leader: Option<ReplicaId>,
    },

    /// A fetch or state update naming a replica that is not a follower of
    /// this partition (the leader itself, or not assigned at all).
    #[error("replica {replica_id} is not a follower of this partition (leader {leader}, replicas {replicas:?})")]
    NotAFollower {
        replica_id: ReplicaId,
        leader: ReplicaId,
        replicas: Vec<ReplicaId>,
    },

    /// The leader's log end offset may only grow while it leads.
    #[error("leader log end offset went backwards: {previous} -> {new}")]
    LogEndOffsetWentBackwards { previous: i64, new: i64 },

    /// A follower fetched past the leader's log end offset
    /// (OFFSET_OUT_OF_RANGE).
    #[error("replica {replica_id} fetched at offset {fetch_offset}, beyond the leader's log end offset {log_end_offset}")]
    FetchOffsetOutOfRange {
        replica_id: ReplicaId,
        fetch_offset: i64,
        log_end_offset: i64,
    },

    /// acks=all refused before appending: the committed ISR is smaller
    /// than min.insync.replicas (NOT_ENOUGH_REPLICAS).
    #[error("not enough in-sync replicas: isr size {isr_size} < min.insync.replicas {min_insync_replicas}")]
    NotEnoughReplicas {
        isr_size: usize,
        min_insync_replicas: usize,
    },

    /// An acks=all produce was appended and reached the high watermark,
    /// but the ISR shrank below min.insync.replicas while it waited
    /// (NOT_ENOUGH_REPLICAS_AFTER_APPEND).
    #[error("records up to offset {required_offset} were appended, but the isr shrank to {isr_size} < min.insync.replicas {min_insync_replicas}")]
    NotEnoughReplicasAfterAppend {
        required_offset: i64,
        isr_size: usize,
        min_insync_replicas: usize,
    },

    /// A request carried an older leader epoch than ours
    /// (FENCED_LEADER_EPOCH).
    #[error("leader epoch {request_epoch} is fenced: the current leader epoch is {current_epoch}")]
    FencedLeaderEpoch {
        request_epoch: i32,
        current_epoch: i32,
    },

    /// A request carried a newer leader epoch than ours: we have not heard
    /// of it yet (UNKNOWN_LEADER_EPOCH).
    #[error(
        "leader epoch {request_epoch} is unknown: the current leader epoch is {current_epoch}"
    )]
    UnknownLeaderEpoch {
        request_epoch: i32,
        current_epoch: i32,
    },

    /// An ISR update (AlterPartition answer or a newer registration) based
    /// on a partition epoch that is not newer than ours; it is ignored
    /// (INVALID_UPDATE_VERSION on the controller side).
    #[error("stale isr update: partition epoch {version} is not newer than the current {current_version}")]
    StaleIsrUpdate { version: i32, current_version: i32 },

    /// An AlterPartition built on a partition epoch the controller has
    /// moved past (INVALID_UPDATE_VERSION).
    #[error("alter partition based on partition epoch {version}, but the controller is at {current_version}")]
    InvalidUpdateVersion { version: i32, current_version: i32 },

    /// No live replica is in the ISR, so a clean election is impossible
    /// and the partition stays offline (unclean election is disabled).
    #[error(
        "no eligible leader: replicas {replicas:?}, isr {isr:?}, live brokers {live_brokers:?}"
    )]
    NoEligibleLeader {
        replicas: Vec<ReplicaId>,
        isr: BTreeSet<ReplicaId>,
        live_brokers: BTreeSet<ReplicaId>,
    },

    /// A follower event that does not fit the follower's current phase
    /// (for example a fetch response while it is still truncating).
    #[error("follower event {event} is not valid in phase {phase}")]
    UnexpectedFollowerEvent {
        event: &'static str,
        phase: &'static str,
    },

    /// A follower's log end offset went backwards outside a truncation.
    #[error("follower log end offset went backwards: {previous} -> {new}")]
    FollowerLogEndOffsetWentBackwards { previous: i64, new: i64 },
}

/// Leader-epoch fencing of a request that must carry the current epoch:
/// an older one is FencedLeaderEpoch, a newer one UnknownLeaderEpoch.
pub(crate) fn check_leader_epoch(request_epoch: i32, current_epoch: i32) -> Result<()> {
    if request_epoch < current_epoch {
        Err(Error::FencedLeaderEpoch {
            request_epoch,
            current_epoch,
        })
    } else if request_epoch > current_epoch {
        Err(Error::UnknownLeaderEpoch {
            request_epoch,
            current_epoch,
        })
    } else {
        Ok(())
    }
}
