//! Idempotent and transactional producer state of one partition: Kafka's
//! ProducerStateManager.
//!
//! Owns: per producer id, the current producer epoch, the metadata of its
//! last `BATCHES_TO_RETAIN` batches and the first offset of its open
//! transaction; the verdict on incoming batches (in sequence, a retried
//! duplicate, or rejected: Kafka's `checkProducerEpoch`, `checkSequence`,
//! `findDuplicateBatch`, and a non-transactional batch inside an open
//! transaction); the partition's open transactions (whose smallest first
//! offset bounds the last stable offset) and aborted transactions (what a
//! read_committed fetch must be told to drop), a marker (control batch)
//! closing a producer's transaction; replaying stored batches at open and
//! batches a leader replicated; rewinding after a truncation (submodule
//! `rewind`); and the snapshot encoding. Aborted transactions are dropped
//! once retention removes the records they cover; a client can add entries
//! only by writing log bytes, as with Kafka's transaction index.
//! Must not: do I/O or lock. The partition calls `check_append` under the
//! lock that assigns offsets and `commit`s the update only after the bytes
//! are written, so a failed write leaves the state untouched.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

use chronik_protocol::record_batch::BatchHeader;

use crate::error::{Error, Result};

/// Kafka's `ProducerStateEntry.NUM_BATCHES_TO_RETAIN`: a producer has at most
/// five requests in flight, so a retry is always of one of its last five.
pub(crate) const BATCHES_TO_RETAIN: usize = 5;

/// Kafka's `RecordBatch.NO_SEQUENCE`.
const NO_SEQUENCE: i32 = -1;

/// What the state machine needs from one batch, with its offsets assigned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProducerBatch {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub base_offset: i64,
    pub last_offset_delta: i32,
    pub max_timestamp: i64,
    pub is_control: bool,
    pub is_transactional: bool,
    /// For a transaction marker: COMMIT (true) or ABORT (false); None for
    /// data batches and control batches of another type.
    pub control: Option<bool>,
}

/// A marker's commit flag from its control record type.
pub(crate) fn marker_kind(control_type: Option<i16>) -> Option<bool> {
    match control_type {
        Some(chronik_protocol::records::CONTROL_TYPE_COMMIT) => Some(true),
        Some(chronik_protocol::records::CONTROL_TYPE_ABORT) => Some(false),
        _ => None,
    }
}

impl ProducerBatch {
    /// The batch described by `h` (whose bytes are `bytes`, the whole
    /// batch), once stored at `base_offset`.
    pub(crate) fn from_header(h: &BatchHeader, bytes: &[u8], base_offset: i64) -> Self {
        let control = if h.is_control() {
            marker_kind(chronik_protocol::records::control_record_type(bytes))
        } else {
            None
        };
        Self {
            producer_id: h.producer_id,
            producer_epoch: h.producer_epoch,
            base_sequence: h.base_sequence,
            base_offset,
            last_offset_delta: h.last_offset_delta,
            max_timestamp: h.max_timestamp,
            is_control: h.is_control(),
            is_transactional: h.is_transactional(),
            control,
        }
    }

    fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta)
    }

    /// Kafka's `DefaultRecordBatch.lastSequence`: sequences wrap from
    /// i32::MAX to 0. Both operands are non-negative, so their wrapping sum
    /// taken modulo 2^31 is exactly the low 31 bits.
    fn last_sequence(&self) -> i32 {
        if self.base_sequence < 0 {
            return NO_SEQUENCE;
        }
        self.base_sequence
            .wrapping_add(self.last_offset_delta.max(0))
            & i32::MAX
    }

    fn metadata(&self) -> BatchMetadata {
        BatchMetadata {
            first_seq: self.base_sequence,
            last_seq: self.last_sequence(),
            base_offset: self.base_offset,
            last_offset: self.last_offset(),
            max_timestamp: self.max_timestamp,
        }
    }
}

