//! `throttle_time_ms` in responses: a client over its quota is told how
//! long to hold back (KIP-219), in every response whose schema has the
//! field.
//!
//! Owns: which responses carry the field and setting it. Must not: decide
//! a throttle (the server's quotas do).

use crate::api::Response;

macro_rules! with_throttle_time {
    ($($variant:ident),* $(,)?) => {
        impl Response {
            /// Sets `throttle_time_ms` where the response has it; false
            /// when it has none (its clients are never told).
            pub fn set_throttle_time_ms(&mut self, ms: i32) -> bool {
                match self {
                    $( Response::$variant(r) => { r.throttle_time_ms = ms; true } )*
                    #[allow(unreachable_patterns)]
                    _ => false,
                }
            }

            /// The response's `throttle_time_ms` (0 where it has none).
            pub fn throttle_time_ms(&self) -> i32 {
                match self {
                    $( Response::$variant(r) => r.throttle_time_ms, )*
                    #[allow(unreachable_patterns)]
                    _ => 0,
                }
            }
        }
    };
}

with_throttle_time!(
    Produce,
    Fetch,
    ListOffsets,
    Metadata,
    ApiVersions,
    CreateTopics,
    DeleteTopics,
    DescribeConfigs,
    FindCoordinator,
    JoinGroup,
    SyncGroup,
    Heartbeat,
    LeaveGroup,
    OffsetCommit,
    OffsetFetch,
    ListGroups,
    DescribeGroups,
    DeleteGroups,
    InitProducerId,
    OffsetForLeaderEpoch,
    AddPartitionsToTxn,
    AddOffsetsToTxn,
    EndTxn,
    TxnOffsetCommit,
    DescribeTransactions,
    ListTransactions,
    CreatePartitions,
    AlterConfigs,
    IncrementalAlterConfigs,
    DescribeCluster,
    DescribeLogDirs,
    OffsetDelete,
    DeleteRecords,
    ConsumerGroupHeartbeat,
    ConsumerGroupDescribe,
    DescribeAcls,
    CreateAcls,
    DeleteAcls,
    DescribeUserScramCredentials,
    AlterUserScramCredentials,
    ElectLeaders,
    AlterPartitionReassignments,
    ListPartitionReassignments,
    UnregisterBroker,
    AddRaftVoter,
    RemoveRaftVoter,
    UpdateRaftVoter,
    UpdateFeatures,
    DescribeTopicPartitions,
    DescribeClientQuotas,
    AlterClientQuotas,
);
