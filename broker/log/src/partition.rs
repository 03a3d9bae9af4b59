//! One partition's log: Kafka's LocalLog over a list of segments.
//!
//! Owns: the segment list (oldest first, the last one active), offset
//! assignment together with the idempotent-producer checks (the producer
//! state is consulted and updated under the same lock), appends of batches
//! a leader replicated, rolling, reads by offset and timestamp, the log
//! start / end / durable offsets and the bookkeeping the flusher and
//! retention act on.
//! Must not: fsync on the append path (the flusher does, outside the lock),
//! hold its lock during reads of segment data (truncation, rare, is the
//! exception), or parse records inside batches.
//! Submodules: `sync` (hand-over to the flusher, closing), `retention`
//! (applying retention to this partition), `clean` (what the log cleaner
//! may clean, and swapping cleaned segments in) and `truncate` (a follower
//! cutting its log back).
//!
//! Thread-safety: `PartitionLog` is `Send + Sync`. One mutex guards the
//! segment list and the producer state; appends, rolls, truncations and
//! retention take it and are serialised.
//! Reads take it only to snapshot file handles and positions. The offsets
//! are mirrored in atomics for lock-free queries. A second mutex, `files`,
//! orders segment file deletions that run outside the state lock
//! (retention's) before truncations that create or delete segment files;
//! it is only ever taken while holding, or right after dropping, the state
//! lock (order: state, then files).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, Weak};

use bytes::Bytes;
use chronik_protocol::record_batch::BatchHeader;
use tracing::debug;

use crate::config::LogConfig;
use crate::dir_health::LogDirHealth;
use crate::error::{Error, Result};
use crate::flusher::{FlushPolicy, FlushQueue};
use crate::producer_recovery::load_producer_state;
use crate::producer_state::{AbortedTxn, AppendCheck, ProducerBatch, ProducerStateManager};
use crate::read::{self, SegmentSlice};
use crate::recovery::{recover_partition, RecoveryHint};
use crate::registry::Registry;
use crate::segment::{wall_clock_ms, LogSegment};
use crate::stats::Counters;

mod clean;
mod delete_records;
mod reopen;
mod retention;
mod sync;
mod truncate;

use sync::SealedSegment;
pub(crate) use sync::SyncWork;

/// What an append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    /// The next offset to be assigned, also for a duplicate: waiting until
    /// it is durable covers the original batches.
    pub log_end_offset: i64,
    /// Always -1: batches keep their CreateTime timestamps.
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
    /// The request retried idempotent batches already in the log: nothing
    /// was written and `base_offset`/`last_offset` are the original ones.
    pub duplicate: bool,
}

