//! One ShareFetch loop per partition leader: a share session on that broker
//! (epochs 0, 1, 2, ...), records acquired and delivered to the verifier,
//! each batch's acknowledgements (ACCEPT, and GAP for acquired offsets
//! without a record) piggybacked on a later ShareFetch once a checkpoint
//! naming them is on disk, and at the end the session closed by a
//! ShareAcknowledge with epoch -1 carrying the last acknowledgements.
//!
//! Owns: the session epoch, the partitions in the session, the pending
//! acknowledgements and their outcome (`ShareTally::confirmed`). Must not:
//! decide the assignment (membership) or write reports (the manager's
//! checkpoints advance `Shared::durable`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use chronik_harness::verify::Observed;
use chronik_harness::{now_us, ENVELOPE_HEADER};
use kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch as AckReqBatch,
    ShareAcknowledgeRequest,
};
use kafka_protocol::messages::share_fetch_request::{
    FetchPartition, FetchTopic, ForgottenTopic, ShareFetchRequest,
};
use kafka_protocol::messages::share_fetch_response::PartitionData;
use kafka_protocol::messages::GroupId;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Record, RecordBatchDecoder};
use tokio::sync::watch;
use uuid::Uuid;

use super::acks::{ack_plan, batches, AckType, Pending, Taken};
use super::conn::Conn;
use super::state::{deliver, Shared};

/// How long a ShareFetch waits for records at the broker.
const MAX_WAIT_MS: i32 = 250;
/// Bytes and records asked per ShareFetch.
const MAX_BYTES: i32 = 8 * 1024 * 1024;
const MAX_RECORDS: i32 = 500;
/// A call's timeout beyond the broker's wait.
const CALL_SLACK: Duration = Duration::from_secs(10);
const BACKOFF: Duration = Duration::from_millis(500);
/// The longest the close waits for its last acknowledgements to be on disk.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

// Kafka error codes acted on.
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const UNKNOWN_TOPIC_ID: i16 = 100;
const FENCED_LEADER_EPOCH: i16 = 74;

type Key = (Uuid, i32);

