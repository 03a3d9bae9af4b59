//! One measured run: start the tasks, time the warmup and the window, stop,
//! drain, verify, and assemble the `RunResult`.
//!
//! Owns: the order of a run (connect every task → start the clock → warmup →
//! window → stop → drain → reconcile) and the window's end: the planned end
//! (`--duration`), the moment of Ctrl-C, or — in count mode — the last
//! acknowledgement. Must not: format output.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use anyhow::{anyhow, bail, Context, Result};
use chronik_harness::ledger::Ledger;
use chronik_harness::results::rfc3339_utc;
use chronik_harness::verify::Verifier;
use rdkafka::Offset;

use crate::client;
use crate::config::{Config, ConsumeFrom, Mode};
use crate::consume::{self, ConsumerOutcome, ConsumerSpec, DrainTarget, Role};
use crate::metadata::{self, RequesterSpec};
use crate::metrics::{Kind, ReportMsg, Reporter, ReporterSettings, Timeline};
use crate::payload::{Keys, Payloads, SplitMix64};
use crate::produce::{self, ProducerOutcome, ProducerSpec};
use crate::resources::{clock_ticks_per_sec, CpuMeter, RssSampler};
use crate::result::{
    headline_kind, BrokerResources, Histograms, PublishCounts, Resources, RunResult, Verification,
};
use crate::schedule::{duration_ns, RunClock, Schedule};
use crate::start::{self, Barrier};

/// How long every task may take to connect before the run is abandoned.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
const WAIT_SLICE: Duration = Duration::from_millis(10);

/// What a run needs besides the config.
#[derive(Debug, Clone)]
pub struct RunContext {
    /// Set by SIGINT.
    pub interrupted: Arc<AtomicBool>,
    pub print_lines: bool,
    /// Partition ids of the topic.
    pub partitions: Vec<i32>,
    /// Where this run's `.hlog` files go, if anywhere.
    pub hlog_dir: Option<PathBuf>,
    pub hlog_comment: String,
}

enum Stop {
    Interrupted(u64),
    Planned(u64),
    /// Quota done or consumers caught up: the window ends at the last event.
    Finished,
}

/// A fresh random value (per run: producer-id prefix, payload seed).
pub fn random_u64() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    SplitMix64::new(nanos ^ (u64::from(std::process::id()) << 32)).next_u64()
}

type Handle<T> = JoinHandle<Result<T>>;

