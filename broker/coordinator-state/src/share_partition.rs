//! A share-partition (KIP-932): one share group's view of one topic
//! partition, kept by that partition's leader — which offsets a member has
//! acquired, until when, how often each was delivered, and which are done.
//!
//! Owns: the share-partition start offset (SPSO: every offset below it is
//! done), the end offset (SPEO: the first offset never acquired), the state
//! of every offset between them (`RecordState`), acquisition with
//! `share.partition.max.record.locks` (the SPSO..SPEO window never exceeds
//! it), acquisition locks (`share.record.lock.duration.ms`) and their
//! expiry, acknowledgements (accept, release, reject, gap, renew) with
//! Kafka's checks, delivery counts with `share.delivery.count.limit` (a
//! record released at the limit is archived, never redelivered), and the
//! durable form (`ShareSnapshot`: what Kafka writes to
//! `__share_group_state`). Must not: read the log or a clock, or know the
//! wire format (the server's share-partition manager feeds it the batches
//! it read, the time and the requests).

use std::collections::BTreeMap;

use crate::Millis;

/// Kafka's share-partition record states (their ids are the durable form's
/// `delivery_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordState {
    Available,
    Acquired,
    Acknowledged,
    Archived,
}

impl RecordState {
    /// Kafka's RecordState id (AVAILABLE 0, ACQUIRED 1, ACKNOWLEDGED 2,
    /// ARCHIVED 4).
    pub fn id(self) -> i8 {
        match self {
            RecordState::Available => 0,
            RecordState::Acquired => 1,
            RecordState::Acknowledged => 2,
            RecordState::Archived => 4,
        }
    }

    pub fn from_id(id: i8) -> Option<RecordState> {
        match id {
            0 => Some(RecordState::Available),
            1 => Some(RecordState::Acquired),
            2 => Some(RecordState::Acknowledged),
            4 => Some(RecordState::Archived),
            _ => None,
        }
    }

    fn is_done(self) -> bool {
        matches!(self, RecordState::Acknowledged | RecordState::Archived)
    }
}

/// Kafka's acknowledge types (ShareFetch / ShareAcknowledge
/// `AcknowledgeTypes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckType {
    Gap,
    Accept,
    Release,
    Reject,
    /// KIP-1222: extend the acquisition lock (ShareFetch / ShareAcknowledge v2).
    Renew,
}

impl AckType {
    pub fn from_wire(value: i8) -> Option<AckType> {
        match value {
            0 => Some(AckType::Gap),
            1 => Some(AckType::Accept),
            2 => Some(AckType::Release),
            3 => Some(AckType::Reject),
            4 => Some(AckType::Renew),
            _ => None,
        }
    }
}

/// The group's share settings, as the partition uses them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareConfig {
    /// `share.record.lock.duration.ms`.
    pub lock_duration_ms: Millis,
    /// `share.delivery.count.limit`.
    pub delivery_count_limit: u16,
    /// `share.partition.max.record.locks`.
    pub max_record_locks: i64,
}

impl Default for ShareConfig {
    /// Kafka 4.3's broker defaults.
    fn default() -> ShareConfig {
        ShareConfig {
            lock_duration_ms: 30_000,
            delivery_count_limit: 5,
            max_record_locks: 2000,
        }
    }
}

/// One offset between SPSO and SPEO.
#[derive(Debug, Clone, PartialEq, Eq)]
struct InFlight {
    state: RecordState,
    delivery_count: u16,
    /// The member holding it while Acquired.
    owner: Option<String>,
    lock_until: Millis,
}

/// A run of acquired offsets handed to a member in one ShareFetch, with
/// its delivery count (ShareFetch's `AcquiredRecords`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquired {
    pub first_offset: i64,
    pub last_offset: i64,
    pub delivery_count: u16,
}

/// How ShareFetch may exceed `max_records` (v2 `ShareAcquireMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcquireMode {
    /// 0: whole fetched batches, past max_records if a batch crosses it.
    BatchOptimized,
    /// 1: never more than max_records.
    RecordLimit,
}

/// One acknowledgement batch of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckBatch {
    pub first_offset: i64,
    pub last_offset: i64,
    /// One type for the whole range, or one per offset.
    pub types: Vec<AckType>,
}

/// Why an acknowledgement was refused (Kafka's error for it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AckError {
    /// INVALID_REQUEST: malformed batches (first > last, type count
    /// mismatch, overlapping or unordered batches).
    InvalidRequest(String),
    /// INVALID_RECORD_STATE: an offset not acquired by this member.
    InvalidRecordState(String),
}

