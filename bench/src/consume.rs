//! Consumer tasks: read, verify, time end to end.
//!
//! Owns: one consumer task = one rdkafka `BaseConsumer` with a manual
//! partition assignment (no group rebalance to wait for), its `Verifier`
//! (chronik-harness's, the consumer's own: verdicts are defined there) and
//! its interval recorder, which times end-to-end latency on the run's clock. In round-trip it runs while the producers run
//! and, after they stop, until it has read up to the high watermarks it is
//! given (or the drain timeout). Must not: commit offsets or lock.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use chronik_harness::histogram::record_us;
use chronik_harness::verify::{Verdict, Verifier};
use chronik_harness::{Envelope, ENVELOPE_HEADER};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};

use crate::client::{BenchConsumer, QuietEofContext};
use crate::metrics::{IntervalRecorder, ReportMsg};
use crate::start::Barrier;

const POLL_TIMEOUT: Duration = Duration::from_millis(50);

/// How the task decides it is finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Round-trip: read until the drain targets are reached.
    RoundTrip,
    /// Consume mode: read until `stop`, or until every partition is at its end.
    Consume { until_caught_up: bool },
}

/// Where to stop reading after the producers stopped: per partition, the
/// offset to reach, and a deadline (ns after t0).
#[derive(Debug, Clone)]
pub struct DrainTarget {
    pub high_watermarks: Vec<(i32, i64)>,
    pub deadline_ns: u64,
}

pub struct ConsumerSpec {
    pub index: u32,
    pub topic: String,
    pub client: ClientConfig,
    pub assignment: Vec<(i32, Offset)>,
    /// Round-trip: the run's producer-id prefix; consume mode: `None`.
    pub accept_prefix: Option<u32>,
    pub role: Role,
    pub stop: Arc<AtomicBool>,
    pub drain: Receiver<DrainTarget>,
    /// Records consumed so far (for `--message-count` in consume mode).
    pub progress: Arc<AtomicU64>,
    pub source: usize,
    pub report_tx: Sender<ReportMsg>,
}

#[derive(Debug)]
pub struct ConsumerOutcome {
    pub verifier: Verifier,
    pub consumed_total: u64,
    pub last_consume_ns: u64,
    /// Round-trip: whether everything up to the drain targets was read.
    pub drained: bool,
}

