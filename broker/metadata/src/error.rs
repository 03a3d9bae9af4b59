//! The crate's error type. Each variant names the Kafka error code the
//! server should answer with; the mapping itself belongs to the server's
//! handlers.
//!
//! Serializable because a forwarded request's rejection travels back from
//! the controller over the raft RPC transport.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum ClusterError {
    /// TOPIC_ALREADY_EXISTS
    #[error("topic {0:?} already exists")]
    TopicAlreadyExists(String),
    /// UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID when looked up by id)
    #[error("unknown topic or partition {0:?}")]
    UnknownTopic(String),
    /// INVALID_REPLICATION_FACTOR: < 1 or more than the live brokers.
    #[error("invalid replication factor: {0}")]
    InvalidReplicationFactor(String),
    /// INVALID_PARTITIONS
    #[error("invalid number of partitions: {0}")]
    InvalidPartitions(String),
    /// INVALID_TOPIC_EXCEPTION
    #[error("invalid topic name: {0}")]
    InvalidTopic(String),
    /// FENCED_LEADER_EPOCH (AlterPartition from a stale or wrong leader)
    #[error("fenced leader epoch")]
    FencedLeaderEpoch,
    /// INVALID_UPDATE_VERSION (AlterPartition based on an old partition epoch)
    #[error("invalid update version (partition epoch mismatch)")]
    InvalidUpdateVersion,
    /// INVALID_REQUEST (e.g. an ISR without the leader, or with a fenced
    /// broker being added: Kafka's INELIGIBLE_REPLICA)
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// INVALID_REPLICA_ASSIGNMENT (a reassignment naming an unregistered
    /// broker, a duplicate, or no replica at all)
    #[error("invalid replica assignment: {0}")]
    InvalidReplicaAssignment(String),
    /// NO_REASSIGNMENT_IN_PROGRESS (cancelling a reassignment that is not
    /// under way)
    #[error("no reassignment in progress for {0}")]
    NoReassignmentInProgress(String),
    /// ELECTION_NOT_NEEDED (the wanted leader already leads)
    #[error("election not needed: {0}")]
    ElectionNotNeeded(String),
    /// PREFERRED_LEADER_NOT_AVAILABLE (the preferred replica is not a live
    /// ISR member)
    #[error("preferred leader not available: {0}")]
    PreferredLeaderNotAvailable(String),
    /// ELIGIBLE_LEADERS_NOT_AVAILABLE (no live replica to lead)
    #[error("eligible leaders not available: {0}")]
    EligibleLeadersNotAvailable(String),
    /// BROKER_ID_NOT_REGISTERED (UnregisterBroker of a broker the image
    /// does not have)
    #[error("Broker ID {0} is not currently registered")]
    BrokerIdNotRegistered(i32),
    /// INVALID_UPDATE_VERSION: an UpdateFeatures change the controller
    /// refused, in Kafka's words (`features::FeatureError`).
    #[error("{0}")]
    FeatureUpdateFailed(String),
    /// NOT_CONTROLLER: the controller could not be reached to forward to.
    #[error("not the controller")]
    NotController,
    /// REQUEST_TIMED_OUT: sent, but no answer in time (the command may
    /// still be applied).
    #[error("timed out")]
    Timeout,
    /// REQUEST_TIMED_OUT with Kafka's message: a voter change that cannot
    /// be made now (another is under way, the new voter is not caught up
    /// or not following the leader); the client may retry.
    #[error("{0}")]
    VoterChangeTimedOut(String),
    /// DUPLICATE_VOTER (AddRaftVoter of a node id that already votes)
    #[error("{0}")]
    DuplicateVoter(String),
    /// VOTER_NOT_FOUND (RemoveRaftVoter / UpdateRaftVoter of an id and
    /// directory id the voter set does not hold)
    #[error("{0}")]
    VoterNotFound(String),
    /// The quorum cannot commit (no leader, shut down): a retriable error
    /// such as NOT_CONTROLLER / REQUEST_TIMED_OUT for the client.
    #[error("metadata quorum unavailable: {0}")]
    Unavailable(String),
}
