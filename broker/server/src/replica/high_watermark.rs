//! The offsets consumers may read below for one partition: the replication
//! high watermark of the leader capped at what the group-commit flusher
//! made durable here (a follower answers NOT_LEADER_OR_FOLLOWER), and for
//! read_committed consumers the last stable offset — the high watermark
//! capped at the first offset of the oldest open transaction.

use chronik_log::PartitionLog;
use kafka_protocol::error::ResponseError;

use crate::replica::Replica;

/// What consumers may read below on `replica` (NOT_LEADER_OR_FOLLOWER off
/// the leader).
pub fn consumer_high_watermark(replica: &Replica) -> Result<i64, ResponseError> {
    Ok(replica
        .consumer_high_watermark()?
        .min(replica.log.durable_offset()))
}

/// Kafka's last stable offset given the partition's high watermark.
pub fn last_stable_offset(log: &PartitionLog, high_watermark: i64) -> i64 {
    log.first_unstable_offset()
        .map_or(high_watermark, |first| first.min(high_watermark))
}
