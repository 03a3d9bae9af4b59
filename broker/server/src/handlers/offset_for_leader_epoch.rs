//! OffsetForLeaderEpoch: a single-node broker has only leader epoch 0, so
//! epoch 0 ends at the log end offset and later epochs are unknown.

use std::sync::Arc;

use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_for_leader_epoch_response::{EpochEndOffset, OffsetForLeaderTopicResult};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use uuid::Uuid;

use super::topic_lookup::resolve;
use super::Handled;
use crate::broker::Broker;

pub fn handle(broker: &Arc<Broker>, _version: i16, request: OffsetForLeaderEpochRequest) -> Option<Handled> {
    let mut has_error = false;
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let found = resolve(broker, &topic.topic.0, Uuid::nil());
            let partitions = topic
                .partitions
                .into_iter()
                .map(|p| {
                    let result = EpochEndOffset::default().with_partition(p.partition);
                    let log = match &found {
                        Ok(t) => t.partition(p.partition).ok_or(ResponseError::UnknownTopicOrPartition),
                        Err(e) => Err(*e),
                    };
                    match log {
                        Err(e) => {
                            has_error = true;
                            result.with_error_code(e.code()).with_leader_epoch(-1).with_end_offset(-1)
                        }
                        Ok(_) if p.current_leader_epoch > 0 => {
                            has_error = true;
                            result
                                .with_error_code(ResponseError::UnknownLeaderEpoch.code())
                                .with_leader_epoch(-1)
                                .with_end_offset(-1)
                        }
                        Ok(log) if p.leader_epoch <= 0 => result.with_leader_epoch(0).with_end_offset(log.log_end_offset()),
                        Ok(_) => result.with_leader_epoch(-1).with_end_offset(-1),
                    }
                })
                .collect();
            OffsetForLeaderTopicResult::default().with_topic(topic.topic).with_partitions(partitions)
        })
        .collect();
    Handled::new(
        Response::OffsetForLeaderEpoch(OffsetForLeaderEpochResponse::default().with_topics(topics)),
        has_error,
    )
}
