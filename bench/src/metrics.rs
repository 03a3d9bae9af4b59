//! Interval recording on the hot path and its aggregation off it.
//!
//! Owns: [`IntervalData`] (counters and histograms of one interval of one
//! source), [`IntervalRecorder`] (a source's current interval; rotated by
//! the source itself when a boundary passes, then handed over a channel) and
//! [`Reporter`] (one thread merging every source's interval `k` once all
//! have delivered it: periodic line, `.hlog` interval, per-interval series,
//! run totals). Must not: take locks or allocate per message; average
//! percentiles (histograms are merged).
//!
//! Intervals are numbered from the end of the warmup: interval `k` covers
//! `[warmup_end + k·I, warmup_end + (k+1)·I)`. What a source records before
//! the warmup ends is discarded at its first rotation.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use chronik_harness::histogram::{
    merge_into, new_latency_histogram, HlogWriter, LatencyHistogram, Percentiles,
};
use serde::Serialize;

use crate::report::table::periodic_line;
use crate::schedule::RunClock;

/// The histograms a run can record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Delivery report − actual send (OMB's publish latency); metadata mode: request latency.
    Service,
    /// Delivery report − intended send (open loop; = service time in closed loop).
    Response,
    /// Actual send − intended send (OMB's publish delay).
    ScheduleDelay,
    /// Consume time − intended send time in the envelope.
    EndToEnd,
}

impl Kind {
    pub const ALL: [Kind; 4] = [
        Kind::Service,
        Kind::Response,
        Kind::ScheduleDelay,
        Kind::EndToEnd,
    ];

    pub fn file_stem(self) -> &'static str {
        match self {
            Kind::Service => "publish-service",
            Kind::Response => "publish-response",
            Kind::ScheduleDelay => "publish-delay",
            Kind::EndToEnd => "end-to-end",
        }
    }
}

/// Counters and histograms of one interval (of one source, or merged).
#[derive(Debug, Clone)]
pub struct IntervalData {
    /// Successful acknowledgements (metadata mode: answered requests) that
    /// arrived inside the measured window.
    pub acked: u64,
    pub acked_bytes: u64,
    /// Failed deliveries or requests reported after the warmup.
    pub failed: u64,
    /// Records consumed inside the measured window.
    pub consumed: u64,
    pub consumed_bytes: u64,
    pub service: LatencyHistogram,
    pub response: LatencyHistogram,
    pub schedule_delay: LatencyHistogram,
    pub end_to_end: LatencyHistogram,
}

impl Default for IntervalData {
    fn default() -> Self {
        IntervalData {
            acked: 0,
            acked_bytes: 0,
            failed: 0,
            consumed: 0,
            consumed_bytes: 0,
            service: new_latency_histogram(),
            response: new_latency_histogram(),
            schedule_delay: new_latency_histogram(),
            end_to_end: new_latency_histogram(),
        }
    }
}

impl IntervalData {
    pub fn histogram(&self, kind: Kind) -> &LatencyHistogram {
        match kind {
            Kind::Service => &self.service,
            Kind::Response => &self.response,
            Kind::ScheduleDelay => &self.schedule_delay,
            Kind::EndToEnd => &self.end_to_end,
        }
    }

    pub fn merge(&mut self, o: &IntervalData) {
        self.acked += o.acked;
        self.acked_bytes += o.acked_bytes;
        self.failed += o.failed;
        self.consumed += o.consumed;
        self.consumed_bytes += o.consumed_bytes;
        merge_into(&mut self.service, &o.service);
        merge_into(&mut self.response, &o.response);
        merge_into(&mut self.schedule_delay, &o.schedule_delay);
        merge_into(&mut self.end_to_end, &o.end_to_end);
    }

    fn reset(&mut self) {
        self.acked = 0;
        self.acked_bytes = 0;
        self.failed = 0;
        self.consumed = 0;
        self.consumed_bytes = 0;
        self.service.reset();
        self.response.reset();
        self.schedule_delay.reset();
        self.end_to_end.reset();
    }
}

/// Interval timing shared by the sources and the reporter.
#[derive(Debug)]
pub struct Timeline {
    pub clock: RunClock,
    pub warmup_end_ns: u64,
    pub interval_ns: u64,
    /// End of the measured window in ns after t0; `u64::MAX` while running.
    pub window_end_ns: AtomicU64,
}