/// Runs once at `rate` (None = closed loop).
pub fn run_once(c: &Config, rate: Option<f64>, ctx: &RunContext) -> Result<RunResult> {
    let started_at = rfc3339_utc(SystemTime::now());
    let run_prefix = (random_u64() >> 32) as u32;
    let payloads = Arc::new(Payloads::generate(
        c.message_size,
        c.payload_pattern,
        random_u64(),
    ));
    let keys = Arc::new(Keys::generate(c.key_pattern, random_u64()));
    let (report_tx, report_rx) = mpsc::channel::<ReportMsg>();
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
    let stop = Arc::new(AtomicBool::new(false));
    let mut go: Vec<Sender<Arc<Timeline>>> = Vec::new();
    let mut barrier = || {
        let (tx, rx) = mpsc::channel();
        go.push(tx);
        Barrier::new(ready_tx.clone(), rx)
    };
    let mut source = 0usize;
    let senders = match c.mode {
        Mode::Produce | Mode::RoundTrip | Mode::Metadata => c.concurrency,
        Mode::Consume => 0,
    };
    let schedule = rate.map(|r| Schedule::new(r, senders.max(1)));
    let quota = |task: u32| {
        c.message_count
            .map(|n| n / u64::from(senders) + u64::from(u64::from(task) < n % u64::from(senders)))
    };

    let md = client::metadata_client(c)?;
    let mut producers: Vec<Handle<ProducerOutcome>> = Vec::new();
    let mut consumers: Vec<(Handle<ConsumerOutcome>, Sender<DrainTarget>, Arc<AtomicU64>)> =
        Vec::new();

    // Round-trip: the consumer starts at the current end of every partition,
    // fixed before anything is produced.
    let assignments: Vec<Vec<(i32, Offset)>> = match c.mode {
        Mode::RoundTrip => {
            let hws = client::high_watermarks(&md, &c.topic, &ctx.partitions)?;
            vec![ctx
                .partitions
                .iter()
                .zip(hws)
                .map(|(&p, hw)| (p, Offset::Offset(hw)))
                .collect()]
        }
        Mode::Consume => {
            let n = (c.concurrency as usize).min(ctx.partitions.len()).max(1);
            let start = match c.consume_from {
                ConsumeFrom::Earliest => Offset::Beginning,
                ConsumeFrom::Latest => Offset::End,
            };
            (0..n)
                .map(|i| {
                    ctx.partitions
                        .iter()
                        .skip(i)
                        .step_by(n)
                        .map(|&p| (p, start))
                        .collect()
                })
                .collect()
        }
        Mode::Produce | Mode::Metadata => Vec::new(),
    };
    for (i, assignment) in assignments.into_iter().enumerate() {
        let (drain_tx, drain_rx) = mpsc::channel();
        let progress = Arc::new(AtomicU64::new(0));
        let spec = ConsumerSpec {
            index: i as u32,
            topic: c.topic.clone(),
            client: client::consumer_config(c, &format!("chronik-bench-{run_prefix:08x}")),
            assignment,
            accept_prefix: (c.mode == Mode::RoundTrip).then_some(run_prefix),
            role: match c.mode {
                Mode::RoundTrip => Role::RoundTrip,
                _ => Role::Consume {
                    until_caught_up: c.until_caught_up,
                },
            },
            stop: stop.clone(),
            drain: drain_rx,
            progress: progress.clone(),
            source,
            report_tx: report_tx.clone(),
        };
        source += 1;
        consumers.push((
            start::spawn(format!("consumer-{i}"), spec, barrier(), consume::run_task)?,
            drain_tx,
            progress,
        ));
    }
    for task in 0..senders {
        let handle = if c.mode == Mode::Metadata {
            let spec = RequesterSpec {
                index: task,
                topic: c.topic.clone(),
                client: client::consumer_config(c, "chronik-bench-metadata"),
                schedule,
                quota: quota(task),
                stop: stop.clone(),
                source,
                report_tx: report_tx.clone(),
            };
            start::spawn(
                format!("metadata-{task}"),
                spec,
                barrier(),
                metadata::run_task,
            )?
        } else {
            let spec = ProducerSpec {
                task,
                producer_id: (u64::from(run_prefix) << 32) | u64::from(task),
                topic: c.topic.clone(),
                client: client::producer_config(c),
                schedule,
                payloads: payloads.clone(),
                keys: keys.clone(),
                envelope: c.envelope,
                quota: quota(task),
                keep_ledger: c.mode == Mode::RoundTrip,
                injections: if task == 0 {
                    c.injections
                } else {
                    Default::default()
                },
                max_in_flight: c.max_in_flight,
                drain_timeout: c.drain_timeout,
                stop: stop.clone(),
                source,
                report_tx: report_tx.clone(),
            };
            start::spawn(
                format!("producer-{task}"),
                spec,
                barrier(),
                produce::run_task,
            )?
        };
        source += 1;
        producers.push(handle);
    }
    drop(ready_tx);
    drop(report_tx);

    // Every task connected, or none runs.
    for _ in 0..source {
        let problem = match ready_rx.recv_timeout(READY_TIMEOUT) {
            Ok(Ok(())) => continue,
            Ok(Err(msg)) => msg,
            Err(_) => format!("a task did not connect within {READY_TIMEOUT:?}"),
        };
        drop(go);
        for h in producers {
            let _ = h.join();
        }
        for (h, _, _) in consumers {
            let _ = h.join();
        }
        bail!("{problem}");
    }

    let clock = RunClock::start();
    let interval = Duration::from_secs(c.report_interval_secs);
    let timeline = Arc::new(Timeline::new(clock, c.warmup_duration, interval));
    let settings = ReporterSettings {
        sources: source,
        headline: headline_kind(c.mode),
        show_consumed: c.mode == Mode::RoundTrip,
        print_lines: ctx.print_lines,
        hlog: ctx.hlog_dir.clone().map(|d| {
            (
                d,
                hlog_kinds(c.mode, rate.is_some()),
                ctx.hlog_comment.clone(),
            )
        }),
    };
    let reporter = {
        let timeline = timeline.clone();
        std::thread::Builder::new()
            .name("reporter".into())
            .spawn(move || Reporter::run(report_rx, timeline, settings))
            .context("spawning the reporter")?
    };
    for tx in &go {
        let _ = tx.send(timeline.clone());
    }
    drop(go);
    if !c.warmup_duration.is_zero() {
        tracing::info!(warmup = ?c.warmup_duration, "warming up (excluded from the figures)");
    }

    let ticks = clock_ticks_per_sec();
    let tool_cpu = CpuMeter::new(vec![None], ticks);
    let broker_cpu = CpuMeter::new(c.broker_pids.iter().map(|&p| Some(p)).collect(), ticks);
    let rss = RssSampler::start(c.broker_pids.clone());

    // Warmup.
    let mut interrupted_at = None;
    while clock.now_ns() < timeline.warmup_end_ns {
        if ctx.interrupted.load(Ordering::Relaxed) {
            interrupted_at = Some(clock.now_ns());
            break;
        }
        sleep_towards(clock.now_ns(), timeline.warmup_end_ns);
    }
    let (tool0, broker0) = (tool_cpu.seconds(), broker_cpu.seconds());
    rss.reset();

    // The measured window.
    let planned_end = c.duration.map(|d| timeline.warmup_end_ns + duration_ns(d));
    let stop_reason = loop {
        let now = clock.now_ns();
        if let Some(at) = interrupted_at {
            break Stop::Interrupted(at);
        }
        if ctx.interrupted.load(Ordering::Relaxed) {
            break Stop::Interrupted(now);
        }
        if let Some(end) = planned_end {
            if now >= end {
                break Stop::Planned(end);
            }
        }
        let finished = match c.mode {
            Mode::Consume => {
                let consumed: u64 = consumers
                    .iter()
                    .map(|(_, _, p)| p.load(Ordering::Relaxed))
                    .sum();
                if c.message_count.is_some_and(|n| consumed >= n) {
                    break Stop::Planned(now);
                }
                consumers.iter().all(|(h, _, _)| h.is_finished())
            }
            _ => c.message_count.is_some() && producers.iter().all(JoinHandle::is_finished),
        };
        if finished {
            break Stop::Finished;
        }
        sleep_towards(now, planned_end.unwrap_or(u64::MAX));
    };
    let interrupted = matches!(stop_reason, Stop::Interrupted(_));
    match stop_reason {
        Stop::Interrupted(at) | Stop::Planned(at) => {
            timeline.window_end_ns.store(at, Ordering::Relaxed)
        }
        Stop::Finished => {}
    }
    stop.store(true, Ordering::Relaxed);
    let (tool1, broker1) = (tool_cpu.seconds(), broker_cpu.seconds());
    if interrupted {
        tracing::warn!(
            "interrupted: stopping, draining and writing results (Ctrl-C again to quit at once)"
        );
    }

    // Drain the producers, then let the round-trip consumer catch up.
    let mut outcomes = Vec::new();
    for h in producers {
        outcomes.push(
            h.join()
                .map_err(|_| anyhow!("a producer thread panicked"))??,
        );
    }
    if c.mode == Mode::RoundTrip {
        let hws = client::high_watermarks(&md, &c.topic, &ctx.partitions)?;
        let deadline_ns = clock.now_ns() + duration_ns(c.drain_timeout);
        for (_, tx, _) in &consumers {
            let _ = tx.send(DrainTarget {
                high_watermarks: ctx.partitions.iter().copied().zip(hws.clone()).collect(),
                deadline_ns,
            });
        }
    }
    let mut consumer_outcomes = Vec::new();
    for (h, _, _) in consumers {
        consumer_outcomes.push(
            h.join()
                .map_err(|_| anyhow!("a consumer thread panicked"))??,
        );
    }
    if matches!(stop_reason, Stop::Finished) {
        let last = outcomes
            .iter()
            .map(|o| o.last_ack_ns)
            .chain(consumer_outcomes.iter().map(|o| o.last_consume_ns))
            .max()
            .unwrap_or(0);
        timeline
            .window_end_ns
            .store(last.max(timeline.warmup_end_ns) + 1, Ordering::Relaxed);
    }
    let reported = reporter
        .join()
        .map_err(|_| anyhow!("the reporter thread panicked"))?;
    let peak_rss = rss.finish();
    let window_end = timeline.window_end_ns();
    let window_secs = window_end.saturating_sub(timeline.warmup_end_ns) as f64 / 1e9;

    let publish = PublishCounts {
        acked: reported.totals.acked,
        acked_bytes: reported.totals.acked_bytes,
        failed: reported.totals.failed,
        unacknowledged: outcomes.iter().map(|o| o.unacknowledged).sum(),
        behind_schedule: outcomes.iter().map(|o| o.behind_schedule).sum(),
        sent_total: outcomes.iter().map(|o| o.sent_total).sum(),
    };
    let verification = match c.mode {
        Mode::RoundTrip => {
            let ledgers: Vec<Ledger> = outcomes
                .iter_mut()
                .filter_map(|o| o.ledger.take())
                .collect();
            let outcome = consumer_outcomes
                .first()
                .ok_or_else(|| anyhow!("round-trip ran no consumer"))?;
            if !outcome.drained {
                tracing::warn!(timeout = ?c.drain_timeout, "the consumer did not reach the high watermarks before the drain timeout");
            }
            Some(Verification::of(&[&outcome.verifier], Some(&ledgers)))
        }
        Mode::Consume => {
            let verifiers: Vec<&Verifier> = consumer_outcomes.iter().map(|o| &o.verifier).collect();
            Some(Verification::of(&verifiers, None))
        }
        Mode::Produce | Mode::Metadata => None,
    };

    let (consumed, consumed_bytes) = (reported.totals.consumed, reported.totals.consumed_bytes);
    let messages = if c.mode == Mode::Consume {
        consumed
    } else {
        publish.acked
    };
    let per_msg = |secs: f64| {
        if messages > 0 {
            secs * 1e6 / messages as f64
        } else {
            0.0
        }
    };
    // In count mode the CPU window ends when the stop was noticed (after the
    // drain): a slight overestimate, never an underestimate.
    let resources = Resources {
        tool_cpu_secs: tool1 - tool0,
        tool_cpu_us_per_msg: per_msg(tool1 - tool0),
        broker: (!c.broker_pids.is_empty()).then(|| BrokerResources {
            pids: c.broker_pids.clone(),
            cpu_secs: broker1 - broker0,
            cpu_us_per_msg: per_msg(broker1 - broker0),
            peak_rss_bytes: peak_rss,
        }),
    };
    let series = reported.series(&timeline);
    let totals = reported.totals;
    Ok(RunResult {
        mode: c.mode,
        rate_target: rate,
        started_at,
        ended_at: rfc3339_utc(SystemTime::now()),
        window_secs,
        interrupted,
        publish,
        consumed,
        consumed_bytes,
        histograms: Histograms {
            service: totals.service,
            response: totals.response,
            schedule_delay: totals.schedule_delay,
            end_to_end: totals.end_to_end,
        },
        series,
        verification,
        resources,
        hlog_files: reported.hlog_files,
        partitions: ctx.partitions.len(),
    })
}