/// What the manager shares with every partition.
#[derive(Clone)]
pub(crate) struct PartitionContext {
    pub flush: Arc<FlushQueue>,
    pub counters: Arc<Counters>,
    /// For the recovery-point checkpoint a truncation rewrites first.
    pub registry: Weak<Registry>,
    /// The data directory's health: offline, every partition refuses writes.
    pub dir: Arc<LogDirHealth>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closed {
    ShuttingDown,
    Deleted,
    /// An fsync failed: Linux may have dropped the dirty pages, so a later
    /// successful fsync proves nothing. Like Kafka taking a log dir offline,
    /// the partition refuses appends and never advances its durable offset
    /// again until the broker restarts and recovery re-validates the tail.
    Offline,
}

/// Invariant: `segments` is never empty, sorted by base offset, and each
/// segment's `next_offset` is the next one's base offset.
struct State {
    segments: Vec<LogSegment>,
    /// Sealed segments not fsynced yet, oldest first; mirrored by
    /// `PartitionLog::unsynced_floor`.
    unsynced: Vec<SealedSegment>,
    dir_unsynced: bool,
    closed: Option<Closed>,
    producers: ProducerStateManager,
    /// Counts truncations, so flush work taken before one does not advance
    /// the offsets after it.
    truncations: u64,
    /// The log start offset DeleteRecords asked for (0: never), persisted
    /// in the partition's `log-start-offset` file; segments wholly below it
    /// go at the next retention pass.
    deleted_before: i64,
}

impl State {
    fn active(&self) -> &LogSegment {
        // Cannot fail: segments is never empty (recovery creates one and
        // retention never removes the active segment).
        self.segments
            .last()
            .expect("a partition always has an active segment")
    }
    fn active_mut(&mut self) -> &mut LogSegment {
        // Cannot fail: see `active`.
        self.segments
            .last_mut()
            .expect("a partition always has an active segment")
    }
    /// The first segment's base offset, or DeleteRecords' offset when that
    /// is higher (never above the log end offset: a truncation below it
    /// takes the log start offset down with it).
    fn log_start_offset(&self) -> i64 {
        let base = self.segments.first().map_or(0, LogSegment::base_offset);
        base.max(self.deleted_before.min(self.active().next_offset()))
    }
}

pub struct PartitionLog {
    topic: String,
    partition: i32,
    dir: PathBuf,
    /// Replaced whole when the topic's configs are altered; readers take a
    /// snapshot (`config()`) and never see half of a change.
    config: RwLock<Arc<LogConfig>>,
    state: Mutex<State>,
    log_start_offset: AtomicI64,
    log_end_offset: AtomicI64,
    durable_offset: AtomicI64,
    recovery_point: AtomicI64,
    /// Base offset of the oldest sealed segment not fsynced yet (i64::MAX
    /// when none): with `recovery_point`, makes `recovery_point()` lock-free.
    unsynced_floor: AtomicI64,
    size_bytes: AtomicU64,
    /// The first offset of the oldest open transaction (i64::MAX: none),
    /// mirrored from the producer state after every change to it.
    first_unstable_offset: AtomicI64,
    /// Set while the partition sits in the flush queue (owned by FlushQueue).
    pub(crate) queued: AtomicBool,
    /// Mirrors `Closed::Offline` for lock-free checks.
    offline: AtomicBool,
    /// Orders segment file deletions and creations (see the module docs).
    files: Mutex<()>,
    /// The cleaner checkpoint: offsets below it were cleaned.
    clean_checkpoint: AtomicI64,
    /// Set while a cleaner thread works on this partition.
    cleaning: AtomicBool,
    ctx: PartitionContext,
    me: Weak<PartitionLog>,
}

impl PartitionLog {
    /// Loads (recovering if needed) or creates the partition in `dir`.
    pub(crate) fn open(
        (topic, partition): (&str, i32),
        dir: PathBuf,
        config: LogConfig,
        hint: RecoveryHint,
        ctx: PartitionContext,
    ) -> Result<Arc<Self>> {
        let recovered = recover_partition(&dir, (topic, partition), &config, hint)?;
        ctx.counters.recovery_truncated(recovered.truncated_bytes);
        let segments = recovered.segments;
        let producers = load_producer_state(&dir, (topic, partition), &segments)?;
        let deleted_before = delete_records::read_log_start_file(&dir)?;
        let end = segments.last().map_or(0, LogSegment::next_offset);
        let start = segments
            .first()
            .map_or(0, LogSegment::base_offset)
            .max(deleted_before.min(end));
        let size = segments.iter().map(LogSegment::size).sum();
        let first_unstable = producers.first_unstable_offset().unwrap_or(i64::MAX);
        let clean_checkpoint = clean::load_clean_checkpoint(&dir);
        debug!(
            topic,
            partition,
            log_start_offset = start,
            log_end_offset = end,
            segments = segments.len(),
            "loaded partition"
        );
        Ok(Arc::new_cyclic(|me| PartitionLog {
            topic: topic.to_string(),
            partition,
            dir,
            config: RwLock::new(Arc::new(config)),
            state: Mutex::new(State {
                segments,
                unsynced: Vec::new(),
                dir_unsynced: false,
                closed: None,
                producers,
                truncations: 0,
                deleted_before,
            }),
            log_start_offset: AtomicI64::new(start),
            log_end_offset: AtomicI64::new(end),
            // Recovery fsynced everything that survived.
            durable_offset: AtomicI64::new(end),
            recovery_point: AtomicI64::new(end),
            unsynced_floor: AtomicI64::new(i64::MAX),
            size_bytes: AtomicU64::new(size),
            first_unstable_offset: AtomicI64::new(first_unstable),
            queued: AtomicBool::new(false),
            offline: AtomicBool::new(false),
            files: Mutex::new(()),
            clean_checkpoint: AtomicI64::new(clean_checkpoint),
            cleaning: AtomicBool::new(false),
            ctx,
            me: me.clone(),
        }))
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }
    pub fn partition(&self) -> i32 {
        self.partition
    }
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// The partition's current config (a snapshot).
    pub fn config(&self) -> Arc<LogConfig> {
        Arc::clone(&self.config.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Applies an altered topic config from the next append, roll or
    /// retention pass on.
    pub(crate) fn set_config(&self, config: LogConfig) {
        *self.config.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(config);
    }
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset.load(Ordering::Acquire)
    }
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset.load(Ordering::Acquire)
    }
    /// Highest offset + 1 known to be fsynced; equals `log_end_offset` under
    /// `FlushPolicy::Never`. Decreases only when a truncation cuts the log
    /// below it.
    pub fn durable_offset(&self) -> i64 {
        self.durable_offset.load(Ordering::Acquire)
    }
    /// Bytes in all segments.
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes.load(Ordering::Relaxed)
    }
    /// Producer ids this partition holds idempotence state for.
    pub fn producer_count(&self) -> usize {
        self.lock().producers.len()
    }