impl Timeline {
    pub fn new(clock: RunClock, warmup: Duration, interval: Duration) -> Timeline {
        Timeline {
            clock,
            warmup_end_ns: crate::schedule::duration_ns(warmup),
            interval_ns: crate::schedule::duration_ns(interval).max(1),
            window_end_ns: AtomicU64::new(u64::MAX),
        }
    }

    #[inline]
    pub fn window_end_ns(&self) -> u64 {
        self.window_end_ns.load(Ordering::Relaxed)
    }

    /// Whether `ns` lies in the measured window.
    #[inline]
    pub fn in_window(&self, ns: u64) -> bool {
        ns >= self.warmup_end_ns && ns < self.window_end_ns()
    }
}

pub enum ReportMsg {
    Interval {
        source: usize,
        index: u64,
        data: Box<IntervalData>,
    },
    Done {
        source: usize,
    },
}

/// One source's current interval.
pub struct IntervalRecorder {
    source: usize,
    tx: Sender<ReportMsg>,
    timeline: Arc<Timeline>,
    /// Index of the interval being recorded; `None` during warmup.
    index: Option<u64>,
    next_boundary_ns: u64,
    pub data: IntervalData,
}

impl IntervalRecorder {
    pub fn new(source: usize, tx: Sender<ReportMsg>, timeline: Arc<Timeline>) -> IntervalRecorder {
        let next_boundary_ns = timeline.warmup_end_ns;
        IntervalRecorder {
            source,
            tx,
            timeline,
            index: None,
            next_boundary_ns,
            data: IntervalData::default(),
        }
    }

    /// Rotates if `now_ns` passed the current interval's end. Call before
    /// recording anything observed at `now_ns`.
    #[inline]
    pub fn tick(&mut self, now_ns: u64) {
        if now_ns >= self.next_boundary_ns {
            self.rotate(now_ns);
        }
    }

    #[cold]
    fn rotate(&mut self, now_ns: u64) {
        while now_ns >= self.next_boundary_ns {
            match self.index {
                None => {
                    self.data.reset();
                    self.index = Some(0);
                }
                Some(k) => {
                    let full = std::mem::take(&mut self.data);
                    // The reporter outlives every source; a send can only fail
                    // once it has given up, and then nobody wants the data.
                    let _ = self.tx.send(ReportMsg::Interval {
                        source: self.source,
                        index: k,
                        data: Box::new(full),
                    });
                    self.index = Some(k + 1);
                }
            }
            self.next_boundary_ns = self
                .next_boundary_ns
                .saturating_add(self.timeline.interval_ns);
        }
    }

    /// Hands over the last (partial) interval and signs off.
    pub fn finish(mut self, now_ns: u64) {
        self.tick(now_ns);
        if let Some(k) = self.index {
            let data = std::mem::take(&mut self.data);
            let _ = self.tx.send(ReportMsg::Interval {
                source: self.source,
                index: k,
                data: Box::new(data),
            });
        }
        let _ = self.tx.send(ReportMsg::Done {
            source: self.source,
        });
    }
}

/// Figures of one completed interval inside the window.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IntervalSummary {
    pub index: u64,
    pub start_secs: f64,
    pub length_secs: f64,
    pub publish_rate: f64,
    pub publish_mb_per_sec: f64,
    pub consume_rate: f64,
    pub failed: u64,
    pub service: Percentiles,
    pub response: Percentiles,
    pub schedule_delay: Percentiles,
    pub end_to_end: Percentiles,
}

/// What the reporter keeps of one interval once its histograms are merged
/// into the totals: counters and percentiles, small enough to keep them all.
#[derive(Debug, Clone)]
pub struct IntervalRecord {
    pub index: u64,
    pub acked: u64,
    pub acked_bytes: u64,
    pub consumed: u64,
    pub failed: u64,
    pub percentiles: [Percentiles; 4],
}

/// What the reporter hands back when every source is done.
#[derive(Debug)]
pub struct ReporterOutcome {
    /// Every interval merged (histograms include the drain after the window).
    pub totals: IntervalData,
    pub intervals: Vec<IntervalRecord>,
    pub hlog_files: Vec<PathBuf>,
}

impl ReporterOutcome {
    /// The per-interval series inside the measured window. Call once the
    /// window's end is final (in count mode it is set after the last ack).
    pub fn series(&self, timeline: &Timeline) -> Vec<IntervalSummary> {
        self.intervals
            .iter()
            .map(|r| summarise(r, timeline))
            .filter(|s| s.length_secs > 0.0)
            .collect()
    }
}

