//! Kafka error codes for the group state machine's errors.

use chronik_coordinator_state::GroupError;
use kafka_protocol::error::ResponseError;

pub fn code(error: Option<GroupError>) -> i16 {
    error.map(|e| response_error(e).code()).unwrap_or(0)
}

pub fn response_error(error: GroupError) -> ResponseError {
    match error {
        GroupError::UnknownMemberId => ResponseError::UnknownMemberId,
        GroupError::IllegalGeneration => ResponseError::IllegalGeneration,
        GroupError::RebalanceInProgress => ResponseError::RebalanceInProgress,
        GroupError::InconsistentGroupProtocol => ResponseError::InconsistentGroupProtocol,
        GroupError::MemberIdRequired => ResponseError::MemberIdRequired,
        GroupError::InvalidSessionTimeout => ResponseError::InvalidSessionTimeout,
        GroupError::GroupIdNotFound => ResponseError::GroupIdNotFound,
        GroupError::NonEmptyGroup => ResponseError::NonEmptyGroup,
        GroupError::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
        GroupError::NotCoordinator => ResponseError::NotCoordinator,
        GroupError::CoordinatorLoadInProgress => ResponseError::CoordinatorLoadInProgress,
        GroupError::InvalidRequest => ResponseError::InvalidRequest,
        GroupError::FencedMemberEpoch => ResponseError::FencedMemberEpoch,
        GroupError::UnreleasedInstanceId => ResponseError::UnreleasedInstanceId,
        GroupError::GroupMaxSizeReached => ResponseError::GroupMaxSizeReached,
        GroupError::UnsupportedAssignor => ResponseError::UnsupportedAssignor,
        GroupError::InvalidRegularExpression => ResponseError::InvalidRegularExpression,
        GroupError::StaleMemberEpoch => ResponseError::StaleMemberEpoch,
    }
}
