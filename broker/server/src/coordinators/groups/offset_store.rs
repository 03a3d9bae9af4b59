//! Committed offsets, durable in the internal topic `__consumer_offsets`
//! (one partition), as Kafka keeps them.
//!
//! Owns: the key/value encoding of offset records, appending commits and
//! tombstones (acks=all through `internal_topic`: acknowledged only once
//! durable and in every ISR member), the in-memory map rebuilt by replaying
//! the topic at start and on becoming its leader (`readable` answers only
//! for a map loaded for the current leadership), and transactional offset
//! commits (TxnOffsetCommit): stored pending under their producer id and
//! applied or dropped by the transaction's end record, which the
//! coordinator's marker for `__consumer_offsets` writes
//! (`complete_transaction`). A marker also records the producer's epoch, so
//! a fenced producer's late commit is refused. It also replays and appends
//! the groups' records — KIP-848 groups (`consumer_group_records`) and
//! classic groups (`classic_group_records`) — whose layout and meaning are
//! the group manager's, and hands them to it at a reload. Must not: check
//! group membership (the handlers ask the `GroupManager` first).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use chronik_log::{LogManager, PartitionLog};
use chronik_protocol::records::{build_batch, SimpleRecord};
use kafka_protocol::error::ResponseError;
use prometheus_client::metrics::counter::Counter;

use super::consumer_group_records::{group_of, GroupRecords};
use crate::coordinators::internal_topic::{
    get_str, put_str, replay_records, InternalPartition, Loaded,
};
use crate::replica::write::WritePath;

pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// Key schema version of an offset-commit record.
const OFFSET_KEY_VERSION: i16 = 1;
/// A transactional offset commit, pending until its transaction ends:
/// (producer id, group, topic, partition) -> an offset value. (Kafka's
/// GroupMetadataKey is version 2 too: classic groups' records are type 16,
/// `classic_group_records`.)
const PENDING_KEY_VERSION: i16 = 2;
/// A transaction's end for a producer id: value (commit u8, epoch i16).
const TXN_END_KEY_VERSION: i16 = 3;
const OFFSET_VALUE_VERSION: i16 = 1;
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
    partition: InternalPartition,
    state: Mutex<Offsets>,
    /// Records passed over at replay because they could not be read.
    skipped: Counter,
    loaded: Loaded,
}