/// How the reporter prints and logs.
#[derive(Debug, Clone)]
pub struct ReporterSettings {
    pub sources: usize,
    /// Which histogram the periodic line shows as `p99`.
    pub headline: Kind,
    pub show_consumed: bool,
    pub print_lines: bool,
    /// Histogram kinds to log, and where.
    pub hlog: Option<(PathBuf, Vec<Kind>, String)>,
}

pub struct Reporter;

impl Reporter {
    /// Runs until every source has sent `Done` (or all senders are gone).
    pub fn run(
        rx: Receiver<ReportMsg>,
        timeline: Arc<Timeline>,
        settings: ReporterSettings,
    ) -> ReporterOutcome {
        let mut logs = open_logs(&settings, &timeline);
        let mut reported_through: Vec<Option<u64>> = vec![None; settings.sources];
        let mut done = vec![false; settings.sources];
        let mut pending: std::collections::BTreeMap<u64, IntervalData> = Default::default();
        let mut next_index = 0u64;
        let mut totals = IntervalData::default();
        let mut intervals = Vec::new();
        let mut cumulative_acked = 0u64;
        let mut cumulative_consumed = 0u64;
        while let Ok(msg) = rx.recv() {
            match msg {
                ReportMsg::Interval {
                    source,
                    index,
                    data,
                } => {
                    reported_through[source] = Some(index);
                    pending.entry(index).or_default().merge(&data);
                }
                ReportMsg::Done { source } => done[source] = true,
            }
            let all_done = done.iter().all(|d| *d);
            // Emit every interval that all live sources have delivered.
            while let Some((&first, _)) = pending.first_key_value() {
                let complete = all_done
                    || (0..settings.sources)
                        .all(|s| done[s] || reported_through[s].is_some_and(|r| r >= first));
                if !complete {
                    break;
                }
                let data = pending.remove(&first).unwrap_or_default();
                // Intervals nobody recorded anything in still get a line.
                while next_index < first {
                    let empty = IntervalData::default();
                    emit(
                        next_index,
                        &empty,
                        &timeline,
                        &settings,
                        &mut logs,
                        &mut intervals,
                        (cumulative_acked, cumulative_consumed),
                    );
                    next_index += 1;
                }
                cumulative_acked += data.acked;
                cumulative_consumed += data.consumed;
                emit(
                    first,
                    &data,
                    &timeline,
                    &settings,
                    &mut logs,
                    &mut intervals,
                    (cumulative_acked, cumulative_consumed),
                );
                next_index = first + 1;
                totals.merge(&data);
            }
            if all_done && pending.is_empty() {
                break;
            }
        }
        let mut hlog_files = Vec::new();
        for (_, writer) in logs {
            match writer.finish() {
                Ok(p) => hlog_files.push(p),
                Err(e) => tracing::warn!(error = %e, "closing interval log"),
            }
        }
        ReporterOutcome {
            totals,
            intervals,
            hlog_files,
        }
    }
}

fn emit(
    index: u64,
    data: &IntervalData,
    timeline: &Timeline,
    settings: &ReporterSettings,
    logs: &mut [(Kind, HlogWriter)],
    intervals: &mut Vec<IntervalRecord>,
    cumulative: (u64, u64),
) {
    let record = IntervalRecord {
        index,
        acked: data.acked,
        acked_bytes: data.acked_bytes,
        consumed: data.consumed,
        failed: data.failed,
        percentiles: Kind::ALL.map(|k| Percentiles::of(data.histogram(k))),
    };
    if settings.print_lines {
        let live = summarise(&record, timeline);
        println!(
            "{}",
            periodic_line(
                &live,
                cumulative.0,
                cumulative.1,
                settings.headline,
                settings.show_consumed
            )
        );
    }
    let start = Duration::from_nanos(index * timeline.interval_ns);
    let length = Duration::from_nanos(timeline.interval_ns);
    for (kind, writer) in logs.iter_mut() {
        if let Err(e) = writer.write_interval(data.histogram(*kind), start, length, None) {
            tracing::warn!(error = %e, "writing interval log");
        }
    }
    intervals.push(record);
}

