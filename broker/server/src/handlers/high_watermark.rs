//! The offset consumers may read below for one partition: the replication
//! high watermark of the leader capped at what the group-commit flusher
//! made durable here (a follower answers NOT_LEADER_OR_FOLLOWER).

use chronik_log::PartitionLog;
use kafka_protocol::error::ResponseError;

use crate::broker::Broker;

pub fn consumer_high_watermark(broker: &Broker, log: &PartitionLog) -> Result<i64, ResponseError> {
    match broker.replica(log.topic(), log.partition()) {
        None => Err(ResponseError::NotLeaderOrFollower),
        Some(replica) => Ok(replica.consumer_high_watermark()?.min(log.durable_offset())),
    }
}
