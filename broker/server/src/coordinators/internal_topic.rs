//! The broker's internal topics, `__consumer_offsets` and
//! `__transaction_state`: one partition each, written only by this broker
//! as their leader, read back only by the coordinator that leads them.
//!
//! Owns, for both: opening the partition's local log, replaying its records
//! from the start (tolerant: an unreadable batch or record is counted and
//! passed over, never fails a load), appending the coordinator's records
//! with acks=all and Kafka's mapping of a failed append to the error a
//! coordinator answers, and `Loaded`: which leader epoch the in-memory
//! state was rebuilt for (a coordinator answers only when that matches its
//! current leadership), and the one string encoding both stores use
//! (`put_str`, `get_str`). Must not: know the records' layout (the stores do).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use chronik_log::{LogManager, PartitionLog};
use chronik_protocol::record_batch::parse_batch;
use chronik_protocol::records::{read_records, SimpleRecord};
use kafka_protocol::error::ResponseError;
use prometheus_client::metrics::counter::Counter;

use crate::replica::write::WritePath;
use crate::replica::ReplicaManager;

const REPLAY_CHUNK: usize = 1024 * 1024;

/// Kafka's offsets.topic.segment.bytes and transaction.state.log.segment.bytes.
const INTERNAL_SEGMENT_BYTES: u64 = 100 * 1024 * 1024;

/// The configs both internal topics are created with: compacted, as in
/// Kafka (each group offset / transactional id keeps its latest record),
/// never deleted by retention, with Kafka's 100 MiB segments (or the
/// broker's `--segment-bytes` when smaller) so closed segments exist to
/// clean.
pub fn internal_topic_configs(default_segment_bytes: u64) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("cleanup.policy".to_string(), "compact".to_string()),
        ("retention.ms".to_string(), "-1".to_string()),
        (
            "segment.bytes".to_string(),
            default_segment_bytes
                .min(INTERNAL_SEGMENT_BYTES)
                .to_string(),
        ),
    ])
}

/// Partition 0 of the internal `topic`, created locally (compacted) when
/// the quorum has not created it here.
pub fn open_partition(log: &LogManager, topic: &str) -> anyhow::Result<Arc<PartitionLog>> {
    let t = match log.topic(topic) {
        Some(t) => t,
        None => log
            .create_topic(
                topic,
                1,
                internal_topic_configs(log.default_log_config().segment_bytes),
            )
            .with_context(|| format!("creating {topic}"))?,
    };
    Ok(t.partition(0)
        .with_context(|| format!("{topic} has no partition 0"))?
        .clone())
}

/// Partition 0 of an internal topic as the coordinators use it: looked up
/// in the log manager at every use, never kept. The replica manager
/// replaces a local topic whose id is not the quorum's (here: created by
/// `open_partition` before the quorum's image arrived), and a handle kept
/// from before would keep writing to the deleted log.
#[derive(Clone)]
pub struct InternalPartition {
    log: Arc<LogManager>,
    writes: Arc<WritePath>,
    topic: &'static str,
}

impl std::fmt::Debug for InternalPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InternalPartition")
            .field("topic", &self.topic)
            .finish()
    }
}

impl InternalPartition {
    /// `open_partition`, and the partition as it is now (to replay).
    pub fn open(
        log: &Arc<LogManager>,
        writes: &Arc<WritePath>,
        topic: &'static str,
    ) -> anyhow::Result<(InternalPartition, Arc<PartitionLog>)> {
        let now = open_partition(log, topic)?;
        Ok((
            InternalPartition {
                log: log.clone(),
                writes: writes.clone(),
                topic,
            },
            now,
        ))
    }

    /// The partition now; None while the local topic is being replaced.
    pub fn current(&self) -> Option<Arc<PartitionLog>> {
        self.log.topic(self.topic)?.partition(0).cloned()
    }

    /// The replicas this partition is written through.
    pub fn replicas(&self) -> &Arc<ReplicaManager> {
        self.writes.replicas()
    }

    /// `current`, or an error naming the topic (for replays).
    pub fn require(&self) -> anyhow::Result<Arc<PartitionLog>> {
        self.current()
            .with_context(|| format!("{} partition 0 is not open here", self.topic))
    }

    /// Appends one batch of the coordinator's records (`append_records`);
    /// COORDINATOR_LOAD_IN_PROGRESS while the local topic is being replaced.
    pub async fn append(&self, batch: Vec<u8>, timeout: Duration) -> Result<(), ResponseError> {
        self.current()
            .ok_or(ResponseError::CoordinatorLoadInProgress)?;
        append_records(&self.writes, self.topic, 0, batch, timeout).await
    }
}

/// The leader epoch an internal topic's in-memory state was loaded for.
#[derive(Debug)]
pub struct Loaded {
    topic: &'static str,
    /// -1: not loaded as the leader (a follower never applies what it
    /// replicates, so its state is stale).
    epoch: AtomicI32,
}

impl Loaded {
    pub fn new(topic: &'static str) -> Loaded {
        Loaded {
            topic,
            epoch: AtomicI32::new(-1),
        }
    }