/// A contiguous run of offsets with one state and delivery count, as
/// persisted (Kafka's share-group state batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateBatch {
    pub first_offset: i64,
    pub last_offset: i64,
    pub state: RecordState,
    pub delivery_count: u16,
}

/// The durable form of a share-partition (`__share_group_state`'s
/// ShareSnapshot): acquired records are written as available, with the
/// delivery count they reached.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShareSnapshot {
    pub state_epoch: i32,
    pub start_offset: i64,
    pub batches: Vec<StateBatch>,
}

/// Most offsets a single snapshot may describe (Kafka's max record locks
/// ceiling, `group.share.max.partition.max.record.locks`): a stored or
/// received snapshot past it is refused.
pub const MAX_SNAPSHOT_OFFSETS: i64 = 4000;

/// One share group's state of one partition.
#[derive(Debug, Clone)]
pub struct SharePartition {
    start: i64,
    end: i64,
    records: BTreeMap<i64, InFlight>,
    state_epoch: i32,
    config: ShareConfig,
}

impl SharePartition {
    /// A new share-partition starting at `start_offset`.
    pub fn new(start_offset: i64, state_epoch: i32, config: ShareConfig) -> SharePartition {
        SharePartition {
            start: start_offset,
            end: start_offset,
            records: BTreeMap::new(),
            state_epoch,
            config,
        }
    }

    /// Rebuilt from its durable form; None when the snapshot is not one
    /// this partition could have written (unordered or overlapping
    /// batches, a window past `MAX_SNAPSHOT_OFFSETS`, an acquired state).
    pub fn from_snapshot(snapshot: &ShareSnapshot, config: ShareConfig) -> Option<SharePartition> {
        let mut sp = SharePartition::new(snapshot.start_offset, snapshot.state_epoch, config);
        let mut next = snapshot.start_offset;
        for b in &snapshot.batches {
            if b.first_offset > b.last_offset
                || b.first_offset < next
                || b.state == RecordState::Acquired
                || b.last_offset - snapshot.start_offset >= MAX_SNAPSHOT_OFFSETS
            {
                return None;
            }
            // A hole between batches was never delivered: available.
            for o in next..b.first_offset {
                sp.records.insert(o, InFlight::available(0));
            }
            for o in b.first_offset..=b.last_offset {
                sp.records.insert(
                    o,
                    InFlight {
                        state: b.state,
                        delivery_count: b.delivery_count,
                        owner: None,
                        lock_until: 0,
                    },
                );
            }
            next = b.last_offset + 1;
        }
        sp.end = next;
        sp.advance_start();
        Some(sp)
    }

    pub fn start_offset(&self) -> i64 {
        self.start
    }

    pub fn end_offset(&self) -> i64 {
        self.end
    }

    pub fn state_epoch(&self) -> i32 {
        self.state_epoch
    }

    pub fn config(&self) -> ShareConfig {
        self.config
    }

    /// Applies a changed group config (lock duration, limits) from now on.
    pub fn set_config(&mut self, config: ShareConfig) {
        self.config = config;
    }

    /// Offsets currently acquired by some member.
    pub fn acquired_count(&self) -> usize {
        self.records
            .values()
            .filter(|r| r.state == RecordState::Acquired)
            .count()
    }

    /// The state and delivery count of `offset`, if in flight.
    pub fn record(&self, offset: i64) -> Option<(RecordState, u16)> {
        self.records
            .get(&offset)
            .map(|r| (r.state, r.delivery_count))
    }

    /// Where a fetch should read the log from: the first offset that may
    /// be acquired now (an available one in flight, else SPEO).
    pub fn next_fetch_offset(&self) -> i64 {
        self.records
            .iter()
            .find(|(_, r)| r.state == RecordState::Available)
            .map_or(self.end, |(o, _)| *o)
    }

    /// Whether a fetch could acquire anything below `high_watermark`.
    pub fn can_acquire(&self, high_watermark: i64) -> bool {
        let next = self.next_fetch_offset();
        next < high_watermark
            && (next < self.end || self.end - self.start < self.config.max_record_locks)
    }

    /// Moves SPSO to `log_start` when the log no longer holds the records
    /// below it (retention, DeleteRecords): those offsets are dropped.
    pub fn follow_log_start(&mut self, log_start: i64) {
        if log_start <= self.start {
            return;
        }
        self.records.retain(|o, _| *o >= log_start);
        self.start = log_start;
        self.end = self.end.max(log_start);
    }

