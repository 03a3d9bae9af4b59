//! The rdkafka poll loop: one `BaseConsumer` in a consumer group, polled on
//! the calling (dedicated) thread, every record handed to the `Verifier`.
//!
//! Owns: client configuration, subscription, periodic async commits (and the
//! final sync one), the live publishing cadence, the `.hlog` intervals, the
//! idle stop, and the final watermark fetch that tells the report how much
//! of each partition exists. What is committed is what was verified: after
//! each record the next offset of its partition is noted (`Processed`), and
//! commits send exactly those offsets (never librdkafka's stored offsets,
//! which were seen to run a whole fetched batch ahead of what the
//! application had been handed at a rebalance, so the partition's next
//! owner skipped it). Commits go every `commit_interval` (async), before
//! partitions are revoked (sync: their new owner starts where this member
//! stopped, so a graceful rebalance re-reads nothing) and at shutdown. A
//! member that dies without a revoke leaves up to one interval to be
//! re-read: counted as redeliveries, never duplicates. Every rebalance
//! callback is kept, with its time, for the report.
//! Must not: decide verdicts (`verify`, `report`) or serve HTTP.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chronik_harness::histogram::HlogWriter;
use chronik_harness::procfs::{self, Task};
use chronik_harness::{now_us, ENVELOPE_HEADER};
use rdkafka::client::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, Headers, Message};
use rdkafka::statistics::Statistics;
use rdkafka::{Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::live::{Live, PartitionSummary};
use crate::Error;
use chronik_harness::verify::{Observed, Verifier};

/// Longest a single poll blocks (bounds how late a stop request is seen).
const POLL_TIMEOUT: Duration = Duration::from_millis(100);
/// How often `/metrics` and `/summary` are refreshed.
const PUBLISH_INTERVAL: Duration = Duration::from_millis(250);
/// Records handled between looks at the clock and the stop flag.
const RECORDS_PER_CHECK: u32 = 1024;
/// Timeout of each request made while finishing (metadata, watermarks).
const FINISH_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    Signal,
    Idle,
}

/// The result of a consuming run.
#[derive(Debug)]
pub struct Consumed {
    pub verifier: Verifier,
    pub stop: StopReason,
    pub rebalances: u64,
    /// The rebalance callbacks with their times (at most `MAX_REBALANCE_EVENTS`).
    pub rebalance_events: Vec<RebalanceEvent>,
    /// From the first to the last record consumed (to within 1024 records).
    pub active: Duration,
    /// CPU seconds of the poll thread (user + system, /proc/thread-self/stat).
    pub poll_thread_cpu_secs: Option<f64>,
}

/// Rebalance events kept per run (a group that keeps rebalancing is reported
/// by the count; the list stops growing here).
const MAX_REBALANCE_EVENTS: usize = 1000;

/// One rebalance callback, as the report lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RebalanceEvent {
    /// Wall-clock time of the callback, µs since the Unix epoch.
    pub at_us: i64,
    /// "assign", "revoke" or "error".
    pub kind: String,
    /// Partitions in the assignment or revocation.
    pub partitions: usize,
}

/// The next offset after the last record verified, per partition slot
/// (the verifier's slot numbers): what a commit may claim as consumed.
#[derive(Default)]
struct Processed {
    /// slot -> (topic, partition, next offset); filled as slots appear.
    by_slot: Vec<Option<(String, i32, i64)>>,
}

impl Processed {
    #[inline]
    fn note(&mut self, slot: usize, topic: &str, partition: i32, next: i64) {
        if slot >= self.by_slot.len() {
            self.by_slot.resize(slot + 1, None);
        }
        match &mut self.by_slot[slot] {
            Some((_, _, at)) => *at = (*at).max(next),
            empty => *empty = Some((topic.to_string(), partition, next)),
        }
    }

