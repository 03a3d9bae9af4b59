//! Committed offsets, durable in the internal topic `__consumer_offsets`
//! (one partition), as Kafka keeps them.
//!
//! Owns: the key/value encoding of offset records, appending commits and
//! tombstones (through `leader_append`, acks=all: acknowledged only once
//! durable and in every ISR member), the in-memory map rebuilt
//! by replaying the topic at start and on becoming its leader, and which
//! leader epoch that map was loaded for: only a coordinator whose map
//! matches its current leadership may answer OffsetFetch (`readable`).
//! Must not: check group membership (the handlers ask the `GroupManager`
//! first).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use chronik_log::{LogManager, PartitionLog};
use chronik_protocol::record_batch::{parse_batch, parse_batches};
use chronik_protocol::records::{build_batch, read_records, SimpleRecord};
use kafka_protocol::error::ResponseError;
use prometheus_client::metrics::counter::Counter;

use crate::broker::Broker;
use crate::durability::wait_until_durable;
use crate::leader_append::{append_as_leader, wait_for_isr};

pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// Key schema version of an offset-commit record.
const OFFSET_KEY_VERSION: i16 = 1;
const OFFSET_VALUE_VERSION: i16 = 1;
const REPLAY_CHUNK: usize = 1024 * 1024;
/// The longest group id an offset commit may carry: ids are stored with a
/// 16-bit length, and 32767 is what a classic (non-compact) string holds.
pub const MAX_GROUP_ID_BYTES: usize = i16::MAX as usize;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
    pub commit_timestamp: i64,
}

/// (group, topic, partition)
type OffsetKey = (String, String, i32);

pub struct OffsetStore {
    log: Arc<PartitionLog>,
    offsets: Mutex<BTreeMap<OffsetKey, CommittedOffset>>,
    /// Records passed over at replay because they could not be read.
    skipped: Counter,
    /// The leader epoch of `__consumer_offsets`-0 whose log `offsets` was
    /// last rebuilt from (-1: not rebuilt as its leader). A follower's map
    /// is stale: it never applies what it replicates.
    loaded_epoch: AtomicI32,
}

impl std::fmt::Debug for OffsetStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OffsetStore")
            .field("topic", &OFFSETS_TOPIC)
            .finish()
    }
}

impl OffsetStore {
    /// Opens the offsets topic (creating it on first start) and replays it.
    pub fn open(log: &LogManager, skipped: Counter) -> anyhow::Result<OffsetStore> {
        let topic = match log.topic(OFFSETS_TOPIC) {
            Some(t) => t,
            None => log
                .create_topic(
                    OFFSETS_TOPIC,
                    1,
                    BTreeMap::from([("retention.ms".to_string(), "-1".to_string())]),
                )
                .context("creating __consumer_offsets")?,
        };
        let partition = topic
            .partition(0)
            .context("__consumer_offsets has no partition 0")?
            .clone();
        let offsets = replay(&partition, &skipped)?;
        tracing::info!(committed = offsets.len(), "loaded committed offsets");
        Ok(OffsetStore {
            log: partition,
            offsets: Mutex::new(offsets),
            skipped,
            loaded_epoch: AtomicI32::new(-1),
        })
    }

    /// Re-reads the committed offsets from the log (this broker just became
    /// the leader of the offsets partition in `leader_epoch`, whose records
    /// it replicated as a follower).
    pub fn reload(&self, leader_epoch: i32) -> anyhow::Result<()> {
        let offsets = replay(&self.log, &self.skipped)?;
        tracing::info!(
            committed = offsets.len(),
            leader_epoch,
            "reloaded committed offsets as the new coordinator"
        );
        *self.offsets.lock().unwrap_or_else(|e| e.into_inner()) = offsets;
        self.loaded_epoch.store(leader_epoch, Ordering::Release);
        Ok(())
    }

    /// Whether this broker may answer OffsetFetch: Kafka's NOT_COORDINATOR
    /// unless it leads `__consumer_offsets`-0, COORDINATOR_LOAD_IN_PROGRESS
    /// until its map has been rebuilt for the current leader epoch.
    pub fn readable(&self, broker: &Broker) -> Result<(), ResponseError> {
        let epoch = broker
            .replicas
            .replica(OFFSETS_TOPIC, 0)
            .and_then(|r| r.leader_epoch())
            .ok_or(ResponseError::NotCoordinator)?;
        if self.loaded_epoch.load(Ordering::Acquire) != epoch {
            return Err(ResponseError::CoordinatorLoadInProgress);
        }
        Ok(())
    }