/// The sequence that must follow `last_seq` (0 after i32::MAX, and after
/// `NO_SEQUENCE`: an entry with no batches yet).
fn next_sequence(last_seq: i32) -> i32 {
    if last_seq == i32::MAX {
        0
    } else {
        last_seq + 1
    }
}

/// Kafka's `BatchMetadata`: one appended batch of a producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchMetadata {
    pub first_seq: i32,
    pub last_seq: i32,
    pub base_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
}

/// Kafka's `ProducerStateEntry`. Invariant: at most `BATCHES_TO_RETAIN`
/// batches, oldest first, all written under `epoch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProducerStateEntry {
    epoch: i16,
    batches: VecDeque<BatchMetadata>,
    /// The first offset of the producer's open transaction here.
    txn_first_offset: Option<i64>,
}

/// A transaction a marker ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CompletedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    /// The marker's offset.
    pub last_offset: i64,
    pub aborted: bool,
}

/// An aborted transaction: what a read_committed fetch of an overlapping
/// range is told, so the client drops the producer's records from
/// `first_offset` up to the marker at `last_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
}

impl ProducerStateEntry {
    fn new(epoch: i16) -> Self {
        Self {
            epoch,
            batches: VecDeque::with_capacity(BATCHES_TO_RETAIN),
            txn_first_offset: None,
        }
    }

    fn last_seq(&self) -> i32 {
        self.batches.back().map_or(NO_SEQUENCE, |b| b.last_seq)
    }

    /// Kafka's `batchWithSequenceRange`, for a batch of the current epoch.
    fn find_duplicate(&self, batch: &ProducerBatch) -> Option<BatchMetadata> {
        let last_seq = batch.last_sequence();
        self.batches
            .iter()
            .find(|m| m.first_seq == batch.base_sequence && m.last_seq == last_seq)
            .copied()
    }

    /// Kafka's `maybeUpdateProducerEpoch`: a new epoch starts a new history.
    fn update_epoch(&mut self, epoch: i16) {
        if epoch != self.epoch {
            self.epoch = epoch;
            self.batches.clear();
        }
    }

    /// Kafka's `addBatch`: control batches move the epoch, and a marker
    /// ends the open transaction (returned); a transactional batch opens
    /// one if none is open.
    fn apply(&mut self, batch: &ProducerBatch) -> Option<CompletedTxn> {
        self.update_epoch(batch.producer_epoch);
        if batch.is_control {
            let commit = batch.control?;
            let first_offset = self.txn_first_offset.take()?;
            return Some(CompletedTxn {
                producer_id: batch.producer_id,
                first_offset,
                last_offset: batch.base_offset,
                aborted: !commit,
            });
        }
        if batch.is_transactional && self.txn_first_offset.is_none() {
            self.txn_first_offset = Some(batch.base_offset);
        }
        if self.batches.len() == BATCHES_TO_RETAIN {
            self.batches.pop_front();
        }
        self.batches.push_back(batch.metadata());
        None
    }
}

/// The outcome of `check_append` for a whole partition request.
#[derive(Debug)]
pub(crate) enum AppendCheck {
    /// Write the batches, then `commit` the update.
    Append(ProducerUpdate),
    /// Every batch is a retry of one already in the log: write nothing and
    /// answer with the original offsets (first batch's base offset, last
    /// batch's last offset).
    Duplicate { base_offset: i64, last_offset: i64 },
}

/// The entries a request changes, applied by `commit` once it is written.
#[derive(Debug, Default)]
pub(crate) struct ProducerUpdate {
    entries: Vec<(i64, ProducerStateEntry)>,
    completed: Vec<CompletedTxn>,
}

impl ProducerUpdate {
    fn get(&self, producer_id: i64) -> Option<&ProducerStateEntry> {
        self.entries
            .iter()
            .find(|(id, _)| *id == producer_id)
            .map(|(_, e)| e)
    }

