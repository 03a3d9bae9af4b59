//! DeleteRecords (kafka-delete-records.sh, Admin.deleteRecords, v0–2): moves
//! each partition's log start offset up to the requested offset on its
//! leader (-1: the high watermark), then — Kafka's DelayedDeleteRecords —
//! answers each partition once its low watermark has reached that offset:
//! the smallest log start offset over the leader and the followers on live
//! (registered, unfenced) brokers, which report theirs in every fetch and
//! move it after the leader's (`replica::fetcher`). The answer's
//! `low_watermark` is that low watermark. A partition not there within the
//! request's timeout_ms (capped at `purgatory::MAX_WAIT`) is answered
//! REQUEST_TIMED_OUT with the low watermark reached so far; the leader's
//! log start offset has moved all the same. Kafka's other errors:
//! NOT_LEADER_OR_FOLLOWER off the leader (or when leadership moves while
//! waiting), OFFSET_OUT_OF_RANGE above the high watermark. Internal topics
//! are refused (POLICY_VIOLATION): their state is rebuilt by replaying them
//! from the start. With no followers (one node) the leader's own log start
//! offset is the low watermark, so the answer is immediate.
//!
//! The log start moves through the write path
//! (`WritePath::delete_records_before`), which wakes what waits on it.
//!
//! Must not: write a log itself, or wait anywhere but in the purgatory
//! (woken by a follower's fetch that moved its log start offset, and by
//! every metadata change).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use chronik_log::LogManager;
use chronik_metadata::Cluster;
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use uuid::Uuid;

use super::Handled;
use crate::replica::high_watermark::consumer_high_watermark;
use crate::replica::purgatory::{Purgatory, MAX_WAIT};
use crate::replica::write::WritePath;
use crate::replica::{Replica, ReplicaManager};
use crate::requests::topics::lookup::{resolve, INTERNAL_TOPICS};

/// The offset meaning "the high watermark".
const HIGH_WATERMARK: i64 = -1;

/// Kafka's `DeleteRecordsResponse.INVALID_LOW_WATERMARK`.
const INVALID_LOW_WATERMARK: i64 = -1;

/// Where one partition of the request stands.
enum Outcome {
    /// The leader's log start offset moved; the low watermark (last seen)
    /// has yet to reach `required`. Still so when the wait ends: timed out.
    Waiting {
        replica: Arc<Replica>,
        required: i64,
        low_watermark: i64,
    },
    /// Answered with this low watermark.
    Done(i64),
    /// Answered with this error and low watermark.
    Failed(ResponseError, i64),
}

/// What a DeleteRecords reaches, lent by the dispatcher.
pub struct DeleteRecordsDeps<'a> {
    pub replicas: &'a ReplicaManager,
    pub cluster: &'a Cluster,
    pub writes: &'a WritePath,
    pub log: &'a LogManager,
    pub purgatory: &'a Purgatory,
}

pub async fn handle(
    deps: &DeleteRecordsDeps<'_>,
    _version: i16,
    request: DeleteRecordsRequest,
) -> Option<Handled> {
    let timeout =
        Duration::from_millis(u64::try_from(request.timeout_ms.max(0)).unwrap_or(0)).min(MAX_WAIT);
    let mut outcomes: Vec<Vec<Outcome>> = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let name = topic.name.0.as_str();
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            partitions.push(
                match delete(deps, name, p.partition_index, p.offset).await {
                    Ok((replica, required)) => Outcome::Waiting {
                        replica,
                        required,
                        low_watermark: INVALID_LOW_WATERMARK,
                    },
                    Err(error) => Outcome::Failed(error, INVALID_LOW_WATERMARK),
                },
            );
        }
        outcomes.push(partitions);
    }
    wait_for_low_watermarks(
        deps.cluster,
        deps.purgatory,
        outcomes.iter_mut().flatten().collect(),
        timeout,
    )
    .await;
    let mut has_error = false;
    let topics = request
        .topics
        .into_iter()
        .zip(outcomes)
        .map(|(topic, outcomes)| {
            let partitions = topic
                .partitions
                .iter()
                .zip(outcomes)
                .map(|(p, outcome)| {
                    let result = DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index);
                    match outcome {
                        Outcome::Done(low_watermark) => result.with_low_watermark(low_watermark),
                        Outcome::Failed(error, low_watermark) => {
                            has_error = true;
                            result
                                .with_low_watermark(low_watermark)
                                .with_error_code(error.code())
                        }
                        Outcome::Waiting { low_watermark, .. } => {
                            has_error = true;
                            result
                                .with_low_watermark(low_watermark)
                                .with_error_code(ResponseError::RequestTimedOut.code())
                        }
                    }
                })
                .collect();
            DeleteRecordsTopicResult::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    Handled::new(
        Response::DeleteRecords(DeleteRecordsResponse::default().with_topics(topics)),
        has_error,
    )
}

/// Moves the leader's log start offset (through the write path); returns
/// the leader replica — looked up once — and the offset the low watermark
/// must reach.
async fn delete(
    deps: &DeleteRecordsDeps<'_>,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<(Arc<Replica>, i64), ResponseError> {
    if INTERNAL_TOPICS.contains(&topic) {
        return Err(ResponseError::PolicyViolation);
    }
    resolve(deps.log, topic, Uuid::nil())?
        .partition(partition)
        .ok_or(ResponseError::UnknownTopicOrPartition)?;
    let replica = deps
        .replicas
        .replica(topic, partition)
        .ok_or(ResponseError::NotLeaderOrFollower)?;
    let high_watermark = consumer_high_watermark(&replica)?;
    let target = match offset {
        HIGH_WATERMARK => high_watermark,
        o if (0..=high_watermark).contains(&o) => o,
        _ => return Err(ResponseError::OffsetOutOfRange),
    };
    deps.writes.delete_records_before(&replica, target).await?;
    Ok((replica, target))
}

/// Kafka's DelayedDeleteRecords: parks in the purgatory on the waiting
/// partitions until each one's low watermark reaches its offset, its
/// leadership moves, or `timeout` passes (REQUEST_TIMED_OUT).
async fn wait_for_low_watermarks(
    cluster: &Cluster,
    purgatory: &Purgatory,
    mut outcomes: Vec<&mut Outcome>,
    timeout: Duration,
) {
    let deadline = tokio::time::Instant::now() + timeout;
    let waiting: Vec<Arc<Replica>> = outcomes
        .iter()
        .filter_map(|o| match &**o {
            Outcome::Waiting { replica, .. } => Some(replica.clone()),
            _ => None,
        })
        .collect();
    // Those still waiting at the deadline are answered REQUEST_TIMED_OUT.
    purgatory
        .park_until(
            deadline,
            || waiting.iter().map(|r| r.log.clone()).collect(),
            || {
                let image = cluster.image();
                let live: BTreeSet<i32> = image.live_brokers().map(|b| b.node_id).collect();
                let mut still_waiting = false;
                for outcome in outcomes.iter_mut() {
                    let Outcome::Waiting {
                        replica,
                        required,
                        low_watermark,
                    } = &mut **outcome
                    else {
                        continue;
                    };
                    match replica.low_watermark(|id| live.contains(&id)) {
                        Ok(reached) if reached >= *required => **outcome = Outcome::Done(reached),
                        Ok(reached) => {
                            *low_watermark = reached;
                            still_waiting = true;
                        }
                        Err(error) => **outcome = Outcome::Failed(error, INVALID_LOW_WATERMARK),
                    }
                }
                !still_waiting
            },
        )
        .await;
}