    /// Stores commits for `group`; returns once they survive a crash of
    /// this broker and a coordinator failover (durable here and in every
    /// ISR member), else the error the coordinator answers. Only stored
    /// commits become visible to OffsetFetch.
    pub async fn commit(
        &self,
        broker: &Broker,
        group: &str,
        commits: Vec<(String, i32, CommittedOffset)>,
        timeout: Duration,
    ) -> Result<(), ResponseError> {
        if commits.is_empty() {
            return Ok(());
        }
        if group.len() > MAX_GROUP_ID_BYTES {
            return Err(ResponseError::InvalidGroupId);
        }
        let records: Vec<SimpleRecord> = commits
            .iter()
            .map(|(topic, partition, c)| SimpleRecord {
                key: Some(encode_key(group, topic, *partition)),
                value: Some(encode_value(c)),
                timestamp: c.commit_timestamp,
            })
            .collect();
        self.append(broker, &records, timeout).await?;
        let mut offsets = self.offsets.lock().unwrap_or_else(|e| e.into_inner());
        for (topic, partition, c) in commits {
            offsets.insert((group.to_string(), topic, partition), c);
        }
        Ok(())
    }

    /// Removes every committed offset of `group` (DeleteGroups).
    pub async fn delete_group(&self, broker: &Broker, group: &str) -> anyhow::Result<()> {
        let keys: Vec<OffsetKey> = {
            let offsets = self.offsets.lock().unwrap_or_else(|e| e.into_inner());
            offsets
                .keys()
                .filter(|(g, _, _)| g == group)
                .cloned()
                .collect()
        };
        let now = now_ms();
        let tombstones: Vec<SimpleRecord> = keys
            .iter()
            .map(|(g, t, p)| SimpleRecord {
                key: Some(encode_key(g, t, *p)),
                value: None,
                timestamp: now,
            })
            .collect();
        if !tombstones.is_empty() {
            self.append(broker, &tombstones, Duration::from_secs(30))
                .await
                .map_err(|e| anyhow::anyhow!("deleting the group's offsets: {e:?}"))?;
        }
        let mut offsets = self.offsets.lock().unwrap_or_else(|e| e.into_inner());
        for key in keys {
            offsets.remove(&key);
        }
        Ok(())
    }

    pub fn fetch(&self, group: &str, topic: &str, partition: i32) -> Option<CommittedOffset> {
        let offsets = self.offsets.lock().unwrap_or_else(|e| e.into_inner());
        offsets
            .get(&(group.to_string(), topic.to_string(), partition))
            .cloned()
    }

    /// Every (topic, partition, offset) committed by `group`.
    pub fn fetch_all(&self, group: &str) -> Vec<(String, i32, CommittedOffset)> {
        let offsets = self.offsets.lock().unwrap_or_else(|e| e.into_inner());
        offsets
            .iter()
            .filter(|((g, _, _), _)| g == group)
            .map(|((_, t, p), c)| (t.clone(), *p, c.clone()))
            .collect()
    }

    /// Groups that have committed offsets (for ListGroups).
    pub fn groups(&self) -> Vec<String> {
        let offsets = self.offsets.lock().unwrap_or_else(|e| e.into_inner());
        let mut groups: Vec<String> = offsets.keys().map(|(g, _, _)| g.clone()).collect();
        groups.dedup();
        groups
    }

    /// Writes `records` as Kafka writes `__consumer_offsets`: appended as
    /// its leader with acks=all, answered once durable here and in every
    /// ISR member. The error is what the coordinator answers (Kafka's
    /// mapping of append errors for offset commits).
    async fn append(
        &self,
        broker: &Broker,
        records: &[SimpleRecord],
        timeout: Duration,
    ) -> Result<(), ResponseError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut batch = build_batch(records);
        let headers = parse_batches(&batch).map_err(|e| {
            tracing::error!(error = %e, "encoding an offsets batch");
            ResponseError::UnknownServerError
        })?;
        let mut outcome = append_as_leader(broker, &self.log, &mut batch, &headers, true);
        if let Ok(appended) = &outcome {
            if broker.fsync_enabled()
                && !wait_until_durable(
                    broker,
                    &[(self.log.clone(), appended.info.log_end_offset)],
                    timeout,
                )
                .await
            {
                outcome = Err(if self.log.is_offline() {
                    (
                        ResponseError::KafkaStorageError,
                        "fsync failed: partition offline".into(),
                    )
                } else {
                    (
                        ResponseError::RequestTimedOut,
                        "not durable within the commit timeout".into(),
                    )
                });
            }
        }
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        wait_for_isr(broker, vec![&mut outcome], remaining).await;
        outcome.map(drop).map_err(|(error, message)| {
            tracing::warn!(error = ?error, message, "offsets not stored");
            coordinator_error(error)
        })
    }
}