/// One leader's loop; returns when `stop_fetch` is set and its session is
/// closed.
pub async fn leader_loop(
    shared: Arc<Shared>,
    node: i32,
    addr: String,
    want: watch::Receiver<Vec<Key>>,
) {
    let mut session = Session {
        shared: shared.clone(),
        node,
        addr,
        conn: None,
        epoch: 0,
        in_session: BTreeSet::new(),
        pending: Pending::default(),
    };
    loop {
        if shared.stop_fetch.load(Ordering::Relaxed) {
            break;
        }
        let desired: BTreeSet<Key> = want.borrow().iter().copied().collect();
        if desired.is_empty() && session.pending.is_empty() {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        if let Err(e) = session.round(&desired).await {
            tracing::warn!(node, error = %format!("{e:#}"), "share fetch failed; new session");
            session.reset_connection();
            tokio::time::sleep(BACKOFF).await;
        }
    }
    session.close().await;
}

struct Session {
    shared: Arc<Shared>,
    node: i32,
    addr: String,
    conn: Option<Conn>,
    epoch: i32,
    in_session: BTreeSet<Key>,
    pending: Pending,
}

impl Session {
    /// The connection was lost: acknowledgements in flight keep their
    /// unknown outcome (they stay `unconfirmed`); a new session starts.
    fn reset_connection(&mut self) {
        self.conn = None;
        self.reset_session();
    }

    /// The session is gone (or replaced): acknowledgements not yet sent can
    /// no longer be (their records were released), so they failed.
    fn reset_session(&mut self) {
        self.epoch = 0;
        self.in_session.clear();
        let dropped = self.pending.take_durable(u64::MAX);
        if dropped.is_empty() {
            return;
        }
        let mut st = self.shared.lock();
        for ((id, partition), taken) in dropped {
            if let Some(name) = st.names.get(&id).cloned() {
                st.share.confirmed(&name, partition, &taken.accepted, false);
            }
        }
        st.dirty = true;
    }

    async fn connect(&mut self) -> anyhow::Result<&mut Conn> {
        if self.conn.is_none() {
            let client_id = self.shared.member.client_id.clone();
            self.conn = Some(Conn::connect(&self.addr, &client_id).await?);
        }
        self.conn
            .as_mut()
            .ok_or_else(|| anyhow::anyhow!("no connection"))
    }

    /// One ShareFetch (or, with nothing to fetch, one ShareAcknowledge).
    async fn round(&mut self, desired: &BTreeSet<Key>) -> anyhow::Result<()> {
        let durable = self.shared.durable.load(Ordering::Relaxed);
        let taken = if self.epoch == 0 {
            BTreeMap::new()
        } else {
            self.pending.take_durable(durable)
        };
        if desired.is_empty() {
            // nothing assigned here any more: acknowledge what is held
            if taken.is_empty() {
                tokio::time::sleep(Duration::from_millis(50)).await;
                return Ok(());
            }
            return self.acknowledge(taken, self.epoch).await;
        }
        let names: BTreeSet<Key> = if self.epoch == 0 {
            desired.clone()
        } else {
            desired
                .difference(&self.in_session)
                .copied()
                .chain(taken.keys().copied())
                .collect()
        };
        let forgotten: Vec<Key> = self
            .in_session
            .iter()
            .filter(|k| !desired.contains(k) && !self.pending.has(k) && !taken.contains_key(k))
            .copied()
            .collect();
        let request = ShareFetchRequest::default()
            .with_group_id(Some(GroupId(StrBytes::from_string(
                self.shared.member.group.clone(),
            ))))
            .with_member_id(Some(StrBytes::from_string(
                self.shared.member.member_id.clone(),
            )))
            .with_share_session_epoch(self.epoch)
            .with_max_wait_ms(MAX_WAIT_MS)
            .with_min_bytes(1)
            .with_max_bytes(MAX_BYTES)
            .with_max_records(MAX_RECORDS)
            .with_batch_size(MAX_RECORDS)
            .with_topics(fetch_topics(&names, &taken))
            .with_forgotten_topics_data(forgotten_topics(&forgotten));
        let timeout = Duration::from_millis(MAX_WAIT_MS as u64) + CALL_SLACK;
        let conn = self.connect().await?;
        let response = match conn.call(&request, 1, timeout).await {
            Ok(r) => r,
            Err(e) => {
                // outcome of `taken` unknown: they stay unconfirmed
                return Err(e);
            }
        };
        if response.error_code != 0 {
            self.session_error(response.error_code, taken);
            return Ok(());
        }
        self.epoch = next_epoch(self.epoch);
        for k in &names {
            self.in_session.insert(*k);
        }
        for k in &forgotten {
            self.in_session.remove(k);
        }
        let mut answered: Vec<(Uuid, PartitionData)> = Vec::new();
        for t in response.responses {
            for p in t.partitions {
                answered.push((t.topic_id, p));
            }
        }
        self.absorb(answered, taken);
        Ok(())
    }

    /// A top-level error: the session is unusable; `taken` was not applied
    /// (the broker checks the session before the acknowledgements).
    fn session_error(&mut self, code: i16, taken: BTreeMap<Key, Taken>) {
        tracing::warn!(
            node = self.node,
            code,
            epoch = self.epoch,
            "share session error; opening a new session"
        );
        let mut st = self.shared.lock();
        st.count_error(format!("share fetch error {code}"));
        for ((id, partition), t) in taken {
            if let Some(name) = st.names.get(&id).cloned() {
                st.share.confirmed(&name, partition, &t.accepted, false);
            }
        }
        st.dirty = true;
        drop(st);
        self.reset_session();
    }

    /// A ShareFetch answer: acknowledgement outcomes, then the records.
    fn absorb(&mut self, answered: Vec<(Uuid, PartitionData)>, mut taken: BTreeMap<Key, Taken>) {
        let shared = self.shared.clone();
        let mut st = shared.lock();
        let generation = st.generation;
        let st = &mut *st;
        for (id, p) in answered {
            let key = (id, p.partition_index);
            let Some(name) = st.names.get(&id).cloned() else {
                st.count_error("unknown topic id in answer".into());
                shared.refresh_metadata.store(true, Ordering::Relaxed);
                continue;
            };
            if let Some(t) = taken.remove(&key) {
                let ok = p.acknowledge_error_code == 0;
                if !ok {
                    st.count_error(format!("acknowledge error {}", p.acknowledge_error_code));
                }
                st.share
                    .confirmed(&name, p.partition_index, &t.accepted, ok);
                st.dirty = true;
            }
            if p.error_code != 0 {
                st.count_error(format!("partition error {}", p.error_code));
                if matches!(
                    p.error_code,
                    NOT_LEADER_OR_FOLLOWER
                        | UNKNOWN_TOPIC_OR_PARTITION
                        | UNKNOWN_TOPIC_ID
                        | FENCED_LEADER_EPOCH
                ) {
                    shared.refresh_metadata.store(true, Ordering::Relaxed);
                }
                continue;
            }
            if p.acquired_records.is_empty() {
                continue;
            }
            let records = match decode(p.records) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(topic = %name, partition = p.partition_index, error = %e, "undecodable records; not acknowledged (redelivered after the lock)");
                    st.count_error("undecodable records".into());
                    continue;
                }
            };
            let delivered: Vec<i64> = records.iter().map(|r| r.offset).collect();
            let consumed_at_us = now_us();
            for a in &p.acquired_records {
                let count = u16::try_from(a.delivery_count.max(1)).unwrap_or(u16::MAX);
                for (offset, t) in ack_plan(&[(a.first_offset, a.last_offset)], &delivered) {
                    match t {
                        AckType::Accept => {
                            let Ok(i) = delivered.binary_search(&offset) else {
                                continue;
                            };
                            let r = &records[i];
                            let envelope = r
                                .headers
                                .iter()
                                .find(|(k, _)| k.as_str() == ENVELOPE_HEADER)
                                .and_then(|(_, v)| v.as_deref());
                            let observed = Observed {
                                offset,
                                envelope,
                                value: r.value.as_deref().unwrap_or(&[]),
                                consumed_at_us,
                            };
                            deliver(
                                &mut st.verifier,
                                &mut st.share,
                                (&name, p.partition_index),
                                &observed,
                                count,
                            );
                        }
                        AckType::Gap => {
                            st.share.gap(
                                &name,
                                p.partition_index,
                                u64::try_from(offset).unwrap_or(0),
                            );
                        }
                    }
                    self.pending.push(key, generation, offset, t);
                }
            }
            let now = Instant::now();
            st.first_delivery.get_or_insert(now);
            st.last_delivery = Some(now);
            st.dirty = true;
        }
    }

    /// A ShareAcknowledge at `epoch` (-1 closes the session).
    async fn acknowledge(&mut self, taken: BTreeMap<Key, Taken>, epoch: i32) -> anyhow::Result<()> {
        let mut topics: BTreeMap<Uuid, Vec<AcknowledgePartition>> = BTreeMap::new();
        for ((id, partition), t) in &taken {
            topics.entry(*id).or_default().push(
                AcknowledgePartition::default()
                    .with_partition_index(*partition)
                    .with_acknowledgement_batches(
                        batches(&t.acks)
                            .into_iter()
                            .map(|b| {
                                AckReqBatch::default()
                                    .with_first_offset(b.first_offset)
                                    .with_last_offset(b.last_offset)
                                    .with_acknowledge_types(b.acknowledge_types)
                            })
                            .collect(),
                    ),
            );
        }
        let request = ShareAcknowledgeRequest::default()
            .with_group_id(Some(GroupId(StrBytes::from_string(
                self.shared.member.group.clone(),
            ))))
            .with_member_id(Some(StrBytes::from_string(
                self.shared.member.member_id.clone(),
            )))
            .with_share_session_epoch(epoch)
            .with_topics(
                topics
                    .into_iter()
                    .map(|(id, partitions)| {
                        AcknowledgeTopic::default()
                            .with_topic_id(id)
                            .with_partitions(partitions)
                    })
                    .collect(),
            );
        let conn = self.connect().await?;
        let response = conn.call(&request, 1, CALL_SLACK).await?;
        if response.error_code != 0 {
            self.session_error(response.error_code, taken);
            return Ok(());
        }
        if epoch != -1 {
            self.epoch = next_epoch(self.epoch);
        }
        let mut taken = taken;
        let mut st = self.shared.lock();
        for t in response.responses {
            for p in t.partitions {
                let key = (t.topic_id, p.partition_index);
                let (Some(done), Some(name)) =
                    (taken.remove(&key), st.names.get(&t.topic_id).cloned())
                else {
                    continue;
                };
                if p.error_code != 0 {
                    st.count_error(format!("acknowledge error {}", p.error_code));
                }
                st.share
                    .confirmed(&name, p.partition_index, &done.accepted, p.error_code == 0);
            }
        }
        st.dirty = true;
        Ok(())
    }

    /// Closes the session: waits (bounded) until the manager's checkpoint
    /// covers every held acknowledgement, then sends them with epoch -1.
    async fn close(&mut self) {
        if self.epoch == 0 || self.conn.is_none() {
            if !self.pending.is_empty() {
                tracing::warn!(node = self.node, "closing without a session: held acknowledgements dropped (their records are redelivered)");
            }
            return;
        }
        let deadline = Instant::now() + CLOSE_WAIT;
        while let Some(oldest) = self.pending.oldest() {
            if oldest <= self.shared.durable.load(Ordering::Relaxed) || Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let durable = self.shared.durable.load(Ordering::Relaxed);
        let taken = self.pending.take_durable(durable);
        let n: usize = taken.values().map(|t| t.acks.len()).sum();
        match self.acknowledge(taken, -1).await {
            Ok(()) => tracing::info!(
                node = self.node,
                acknowledgements = n,
                "share session closed"
            ),
            Err(e) => {
                tracing::warn!(node = self.node, error = %format!("{e:#}"), "closing the share session failed")
            }
        }
    }
}

fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

/// The request's topics: every partition in `names`, with the
/// acknowledgements taken for it.
fn fetch_topics(names: &BTreeSet<Key>, taken: &BTreeMap<Key, Taken>) -> Vec<FetchTopic> {
    let mut topics: BTreeMap<Uuid, Vec<FetchPartition>> = BTreeMap::new();
    for key in names {
        let acks = taken.get(key).map(|t| batches(&t.acks)).unwrap_or_default();
        topics.entry(key.0).or_default().push(
            FetchPartition::default()
                .with_partition_index(key.1)
                .with_partition_max_bytes(MAX_BYTES)
                .with_acknowledgement_batches(acks),
        );
    }
    topics
        .into_iter()
        .map(|(id, partitions)| {
            FetchTopic::default()
                .with_topic_id(id)
                .with_partitions(partitions)
        })
        .collect()
}

fn forgotten_topics(forgotten: &[Key]) -> Vec<ForgottenTopic> {
    let mut topics: BTreeMap<Uuid, Vec<i32>> = BTreeMap::new();
    for (id, p) in forgotten {
        topics.entry(*id).or_default().push(*p);
    }
    topics
        .into_iter()
        .map(|(id, partitions)| {
            ForgottenTopic::default()
                .with_topic_id(id)
                .with_partitions(partitions)
        })
        .collect()
}

/// The data records of a ShareFetch answer (control records left out:
/// their offsets are acknowledged as GAP), sorted by offset.
fn decode(records: Option<Bytes>) -> anyhow::Result<Vec<Record>> {
    let Some(mut bytes) = records else {
        return Ok(Vec::new());
    };
    let mut out: Vec<Record> = Vec::new();
    for set in RecordBatchDecoder::decode_all(&mut bytes)? {
        out.extend(set.records.into_iter().filter(|r| !r.control));
    }
    out.sort_by_key(|r| r.offset);
    out.dedup_by_key(|r| r.offset);
    Ok(out)
}