    pub fn set(&self, leader_epoch: i32) {
        self.epoch.store(leader_epoch, Ordering::Release);
    }

    /// The current leader epoch when this broker leads the topic and its
    /// state was loaded for it: NOT_COORDINATOR when another broker leads,
    /// COORDINATOR_LOAD_IN_PROGRESS until loaded.
    pub fn readable(&self, replicas: &ReplicaManager) -> Result<i32, ResponseError> {
        let epoch = replicas
            .replica(self.topic, 0)
            .and_then(|r| r.leader_epoch())
            .ok_or(ResponseError::NotCoordinator)?;
        if self.epoch.load(Ordering::Acquire) != epoch {
            return Err(ResponseError::CoordinatorLoadInProgress);
        }
        Ok(epoch)
    }
}

/// Appends one batch of the coordinator's records (acks=all); the error is
/// what the coordinator answers (Kafka's mapping for offset commits and
/// transaction-state writes).
pub async fn append_records(
    writes: &WritePath,
    topic: &str,
    partition: i32,
    batch: Vec<u8>,
    timeout: Duration,
) -> Result<(), ResponseError> {
    writes
        .write_internal(topic, partition, batch, timeout)
        .await
        .map(drop)
        .map_err(|(error, message)| {
            tracing::warn!(topic, partition, error = ?error, message, "coordinator records not stored");
            coordinator_error(error)
        })
}

/// Kafka's answer to a coordinator whose append failed.
fn coordinator_error(append: ResponseError) -> ResponseError {
    match append {
        ResponseError::NotLeaderOrFollower | ResponseError::KafkaStorageError => {
            ResponseError::NotCoordinator
        }
        ResponseError::UnknownTopicOrPartition
        | ResponseError::NotEnoughReplicas
        | ResponseError::NotEnoughReplicasAfterAppend
        | ResponseError::RequestTimedOut => ResponseError::CoordinatorNotAvailable,
        ResponseError::MessageTooLarge
        | ResponseError::RecordListTooLarge
        | ResponseError::InvalidFetchSize => ResponseError::InvalidCommitOffsetSize,
        _ => ResponseError::UnknownServerError,
    }
}

/// Feeds every record of `partition`, from its start, to `apply` (false:
/// the record could not be decoded). Start-up never fails on the topic's
/// content: a batch or record that cannot be read (compressed, foreign,
/// damaged) is logged, counted in `skipped` and passed over, and every
/// batch — a zero-record one included — advances the replay past its last
/// offset. Control batches (transaction markers) carry no records to apply.
pub fn replay_records(
    partition: &PartitionLog,
    skipped: &Counter,
    mut apply: impl FnMut(&SimpleRecord) -> bool,
) -> anyhow::Result<()> {
    let topic = partition.topic();
    let mut next = partition.log_start_offset();
    let end = partition.log_end_offset();
    while next < end {
        let chunk = partition
            .read(next, REPLAY_CHUNK, end)
            .with_context(|| format!("replaying {topic}"))?;
        if chunk.is_empty() {
            break;
        }
        let before = next;
        let mut position = 0;
        while position < chunk.len() {
            let header = match parse_batch(&chunk, position) {
                Ok(h) => h,
                // The log only returns whole batches; a partial one at the
                // end of the chunk is read again from `next`.
                Err(_) => break,
            };
            let batch = &chunk[position..position + header.size];
            position += header.size;
            if header.last_offset() < next {
                continue;
            }
            if !header.is_control() {
                match read_records(batch) {
                    Ok(records) => {
                        for (_, record) in &records {
                            if !apply(record) {
                                skipped.inc();
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!(topic, base_offset = header.base_offset, error = %e, "skipping an unreadable batch");
                        skipped.inc_by(u64::try_from(header.records_count.max(1)).unwrap_or(1));
                    }
                }
            }
            next = header.last_offset() + 1;
        }
        if next == before {
            // Nothing usable at `next` (the log read returned no whole
            // batch): stop rather than loop.
            tracing::warn!(
                topic,
                offset = next,
                "replay stopped at an unreadable position"
            );
            skipped.inc();
            break;
        }
    }
    Ok(())
}

/// A string as both internal topics store it (16-bit length, then the
/// bytes). Callers bound every stored string (group and transactional ids,
/// topic names, commit metadata) below 64 KiB, so the length always fits.
pub fn put_str(buf: &mut BytesMut, s: &str) {
    debug_assert!(
        s.len() <= usize::from(u16::MAX),
        "string of {} bytes in an offsets record",
        s.len()
    );
    let len = s.len().min(usize::from(u16::MAX));
    buf.put_u16(u16::try_from(len).unwrap_or(u16::MAX));
    buf.put_slice(&s.as_bytes()[..len]);
}

/// The string `put_str` wrote; None when `buf` is short or not UTF-8.
pub fn get_str(buf: &mut Bytes) -> Option<String> {
    if buf.remaining() < 2 {
        return None;
    }
    let len = usize::from(buf.get_u16());
    if buf.remaining() < len {
        return None;
    }
    String::from_utf8(buf.split_to(len).to_vec()).ok()
}