    fn put(&mut self, producer_id: i64, entry: ProducerStateEntry) {
        match self.entries.iter_mut().find(|(id, _)| *id == producer_id) {
            Some(slot) => slot.1 = entry,
            None => self.entries.push((producer_id, entry)),
        }
    }
}

enum Verdict {
    Accept,
    Duplicate(BatchMetadata),
}

/// Producer state of one partition, keyed by producer id. An id not used
/// (appended or replicated) for producer.id.expiration.ms is dropped by
/// `expire`, as Kafka does, so clients minting producer ids cannot grow it
/// without bound; a producer whose batches retention deleted keeps its
/// entry until then.
#[derive(Debug, Default, Clone)]
pub(crate) struct ProducerStateManager {
    producers: HashMap<i64, ProducerStateEntry>,
    /// When each producer id was last used in this process (ids loaded at
    /// open count as used then).
    last_used: HashMap<i64, Instant>,
    /// (first offset, producer id) of every open transaction.
    ongoing: BTreeSet<(i64, i64)>,
    /// Aborted transactions, in marker (last offset) order.
    aborted: Vec<AbortedTxn>,
}

/// Equal when they hold the same producer state (the usage clock aside).
impl PartialEq for ProducerStateManager {
    fn eq(&self, other: &Self) -> bool {
        self.producers == other.producers && self.aborted == other.aborted
    }
}
impl Eq for ProducerStateManager {}

impl ProducerStateManager {
    /// Producer ids with state in this partition.
    pub(crate) fn len(&self) -> usize {
        self.producers.len()
    }

    pub(crate) fn clear(&mut self) {
        self.producers.clear();
        self.last_used.clear();
        self.ongoing.clear();
        self.aborted.clear();
    }

    /// The first offset of the oldest open transaction (Kafka's first
    /// unstable offset).
    pub(crate) fn first_unstable_offset(&self) -> Option<i64> {
        self.ongoing.first().map(|(offset, _)| *offset)
    }

    /// Whether `producer_id` has a transaction open here.
    pub(crate) fn has_open_transaction(&self, producer_id: i64) -> bool {
        self.producers
            .get(&producer_id)
            .is_some_and(|e| e.txn_first_offset.is_some())
    }

    /// Whether any transaction ever touched this state (open or aborted):
    /// a truncation then rebuilds it by a full replay.
    pub(crate) fn has_transactions(&self) -> bool {
        !self.ongoing.is_empty() || !self.aborted.is_empty()
    }

    /// Aborted transactions overlapping offsets `from..upto`.
    pub(crate) fn aborted_transactions(&self, from: i64, upto: i64) -> Vec<AbortedTxn> {
        // Sorted by last offset: skip those ending before `from`.
        let start = self.aborted.partition_point(|a| a.last_offset < from);
        let mut found: Vec<AbortedTxn> = self.aborted[start..]
            .iter()
            .filter(|a| a.first_offset < upto)
            .copied()
            .collect();
        found.sort_by_key(|a| a.first_offset);
        found
    }

    /// Each producer's last batch, by its last offset: the log cleaner keeps
    /// that batch (Kafka does, so idempotence state survives a restart).
    pub(crate) fn last_batch_offsets(&self) -> HashMap<i64, i64> {
        self.producers
            .iter()
            .filter_map(|(&id, e)| e.batches.back().map(|b| (id, b.last_offset)))
            .collect()
    }

    /// Drops aborted transactions wholly below `log_start_offset`.
    pub(crate) fn prune_aborted(&mut self, log_start_offset: i64) {
        let gone = self
            .aborted
            .partition_point(|a| a.last_offset < log_start_offset);
        self.aborted.drain(..gone);
    }

    /// Drops the aborted transactions that ended at these (producer id,
    /// marker offset): the log cleaner removed their markers (and every
    /// batch of theirs before).
    pub(crate) fn forget_aborted(&mut self, markers: &[(i64, i64)]) {
        if !markers.is_empty() {
            self.aborted
                .retain(|a| !markers.contains(&(a.producer_id, a.last_offset)));
        }
    }