    /// The offsets to commit for the partitions in `of`.
    fn offsets_for(&self, of: &TopicPartitionList) -> TopicPartitionList {
        let mut tpl = TopicPartitionList::new();
        for (topic, partition, next) in self.by_slot.iter().flatten() {
            if of.find_partition(topic, *partition).is_some() {
                let _ = tpl.add_partition_offset(topic, *partition, Offset::Offset(*next));
            }
        }
        tpl
    }
}

/// Callbacks librdkafka makes on the poll thread.
struct Context {
    rebalances: AtomicU64,
    processed: Mutex<Processed>,
    events: Mutex<Vec<RebalanceEvent>>,
    assignment_changed: AtomicBool,
    /// (topic, partition) -> (low, high) watermark from the latest statistics.
    watermarks: Mutex<HashMap<(String, i32), (i64, i64)>>,
}

impl ClientContext for Context {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        chronik_harness::librdkafka_log::forward(level, fac, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        tracing::warn!(target: "librdkafka", %error, "{reason}");
    }

    fn stats(&self, statistics: Statistics) {
        let mut w = self.watermarks.lock().unwrap_or_else(|p| p.into_inner());
        for (topic, t) in statistics.topics {
            for (_, p) in t.partitions {
                // Partition -1 is librdkafka's internal "unassigned" queue.
                if p.partition >= 0 && p.hi_offset >= 0 {
                    w.insert((topic.clone(), p.partition), (p.lo_offset, p.hi_offset));
                }
            }
        }
    }
}

impl ConsumerContext for Context {
    /// Before a revocation takes effect: commit what was verified, so the
    /// partitions' next owner does not read it again.
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(tpl) = rebalance {
            if tpl.count() > 0 {
                commit_partitions(consumer, tpl, CommitMode::Sync);
            }
        }
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let (kind, partitions) = match rebalance {
            Rebalance::Assign(tpl) => {
                tracing::info!(partitions = tpl.count(), "partitions assigned");
                ("assign", tpl.count())
            }
            Rebalance::Revoke(tpl) => {
                tracing::info!(partitions = tpl.count(), "partitions revoked");
                ("revoke", tpl.count())
            }
            Rebalance::Error(e) => {
                tracing::warn!(error = %e, "rebalance error");
                ("error", 0)
            }
        };
        let mut events = self.events.lock().unwrap_or_else(|p| p.into_inner());
        if events.len() < MAX_REBALANCE_EVENTS {
            events.push(RebalanceEvent {
                at_us: now_us(),
                kind: kind.to_string(),
                partitions,
            });
        }
        drop(events);
        self.rebalances.fetch_add(1, Ordering::Relaxed);
        self.assignment_changed.store(true, Ordering::Relaxed);
    }

    fn commit_callback(
        &self,
        result: rdkafka::error::KafkaResult<()>,
        _offsets: &rdkafka::TopicPartitionList,
    ) {
        match result {
            Ok(()) | Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::NoOffset)) => {}
            Err(e) => tracing::warn!(error = %e, "offset commit failed"),
        }
    }
}

fn client_config(config: &Config) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &config.bootstrap_servers)
        .set("group.id", &config.group)
        .set("client.id", &config.client_id)
        .set("enable.auto.commit", "false")
        // commits name the verified offsets themselves (`Processed`)
        .set("enable.auto.offset.store", "false")
        .set(
            "auto.offset.reset",
            if config.from_beginning {
                "earliest"
            } else {
                "latest"
            },
        )
        .set("enable.partition.eof", "false")
        .set("statistics.interval.ms", "1000");
    // KIP-392: librdkafka sends it as Fetch v11+'s rack_id, and a leader with
    // a rack-aware replica selector answers with the same-rack follower to
    // fetch from (preferred_read_replica)
    if let Some(rack) = &config.client_rack {
        c.set("client.rack", rack);
    }
    // a broker that restarted or moved is found again in seconds; -X overrides
    for (k, v) in chronik_harness::reconnect::LIBRDKAFKA_RECONNECT {
        c.set(k, v);
    }
    for (k, v) in config.consumer_properties.iter() {
        c.set(k, v);
    }
    c
}

