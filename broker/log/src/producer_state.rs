//! Idempotent-producer state of one partition: Kafka's ProducerStateManager.
//!
//! Owns: per producer id, the current producer epoch and the metadata of its
//! last `BATCHES_TO_RETAIN` batches; the verdict on incoming batches (in
//! sequence, a retried duplicate, or rejected: Kafka's `checkProducerEpoch`,
//! `checkSequence` and `findDuplicateBatch`); replaying stored batches at
//! open and batches a leader replicated; rewinding after a truncation
//! (submodule `rewind`); and the snapshot encoding.
//! Must not: do I/O or lock. The partition calls `check_append` under the
//! lock that assigns offsets and `commit`s the update only after the bytes
//! are written, so a failed write leaves the state untouched.

use std::collections::{HashMap, VecDeque};
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
}

impl ProducerBatch {
    /// The batch described by `h`, once stored at `base_offset`.
    pub(crate) fn from_header(h: &BatchHeader, base_offset: i64) -> Self {
        Self {
            producer_id: h.producer_id,
            producer_epoch: h.producer_epoch,
            base_sequence: h.base_sequence,
            base_offset,
            last_offset_delta: h.last_offset_delta,
            max_timestamp: h.max_timestamp,
            is_control: h.is_control(),
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
}

impl ProducerStateEntry {
    fn new(epoch: i16) -> Self {
        Self {
            epoch,
            batches: VecDeque::with_capacity(BATCHES_TO_RETAIN),
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

    /// Kafka's `addBatch` (control batches only move the epoch).
    fn apply(&mut self, batch: &ProducerBatch) {
        self.update_epoch(batch.producer_epoch);
        if batch.is_control {
            return;
        }
        if self.batches.len() == BATCHES_TO_RETAIN {
            self.batches.pop_front();
        }
        self.batches.push_back(batch.metadata());
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
}

/// Equal when they hold the same producer state (the usage clock aside).
impl PartialEq for ProducerStateManager {
    fn eq(&self, other: &Self) -> bool {
        self.producers == other.producers
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
    }

    /// Drops every producer id unused for longer than `ttl` as of `now`;
    /// returns how many.
    pub(crate) fn expire(&mut self, now: Instant, ttl: Duration) -> usize {
        let before = self.producers.len();
        let last_used = &mut self.last_used;
        self.producers.retain(|pid, _| {
            let used = *last_used.entry(*pid).or_insert(now);
            now.saturating_duration_since(used) <= ttl
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
                    entry.apply(&batch);
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
            self.producers.insert(pid, entry);
            self.last_used.insert(pid, now);
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
        self.producers
            .entry(batch.producer_id)
            .or_insert_with(|| ProducerStateEntry::new(batch.producer_epoch))
            .apply(batch);
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

/// Snapshot format version; bump on any layout change.
const SNAPSHOT_VERSION: u16 = 1;
const ENTRY_HEADER_BYTES: usize = 8 + 2 + 1;
const BATCH_BYTES: usize = 4 + 4 + 8 + 8 + 8;

impl ProducerStateManager {
    /// The state as bytes (big-endian): version u16, producer count u32,
    /// then per producer (by id) id i64, epoch i16, batch count u8 and per
    /// batch first_seq i32, last_seq i32, base_offset i64, last_offset i64,
    /// max_timestamp i64.
    pub(crate) fn encode_snapshot(&self) -> Vec<u8> {
        let mut ids: Vec<i64> = self.producers.keys().copied().collect();
        ids.sort_unstable();
        let mut out = Vec::with_capacity(
            6 + ids.len() * (ENTRY_HEADER_BYTES + BATCHES_TO_RETAIN * BATCH_BYTES),
        );
        out.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        // Producer ids fit u32: each took at least one batch of the log.
        out.extend_from_slice(&u32::try_from(ids.len()).unwrap_or(u32::MAX).to_be_bytes());
        for id in ids {
            let entry = &self.producers[&id];
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&entry.epoch.to_be_bytes());
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
        out
    }

    /// Decodes `encode_snapshot` output; any deviation is an error, so a
    /// damaged snapshot is never half-trusted.
    pub(crate) fn decode_snapshot(bytes: &[u8]) -> std::result::Result<Self, String> {
        let mut r = Reader { bytes, at: 0 };
        let version = u16::from_be_bytes(r.take()?);
        if version != SNAPSHOT_VERSION {
            return Err(format!("unsupported snapshot version {version}"));
        }
        let count = u32::from_be_bytes(r.take()?);
        let mut producers = HashMap::new();
        for _ in 0..count {
            let id = i64::from_be_bytes(r.take()?);
            let epoch = i16::from_be_bytes(r.take()?);
            let [n] = r.take()?;
            if id < 0 || usize::from(n) > BATCHES_TO_RETAIN {
                return Err(format!("invalid entry for producer {id} ({n} batches)"));
            }
            let mut entry = ProducerStateEntry::new(epoch);
            for _ in 0..n {
                entry.batches.push_back(BatchMetadata {
                    first_seq: i32::from_be_bytes(r.take()?),
                    last_seq: i32::from_be_bytes(r.take()?),
                    base_offset: i64::from_be_bytes(r.take()?),
                    last_offset: i64::from_be_bytes(r.take()?),
                    max_timestamp: i64::from_be_bytes(r.take()?),
                });
            }
            if producers.insert(id, entry).is_some() {
                return Err(format!("producer {id} appears twice"));
            }
        }
        if r.at != bytes.len() {
            return Err(format!("{} trailing bytes", bytes.len() - r.at));
        }
        Ok(Self {
            producers,
            last_used: HashMap::new(),
        })
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