    /// Installs `entry` for `pid`, keeping the open-transaction index in
    /// step, and records what `completed` ended.
    fn install(&mut self, pid: i64, entry: ProducerStateEntry) {
        if let Some(old) = self.producers.get(&pid).and_then(|e| e.txn_first_offset) {
            self.ongoing.remove(&(old, pid));
        }
        if let Some(first) = entry.txn_first_offset {
            self.ongoing.insert((first, pid));
        }
        self.producers.insert(pid, entry);
    }

    fn record_completed(&mut self, completed: CompletedTxn) {
        if completed.aborted {
            self.aborted.push(AbortedTxn {
                producer_id: completed.producer_id,
                first_offset: completed.first_offset,
                last_offset: completed.last_offset,
            });
        }
    }

    /// Drops every producer id unused for longer than `ttl` as of `now`;
    /// returns how many.
    pub(crate) fn expire(&mut self, now: Instant, ttl: Duration) -> usize {
        let before = self.producers.len();
        let last_used = &mut self.last_used;
        // A producer with an open transaction is kept: its transaction
        // still bounds the last stable offset until a marker ends it.
        self.producers.retain(|pid, entry| {
            let used = *last_used.entry(*pid).or_insert(now);
            entry.txn_first_offset.is_some() || now.saturating_duration_since(used) <= ttl
        });
        last_used.retain(|pid, _| self.producers.contains_key(pid));
        before - self.producers.len()
    }

    /// Validates one request's batches, in order and as if each earlier one
    /// were already appended. Batches without a producer id pass untouched.
    /// A rejected batch rejects the whole request. Duplicates are answered
    /// only when every batch is one; a request mixing retried and new
    /// batches is refused as out of order (Kafka never sees one: produce
    /// v3+ carries a single batch per partition, and a client retries whole
    /// requests), because appending part of it would break the request's
    /// all-or-nothing offsets and answering it whole would lose data.
    pub(crate) fn check_append(
        &self,
        batches: impl IntoIterator<Item = ProducerBatch>,
    ) -> Result<AppendCheck> {
        let mut update = ProducerUpdate::default();
        let mut duplicates: Option<(i64, i64)> = None;
        let mut first_duplicate_error = None;
        let mut new_batches = 0usize;
        for batch in batches {
            if batch.producer_id < 0 {
                new_batches += 1;
                continue;
            }
            let pid = batch.producer_id;
            let current = update.get(pid).or_else(|| self.producers.get(&pid));
            match check_batch(current, &batch)? {
                Verdict::Duplicate(original) => {
                    let range = duplicates.get_or_insert((original.base_offset, 0));
                    range.1 = original.last_offset;
                    first_duplicate_error.get_or_insert(Error::OutOfOrderSequence {
                        producer_id: pid,
                        expected: next_sequence(current.map_or(NO_SEQUENCE, |e| e.last_seq())),
                        got: batch.base_sequence,
                    });
                }
                Verdict::Accept => {
                    let mut entry = current
                        .cloned()
                        .unwrap_or_else(|| ProducerStateEntry::new(batch.producer_epoch));
                    if let Some(completed) = entry.apply(&batch) {
                        update.completed.push(completed);
                    }
                    update.put(pid, entry);
                    new_batches += 1;
                }
            }
        }
        match (duplicates, first_duplicate_error) {
            (Some((base_offset, last_offset)), _) if new_batches == 0 => {
                Ok(AppendCheck::Duplicate {
                    base_offset,
                    last_offset,
                })
            }
            (_, Some(mixed)) => Err(mixed),
            _ => Ok(AppendCheck::Append(update)),
        }
    }

    /// Applies what `check_append` accepted, once the batches are written.
    pub(crate) fn commit(&mut self, update: ProducerUpdate) {
        let now = Instant::now();
        for (pid, entry) in update.entries {
            self.install(pid, entry);
            self.last_used.insert(pid, now);
        }
        for completed in update.completed {
            self.record_completed(completed);
        }
    }