/// The `chronik-env` header value of `m`, if it has one.
#[inline]
fn envelope_of<'a>(m: &'a BorrowedMessage<'_>) -> Option<&'a [u8]> {
    let headers = m.headers()?;
    (0..headers.count())
        .map(|i| headers.get(i))
        .find(|h| h.key == ENVELOPE_HEADER)
        .and_then(|h| h.value)
}

/// One assigned partition: its verifier slot and name.
struct Assigned {
    slot: usize,
    topic: String,
    partition: i32,
}

/// Consumes until `stop` is set or, with `until_idle`, nothing new arrived
/// for that long. Publishes into `live`, writes latency intervals to `hlog`.
pub fn run(
    config: &Config,
    live: &Live,
    stop: &AtomicBool,
    hlog: Option<HlogWriter>,
) -> Result<Consumed, Error> {
    let context = Context {
        rebalances: AtomicU64::new(0),
        processed: Mutex::new(Processed::default()),
        events: Mutex::new(Vec::new()),
        assignment_changed: AtomicBool::new(false),
        watermarks: Mutex::new(HashMap::new()),
    };
    let consumer: BaseConsumer<Context> = client_config(config)
        .create_with_context(context)
        .map_err(|source| Error::Kafka {
            context: "creating the consumer",
            source,
        })?;
    let topics: Vec<&str> = config.topics.iter().map(String::as_str).collect();
    consumer.subscribe(&topics).map_err(|source| Error::Kafka {
        context: "subscribing",
        source,
    })?;

    let started = Instant::now();
    let mut verifier = Verifier::new();
    let mut assigned: Vec<Assigned> = Vec::new();
    let (mut last_consumed, mut last_progress) = (0u64, started);
    let mut next_publish = started;
    let mut next_commit = started + config.commit_interval;
    let mut intervals = LatencyIntervals {
        hlog,
        started,
        from: started,
    };
    let mut next_hlog = started + config.hlog_interval;
    let mut last_error_log: Option<Instant> = None;
    let mut since_check = 0u32;
    let mut first_record: Option<Instant> = None;

    let reason = loop {
        match consumer.poll(POLL_TIMEOUT) {
            Some(Ok(m)) => {
                let slot = verifier.partition_slot(m.topic(), m.partition());
                let record = Observed {
                    offset: m.offset(),
                    envelope: envelope_of(&m),
                    value: m.payload().unwrap_or(&[]),
                    consumed_at_us: now_us(),
                };
                verifier.observe(slot, &record);
                consumer
                    .context()
                    .processed
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .note(slot, m.topic(), m.partition(), m.offset() + 1);
                since_check += 1;
                if since_check < RECORDS_PER_CHECK {
                    continue;
                }
            }
            Some(Err(e))
                if last_error_log.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) =>
            {
                tracing::warn!(error = %e, "consumer error (repeats within 10 s are not logged)");
                last_error_log = Some(Instant::now());
            }
            Some(Err(_)) => {}
            None => {}
        }
        since_check = 0;
        if stop.load(Ordering::Relaxed) {
            break StopReason::Signal;
        }
        let now = Instant::now();
        if consumer
            .context()
            .assignment_changed
            .swap(false, Ordering::Relaxed)
        {
            assigned = current_assignment(&consumer, &mut verifier);
            last_progress = now;
        }
        if verifier.counts().consumed != last_consumed {
            last_consumed = verifier.counts().consumed;
            last_progress = now;
            first_record.get_or_insert(now);
        }
        if now >= next_publish {
            publish(&consumer, &mut verifier, &assigned, live, started);
            next_publish = now + PUBLISH_INTERVAL;
        }
        if now >= next_commit {
            commit(&consumer, CommitMode::Async);
            next_commit = now + config.commit_interval;
        }
        if now >= next_hlog {
            intervals.close(&mut verifier, live, now);
            next_hlog = now + config.hlog_interval;
        }
        if config
            .until_idle
            .is_some_and(|idle| now.duration_since(last_progress) >= idle)
        {
            break StopReason::Idle;
        }
    };

    live.set_state("stopping");
    tracing::info!(
        ?reason,
        consumed = verifier.counts().consumed,
        "stopping: final commit and watermarks"
    );
    commit(&consumer, CommitMode::Sync);
    intervals.close(&mut verifier, live, Instant::now());
    if let Some(w) = intervals.hlog {
        w.finish()?;
    }
    final_watermarks(config, &config.topics, &mut verifier);
    publish(&consumer, &mut verifier, &assigned, live, started);
    let rebalances = consumer.context().rebalances.load(Ordering::Relaxed);
    let rebalance_events = std::mem::take(
        &mut *consumer
            .context()
            .events
            .lock()
            .unwrap_or_else(|p| p.into_inner()),
    );
    let active = first_record.map_or(Duration::ZERO, |first| {
        last_progress.saturating_duration_since(first)
    });
    let poll_thread_cpu_secs = procfs::cpu_secs(Task::ThisThread);
    // Dropping the consumer closes it: leaves the group so the remaining
    // members rebalance at once.
    drop(consumer);
    Ok(Consumed {
        verifier,
        stop: reason,
        rebalances,
        rebalance_events,
        active,
        poll_thread_cpu_secs,
    })
}