    /// The first offset of the oldest transaction still open here (Kafka's
    /// first unstable offset; the last stable offset is the smaller of it
    /// and the high watermark). Lock-free.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        let offset = self.first_unstable_offset.load(Ordering::Acquire);
        (offset != i64::MAX).then_some(offset)
    }

    /// The aborted transactions overlapping offsets `from..upto`, by first
    /// offset: what a read_committed fetch of that range is told.
    pub fn aborted_transactions(&self, from: i64, upto: i64) -> Vec<AbortedTxn> {
        self.lock().producers.aborted_transactions(from, upto)
    }

    /// Whether `producer_id` has a transaction open in this partition (a
    /// leader verifies a transactional batch with the coordinator only
    /// when it would open one: KIP-890).
    pub fn has_open_transaction(&self, producer_id: i64) -> bool {
        self.lock().producers.has_open_transaction(producer_id)
    }

    /// Publishes the producer state's first unstable offset (callers hold
    /// the partition lock and just changed it).
    fn publish_transactions(&self, state: &State) {
        self.first_unstable_offset.store(
            state.producers.first_unstable_offset().unwrap_or(i64::MAX),
            Ordering::Release,
        );
    }

    /// Poisoning is ignored: critical sections keep `State` consistent at
    /// every step that can fail, and panic only on bugs; failing every later
    /// produce and fetch would not help.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// See `files`: held while deleting or creating segment files.
    fn files(&self) -> MutexGuard<'_, ()> {
        self.files.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Mirrors the oldest unsynced sealed segment in `unsynced_floor`; call
    /// after every change to `state.unsynced`.
    fn publish_unsynced(&self, state: &State) {
        let floor = state
            .unsynced
            .iter()
            .map(|s| s.base_offset)
            .min()
            .unwrap_or(i64::MAX);
        self.unsynced_floor.store(floor, Ordering::Release);
    }

    fn mark_dirty(&self, bytes: u64, batches: u64) {
        if let Some(me) = self.me.upgrade() {
            self.ctx.flush.mark_dirty(me, bytes, batches);
        }
    }

    fn check_open(&self, state: &State) -> Result<()> {
        if self.ctx.dir.is_offline() {
            return Err(Error::LogDirOffline {
                dir: self.dir.parent().unwrap_or(&self.dir).to_path_buf(),
                reason: self.ctx.dir.reason().unwrap_or_default(),
            });
        }
        self.check_closed(state)
    }

    /// `check_open` without the directory's health (reopening it).
    fn check_closed(&self, state: &State) -> Result<()> {
        match state.closed {
            None => Ok(()),
            Some(Closed::ShuttingDown) => Err(Error::ShuttingDown),
            Some(Closed::Deleted) => Err(Error::UnknownTopic(self.topic.clone())),
            Some(Closed::Offline) => Err(Error::StorageOffline {
                topic: self.topic.clone(),
                partition: self.partition,
            }),
        }
    }

    /// Whether an fsync failure took this partition offline (see `Closed::Offline`).
    pub fn is_offline(&self) -> bool {
        self.offline.load(Ordering::Acquire)
    }

    /// Takes the partition, and its directory, offline after a failed fsync.
    pub(crate) fn mark_offline(&self, error: &Error) {
        self.ctx
            .dir
            .fail_fsync(&format!("{}-{}", self.topic, self.partition), error);
        let mut state = self.lock();
        if state.closed.is_none() {
            state.closed = Some(Closed::Offline);
        }
        self.offline.store(true, Ordering::Release);
    }

    /// Appends whole, CRC-validated v2 batches (`records`, described by
    /// `batches` from `parse_batches`). Base offsets are rewritten in place,
    /// consecutive from the log end offset, and the bytes are written
    /// verbatim to the active segment, rolling it first when it is full or
    /// old. Returns before any fsync; see `durable_offset`.
    ///
    /// Batches with a producer id are checked first, all or nothing, as
    /// Kafka's ProducerStateManager does: an older epoch fails with
    /// `InvalidProducerEpoch`, a sequence that does not follow the
    /// producer's last one with `OutOfOrderSequence`, and nothing is
    /// written. A request whose batches are all retries of batches among
    /// their producers' last five is not written again: it returns the
    /// original offsets with `duplicate` set (one mixing retried and new
    /// batches is out of order).
    pub fn append(&self, records: &mut [u8], batches: &[BatchHeader]) -> Result<AppendInfo> {
        let offsets = validate_batches(records, batches, self.config().max_message_bytes)?;
        let mut state = self.lock();
        self.check_open(&state)?;
        // Rolling keeps the next offset, so these are the offsets the
        // batches will get.
        let mut next = state.active().next_offset();
        let incoming = batches.iter().map(|h| {
            let batch =
                ProducerBatch::from_header(h, &records[h.position..h.position + h.size], next);
            next += h.offset_count();
            batch
        });
        let producer_update = match state.producers.check_append(incoming)? {
            AppendCheck::Append(update) => update,
            AppendCheck::Duplicate {
                base_offset,
                last_offset,
            } => {
                return Ok(AppendInfo {
                    base_offset,
                    last_offset,
                    log_end_offset: state.active().next_offset(),
                    log_append_time_ms: -1,
                    log_start_offset: state.log_start_offset(),
                    duplicate: true,
                })
            }
        };
        let interval = self.config().index_interval_bytes;
        let (info, rolled) = self
            .write(&mut state, batches, offsets, records.len(), |segment| {
                segment.append(records, batches, interval)
            })
            .inspect_err(|e| {
                self.ctx.dir.record("append", e);
            })?;
        state.producers.commit(producer_update);
        self.publish_transactions(&state);
        drop(state);
        self.appended(rolled, records.len(), batches.len());
        Ok(info)
    }

    /// A follower's append: batches fetched from the leader, whose offsets
    /// (and partition leader epochs) the leader assigned, written verbatim.
    /// The framing checks are `append`'s, except max.message.bytes (the
    /// leader enforced it; a follower with another value must not stall
    /// replication, as in Kafka). The first batch must start at or after the
    /// log end offset and each later one after its predecessor (gaps are
    /// what the leader's cleaner left), else `NonContiguousAppend` and
    /// nothing is written. Rolls, durability
    /// bookkeeping and the return value are `append`'s (`duplicate` is
    /// always false).
    ///
    /// Batches with a producer id update the producer state without being
    /// checked (Kafka's follower path: a new epoch or sequence simply
    /// replaces what was known), so this replica deduplicates retries
    /// correctly once it becomes the leader. `records` is not modified.
    pub fn append_as_follower(
        &self,
        records: &mut [u8],
        batches: &[BatchHeader],
    ) -> Result<AppendInfo> {
        let records: &[u8] = records;
        let offsets = validate_batches(records, batches, u32::MAX)?;
        let mut state = self.lock();
        self.check_open(&state)?;
        let mut expected = state.active().next_offset();
        for h in batches {
            // A compacted leader log has gaps between batches (Kafka's
            // followers accept any increasing offsets).
            if h.base_offset < expected {
                return Err(Error::NonContiguousAppend {
                    expected,
                    got: h.base_offset,
                });
            }
            expected = h.last_offset() + 1;
        }
        let interval = self.config().index_interval_bytes;
        let (info, rolled) = self
            .write(&mut state, batches, offsets, records.len(), |segment| {
                segment.append_assigned(records, batches, interval)
            })
            .inspect_err(|e| {
                self.ctx.dir.record("follower append", e);
            })?;
        for h in batches {
            state.producers.replay(&ProducerBatch::from_header(
                h,
                &records[h.position..h.position + h.size],
                h.base_offset,
            ));
        }
        self.publish_transactions(&state);
        drop(state);
        self.appended(rolled, records.len(), batches.len());
        Ok(info)
    }

    /// Writes `batches` (`offsets` offsets, `bytes` bytes) to the active
    /// segment with `write`, rolling it first when due, and publishes the new
    /// log end. Returns what to answer and whether it rolled.
    fn write(
        &self,
        state: &mut State,
        batches: &[BatchHeader],
        offsets: i64,
        bytes: usize,
        write: impl FnOnce(&mut LogSegment) -> Result<()>,
    ) -> Result<(AppendInfo, bool)> {
        let bytes = bytes as u64;
        let now = wall_clock_ms();
        let max_timestamp = batches.iter().map(|h| h.max_timestamp).max().unwrap_or(-1);
        let rolled = state
            .active()
            .should_roll(bytes, offsets, max_timestamp, now, &self.config());
        if rolled {
            self.roll(state, now)?;
        }
        let base_offset = state.active().next_offset();
        write(state.active_mut())?;
        let log_end_offset = state.active().next_offset();
        self.log_end_offset.store(log_end_offset, Ordering::Release);
        self.size_bytes.fetch_add(bytes, Ordering::Relaxed);
        if !self.group_commit() {
            self.durable_offset
                .fetch_max(log_end_offset, Ordering::AcqRel);
        }
        let info = AppendInfo {
            base_offset,
            last_offset: log_end_offset - 1,
            log_end_offset,
            log_append_time_ms: -1,
            log_start_offset: state.log_start_offset(),
            duplicate: false,
        };
        Ok((info, rolled))
    }

    /// After a write, outside the lock: hands the partition to the flusher
    /// and counts the append.
    fn appended(&self, rolled: bool, bytes: usize, batches: usize) {
        let (bytes, batches) = (bytes as u64, batches as u64);
        if self.group_commit() {
            self.mark_dirty(bytes, batches);
        } else if rolled {
            self.mark_dirty(0, 0);
        }
        self.ctx.counters.appended(bytes, batches);
    }

    fn group_commit(&self) -> bool {
        matches!(self.ctx.flush.policy(), FlushPolicy::GroupCommit { .. })
    }

    /// Seals the active segment (index files written, handed to the flusher)
    /// and starts a new one at the log end offset.
    fn roll(&self, state: &mut State, now_ms: i64) -> Result<()> {
        let active = state.active_mut();
        active.seal();
        let mut files = active.write_index_files()?;
        files.push(active.log_sync_target());
        let (sealed_base, new_base) = (active.base_offset(), active.next_offset());
        let segment = LogSegment::create(&self.dir, new_base, now_ms)?;
        state.segments.push(segment);
        state.unsynced.push(SealedSegment {
            base_offset: sealed_base,
            files,
        });
        self.publish_unsynced(state);
        state.dir_unsynced = true;
        self.ctx.counters.segment_rolled();
        debug!(
            topic = self.topic,
            partition = self.partition,
            base_offset = new_base,
            "rolled segment"
        );
        Ok(())
    }

    /// Whole batches from the one containing `fetch_offset`: at most
    /// `max_bytes` (but always the first batch whole), none whose base offset
    /// is >= `upper_bound` (the high watermark). Empty at the log end.
    pub fn read(&self, fetch_offset: i64, max_bytes: usize, upper_bound: i64) -> Result<Bytes> {
        let slices = {
            let state = self.lock();
            if state.closed == Some(Closed::Deleted) {
                return Err(Error::UnknownTopic(self.topic.clone()));
            }
            let (start, end) = (state.log_start_offset(), state.active().next_offset());
            if fetch_offset < start || fetch_offset > end {
                return Err(Error::OffsetOutOfRange {
                    offset: fetch_offset,
                    log_start_offset: start,
                    log_end_offset: end,
                });
            }
            if fetch_offset == end || fetch_offset >= upper_bound {
                return Ok(Bytes::new());
            }
            let first = state
                .segments
                .partition_point(|s| s.base_offset() <= fetch_offset)
                .saturating_sub(1);
            let mut slices = Vec::new();
            let mut covered = 0u64;
            for (i, segment) in state.segments[first..].iter().enumerate() {
                let from = if i == 0 {
                    segment.index_lookup(fetch_offset).0
                } else {
                    0
                };
                if segment.size() > from {
                    slices.push(slice_of(segment, from));
                    covered += segment.size() - from;
                }
                if covered >= max_bytes as u64 {
                    break;
                }
            }
            slices
        };
        read::read_batches(&slices, fetch_offset, max_bytes, upper_bound)
    }

    /// ListOffsets by timestamp: the first batch whose max timestamp is >=
    /// `timestamp`, as `(its base offset, its max timestamp)`. Batch
    /// granularity: records are not decompressed.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<(i64, i64)>> {
        let slices: Vec<SegmentSlice> = {
            let state = self.lock();
            let Some(first) = state
                .segments
                .iter()
                .position(|s| s.max_timestamp() >= timestamp)
            else {
                return Ok(None);
            };
            state.segments[first..]
                .iter()
                .enumerate()
                .filter(|(_, s)| s.max_timestamp() >= timestamp && !s.is_empty())
                .map(|(i, s)| {
                    slice_of(
                        s,
                        if i == 0 {
                            s.timestamp_scan_start(timestamp)
                        } else {
                            0
                        },
                    )
                })
                .collect()
        };
        read::find_timestamp(&slices, timestamp)
    }

    /// ListOffsets MAX_TIMESTAMP: `(offset, timestamp)` of the first batch
    /// holding the largest timestamp, or None when no batch has one. The
    /// offset is that batch's last offset (records are not decompressed).
    pub fn max_timestamp_offset(&self) -> Result<Option<(i64, i64)>> {
        let state = self.lock();
        let best = state
            .segments
            .iter()
            .filter(|s| s.max_timestamp() >= 0)
            .fold(None, |best: Option<&LogSegment>, s| match best {
                Some(b) if b.max_timestamp() >= s.max_timestamp() => Some(b),
                _ => Some(s),
            });
        Ok(best.map(|s| (s.offset_of_max_timestamp(), s.max_timestamp())))
    }
}

fn slice_of(segment: &LogSegment, start: u64) -> SegmentSlice {
    SegmentSlice {
        file: Arc::clone(segment.log_file()),
        path: segment.log_path().to_path_buf(),
        start,
        end: segment.size(),
    }
}

/// Checks that `batches` tile `records` exactly and that none exceeds
/// max.message.bytes; returns the number of offsets they occupy.
fn validate_batches(
    records: &[u8],
    batches: &[BatchHeader],
    max_message_bytes: u32,
) -> Result<i64> {
    if batches.is_empty() {
        return Err(Error::InvalidRecords("no record batches".into()));
    }
    let mut expected = 0usize;
    let mut offsets = 0i64;
    for h in batches {
        if h.position != expected {
            return Err(Error::InvalidRecords(format!(
                "batch at byte {} where one was expected at {expected}",
                h.position
            )));
        }
        if h.size > max_message_bytes as usize {
            return Err(Error::RecordTooLarge {
                size: h.size,
                max: max_message_bytes,
            });
        }
        expected += h.size;
        offsets += h.offset_count();
    }
    if expected != records.len() {
        return Err(Error::InvalidRecords(format!(
            "batches cover {expected} of {} bytes",
            records.len()
        )));
    }
    Ok(offsets)
}