    /// Acquires for `member` what is available in the fetched `batches`
    /// ((first offset, last offset) each, in log order) below
    /// `high_watermark`, up to `max_records` (whole batches in
    /// batch-optimized mode), within the max-record-locks window. Each
    /// acquired offset's delivery count rises by one and its lock runs
    /// `lock_duration_ms` from `now`.
    pub fn acquire(
        &mut self,
        member: &str,
        batches: &[(i64, i64)],
        high_watermark: i64,
        (max_records, mode): (usize, AcquireMode),
        now: Millis,
    ) -> Vec<Acquired> {
        let mut out: Vec<Acquired> = Vec::new();
        let mut taken = 0usize;
        let lock_until = now.saturating_add(self.config.lock_duration_ms);
        'batches: for &(first, last) in batches {
            if taken >= max_records.max(1) {
                break;
            }
            let last = last.min(high_watermark - 1);
            let mut o = first.max(self.start);
            if o > last {
                continue;
            }
            // Offsets the log skips (compaction, a moved log start) before
            // this batch: nothing to deliver there.
            if o > self.end {
                if self.records.values().all(|r| r.state.is_done()) {
                    self.records.clear();
                    self.start = o;
                    self.end = o;
                } else if o - self.start <= self.config.max_record_locks {
                    for gap in self.end..o {
                        self.records.insert(gap, InFlight::archived());
                    }
                    self.end = o;
                } else {
                    break;
                }
            }
            while o <= last {
                if mode == AcquireMode::RecordLimit && taken >= max_records.max(1) {
                    break 'batches;
                }
                if o == self.end {
                    if self.end - self.start >= self.config.max_record_locks {
                        break 'batches;
                    }
                    self.records.insert(o, InFlight::available(0));
                    self.end += 1;
                }
                let limit = self.config.delivery_count_limit;
                if let Some(r) = self.records.get_mut(&o) {
                    if r.state == RecordState::Available && r.delivery_count < limit {
                        r.state = RecordState::Acquired;
                        r.delivery_count += 1;
                        r.owner = Some(member.to_string());
                        r.lock_until = lock_until;
                        push_run(&mut out, o, r.delivery_count);
                        taken += 1;
                    }
                }
                o += 1;
            }
        }
        self.advance_start();
        out
    }

    /// Applies `member`'s acknowledgements. The batches are checked first
    /// (all or none apply): ordered, not overlapping, first ≤ last, one
    /// type or one per offset, and every offset acquired by `member` (a
    /// gap may also name an offset nobody holds). Returns whether the
    /// durable state changed.
    pub fn acknowledge(
        &mut self,
        member: &str,
        batches: &[AckBatch],
        now: Millis,
    ) -> Result<bool, AckError> {
        let mut previous_last: Option<i64> = None;
        for b in batches {
            if b.first_offset > b.last_offset {
                return Err(AckError::InvalidRequest(format!(
                    "Acknowledgement batch first offset {} is past its last offset {}.",
                    b.first_offset, b.last_offset
                )));
            }
            if previous_last.is_some_and(|p| b.first_offset <= p) {
                return Err(AckError::InvalidRequest(
                    "Acknowledgement batches overlap or are not in offset order.".to_string(),
                ));
            }
            previous_last = Some(b.last_offset);
            let len = b.last_offset - b.first_offset + 1;
            if b.types.is_empty() || (b.types.len() != 1 && b.types.len() as i64 != len) {
                return Err(AckError::InvalidRequest(format!(
                    "Acknowledgement batch {}-{} has {} types; it takes 1 or {len}.",
                    b.first_offset,
                    b.last_offset,
                    b.types.len()
                )));
            }
            if b.first_offset < self.start || b.last_offset >= self.end {
                return Err(AckError::InvalidRecordState(format!(
                    "Offsets {}-{} are not all in flight (share-partition start {}, end {}).",
                    b.first_offset, b.last_offset, self.start, self.end
                )));
            }
            for (i, o) in (b.first_offset..=b.last_offset).enumerate() {
                let t = if b.types.len() == 1 {
                    b.types[0]
                } else {
                    b.types[i]
                };
                let held = self.records.get(&o).is_some_and(|r| {
                    r.state == RecordState::Acquired && r.owner.as_deref() == Some(member)
                });
                if !held && t != AckType::Gap {
                    return Err(AckError::InvalidRecordState(format!(
                        "Offset {o} is not acquired by member {member}."
                    )));
                }
            }
        }
        let mut changed = false;
        let limit = self.config.delivery_count_limit;
        let lock_until = now.saturating_add(self.config.lock_duration_ms);
        for b in batches {
            for (i, o) in (b.first_offset..=b.last_offset).enumerate() {
                let t = if b.types.len() == 1 {
                    b.types[0]
                } else {
                    b.types[i]
                };
                let Some(r) = self.records.get_mut(&o) else {
                    continue;
                };
                let held = r.state == RecordState::Acquired && r.owner.as_deref() == Some(member);
                if !held {
                    // A gap named on an offset nobody holds: nothing to do.
                    continue;
                }
                match t {
                    AckType::Renew => r.lock_until = lock_until,
                    AckType::Accept => r.finish(RecordState::Acknowledged),
                    AckType::Gap | AckType::Reject => r.finish(RecordState::Archived),
                    AckType::Release => r.release(limit),
                }
                changed |= t != AckType::Renew;
            }
        }
        self.advance_start();
        Ok(changed)
    }

    /// Releases every lock that ran out by `now` (archiving those at the
    /// delivery limit). Returns how many were released.
    pub fn expire_locks(&mut self, now: Millis) -> usize {
        let limit = self.config.delivery_count_limit;
        let mut released = 0;
        for r in self.records.values_mut() {
            if r.state == RecordState::Acquired && r.lock_until <= now {
                r.release(limit);
                released += 1;
            }
        }
        if released > 0 {
            self.advance_start();
        }
        released
    }

    /// Releases everything `member` holds (its share session closed or it
    /// left the group). Returns how many were released.
    pub fn release_member(&mut self, member: &str) -> usize {
        let limit = self.config.delivery_count_limit;
        let mut released = 0;
        for r in self.records.values_mut() {
            if r.state == RecordState::Acquired && r.owner.as_deref() == Some(member) {
                r.release(limit);
                released += 1;
            }
        }
        if released > 0 {
            self.advance_start();
        }
        released
    }

    /// The earliest lock deadline, if anything is acquired.
    pub fn next_lock_expiry(&self) -> Option<Millis> {
        self.records
            .values()
            .filter(|r| r.state == RecordState::Acquired)
            .map(|r| r.lock_until)
            .min()
    }

    /// The durable form: runs of one state and count, acquired written as
    /// available.
    pub fn snapshot(&self) -> ShareSnapshot {
        let mut batches: Vec<StateBatch> = Vec::new();
        for (&o, r) in &self.records {
            let state = if r.state == RecordState::Acquired {
                RecordState::Available
            } else {
                r.state
            };
            match batches.last_mut() {
                Some(b)
                    if b.last_offset + 1 == o
                        && b.state == state
                        && b.delivery_count == r.delivery_count =>
                {
                    b.last_offset = o
                }
                _ => batches.push(StateBatch {
                    first_offset: o,
                    last_offset: o,
                    state,
                    delivery_count: r.delivery_count,
                }),
            }
        }
        // Offsets never delivered carry nothing worth keeping.
        while batches
            .last()
            .is_some_and(|b| b.state == RecordState::Available && b.delivery_count == 0)
        {
            batches.pop();
        }
        ShareSnapshot {
            state_epoch: self.state_epoch,
            start_offset: self.start,
            batches,
        }
    }

    /// Drops what is done from the front: SPSO moves past acknowledged
    /// and archived offsets.
    fn advance_start(&mut self) {
        while let Some(entry) = self.records.first_entry() {
            if !entry.get().state.is_done() {
                break;
            }
            entry.remove();
            self.start += 1;
        }
        if self.records.is_empty() {
            self.start = self.start.max(self.end);
            self.end = self.start;
        }
    }
}

impl InFlight {
    fn available(delivery_count: u16) -> InFlight {
        InFlight {
            state: RecordState::Available,
            delivery_count,
            owner: None,
            lock_until: 0,
        }
    }

    fn archived() -> InFlight {
        InFlight {
            state: RecordState::Archived,
            delivery_count: 0,
            owner: None,
            lock_until: 0,
        }
    }

    fn finish(&mut self, state: RecordState) {
        self.state = state;
        self.owner = None;
    }

    /// Back to available, or archived once delivered `limit` times.
    fn release(&mut self, limit: u16) {
        self.owner = None;
        self.state = if self.delivery_count >= limit {
            RecordState::Archived
        } else {
            RecordState::Available
        };
    }
}

fn push_run(out: &mut Vec<Acquired>, offset: i64, delivery_count: u16) {
    match out.last_mut() {
        Some(run) if run.last_offset + 1 == offset && run.delivery_count == delivery_count => {
            run.last_offset = offset
        }
        _ => out.push(Acquired {
            first_offset: offset,
            last_offset: offset,
            delivery_count,
        }),
    }
}
