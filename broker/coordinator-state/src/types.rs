//! Requests and replies of the group state machine, in Kafka's terms but
//! independent of any wire version.

use bytes::Bytes;

/// The protocol type of consumers (the embedded ConsumerProtocol); the
/// only classic protocol type that can migrate to and from KIP-848 groups.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// Routes a delayed reply back to the request that is waiting for it.
pub type Ticket = u64;
/// Milliseconds on the owner's monotonic clock.
pub type Millis = u64;

/// The Kafka errors the state machine can answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupError {
    UnknownMemberId,
    IllegalGeneration,
    RebalanceInProgress,
    InconsistentGroupProtocol,
    MemberIdRequired,
    InvalidSessionTimeout,
    GroupIdNotFound,
    NonEmptyGroup,
    /// The group is being deleted or was unloaded, or its record could
    /// not be stored.
    CoordinatorNotAvailable,
    /// This broker does not lead `__consumer_offsets` (any more).
    NotCoordinator,
    /// This broker leads `__consumer_offsets` but has not loaded it yet.
    CoordinatorLoadInProgress,
    // KIP-848 consumer groups:
    /// A required field is missing or out of bounds.
    InvalidRequest,
    FencedMemberEpoch,
    UnreleasedInstanceId,
    GroupMaxSizeReached,
    UnsupportedAssignor,
    InvalidRegularExpression,
    /// An offset commit or fetch from a member epoch that is not current.
    StaleMemberEpoch,
}

#[derive(Debug, Clone)]
pub struct JoinRequest {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: u64,
    pub rebalance_timeout_ms: u64,
    pub protocol_type: String,
    /// (assignor name, subscription metadata), in the member's preference order.
    pub protocols: Vec<(String, Bytes)>,
    /// JoinGroup v4+: a member without an id is first given one and asked to
    /// rejoin with it (MEMBER_ID_REQUIRED), so a retried join cannot create
    /// a phantom member.
    pub require_known_member_id: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct JoinedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub metadata: Bytes,
}

#[derive(Debug, Clone, PartialEq)]
pub struct JoinReply {
    pub error: Option<GroupError>,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// Filled for the leader only: every member and its subscription.
    pub members: Vec<JoinedMember>,
}

impl JoinReply {
    pub fn error(error: GroupError, member_id: &str) -> JoinReply {
        JoinReply {
            error: Some(error),
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            member_id: member_id.to_string(),
            members: Vec::new(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct SyncRequest {
    pub member_id: String,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    /// Sent by the leader only: (member id, assignment bytes).
    pub assignments: Vec<(String, Bytes)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SyncReply {
    pub error: Option<GroupError>,
    /// SyncGroup v5 carries these in every response, errors included.
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

/// Something the owner must deliver.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Join(Ticket, JoinReply),
    Sync(Ticket, SyncReply),
}

/// How a commit relates to the group's membership.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitCheck {
    /// Commit allowed.
    Ok,
    Rejected(GroupError),
}