/// What `__consumer_offsets` holds, as replayed.
#[derive(Debug, Default)]
struct Offsets {
    /// Groups' records by group (`consumer_group_records::group_of`: KIP-848
    /// and classic), handed
    /// to the group manager when this broker becomes the coordinator.
    consumer_groups: BTreeMap<String, GroupRecords>,
    committed: BTreeMap<OffsetKey, CommittedOffset>,
    /// Transactional commits not yet ended, by producer id.
    pending: HashMap<i64, BTreeMap<OffsetKey, CommittedOffset>>,
    /// The epoch of each producer id's last transaction end: a
    /// transactional commit from an older epoch is fenced.
    ended_epochs: HashMap<i64, i16>,
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
    pub fn open(
        log: &Arc<LogManager>,
        writes: &Arc<WritePath>,
        skipped: Counter,
    ) -> anyhow::Result<OffsetStore> {
        let (partition, now) = InternalPartition::open(log, writes, OFFSETS_TOPIC)?;
        let state = replay(&now, &skipped)?;
        tracing::info!(
            committed = state.committed.len(),
            "loaded committed offsets"
        );
        Ok(OffsetStore {
            partition,
            state: Mutex::new(state),
            skipped,
            loaded: Loaded::new(OFFSETS_TOPIC),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Offsets> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Re-reads the committed offsets from the log (this broker just became
    /// the leader of the offsets partition in `leader_epoch`, whose records
    /// it replicated as a follower).
    /// `load_groups` is handed the groups' records (KIP-848 and classic)
    /// before the store answers as loaded, so no request finds its group
    /// missing.
    pub fn reload(
        &self,
        leader_epoch: i32,
        load_groups: impl FnOnce(&BTreeMap<String, GroupRecords>),
    ) -> anyhow::Result<()> {
        let state = replay(&*self.partition.require()?, &self.skipped)?;
        load_groups(&state.consumer_groups);
        tracing::info!(
            committed = state.committed.len(),
            pending_transactions = state.pending.len(),
            consumer_groups = state.consumer_groups.len(),
            leader_epoch,
            "reloaded committed offsets as the new coordinator"
        );
        *self.lock() = state;
        self.loaded.set(leader_epoch);
        Ok(())
    }

    /// Whether this broker may answer OffsetFetch: Kafka's NOT_COORDINATOR
    /// unless it leads `__consumer_offsets`-0, COORDINATOR_LOAD_IN_PROGRESS
    /// until its map has been rebuilt for the current leader epoch.
    pub fn readable(&self) -> Result<(), ResponseError> {
        self.loaded.readable(self.partition.replicas()).map(drop)
    }

    /// Stores commits for `group`; returns once they survive a crash of
    /// this broker and a coordinator failover (durable here and in every
    /// ISR member), else the error the coordinator answers. Only stored
    /// commits become visible to OffsetFetch.
    pub async fn commit(
        &self,
        group: &str,
        commits: Vec<(String, i32, CommittedOffset)>,
        timeout: Duration,
    ) -> Result<(), ResponseError> {
        if commits.is_empty() {
            return Ok(());
        }
        let records = commit_records(group, &commits, |t, p| encode_key(group, t, p))?;
        self.append(&records, timeout).await?;
        let mut state = self.lock();
        for (topic, partition, c) in commits {
            state
                .committed
                .insert((group.to_string(), topic, partition), c);
        }
        Ok(())
    }

    /// Stores transactional commits of `producer_id` for `group`, pending
    /// until the transaction ends (TxnOffsetCommit). PRODUCER_FENCED when
    /// a transaction of a newer epoch of that producer id already ended.
    pub async fn commit_transactional(
        &self,
        group: &str,
        (producer_id, producer_epoch): (i64, i16),
        commits: Vec<(String, i32, CommittedOffset)>,
        timeout: Duration,
    ) -> Result<(), ResponseError> {
        if commits.is_empty() {
            return Ok(());
        }
        let records = commit_records(group, &commits, |t, p| {
            encode_pending_key(producer_id, group, t, p)
        })?;
        if self
            .lock()
            .ended_epochs
            .get(&producer_id)
            .is_some_and(|&ended| producer_epoch < ended)
        {
            return Err(ResponseError::ProducerFenced);
        }
        self.append(&records, timeout).await?;
        let mut state = self.lock();
        let pending = state.pending.entry(producer_id).or_default();
        for (topic, partition, c) in commits {
            pending.insert((group.to_string(), topic, partition), c);
        }
        Ok(())
    }

    /// The transaction marker for `__consumer_offsets`: `producer_id`'s
    /// pending commits become committed offsets (`commit`) or are dropped.
    pub async fn complete_transaction(
        &self,
        (producer_id, producer_epoch): (i64, i16),
        commit: bool,
        timeout: Duration,
    ) -> Result<(), ResponseError> {
        // A commit also writes the offsets as ordinary commit records, in
        // the same batch before the end record: the committed state then
        // never depends on the pending records. Each pending record is
        // also overwritten by a tombstone there, so a compacted
        // `__consumer_offsets` (where a later end record of the producer
        // id replaces this one) never replays it into a later transaction.
        let mut records: Vec<SimpleRecord> = Vec::new();
        if let Some(pending) = self.lock().pending.get(&producer_id) {
            for ((group, topic, partition), c) in pending {
                if commit {
                    records.push(SimpleRecord {
                        key: Some(encode_key(group, topic, *partition)),
                        value: Some(encode_value(c)),
                        timestamp: c.commit_timestamp,
                    });
                }
                records.push(SimpleRecord {
                    key: Some(encode_pending_key(producer_id, group, topic, *partition)),
                    value: None,
                    timestamp: c.commit_timestamp,
                });
            }
        }
        records.push(SimpleRecord {
            key: Some(encode_txn_end_key(producer_id)),
            value: Some(encode_txn_end(commit, producer_epoch)),
            timestamp: now_ms(),
        });
        self.append(&records, timeout).await?;
        end_transaction(&mut self.lock(), producer_id, producer_epoch, commit);
        Ok(())
    }

    /// Whether a transaction of `group` has an offset for the partition
    /// pending (OffsetFetch with require_stable answers
    /// UNSTABLE_OFFSET_COMMIT).
    pub fn has_pending(&self, group: &str, topic: &str, partition: i32) -> bool {
        let key = (group.to_string(), topic.to_string(), partition);
        self.lock().pending.values().any(|p| p.contains_key(&key))
    }

    /// Removes every committed offset of `group` (DeleteGroups).
    pub async fn delete_group(&self, group: &str) -> anyhow::Result<()> {
        self.delete_offsets(group, |_, _| true).await
    }

    /// Appends a group's changed records (None: a tombstone), as
    /// `commit` appends offsets: acknowledged once durable here and in
    /// every ISR member, else the error the coordinator answers.
    pub async fn write_group_records(
        &self,
        changes: &[(Bytes, Option<Bytes>)],
    ) -> Result<(), ResponseError> {
        let now = now_ms();
        let records: Vec<SimpleRecord> = changes
            .iter()
            .map(|(key, value)| SimpleRecord {
                key: Some(key.clone()),
                value: value.clone(),
                timestamp: now,
            })
            .collect();
        self.append(&records, Duration::from_secs(30)).await
    }

    /// Removes the committed offsets of `group` whose (topic, partition)
    /// `doomed` picks (OffsetDelete; DeleteGroups picks all), with
    /// tombstones acknowledged like commits.
    pub async fn delete_offsets(
        &self,
        group: &str,
        doomed: impl Fn(&str, i32) -> bool,
    ) -> anyhow::Result<()> {
        let keys: Vec<OffsetKey> = {
            let state = self.lock();
            state
                .committed
                .keys()
                .filter(|(g, t, p)| g == group && doomed(t, *p))
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
            self.append(&tombstones, Duration::from_secs(30))
                .await
                .map_err(|e| anyhow::anyhow!("deleting committed offsets: {e:?}"))?;
        }
        let mut state = self.lock();
        for key in keys {
            state.committed.remove(&key);
        }
        Ok(())
    }

    pub fn fetch(&self, group: &str, topic: &str, partition: i32) -> Option<CommittedOffset> {
        self.lock()
            .committed
            .get(&(group.to_string(), topic.to_string(), partition))
            .cloned()
    }

    /// Every (topic, partition, offset) committed by `group`.
    pub fn fetch_all(&self, group: &str) -> Vec<(String, i32, CommittedOffset)> {
        self.lock()
            .committed
            .iter()
            .filter(|((g, _, _), _)| g == group)
            .map(|((_, t, p), c)| (t.clone(), *p, c.clone()))
            .collect()
    }

    /// Groups that have committed offsets (for ListGroups).
    pub fn groups(&self) -> Vec<String> {
        let mut groups: Vec<String> = self
            .lock()
            .committed
            .keys()
            .map(|(g, _, _)| g.clone())
            .collect();
        groups.dedup();
        groups
    }

    /// Writes `records` as Kafka writes `__consumer_offsets`: appended as
    /// its leader with acks=all, answered once durable here and in every
    /// ISR member.
    async fn append(
        &self,
        records: &[SimpleRecord],
        timeout: Duration,
    ) -> Result<(), ResponseError> {
        self.partition.append(build_batch(records), timeout).await
    }
}

fn end_transaction(state: &mut Offsets, producer_id: i64, producer_epoch: i16, commit: bool) {
    if let Some(pending) = state.pending.remove(&producer_id) {
        if commit {
            state.committed.extend(pending);
        }
    }
    let ended = state
        .ended_epochs
        .entry(producer_id)
        .or_insert(producer_epoch);
    *ended = (*ended).max(producer_epoch);
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The records storing `commits` of `group`, each keyed by `key(topic,
/// partition)`: INVALID_GROUP_ID when the group id is too long to store.
fn commit_records(
    group: &str,
    commits: &[(String, i32, CommittedOffset)],
    key: impl Fn(&str, i32) -> Bytes,
) -> Result<Vec<SimpleRecord>, ResponseError> {
    if group.len() > MAX_GROUP_ID_BYTES {
        return Err(ResponseError::InvalidGroupId);
    }
    Ok(commits
        .iter()
        .map(|(topic, partition, c)| SimpleRecord {
            key: Some(key(topic, *partition)),
            value: Some(encode_value(c)),
            timestamp: c.commit_timestamp,
        })
        .collect())
}

fn encode_key(group: &str, topic: &str, partition: i32) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(OFFSET_KEY_VERSION);
    put_str(&mut buf, group);
    put_str(&mut buf, topic);
    buf.put_i32(partition);
    buf.freeze()
}

/// A record's key, by schema version.
#[derive(Debug, PartialEq, Eq)]
enum Key {
    Committed(OffsetKey),
    Pending(i64, OffsetKey),
    TxnEnd(i64),
    /// A KIP-848 group's record: (group, the whole key).
    ConsumerGroup(String, Bytes),
}

fn decode_offset_key(key: &mut Bytes) -> Option<OffsetKey> {
    let group = get_str(key)?;
    let topic = get_str(key)?;
    if key.remaining() < 4 {
        return None;
    }
    Some((group, topic, key.get_i32()))
}

fn decode_key(mut key: Bytes) -> Option<Key> {
    if key.remaining() < 2 {
        return None;
    }
    if let Some(group) = group_of(&key) {
        return Some(Key::ConsumerGroup(group, key));
    }
    match key.get_i16() {
        OFFSET_KEY_VERSION => decode_offset_key(&mut key).map(Key::Committed),
        PENDING_KEY_VERSION if key.remaining() >= 8 => {
            let producer_id = key.get_i64();
            decode_offset_key(&mut key).map(|k| Key::Pending(producer_id, k))
        }
        TXN_END_KEY_VERSION if key.remaining() >= 8 => Some(Key::TxnEnd(key.get_i64())),
        _ => None,
    }
}

fn encode_pending_key(producer_id: i64, group: &str, topic: &str, partition: i32) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(PENDING_KEY_VERSION);
    buf.put_i64(producer_id);
    put_str(&mut buf, group);
    put_str(&mut buf, topic);
    buf.put_i32(partition);
    buf.freeze()
}

fn encode_txn_end_key(producer_id: i64) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(TXN_END_KEY_VERSION);
    buf.put_i64(producer_id);
    buf.freeze()
}

fn encode_txn_end(commit: bool, producer_epoch: i16) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_u8(u8::from(commit));
    buf.put_i16(producer_epoch);
    buf.freeze()
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
fn apply(state: &mut Offsets, record: &SimpleRecord) -> bool {
    let Some(key) = record.key.clone().and_then(decode_key) else {
        tracing::warn!("skipping an undecodable __consumer_offsets key");
        return false;
    };
    let value = record.value.clone();
    match (key, value) {
        (Key::Committed(key), None) => {
            state.committed.remove(&key);
            true
        }
        (Key::Committed(key), Some(value)) => match decode_value(value) {
            Some(c) => {
                state.committed.insert(key, c);
                true
            }
            None => {
                tracing::warn!(group = %key.0, "skipping an undecodable __consumer_offsets value");
                false
            }
        },
        (Key::Pending(producer_id, key), None) => {
            if let Some(pending) = state.pending.get_mut(&producer_id) {
                pending.remove(&key);
            }
            true
        }
        (Key::Pending(producer_id, key), Some(value)) => match decode_value(value) {
            Some(c) => {
                state.pending.entry(producer_id).or_default().insert(key, c);
                true
            }
            None => false,
        },
        (Key::ConsumerGroup(group, key), None) => {
            if let Some(records) = state.consumer_groups.get_mut(&group) {
                records.remove(&key);
                if records.is_empty() {
                    state.consumer_groups.remove(&group);
                }
            }
            true
        }
        (Key::ConsumerGroup(group, key), Some(value)) => {
            state
                .consumer_groups
                .entry(group)
                .or_default()
                .insert(key, value);
            true
        }
        (Key::TxnEnd(producer_id), Some(mut value)) if value.remaining() >= 3 => {
            let commit = value.get_u8() == 1;
            end_transaction(state, producer_id, value.get_i16(), commit);
            true
        }
        _ => false,
    }
}

/// Everything `partition` holds, replayed from its start (see
/// `internal_topic::replay_records`).
fn replay(partition: &PartitionLog, skipped: &Counter) -> anyhow::Result<Offsets> {
    let mut state = Offsets::default();
    replay_records(partition, skipped, |record| apply(&mut state, record))?;
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_round_trip() {
        let key = encode_key("group-1", "orders", 7);
        assert_eq!(
            decode_key(key),
            Some(Key::Committed(("group-1".into(), "orders".into(), 7)))
        );
        assert_eq!(
            decode_key(encode_pending_key(9, "g", "t", 2)),
            Some(Key::Pending(9, ("g".into(), "t".into(), 2)))
        );
        assert_eq!(decode_key(encode_txn_end_key(9)), Some(Key::TxnEnd(9)));
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

    #[test]
    fn a_transaction_end_applies_or_drops_its_pending_commits_and_fences_older_epochs() {
        let c = |offset| CommittedOffset {
            offset,
            leader_epoch: -1,
            metadata: None,
            commit_timestamp: 0,
        };
        let rec = |key: Bytes, value: Bytes| SimpleRecord {
            key: Some(key),
            value: Some(value),
            timestamp: 0,
        };
        let mut state = Offsets::default();
        assert!(apply(
            &mut state,
            &rec(encode_pending_key(7, "g", "t", 0), encode_value(&c(10)))
        ));
        assert!(apply(
            &mut state,
            &rec(encode_pending_key(8, "g", "t", 1), encode_value(&c(20)))
        ));
        assert!(
            state.committed.is_empty(),
            "pending commits are not visible"
        );
        assert!(apply(
            &mut state,
            &rec(encode_txn_end_key(7), encode_txn_end(true, 3))
        ));
        assert!(apply(
            &mut state,
            &rec(encode_txn_end_key(8), encode_txn_end(false, 1))
        ));
        assert_eq!(state.committed.len(), 1);
        assert_eq!(state.committed[&("g".into(), "t".into(), 0)].offset, 10);
        assert!(state.pending.is_empty());
        assert_eq!(state.ended_epochs[&7], 3);
    }

    /// What compaction leaves of two transactions of one producer id: the
    /// first (aborted) one's end record is replaced by the second's, and
    /// its pending record by the tombstone written at its end. Replaying
    /// that must not commit the aborted offset.
    #[test]
    fn a_compacted_log_does_not_replay_an_aborted_pending_commit() {
        let c = |offset| CommittedOffset {
            offset,
            leader_epoch: -1,
            metadata: None,
            commit_timestamp: 0,
        };
        let rec = |key: Bytes, value: Option<Bytes>| SimpleRecord {
            key: Some(key),
            value,
            timestamp: 0,
        };
        let (k1, k2) = (
            encode_pending_key(7, "g", "t", 0),
            encode_pending_key(7, "g", "t", 1),
        );
        // Kept after compaction, in log order: txn 1's tombstone for its
        // pending record, txn 2's pending record, its materialized commit,
        // its tombstone and its (commit) end record.
        let compacted = [
            rec(k1.clone(), None),
            rec(k2.clone(), Some(encode_value(&c(20)))),
            rec(encode_key("g", "t", 1), Some(encode_value(&c(20)))),
            rec(k2, None),
            rec(encode_txn_end_key(7), Some(encode_txn_end(true, 0))),
        ];
        let mut state = Offsets::default();
        // Without compaction the aborted pending record came first.
        assert!(apply(&mut state, &rec(k1, Some(encode_value(&c(10))))));
        for r in &compacted {
            assert!(apply(&mut state, r));
        }
        assert_eq!(state.committed.len(), 1, "{:?}", state.committed);
        assert_eq!(state.committed[&("g".into(), "t".into(), 1)].offset, 20);
        let mut replayed = Offsets::default();
        for r in &compacted {
            assert!(apply(&mut replayed, r));
        }
        assert_eq!(replayed.committed, state.committed);
        assert!(replayed.pending.values().all(BTreeMap::is_empty));
    }
}
