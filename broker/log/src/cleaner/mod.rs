//! The log cleaner: Kafka's LogCleaner for `cleanup.policy=compact` logs.
//!
//! Owns: the `log-cleaner-N` threads (`--log-cleaner-threads`), each of
//! which repeatedly picks the compacted partition with the highest dirty
//! ratio that is due (`schedule`) and no other thread is cleaning, builds
//! the key map of its dirty part (`offset_map`, bounded by
//! `--log-cleaner-dedupe-buffer-size` per thread), rewrites every closed
//! segment below the mapped end group by group (`clean_segment`), hands
//! each cleaned segment to the partition to swap in (`swap` on disk), and
//! moves the partition's cleaner checkpoint; with nothing due it sleeps
//! `--log-cleaner-backoff-ms`. Must not: clean the active segment, data
//! past an open transaction or not yet durable, or records younger than
//! min.compaction.lag.ms; hold a partition lock while reading or writing
//! segment data.

mod clean_segment;
pub(crate) mod offset_map;
pub(crate) mod schedule;
pub(crate) mod swap;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tracing::{debug, info, warn};

use self::clean_segment::{build_offset_map, clean_group, Retention, Transactions};
use self::offset_map::OffsetMap;
use self::schedule::{groups, is_due, Cleanable, SegmentFacts};
use crate::error::Result;
use crate::partition::PartitionLog;
use crate::producer_state::AbortedTxn;
use crate::read::{first_batch_max_timestamp, SegmentSlice};
use crate::registry::Registry;
use crate::retention::StopSignal;
use crate::segment::{file_modified_ms, remove_if_exists, wall_clock_ms};
use crate::stats::Counters;

/// The cleaner's broker-level settings, under Kafka's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanerConfig {
    /// `log.cleaner.threads`; 0 disables the cleaner.
    pub threads: usize,
    /// `log.cleaner.dedupe.buffer.size`: memory for the key map, split
    /// evenly between the threads (as Kafka does).
    pub dedupe_buffer_size: usize,
    /// `log.cleaner.backoff.ms`: sleep when no log needs cleaning.
    pub backoff: Duration,
    /// Bound on a compressed batch's inflated records while cleaning.
    pub max_decompressed_batch_bytes: usize,
}

impl Default for CleanerConfig {
    /// Kafka's defaults: one thread, 128 MiB, 15 s.
    fn default() -> Self {
        Self {
            threads: 1,
            dedupe_buffer_size: 128 << 20,
            backoff: Duration::from_millis(15_000),
            max_decompressed_batch_bytes: 64 << 20,
        }
    }
}

/// One closed segment as the cleaner reads it (snapshotted under the
/// partition lock, like a Fetch).
#[derive(Debug, Clone)]
pub(crate) struct SourceSegment {
    pub facts: SegmentFacts,
    pub slice: SegmentSlice,
}

/// What a partition offers to clean: its closed segments below the first
/// uncleanable offset, the clean/dirty split, and the transaction and
/// producer facts the record rules need.
#[derive(Debug)]
pub(crate) struct CleanView {
    pub segments: Vec<SourceSegment>,
    pub cleanable: Cleanable,
    pub aborted: Vec<AbortedTxn>,
    pub producer_last_offsets: HashMap<i64, i64>,
}

/// The body of one `log-cleaner-N` thread.
pub(crate) fn run_cleaner(
    registry: Arc<Registry>,
    stop: Arc<StopSignal>,
    config: CleanerConfig,
    counters: Arc<Counters>,
) {
    let per_thread = config.dedupe_buffer_size / config.threads.max(1);
    let mut map = OffsetMap::with_buffer(per_thread);
    loop {
        let cleaned = clean_filthiest(
            &registry,
            &mut map,
            (&config, &counters),
            Some(&stop),
            wall_clock_ms(),
        );
        if stop.wait(if cleaned {
            Duration::ZERO
        } else {
            config.backoff
        }) {
            return;
        }
    }
}