    /// Takes a stored batch as the log has it (at open, or replicated from
    /// a leader, which validated it): no validation; a new epoch or
    /// sequence simply replaces what was known (Kafka's follower path).
    pub(crate) fn replay(&mut self, batch: &ProducerBatch) {
        if batch.producer_id < 0 {
            return;
        }
        self.last_used.insert(batch.producer_id, Instant::now());
        let mut entry = self
            .producers
            .get(&batch.producer_id)
            .cloned()
            .unwrap_or_else(|| ProducerStateEntry::new(batch.producer_epoch));
        let completed = entry.apply(batch);
        self.install(batch.producer_id, entry);
        if let Some(completed) = completed {
            self.record_completed(completed);
        }
    }
}

/// One batch against its producer's entry (`None`: an id this partition has
/// no state for, whose sequence cannot be verified and is accepted).
fn check_batch(current: Option<&ProducerStateEntry>, batch: &ProducerBatch) -> Result<Verdict> {
    let pid = batch.producer_id;
    if !batch.is_control && batch.base_sequence < 0 {
        return Err(Error::InvalidRecords(format!(
            "invalid sequence number {} in a batch of producer {pid}",
            batch.base_sequence
        )));
    }
    let Some(entry) = current else {
        return Ok(Verdict::Accept);
    };
    if batch.producer_epoch < entry.epoch {
        return Err(Error::InvalidProducerEpoch {
            producer_id: pid,
            epoch: batch.producer_epoch,
            current_epoch: entry.epoch,
        });
    }
    // Transaction markers carry no sequence: Kafka checks only their epoch.
    if batch.is_control {
        return Ok(Verdict::Accept);
    }
    if !batch.is_transactional && entry.txn_first_offset.is_some() {
        return Err(Error::InvalidTxnState {
            producer_id: pid,
            reason: "a non-transactional batch inside the producer's open transaction".into(),
        });
    }
    let expected = if batch.producer_epoch > entry.epoch {
        0
    } else if let Some(original) = entry.find_duplicate(batch) {
        return Ok(Verdict::Duplicate(original));
    } else {
        next_sequence(entry.last_seq())
    };
    if batch.base_sequence == expected {
        Ok(Verdict::Accept)
    } else {
        Err(Error::OutOfOrderSequence {
            producer_id: pid,
            expected,
            got: batch.base_sequence,
        })
    }
}

/// Snapshot format version; bump on any layout change. Version 1 (before
/// transactions) is still read: it has no open transactions and no
/// aborted ones.
const SNAPSHOT_VERSION: u16 = 2;
const ENTRY_HEADER_BYTES: usize = 8 + 2 + 8 + 1;
const BATCH_BYTES: usize = 4 + 4 + 8 + 8 + 8;
const ABORTED_BYTES: usize = 8 + 8 + 8;