fn current_assignment(consumer: &BaseConsumer<Context>, verifier: &mut Verifier) -> Vec<Assigned> {
    match consumer.assignment() {
        Ok(tpl) => tpl
            .elements()
            .iter()
            .map(|e| Assigned {
                slot: verifier.partition_slot(e.topic(), e.partition()),
                topic: e.topic().to_string(),
                partition: e.partition(),
            })
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "reading the assignment failed");
            Vec::new()
        }
    }
}

fn publish(
    consumer: &BaseConsumer<Context>,
    verifier: &mut Verifier,
    assigned: &[Assigned],
    live: &Live,
    started: Instant,
) {
    let positions: HashMap<(String, i32), i64> = consumer
        .position()
        .map(|tpl| {
            tpl.elements()
                .iter()
                .filter_map(|e| match e.offset() {
                    Offset::Offset(o) => Some(((e.topic().to_string(), e.partition()), o)),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    {
        let watermarks = consumer
            .context()
            .watermarks
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        for a in assigned {
            if let Some(&(low, high)) = watermarks.get(&(a.topic.clone(), a.partition)) {
                verifier.note_watermarks(a.slot, low, high);
            }
        }
    }
    let summaries = assigned
        .iter()
        .map(|a| {
            let p = &verifier.partitions()[a.slot];
            let position = p
                .position()
                .or_else(|| positions.get(&(a.topic.clone(), a.partition)).copied());
            PartitionSummary {
                topic: a.topic.clone(),
                partition: a.partition,
                position,
                high_watermark: p.high_watermark,
                lag: p
                    .high_watermark
                    .zip(position)
                    .map(|(hw, pos)| (hw - pos).max(0)),
            }
        })
        .collect();
    let gaps = verifier
        .producers()
        .iter()
        .map(|p| p.seen.gap_count())
        .sum();
    let rebalances = consumer.context().rebalances.load(Ordering::Relaxed);
    live.publish(
        verifier.counts(),
        gaps,
        verifier.producers().len() as u64,
        rebalances,
        summaries,
        started.elapsed().as_secs_f64(),
    );
}

/// Commits the verified offsets of the current assignment.
fn commit(consumer: &BaseConsumer<Context>, mode: CommitMode) {
    match consumer.assignment() {
        Ok(assigned) => commit_partitions(consumer, &assigned, mode),
        Err(e) => tracing::warn!(error = %e, "no assignment to commit"),
    }
}

/// Commits the verified offsets of the partitions in `of` (those with a
/// record verified; nothing else is claimed).
fn commit_partitions(consumer: &BaseConsumer<Context>, of: &TopicPartitionList, mode: CommitMode) {
    let offsets = consumer
        .context()
        .processed
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .offsets_for(of);
    if offsets.count() == 0 {
        return;
    }
    match consumer.commit(&offsets, mode) {
        Ok(()) | Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::NoOffset)) => {}
        Err(e) => tracing::warn!(error = %e, ?mode, "offset commit failed"),
    }
}

/// The run's latency intervals: each one closed goes to the live figures
/// and, with an `.hlog` writer, to the interval log.
pub(crate) struct LatencyIntervals {
    hlog: Option<HlogWriter>,
    started: Instant,
    /// Where the open interval began.
    from: Instant,
}

impl LatencyIntervals {
    pub(crate) fn new(hlog: Option<HlogWriter>, started: Instant) -> LatencyIntervals {
        LatencyIntervals {
            hlog,
            started,
            from: started,
        }
    }

    /// Closes the open interval at `to` and opens the next one there.
    fn close(&mut self, verifier: &mut Verifier, live: &Live, to: Instant) {
        let interval = verifier.take_latency_interval();
        self.close_with(interval, live, to);
    }

    /// Closes the open interval with `interval`'s latencies (taken from the
    /// verifier by the caller) at `to`.
    pub(crate) fn close_with(
        &mut self,
        interval: chronik_harness::histogram::LatencyHistogram,
        live: &Live,
        to: Instant,
    ) {
        live.add_latency(&interval);
        if let Some(w) = self.hlog.as_mut() {
            if let Err(e) = w.write_interval(
                &interval,
                self.from.duration_since(self.started),
                to.duration_since(self.from),
                None,
            ) {
                tracing::warn!(error = %e, "writing a latency interval failed");
            } else if let Err(e) = w.flush() {
                tracing::warn!(error = %e, "flushing the latency log failed");
            }
        }
        self.from = to;
    }

    /// Finishes the `.hlog`, if one is written.
    pub(crate) fn finish(self) -> Result<(), Error> {
        if let Some(w) = self.hlog {
            w.finish()?;
        }
        Ok(())
    }
}

/// Asks the broker for every partition of `topics` and its watermarks, so
/// the report knows what exists — including partitions this replica never
/// owned. Uses a client of its own: on the group consumer's connection these
/// requests would queue behind long-polling fetches (fetch.wait.max.ms each).
pub(crate) fn final_watermarks(config: &Config, topics: &[String], verifier: &mut Verifier) {
    let mut client_config = client_config(config);
    client_config.remove("group.id");
    client_config.set("client.id", format!("{}-watermarks", config.client_id));
    let consumer: BaseConsumer = match client_config.create() {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "creating the watermark client failed; coverage will be unknown");
            return;
        }
    };
    for topic in topics {
        let metadata = match consumer.fetch_metadata(Some(topic), FINISH_TIMEOUT) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(%topic, error = %e, "metadata at finish failed; coverage will be unknown");
                continue;
            }
        };
        let partitions: Vec<i32> = metadata
            .topics()
            .iter()
            .filter(|t| t.name() == topic)
            .flat_map(|t| t.partitions().iter().map(|p| p.id()))
            .collect();
        for partition in partitions {
            match consumer.fetch_watermarks(topic, partition, FINISH_TIMEOUT) {
                Ok((low, high)) => {
                    let slot = verifier.partition_slot(topic, partition);
                    verifier.note_watermarks(slot, low, high);
                }
                Err(e) => {
                    tracing::warn!(%topic, partition, error = %e, "watermarks at finish failed")
                }
            }
        }
    }
}
