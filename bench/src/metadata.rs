//! Metadata-mode tasks: Metadata requests as the load.
//!
//! Owns: one requester = one rdkafka client sending a Metadata request for
//! the topic, then the next (closed loop) or on the schedule (open loop),
//! timing each and recording it like a delivery report. Must not: produce.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Result};
use chronik_harness::histogram::record_us;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::Consumer;

use crate::client::{BenchConsumer, QuietEofContext};
use crate::metrics::{IntervalRecorder, ReportMsg};
use crate::produce::ProducerOutcome;
use crate::schedule::{pace, Pace, Schedule};
use crate::start::Barrier;

const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

pub struct RequesterSpec {
    pub index: u32,
    pub topic: String,
    pub client: ClientConfig,
    pub schedule: Option<Schedule>,
    pub quota: Option<u64>,
    pub stop: Arc<AtomicBool>,
    pub source: usize,
    pub report_tx: Sender<ReportMsg>,
}

/// A metadata requester (`start::spawn` runs it on its own thread).
pub fn run_task(spec: RequesterSpec, barrier: Barrier) -> Result<ProducerOutcome> {
    let client: BenchConsumer = match spec.client.create_with_context(QuietEofContext) {
        Ok(c) => c,
        Err(e) => {
            barrier.failed(format!("metadata client {}: {e}", spec.index));
            return Err(anyhow!("creating metadata client: {e}"));
        }
    };
    if let Err(e) = client.fetch_metadata(Some(&spec.topic), REQUEST_TIMEOUT) {
        barrier.failed(format!(
            "metadata client {} cannot reach the broker: {e}",
            spec.index
        ));
        return Err(anyhow!("metadata: {e}"));
    }
    let timeline = barrier.connected()?;
    let clock = timeline.clock;
    let mut recorder = IntervalRecorder::new(spec.source, spec.report_tx.clone(), timeline.clone());
    let mut out = ProducerOutcome::default();
    let mut seq = 0u64;
    loop {
        if spec.stop.load(Ordering::Relaxed) || spec.quota.is_some_and(|q| seq >= q) {
            break;
        }
        let intended = match pace(spec.schedule.as_ref(), spec.index, seq, &clock) {
            Pace::Send(intended) => intended,
            Pace::Waited => continue,
        };
        let sent = clock.now_ns();
        let result = client.fetch_metadata(Some(&spec.topic), REQUEST_TIMEOUT);
        let done = clock.now_ns();
        seq += 1;
        out.sent_total += 1;
        recorder.tick(done);
        let intended = intended.unwrap_or(sent);
        let measured = intended >= timeline.warmup_end_ns;
        let data = &mut recorder.data;
        match result {
            Ok(_) => {
                out.acked_total += 1;
                out.last_ack_ns = done;
                if timeline.in_window(done) {
                    data.acked += 1;
                }
                if measured {
                    record_us(&mut data.service, (done - sent) / 1000);
                    record_us(&mut data.response, done.saturating_sub(intended) / 1000);
                    record_us(
                        &mut data.schedule_delay,
                        sent.saturating_sub(intended) / 1000,
                    );
                }
            }
            Err(e) => {
                out.failed_total += 1;
                if done >= timeline.warmup_end_ns {
                    data.failed += 1;
                }
                if out.first_error.is_none() {
                    tracing::warn!(error = %e, "metadata request failed (further failures are counted, not logged)");
                    out.first_error = Some(e.to_string());
                }
            }
        }
    }
    if let Some(s) = &spec.schedule {
        out.behind_schedule = s
            .due_by(spec.index, timeline.window_end_ns().min(clock.now_ns()))
            .saturating_sub(seq);
    }
    recorder.finish(clock.now_ns());
    Ok(out)
}