impl ProducerStateManager {
    /// The state as bytes (big-endian): version u16, producer count u32,
    /// then per producer (by id) id i64, epoch i16, open transaction's
    /// first offset i64 (-1: none), batch count u8 and per batch first_seq
    /// i32, last_seq i32, base_offset i64, last_offset i64, max_timestamp
    /// i64; then the aborted transactions: count u32, each producer id i64,
    /// first offset i64, last offset i64.
    pub(crate) fn encode_snapshot(&self) -> Vec<u8> {
        let mut ids: Vec<i64> = self.producers.keys().copied().collect();
        ids.sort_unstable();
        let mut out = Vec::with_capacity(
            10 + ids.len() * (ENTRY_HEADER_BYTES + BATCHES_TO_RETAIN * BATCH_BYTES)
                + self.aborted.len() * ABORTED_BYTES,
        );
        out.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        // Producer ids fit u32: each took at least one batch of the log.
        out.extend_from_slice(&u32::try_from(ids.len()).unwrap_or(u32::MAX).to_be_bytes());
        for id in ids {
            let entry = &self.producers[&id];
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&entry.epoch.to_be_bytes());
            out.extend_from_slice(&entry.txn_first_offset.unwrap_or(-1).to_be_bytes());
            // At most BATCHES_TO_RETAIN (the entry's invariant).
            out.push(entry.batches.len() as u8);
            for b in &entry.batches {
                out.extend_from_slice(&b.first_seq.to_be_bytes());
                out.extend_from_slice(&b.last_seq.to_be_bytes());
                out.extend_from_slice(&b.base_offset.to_be_bytes());
                out.extend_from_slice(&b.last_offset.to_be_bytes());
                out.extend_from_slice(&b.max_timestamp.to_be_bytes());
            }
        }
        // Each aborted transaction ended with a marker of the log.
        out.extend_from_slice(
            &u32::try_from(self.aborted.len())
                .unwrap_or(u32::MAX)
                .to_be_bytes(),
        );
        for a in &self.aborted {
            out.extend_from_slice(&a.producer_id.to_be_bytes());
            out.extend_from_slice(&a.first_offset.to_be_bytes());
            out.extend_from_slice(&a.last_offset.to_be_bytes());
        }
        out
    }

    /// Decodes `encode_snapshot` output (or a version 1 snapshot); any
    /// deviation is an error, so a damaged snapshot is never half-trusted.
    pub(crate) fn decode_snapshot(bytes: &[u8]) -> std::result::Result<Self, String> {
        let mut r = Reader { bytes, at: 0 };
        let version = u16::from_be_bytes(r.take()?);
        if version != 1 && version != SNAPSHOT_VERSION {
            return Err(format!("unsupported snapshot version {version}"));
        }
        let count = u32::from_be_bytes(r.take()?);
        let mut state = Self::default();
        for _ in 0..count {
            let id = i64::from_be_bytes(r.take()?);
            let epoch = i16::from_be_bytes(r.take()?);
            let txn_first = if version >= 2 {
                i64::from_be_bytes(r.take()?)
            } else {
                -1
            };
            let [n] = r.take()?;
            if id < 0 || usize::from(n) > BATCHES_TO_RETAIN {
                return Err(format!("invalid entry for producer {id} ({n} batches)"));
            }
            let mut entry = ProducerStateEntry::new(epoch);
            entry.txn_first_offset = (txn_first >= 0).then_some(txn_first);
            for _ in 0..n {
                entry.batches.push_back(BatchMetadata {
                    first_seq: i32::from_be_bytes(r.take()?),
                    last_seq: i32::from_be_bytes(r.take()?),
                    base_offset: i64::from_be_bytes(r.take()?),
                    last_offset: i64::from_be_bytes(r.take()?),
                    max_timestamp: i64::from_be_bytes(r.take()?),
                });
            }
            if state.producers.contains_key(&id) {
                return Err(format!("producer {id} appears twice"));
            }
            state.install(id, entry);
        }
        if version >= 2 {
            let aborted = u32::from_be_bytes(r.take()?);
            for _ in 0..aborted {
                let a = AbortedTxn {
                    producer_id: i64::from_be_bytes(r.take()?),
                    first_offset: i64::from_be_bytes(r.take()?),
                    last_offset: i64::from_be_bytes(r.take()?),
                };
                if state
                    .aborted
                    .last()
                    .is_some_and(|p| p.last_offset >= a.last_offset)
                {
                    return Err("aborted transactions out of order".into());
                }
                state.aborted.push(a);
            }
        }
        if r.at != bytes.len() {
            return Err(format!("{} trailing bytes", bytes.len() - r.at));
        }
        Ok(state)
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> std::result::Result<[u8; N], String> {
        let chunk = self
            .bytes
            .get(self.at..self.at + N)
            .ok_or_else(|| format!("snapshot ends at byte {}", self.bytes.len()))?;
        self.at += N;
        let mut out = [0u8; N];
        out.copy_from_slice(chunk);
        Ok(out)
    }
}

mod rewind;

#[cfg(test)]
mod tests;