/// A consumer task (`start::spawn` runs it on its own thread).
pub fn run_task(spec: ConsumerSpec, barrier: Barrier) -> Result<ConsumerOutcome> {
    let consumer: BenchConsumer = match setup(&spec) {
        Ok(c) => c,
        Err(e) => {
            barrier.failed(format!("consumer {}: {e:#}", spec.index));
            return Err(e);
        }
    };
    let timeline = barrier.connected()?;
    let clock = timeline.clock;
    let warmup_end_wall_us = clock.wall_us(timeline.warmup_end_ns);
    let mut recorder = IntervalRecorder::new(spec.source, spec.report_tx.clone(), timeline.clone());
    let mut verifier = match spec.accept_prefix {
        Some(prefix) => Verifier::for_run(prefix),
        None => Verifier::new(),
    };

    let max_partition = spec
        .assignment
        .iter()
        .map(|(p, _)| *p)
        .max()
        .unwrap_or(0)
        .max(0) as usize;
    // Next offset to read per partition id; at-end flags for until-caught-up.
    let mut next_offset: Vec<i64> = vec![-1; max_partition + 1];
    let mut at_end: Vec<bool> = vec![true; max_partition + 1];
    // The verifier's slot per partition id, so a record costs no lookup.
    let mut slots: Vec<usize> = vec![usize::MAX; max_partition + 1];
    for &(p, offset) in &spec.assignment {
        at_end[p as usize] = false;
        if let Offset::Offset(o) = offset {
            next_offset[p as usize] = o;
        }
        slots[p as usize] = verifier.partition_slot(&spec.topic, p);
    }
    let mut target: Option<DrainTarget> = None;
    let mut consumed_total = 0u64;
    let mut last_consume_ns = 0u64;
    let mut drained = false;
    let mut errors_logged = 0u32;

    loop {
        match spec.role {
            Role::Consume { until_caught_up } => {
                if spec.stop.load(Ordering::Relaxed) {
                    break;
                }
                if until_caught_up && at_end.iter().all(|e| *e) {
                    break;
                }
            }
            Role::RoundTrip => {
                if target.is_none() {
                    target = spec.drain.try_recv().ok();
                }
                if let Some(t) = &target {
                    if t.high_watermarks
                        .iter()
                        .all(|&(p, hw)| next_offset.get(p as usize).is_some_and(|&n| n >= hw))
                    {
                        drained = true;
                        break;
                    }
                    if clock.now_ns() >= t.deadline_ns {
                        break;
                    }
                }
            }
        }
        let polled = consumer.poll(POLL_TIMEOUT);
        let now = clock.now_ns();
        recorder.tick(now);
        let msg = match polled {
            None => continue,
            Some(Ok(m)) => m,
            Some(Err(KafkaError::PartitionEOF(p))) => {
                if let Some(e) = at_end.get_mut(p as usize) {
                    *e = true;
                }
                continue;
            }
            Some(Err(e)) => {
                if errors_logged < 5 {
                    tracing::warn!(consumer = spec.index, error = %e, "consumer error");
                    errors_logged += 1;
                }
                continue;
            }
        };
        let partition = msg.partition();
        if let Some(n) = next_offset.get_mut(partition as usize) {
            *n = msg.offset() + 1;
            at_end[partition as usize] = false;
        }
        let value = msg.payload().unwrap_or(&[]);
        consumed_total += 1;
        last_consume_ns = now;
        if timeline.in_window(now) {
            recorder.data.consumed += 1;
            recorder.data.consumed_bytes += value.len() as u64;
        }
        let header = msg.headers().and_then(|h| {
            h.iter()
                .find(|hd| hd.key == ENVELOPE_HEADER)
                .and_then(|hd| hd.value)
        });
        let envelope = header.map(Envelope::decode);
        let send_time_us = match &envelope {
            Some(Ok(e)) => e.send_time_us,
            _ => 0,
        };
        let slot = match slots.get(partition as usize) {
            Some(&slot) if slot != usize::MAX => slot,
            _ => verifier.partition_slot(&spec.topic, partition),
        };
        let verdict = verifier.judge(slot, msg.offset(), envelope, value);
        // Timed: this run's records at their first sighting (not duplicates).
        if let Verdict::Verified {
            duplicate: false, ..
        } = verdict
        {
            let measured = match spec.role {
                Role::RoundTrip => send_time_us >= warmup_end_wall_us,
                Role::Consume { .. } => now >= timeline.warmup_end_ns,
            };
            if measured {
                let e2e_us = clock.wall_us(now).saturating_sub(send_time_us).max(0) as u64;
                record_us(&mut recorder.data.end_to_end, e2e_us);
            }
        }
        spec.progress.store(consumed_total, Ordering::Relaxed);
    }
    spec.progress.store(consumed_total, Ordering::Relaxed);
    recorder.finish(clock.now_ns());
    Ok(ConsumerOutcome {
        verifier,
        consumed_total,
        last_consume_ns,
        drained,
    })
}

fn setup(spec: &ConsumerSpec) -> Result<BenchConsumer> {
    let consumer: BenchConsumer = spec
        .client
        .create_with_context(QuietEofContext)
        .context("creating consumer")?;
    let mut tpl = TopicPartitionList::new();
    for &(p, offset) in &spec.assignment {
        tpl.add_partition_offset(&spec.topic, p, offset)
            .context("building the assignment")?;
    }
    consumer.assign(&tpl).context("assigning partitions")?;
    Ok(consumer)
}