/// Cleans the due partition with the highest dirty ratio that no other
/// thread is cleaning, as of `now` (the wall clock; tests pass another).
/// Returns whether one was cleaned without error. A `stop` signalled
/// meanwhile (shutdown) abandons the cleaning between two cleaned segments.
pub(crate) fn clean_filthiest(
    registry: &Registry,
    map: &mut OffsetMap,
    (config, counters): (&CleanerConfig, &Counters),
    stop: Option<&StopSignal>,
    now: i64,
) -> bool {
    let mut due = Vec::new();
    for partition in registry.partitions() {
        if !partition.config().compact || partition.is_being_cleaned() {
            continue;
        }
        match partition.clean_view(now) {
            Ok(Some(view)) => {
                let first_dirty_ts = view
                    .segments
                    .iter()
                    .find(|s| s.facts.next_offset > view.cleanable.first_dirty)
                    .and_then(|s| first_batch_max_timestamp(&s.slice).ok());
                if is_due(&view.cleanable, first_dirty_ts, &partition.config(), now) {
                    due.push((view.cleanable.dirty_ratio(), partition, view));
                }
            }
            Ok(None) => {}
            Err(e) => {
                warn!(topic = partition.topic(), partition = partition.partition(), error = %e, "cannot inspect a log to clean");
            }
        }
    }
    due.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (_, partition, view) in due {
        if !partition.begin_cleaning() {
            continue;
        }
        let result = clean_partition(&partition, &view, map, (config, counters, stop), now);
        partition.end_cleaning();
        // A failure backs off (it would most likely fail again at once).
        return result
            .map_err(|e| {
                warn!(topic = partition.topic(), partition = partition.partition(), error = %e, "log cleaning failed");
            })
            .is_ok();
    }
    false
}

/// One cleaning of one partition (module docs).
fn clean_partition(
    partition: &PartitionLog,
    view: &CleanView,
    map: &mut OffsetMap,
    (config, counters, stop): (&CleanerConfig, &Counters, Option<&StopSignal>),
    now: i64,
) -> Result<()> {
    let Cleanable {
        first_dirty, end, ..
    } = view.cleanable;
    map.clear();
    let dirty_from = view
        .segments
        .partition_point(|s| s.facts.next_offset <= first_dirty);
    let mapped_end = build_offset_map(
        map,
        &view.segments[dirty_from..],
        (first_dirty, end),
        &view.aborted,
        config.max_decompressed_batch_bytes,
    )?;
    let count = view
        .segments
        .partition_point(|s| s.facts.base_offset < mapped_end);
    let sources = &view.segments[..count];
    let log_config = partition.config();
    let retention = Retention {
        map,
        aborted: &view.aborted,
        producer_last_offsets: &view.producer_last_offsets,
        max_decompressed: config.max_decompressed_batch_bytes,
        now_ms: now,
        delete_retention_ms: log_config.delete_retention_ms,
    };
    let mut txns = Transactions::default();
    let facts: Vec<SegmentFacts> = sources.iter().map(|s| s.facts).collect();
    let (mut bytes_in, mut bytes_out) = (0u64, 0u64);
    for group in groups(&facts, log_config.segment_bytes) {
        if stop.is_some_and(StopSignal::is_stopped) {
            return Ok(());
        }
        let group = &sources[group];
        let modified_ms: Vec<i64> = group
            .iter()
            .map(|s| file_modified_ms(&s.slice.file, &s.slice.path).unwrap_or(now))
            .collect();
        // The cleaned segment is dated by when its data was last cleaned:
        // now if any of it was dirty, else its newest source (its largest
        // timestamp falls back on the date when it holds no batch).
        let any_dirty = group.iter().any(|s| s.facts.next_offset > first_dirty);
        let dated = if any_dirty {
            now
        } else {
            modified_ms.iter().copied().max().unwrap_or(now)
        };
        let cleaned_path = swap::cleaned_path(partition.dir(), group[0].facts.base_offset);
        let written = clean_group(
            group,
            &mut txns,
            &retention,
            log_config.index_interval_bytes,
            now,
        )
        .and_then(|c| c.segment.set_modified_ms(dated).map(|()| c));
        let cleaned = match written {
            Ok(cleaned) => cleaned,
            Err(e) => {
                // Best effort: open deletes a leftover anyway.
                let _ = remove_if_exists(&cleaned_path);
                return Err(e);
            }
        };
        let (size_in, size_out) = (cleaned.bytes_in, cleaned.segment.size());
        if !partition.replace_cleaned(group, cleaned.segment, &cleaned.removed_aborts)? {
            remove_if_exists(&cleaned_path)?;
            debug!(
                topic = partition.topic(),
                partition = partition.partition(),
                "log changed while cleaning; will retry"
            );
            return Ok(());
        }
        bytes_in += size_in;
        bytes_out += size_out;
    }
    partition.set_clean_checkpoint(mapped_end)?;
    counters.cleaned(
        bytes_in,
        bytes_in.saturating_sub(bytes_out),
        wall_clock_ms(),
    );
    info!(
        topic = partition.topic(),
        partition = partition.partition(),
        segments = sources.len(),
        keys = map.len(),
        bytes_in,
        bytes_out,
        clean_up_to = mapped_end,
        "cleaned log"
    );
    Ok(())
}
