//! OffsetForLeaderEpoch: where a leader epoch ends in this log. The leader
//! answers from its leader-epoch cache (KIP-101/279), after checking the
//! asker's current leader epoch.

use chronik_log::LogManager;
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use uuid::Uuid;

use super::Handled;
use crate::replica::ReplicaManager;
use crate::requests::topics::lookup::resolve;

pub fn handle(
    replicas: &ReplicaManager,
    log: &LogManager,
    _version: i16,
    request: OffsetForLeaderEpochRequest,
) -> Option<Handled> {
    let mut has_error = false;
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let found = resolve(log, &topic.topic.0, Uuid::nil());
            let partitions = topic
                .partitions
                .into_iter()
                .map(|p| {
                    let result = EpochEndOffset::default().with_partition(p.partition);
                    let log = match &found {
                        Ok(t) => t
                            .partition(p.partition)
                            .ok_or(ResponseError::UnknownTopicOrPartition),
                        Err(e) => Err(*e),
                    };
                    match log {
                        Ok(log) => {
                            let answer = answer_from_cache(
                                replicas,
                                log,
                                p.current_leader_epoch,
                                p.leader_epoch,
                            );
                            has_error |= answer.error_code != 0;
                            answer.with_partition(p.partition)
                        }
                        Err(e) => {
                            has_error = true;
                            result
                                .with_error_code(e.code())
                                .with_leader_epoch(-1)
                                .with_end_offset(-1)
                        }
                    }
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(topic.topic)
                .with_partitions(partitions)
        })
        .collect();
    Handled::new(
        Response::OffsetForLeaderEpoch(OffsetForLeaderEpochResponse::default().with_topics(topics)),
        has_error,
    )
}

/// The partition leader's answer, from its leader-epoch cache.
fn answer_from_cache(
    manager: &crate::replica::ReplicaManager,
    log: &chronik_log::PartitionLog,
    current_leader_epoch: i32,
    leader_epoch: i32,
) -> EpochEndOffset {
    let error = |e: ResponseError| {
        EpochEndOffset::default()
            .with_error_code(e.code())
            .with_leader_epoch(-1)
            .with_end_offset(-1)
    };
    let Some(replica) = manager.replica(log.topic(), log.partition()) else {
        return error(ResponseError::NotLeaderOrFollower);
    };
    if let Err(e) = replica.leader_epoch_matching(current_leader_epoch) {
        return error(e);
    }
    match replica.end_offset_for(leader_epoch) {
        Some(answer) => EpochEndOffset::default()
            .with_leader_epoch(answer.leader_epoch)
            .with_end_offset(answer.end_offset),
        None => EpochEndOffset::default()
            .with_leader_epoch(-1)
            .with_end_offset(-1),
    }
}