/// Rates over the part of the interval inside the window (as far as the
/// window is known); an interval wholly after the window has length 0.
fn summarise(r: &IntervalRecord, timeline: &Timeline) -> IntervalSummary {
    let start_ns = r.index * timeline.interval_ns;
    let window_len_ns = timeline
        .window_end_ns()
        .saturating_sub(timeline.warmup_end_ns);
    let end_ns = ((r.index + 1) * timeline.interval_ns).min(window_len_ns);
    let length_secs = end_ns.saturating_sub(start_ns) as f64 / 1e9;
    let per_sec = |n: u64| {
        if length_secs > 0.0 {
            n as f64 / length_secs
        } else {
            0.0
        }
    };
    let [service, response, schedule_delay, end_to_end] = r.percentiles;
    IntervalSummary {
        index: r.index,
        start_secs: start_ns as f64 / 1e9,
        length_secs,
        publish_rate: per_sec(r.acked),
        publish_mb_per_sec: per_sec(r.acked_bytes) / 1e6,
        consume_rate: per_sec(r.consumed),
        failed: r.failed,
        service,
        response,
        schedule_delay,
        end_to_end,
    }
}

fn open_logs(settings: &ReporterSettings, timeline: &Timeline) -> Vec<(Kind, HlogWriter)> {
    let Some((dir, kinds, comment)) = &settings.hlog else {
        return Vec::new();
    };
    let start = SystemTime::UNIX_EPOCH
        + Duration::from_micros(timeline.clock.wall_us(timeline.warmup_end_ns).max(0) as u64);
    let mut logs = Vec::new();
    for &kind in kinds {
        let path = dir.join(format!("{}.hlog", kind.file_stem()));
        match HlogWriter::create(
            &path,
            start,
            &format!("{comment}\nhistogram: {}", kind.file_stem()),
        ) {
            Ok(w) => logs.push((kind, w)),
            Err(e) => tracing::warn!(error = %e, "cannot create interval log"),
        }
    }
    logs
}

#[cfg(test)]
mod tests {
    use super::*;
    use chronik_harness::histogram::record_us;
    use std::sync::mpsc;

    fn timeline(warmup_ms: u64, interval_ms: u64) -> Arc<Timeline> {
        Arc::new(Timeline::new(
            RunClock::start(),
            Duration::from_millis(warmup_ms),
            Duration::from_millis(interval_ms),
        ))
    }

    #[test]
    fn recorder_discards_warmup_and_rotates_on_boundaries() {
        let tl = timeline(1000, 500);
        let (tx, rx) = mpsc::channel();
        let mut r = IntervalRecorder::new(0, tx, tl.clone());
        r.tick(10);
        r.data.acked += 5; // warmup: discarded
        r.tick(1_000_000_000); // warmup ends: interval 0 starts
        r.data.acked += 1;
        r.tick(1_400_000_000);
        r.data.acked += 1;
        r.tick(2_600_000_000); // skips past interval 1 into interval 3
        r.data.acked += 7;
        r.finish(2_700_000_000);
        let got: Vec<(u64, u64)> = rx
            .iter()
            .filter_map(|m| match m {
                ReportMsg::Interval { index, data, .. } => Some((index, data.acked)),
                ReportMsg::Done { .. } => None,
            })
            .collect();
        assert_eq!(got, vec![(0, 2), (1, 0), (2, 0), (3, 7)]);
    }

    #[test]
    fn reporter_merges_sources_per_interval_and_keeps_drain_out_of_the_series() {
        let tl = timeline(0, 1000);
        let (tx, rx) = mpsc::channel();
        let settings = ReporterSettings {
            sources: 2,
            headline: Kind::Service,
            show_consumed: false,
            print_lines: false,
            hlog: None,
        };
        let tl2 = tl.clone();
        let handle = std::thread::spawn(move || Reporter::run(rx, tl2, settings));
        for source in 0..2 {
            let mut r = IntervalRecorder::new(source, tx.clone(), tl.clone());
            r.tick(0);
            for v in 0..100 {
                r.data.acked += 1;
                record_us(
                    &mut r.data.service,
                    if source == 0 { 100 } else { 10_000 + v },
                );
            }
            r.tick(1_000_000_000);
            r.data.acked += 3;
            r.tick(2_500_000_000);
            record_us(&mut r.data.service, 1); // drain: after the window
            r.finish(2_600_000_000);
        }
        drop(tx);
        let out = handle.join().expect("reporter");
        tl.window_end_ns.store(2_000_000_000, Ordering::Relaxed);
        assert_eq!(out.totals.acked, 206);
        assert_eq!(out.totals.service.len(), 202);
        assert_eq!(out.intervals.len(), 3);
        let series = out.series(&tl);
        assert_eq!(series.len(), 2, "{series:?}");
        assert_eq!(series[0].publish_rate, 200.0);
        assert!(series[0].service.p99_us >= 10_000, "merged, not averaged");
        assert_eq!(series[1].publish_rate, 6.0);
    }
}
