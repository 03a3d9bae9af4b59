//! The Kafka error code for each metadata-quorum error.

use chronik_metadata::ClusterError;
use kafka_protocol::error::ResponseError;

pub fn cluster_error_code(e: &ClusterError) -> ResponseError {
    match e {
        ClusterError::TopicAlreadyExists(_) => ResponseError::TopicAlreadyExists,
        ClusterError::UnknownTopic(_) => ResponseError::UnknownTopicOrPartition,
        ClusterError::InvalidReplicationFactor(_) => ResponseError::InvalidReplicationFactor,
        ClusterError::InvalidPartitions(_) => ResponseError::InvalidPartitions,
        ClusterError::InvalidTopic(_) => ResponseError::InvalidTopicException,
        ClusterError::FencedLeaderEpoch => ResponseError::FencedLeaderEpoch,
        ClusterError::InvalidUpdateVersion | ClusterError::FeatureUpdateFailed(_) => {
            ResponseError::InvalidUpdateVersion
        }
        ClusterError::InvalidRequest(_) => ResponseError::InvalidRequest,
        ClusterError::InvalidReplicaAssignment(_) => ResponseError::InvalidReplicaAssignment,
        ClusterError::NoReassignmentInProgress(_) => ResponseError::NoReassignmentInProgress,
        ClusterError::ElectionNotNeeded(_) => ResponseError::ElectionNotNeeded,
        ClusterError::PreferredLeaderNotAvailable(_) => ResponseError::PreferredLeaderNotAvailable,
        ClusterError::EligibleLeadersNotAvailable(_) => ResponseError::EligibleLeadersNotAvailable,
        ClusterError::BrokerIdNotRegistered(_) => ResponseError::BrokerIdNotRegistered,
        ClusterError::NotController | ClusterError::Unavailable(_) => ResponseError::NotController,
        ClusterError::Timeout | ClusterError::VoterChangeTimedOut(_) => {
            ResponseError::RequestTimedOut
        }
        ClusterError::DuplicateVoter(_) => ResponseError::DuplicateVoter,
        ClusterError::VoterNotFound(_) => ResponseError::VoterNotFound,
    }
}