/// Kafka's answer to an offset commit whose append failed.
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

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Callers bound every stored string (group ids, topic names, commit
/// metadata) well below 64 KiB, so the length always fits.
fn put_str(buf: &mut BytesMut, s: &str) {
    debug_assert!(
        s.len() <= usize::from(u16::MAX),
        "string of {} bytes in an offsets record",
        s.len()
    );
    let len = s.len().min(usize::from(u16::MAX));
    buf.put_u16(u16::try_from(len).unwrap_or(u16::MAX));
    buf.put_slice(&s.as_bytes()[..len]);
}

fn get_str(buf: &mut Bytes) -> Option<String> {
    if buf.remaining() < 2 {
        return None;
    }
    let len = usize::from(buf.get_u16());
    if buf.remaining() < len {
        return None;
    }
    String::from_utf8(buf.split_to(len).to_vec()).ok()
}

fn encode_key(group: &str, topic: &str, partition: i32) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(OFFSET_KEY_VERSION);
    put_str(&mut buf, group);
    put_str(&mut buf, topic);
    buf.put_i32(partition);
    buf.freeze()
}

fn decode_key(mut key: Bytes) -> Option<OffsetKey> {
    if key.remaining() < 2 || key.get_i16() != OFFSET_KEY_VERSION {
        return None;
    }
    let group = get_str(&mut key)?;
    let topic = get_str(&mut key)?;
    if key.remaining() < 4 {
        return None;
    }
    Some((group, topic, key.get_i32()))
}

fn encode_value(c: &CommittedOffset) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(OFFSET_VALUE_VERSION);
    buf.put_i64(c.offset);
    buf.put_i32(c.leader_epoch);
    match &c.metadata {
        Some(m) => {
            buf.put_u8(1);
            put_str(&mut buf, m);
        }
        None => buf.put_u8(0),
    }
    buf.put_i64(c.commit_timestamp);
    buf.freeze()
}

fn decode_value(mut value: Bytes) -> Option<CommittedOffset> {
    if value.remaining() < 2 + 8 + 4 + 1 || value.get_i16() != OFFSET_VALUE_VERSION {
        return None;
    }
    let offset = value.get_i64();
    let leader_epoch = value.get_i32();
    let metadata = if value.get_u8() == 1 {
        Some(get_str(&mut value)?)
    } else {
        None
    };
    if value.remaining() < 8 {
        return None;
    }
    Some(CommittedOffset {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp: value.get_i64(),
    })
}

/// Applies one record; false when it could not be decoded (skipped).
fn apply(offsets: &mut BTreeMap<OffsetKey, CommittedOffset>, record: &SimpleRecord) -> bool {
    let Some(key) = record.key.clone().and_then(decode_key) else {
        tracing::warn!("skipping an undecodable __consumer_offsets key");
        return false;
    };
    match record.value.clone() {
        None => {
            offsets.remove(&key);
            true
        }
        Some(value) => match decode_value(value) {
            Some(c) => {
                offsets.insert(key, c);
                true
            }
            None => {
                tracing::warn!(group = %key.0, "skipping an undecodable __consumer_offsets value");
                false
            }
        },
    }
}

/// Every committed offset in `partition`, replayed from its start. Start-up
/// never fails on the topic's content: a batch or record that cannot be
/// read (compressed, foreign, damaged) is logged, counted in `skipped` and
/// passed over, and every batch — a zero-record one included — advances the
/// replay past its last offset.
fn replay(
    partition: &PartitionLog,
    skipped: &Counter,
) -> anyhow::Result<BTreeMap<OffsetKey, CommittedOffset>> {
    let mut offsets = BTreeMap::new();
    let mut next = partition.log_start_offset();
    let end = partition.log_end_offset();
    while next < end {
        let chunk = partition
            .read(next, REPLAY_CHUNK, end)
            .context("replaying __consumer_offsets")?;
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
            match read_records(batch) {
                Ok(records) => {
                    for (_, record) in &records {
                        if !apply(&mut offsets, record) {
                            skipped.inc();
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(base_offset = header.base_offset, error = %e, "skipping an unreadable __consumer_offsets batch");
                    skipped.inc_by(u64::try_from(header.records_count.max(1)).unwrap_or(1));
                }
            }
            next = header.last_offset() + 1;
        }
        if next == before {
            // Nothing usable at `next` (the log read returned no whole
            // batch): stop rather than loop.
            tracing::warn!(
                offset = next,
                "__consumer_offsets replay stopped at an unreadable position"
            );
            skipped.inc();
            break;
        }
    }
    Ok(offsets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_round_trip() {
        let key = encode_key("group-1", "orders", 7);
        assert_eq!(
            decode_key(key),
            Some(("group-1".into(), "orders".into(), 7))
        );
        let c = CommittedOffset {
            offset: 42,
            leader_epoch: 0,
            metadata: Some("m".into()),
            commit_timestamp: 123,
        };
        assert_eq!(decode_value(encode_value(&c)), Some(c));
        let none = CommittedOffset {
            offset: 1,
            leader_epoch: -1,
            metadata: None,
            commit_timestamp: 5,
        };
        assert_eq!(decode_value(encode_value(&none)), Some(none));
        assert_eq!(
            decode_key(Bytes::from_static(b"\x00\x01\x00")),
            None,
            "truncated keys are rejected"
        );
    }
}