fn sleep_towards(now: u64, target: u64) {
    let slice = duration_ns(WAIT_SLICE);
    std::thread::sleep(Duration::from_nanos(
        target.saturating_sub(now).clamp(1, slice),
    ));
}

/// The histograms worth an interval log in each mode.
fn hlog_kinds(mode: Mode, open_loop: bool) -> Vec<Kind> {
    let mut kinds = match mode {
        Mode::Consume => return vec![Kind::EndToEnd],
        _ => vec![Kind::Service],
    };
    if open_loop {
        kinds.extend([Kind::Response, Kind::ScheduleDelay]);
    }
    if mode == Mode::RoundTrip {
        kinds.push(Kind::EndToEnd);
    }
    kinds
}

/// Topic set-up shared by every run of an invocation: create it if asked,
/// wait until its partitions have leaders.
pub fn prepare_topic(c: &Config, md: &client::BenchConsumer) -> Result<Vec<i32>> {
    if c.create_topic {
        client::create_topic(c)?;
    }
    client::wait_for_partitions(md, &c.topic, Duration::from_secs(30))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hlog_kinds_follow_the_mode() {
        assert_eq!(hlog_kinds(Mode::Produce, false), vec![Kind::Service]);
        assert_eq!(
            hlog_kinds(Mode::Produce, true),
            vec![Kind::Service, Kind::Response, Kind::ScheduleDelay]
        );
        assert_eq!(
            hlog_kinds(Mode::RoundTrip, false),
            vec![Kind::Service, Kind::EndToEnd]
        );
        assert_eq!(hlog_kinds(Mode::Consume, true), vec![Kind::EndToEnd]);
    }

    #[test]
    fn random_values_differ() {
        assert_ne!(random_u64(), random_u64());
    }
}
