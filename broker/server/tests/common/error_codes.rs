//! Kafka's error codes as the broker's responses carry them (the protocol's
//! numbers, named as in Kafka's `Errors`), for the tests that check a code;
//! one table, so a test names a code instead of repeating its number.

pub const OFFSET_OUT_OF_RANGE: i16 = 1;
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
pub const REQUEST_TIMED_OUT: i16 = 7;
pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
pub const UNKNOWN_MEMBER_ID: i16 = 25;
pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
pub const GROUP_AUTHORIZATION_FAILED: i16 = 30;
pub const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
pub const UNSUPPORTED_VERSION: i16 = 35;
pub const TOPIC_ALREADY_EXISTS: i16 = 36;
pub const INVALID_PARTITIONS: i16 = 37;
pub const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
pub const INVALID_CONFIG: i16 = 40;
pub const INVALID_REQUEST: i16 = 42;
pub const POLICY_VIOLATION: i16 = 44;
pub const INVALID_PRODUCER_EPOCH: i16 = 47;
pub const INVALID_TXN_STATE: i16 = 48;
pub const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
pub const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
pub const SECURITY_DISABLED: i16 = 54;
pub const OPERATION_NOT_ATTEMPTED: i16 = 55;
pub const NON_EMPTY_GROUP: i16 = 68;
pub const GROUP_ID_NOT_FOUND: i16 = 69;
pub const PRODUCER_FENCED: i16 = 90;
pub const UNKNOWN_TOPIC_ID: i16 = 100;
pub const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;
pub const FENCED_MEMBER_EPOCH: i16 = 110;
pub const UNSUPPORTED_ENDPOINT_TYPE: i16 = 115;
pub const INVALID_RECORD_STATE: i16 = 121;
pub const SHARE_SESSION_NOT_FOUND: i16 = 122;
pub const INVALID_SHARE_SESSION_EPOCH: i16 = 123;
