//! Producer tasks: the hot path.
//!
//! Owns: one producer task = one rdkafka `BaseProducer` (its own producer id
//! and sequence) with a delivery callback, the send loop (open loop: on the
//! schedule; closed loop: as fast as the client accepts), and the recording
//! of delivery reports. Must not: lock, allocate per message beyond what
//! librdkafka itself needs, or drop a sample.
//!
//! Who serves delivery reports: a report is timed when `poll` serves it.
//! In closed loop the sender never sleeps, so it polls between sends itself
//! (reports wait a few sends at most, and message memory is freed by the
//! thread that allocated it — glibc's per-thread caches then make that
//! cheap; handing frees to another thread doubled the CPU per message). In
//! open loop the sender sleeps until each intended time, so a poller thread
//! blocked in `poll` serves reports as they arrive; the two share only a
//! ring of atomics holding each in-flight message's send time, indexed by
//! sequence number, and a slot is reused only after its report was served.
//! The recording state (interval histograms, ledger) lives in a
//! thread-local of the polling thread: rdkafka hands the delivery callback
//! only `&self`, and a thread-local is the lock-free way to give it `&mut`.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use chronik_harness::histogram::record_us;
use chronik_harness::intervals::IntervalSet;
use chronik_harness::ledger::Ledger;
use chronik_harness::{Envelope, ENVELOPE_HEADER};
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::ClientContext;

use crate::config::Injections;
use crate::metrics::{IntervalRecorder, ReportMsg, Timeline};
use crate::payload::{Keys, Payloads};
use crate::schedule::{pace, Pace, Schedule};
use crate::start::Barrier;

/// Marks the delivery opaque of an injected duplicate (not a measured message).
const DUPLICATE_BIT: usize = 1 << 63;
const QUEUE_FULL_BACKOFF: Duration = Duration::from_micros(100);
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// Send times of in-flight messages, by sequence number.
pub struct SendRing {
    /// `sequence + 1` of the message owning the slot, 0 when free.
    tags: Box<[AtomicU64]>,
    sent_ns: Box<[AtomicU64]>,
    mask: u64,
}

impl SendRing {
    pub fn new(max_in_flight: u32) -> SendRing {
        let slots = (u64::from(max_in_flight) * 2).next_power_of_two().max(1024) as usize;
        SendRing {
            tags: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            sent_ns: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            mask: slots as u64 - 1,
        }
    }

    /// Claims the slot of `seq`; false while an older message still holds it.
    #[inline]
    pub fn try_occupy(&self, seq: u64, sent_ns: u64) -> bool {
        let i = (seq & self.mask) as usize;
        if self.tags[i].load(Ordering::Acquire) != 0 {
            return false;
        }
        self.sent_ns[i].store(sent_ns, Ordering::Relaxed);
        self.tags[i].store(seq + 1, Ordering::Release);
        true
    }

    /// Frees the slot of a message that was not enqueued after all.
    #[inline]
    pub fn release(&self, seq: u64) {
        self.tags[(seq & self.mask) as usize].store(0, Ordering::Release);
    }

    /// The send time of `seq`, freeing its slot.
    #[inline]
    pub fn take(&self, seq: u64) -> Option<u64> {
        let i = (seq & self.mask) as usize;
        if self.tags[i].load(Ordering::Acquire) != seq + 1 {
            return None;
        }
        let sent = self.sent_ns[i].load(Ordering::Relaxed);
        self.tags[i].store(0, Ordering::Release);
        Some(sent)
    }
}

/// Everything one producer task needs.
pub struct ProducerSpec {
    pub task: u32,
    pub producer_id: u64,
    pub topic: String,
    pub client: ClientConfig,
    pub schedule: Option<Schedule>,
    pub payloads: Arc<Payloads>,
    pub keys: Arc<Keys>,
    pub envelope: bool,
    /// Sequences this task assigns (message count mode).
    pub quota: Option<u64>,
    pub keep_ledger: bool,
    pub injections: Injections,
    pub max_in_flight: u32,
    pub drain_timeout: Duration,
    pub stop: Arc<AtomicBool>,
    pub source: usize,
    pub report_tx: Sender<ReportMsg>,
}

/// What a producer task reports when it ends.
#[derive(Debug, Default)]
pub struct ProducerOutcome {
    pub ledger: Option<Ledger>,
    pub sent_total: u64,
    pub acked_total: u64,
    pub failed_total: u64,
    pub unacknowledged: u64,
    pub behind_schedule: u64,
    /// When the last acknowledgement arrived (ns after t0).
    pub last_ack_ns: u64,
    pub first_error: Option<String>,
}

/// The poller's state, reachable from the delivery callback.
struct PollerState {
    task: u32,
    ring: Arc<SendRing>,
    timeline: Arc<Timeline>,
    schedule: Option<Schedule>,
    recorder: IntervalRecorder,
    ledger: Option<Ledger>,
    message_bytes: u64,
    acked_total: u64,
    failed_total: u64,
    last_ack_ns: u64,
    first_error: Option<String>,
}

thread_local! {
    static POLLER: RefCell<Option<PollerState>> = const { RefCell::new(None) };
}

impl PollerState {
    #[inline]
    fn on_delivery(&mut self, opaque: usize, error: Option<&KafkaError>) {
        if opaque & DUPLICATE_BIT != 0 {
            return; // the injected second copy: the consumer's business, not a figure
        }
        let seq = opaque as u64;
        let now = self.timeline.clock.now_ns();
        self.recorder.tick(now);
        let Some(sent_ns) = self.ring.take(seq) else {
            // Cannot happen: every enqueued sequence holds its slot until
            // this report. Counted as a failure rather than silently ignored.
            self.failed_total += 1;
            self.recorder.data.failed += 1;
            return;
        };
        let intended_ns = match &self.schedule {
            Some(s) => s.intended_ns(self.task, seq),
            None => sent_ns,
        };
        let measured = intended_ns >= self.timeline.warmup_end_ns;
        let data = &mut self.recorder.data;
        if measured {
            record_us(
                &mut data.schedule_delay,
                sent_ns.saturating_sub(intended_ns) / 1000,
            );
        }
        match error {
            None => {
                self.acked_total += 1;
                self.last_ack_ns = now;
                if let Some(l) = self.ledger.as_mut() {
                    l.acknowledged.insert(seq);
                }
                if self.timeline.in_window(now) {
                    data.acked += 1;
                    data.acked_bytes += self.message_bytes;
                }
                if measured {
                    record_us(&mut data.service, now.saturating_sub(sent_ns) / 1000);
                    record_us(&mut data.response, now.saturating_sub(intended_ns) / 1000);
                }
            }
            Some(e) => {
                self.failed_total += 1;
                if let Some(l) = self.ledger.as_mut() {
                    l.failed.insert(seq);
                }
                if now >= self.timeline.warmup_end_ns {
                    data.failed += 1;
                }
                if self.first_error.is_none() {
                    tracing::warn!(task = self.task, error = %e, "delivery failed (further failures are counted, not logged)");
                    self.first_error = Some(e.to_string());
                }
            }
        }
    }
}

/// The producer's context: routes delivery reports to the poller's state.
struct BenchContext;

impl ClientContext for BenchContext {}

impl ProducerContext for BenchContext {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, opaque: usize) {
        let error = result.as_ref().err().map(|(e, _)| e);
        POLLER.with(|cell| {
            // Reports served outside the poller (the purge when the producer
            // is dropped after a timed-out drain) find no state: those
            // messages are already counted as unacknowledged.
            if let Ok(mut state) = cell.try_borrow_mut() {
                if let Some(state) = state.as_mut() {
                    state.on_delivery(opaque, error);
                }
            }
        });
    }
}

/// A producer task (`start::spawn` runs it on its own thread). It connects,
/// passes the start barrier, produces until `stop` (or its quota), drains,
/// and returns.
pub fn run_task(spec: ProducerSpec, barrier: Barrier) -> Result<ProducerOutcome> {
    let producer: Arc<BaseProducer<BenchContext>> =
        match spec.client.create_with_context(BenchContext) {
            Ok(p) => Arc::new(p),
            Err(e) => {
                barrier.failed(format!("creating producer {}: {e}", spec.task));
                return Err(anyhow!("creating producer: {e}"));
            }
        };
    // Connect before the clock starts: metadata for the topic opens the
    // connection to its leader.
    if let Err(e) = producer
        .client()
        .fetch_metadata(Some(&spec.topic), Duration::from_secs(10))
    {
        barrier.failed(format!(
            "producer {} cannot reach the broker: {e}",
            spec.task
        ));
        return Err(anyhow!("producer metadata: {e}"));
    }
    let timeline = barrier.connected()?;

    let ring = Arc::new(SendRing::new(spec.max_in_flight));
    let state = PollerState {
        task: spec.task,
        ring: ring.clone(),
        timeline: timeline.clone(),
        schedule: spec.schedule,
        recorder: IntervalRecorder::new(spec.source, spec.report_tx.clone(), timeline.clone()),
        ledger: spec.keep_ledger.then(|| {
            Ledger::new(
                None,
                spec.producer_id,
                0,
                IntervalSet::new(),
                IntervalSet::new(),
            )
        }),
        message_bytes: spec.payloads.for_sequence(0).0.len() as u64,
        acked_total: 0,
        failed_total: 0,
        last_ack_ns: 0,
        first_error: None,
    };
    let drain_deadline =
        |t: &Timeline| t.clock.now_ns() + crate::schedule::duration_ns(spec.drain_timeout);
    let (sent, state) = if spec.schedule.is_none() {
        // Closed loop: the sender serves its own delivery reports between
        // sends (it never sleeps, so reports wait at most a few sends), and
        // message memory is freed by the thread that allocated it.
        POLLER.with(|cell| *cell.borrow_mut() = Some(state));
        let sent = send_loop(&spec, &producer, &ring, &timeline, Polling::Inline);
        let deadline = drain_deadline(&timeline);
        while producer.in_flight_count() > 0 && timeline.clock.now_ns() < deadline {
            producer.poll(Duration::from_millis(10));
            tick_installed(timeline.clock.now_ns());
        }
        let state = POLLER
            .with(|cell| cell.borrow_mut().take())
            .ok_or_else(|| anyhow!("poller state missing"))?;
        (sent, state)
    } else {
        // Open loop: the sender sleeps until each intended time; a poller
        // thread blocked in `poll` times the reports as they arrive.
        let poller_stop = Arc::new(AtomicBool::new(false));
        let poller = {
            let producer = producer.clone();
            let stop = poller_stop.clone();
            std::thread::Builder::new()
                .name(format!("poller-{}", spec.task))
                .spawn(move || poll_deliveries(&producer, state, &stop))
                .context("spawning a poller thread")?
        };
        let sent = send_loop(&spec, &producer, &ring, &timeline, Polling::Thread);
        let deadline = drain_deadline(&timeline);
        while producer.in_flight_count() > 0 && timeline.clock.now_ns() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        poller_stop.store(true, Ordering::Release);
        (
            sent,
            poller
                .join()
                .map_err(|_| anyhow!("poller thread panicked"))?,
        )
    };
    state.recorder.finish(timeline.clock.now_ns());

    let mut ledger = state.ledger;
    if let Some(l) = ledger.as_mut() {
        l.next_sequence = Some(sent.next_sequence);
        for &s in &sent.phantom_acked {
            l.acknowledged.insert(s);
        }
        for &s in &sent.send_failures {
            l.failed.insert(s);
        }
    }
    let reported = state.acked_total + state.failed_total;
    Ok(ProducerOutcome {
        ledger,
        sent_total: sent.sent_total,
        acked_total: state.acked_total,
        failed_total: state.failed_total + sent.send_failures.len() as u64,
        unacknowledged: sent.sent_total.saturating_sub(reported),
        behind_schedule: sent.behind_schedule,
        last_ack_ns: state.last_ack_ns,
        first_error: state.first_error,
    })
}

/// Who serves delivery reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Polling {
    /// The sender, between sends (closed loop).
    Inline,
    /// A dedicated poller thread (open loop).
    Thread,
}

/// Sends between two inline polls.
const INLINE_POLL_EVERY: u32 = 32;

/// Rotates the interval of the state installed on this thread, if any.
fn tick_installed(now: u64) {
    POLLER.with(|cell| {
        if let Ok(mut state) = cell.try_borrow_mut() {
            if let Some(s) = state.as_mut() {
                s.recorder.tick(now);
            }
        }
    });
}

fn poll_deliveries(
    producer: &BaseProducer<BenchContext>,
    state: PollerState,
    stop: &AtomicBool,
) -> PollerState {
    let timeline = state.timeline.clone();
    POLLER.with(|cell| *cell.borrow_mut() = Some(state));
    let tick = || tick_installed(timeline.clock.now_ns());
    while !stop.load(Ordering::Acquire) {
        producer.poll(POLL_INTERVAL);
        tick();
    }
    // Whatever is already queued (each poll(0) serves one event).
    for _ in 0..1000 {
        if producer.in_flight_count() == 0 {
            break;
        }
        producer.poll(Duration::ZERO);
    }
    tick();
    // The state was put there at the top of this function.
    POLLER
        .with(|cell| cell.borrow_mut().take())
        .expect("poller state is installed")
}

/// What the sender did.
struct Sent {
    next_sequence: u64,
    sent_total: u64,
    behind_schedule: u64,
    phantom_acked: Vec<u64>,
    send_failures: Vec<u64>,
}

fn send_loop(
    spec: &ProducerSpec,
    producer: &BaseProducer<BenchContext>,
    ring: &SendRing,
    timeline: &Timeline,
    polling: Polling,
) -> Sent {
    let clock = timeline.clock;
    let mut out = Sent {
        next_sequence: 0,
        sent_total: 0,
        behind_schedule: 0,
        phantom_acked: Vec::new(),
        send_failures: Vec::new(),
    };
    let mut seq: u64 = 0;
    let mut key_scratch = [0u8; 16];
    let inj = spec.injections;
    let mut since_poll = 0u32;
    // Waits for the client to make room: serving reports frees it when
    // polling inline, the poller thread frees it otherwise.
    let wait_for_room = || {
        if polling == Polling::Inline {
            producer.poll(Duration::from_millis(1));
            tick_installed(clock.now_ns());
        } else {
            std::thread::sleep(QUEUE_FULL_BACKOFF);
        }
    };
    'messages: loop {
        if spec.stop.load(Ordering::Relaxed) || spec.quota.is_some_and(|q| seq >= q) {
            break;
        }
        let intended_ns = match pace(spec.schedule.as_ref(), spec.task, seq, &clock) {
            Pace::Send(intended) => intended,
            Pace::Waited => continue,
        };
        if inj.skip_sequence == Some(seq) {
            seq += 1;
            continue;
        }
        if inj.phantom_ack == Some(seq) {
            out.phantom_acked.push(seq);
            seq += 1;
            continue;
        }
        let (value, crc) = spec.payloads.for_sequence(seq);
        let key = spec.keys.key(spec.producer_id, seq, &mut key_scratch);
        let mut sent_ns = clock.now_ns();
        while !ring.try_occupy(seq, sent_ns) {
            // An older message of this slot is still unacknowledged.
            if spec.stop.load(Ordering::Relaxed) {
                break 'messages;
            }
            wait_for_room();
            sent_ns = clock.now_ns();
        }
        let envelope = Envelope {
            producer_id: spec.producer_id,
            sequence: seq,
            send_time_us: clock.wall_us(intended_ns.unwrap_or(sent_ns)),
            value_crc32c: crc,
        }
        .encode();
        let copies = if inj.duplicate == Some(seq) { 2 } else { 1 };
        for copy in 0..copies {
            let opaque = if copy == 0 {
                seq as usize
            } else {
                seq as usize | DUPLICATE_BIT
            };
            loop {
                let mut record =
                    BaseRecord::<[u8], [u8], usize>::with_opaque_to(&spec.topic, opaque)
                        .payload(value);
                if let Some(k) = key {
                    record = record.key(k);
                }
                if spec.envelope {
                    record = record.headers(OwnedHeaders::new_with_capacity(1).insert(Header {
                        key: ENVELOPE_HEADER,
                        value: Some(&envelope[..]),
                    }));
                }
                match producer.send(record) {
                    Ok(()) => {
                        if copy == 0 {
                            out.sent_total += 1;
                        }
                        break;
                    }
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                        if spec.stop.load(Ordering::Relaxed) {
                            if copy == 0 {
                                ring.release(seq);
                            } else {
                                seq += 1; // the first copy is in flight
                            }
                            break 'messages;
                        }
                        wait_for_room();
                        if copy == 0 {
                            // The send happens when the client accepts it,
                            // not when it was first tried.
                            ring.release(seq);
                            sent_ns = clock.now_ns();
                            while !ring.try_occupy(seq, sent_ns) {
                                wait_for_room();
                                sent_ns = clock.now_ns();
                            }
                        }
                    }
                    Err((e, _)) => {
                        if copy == 0 {
                            ring.release(seq);
                            out.send_failures.push(seq);
                            tracing::warn!(task = spec.task, error = %e, seq, "enqueue failed");
                        }
                        break;
                    }
                }
            }
        }
        seq += 1;
        if polling == Polling::Inline {
            since_poll += 1;
            if since_poll >= INLINE_POLL_EVERY {
                since_poll = 0;
                producer.poll(Duration::ZERO);
                tick_installed(clock.now_ns());
            }
        }
    }
    out.next_sequence = seq;
    if let Some(s) = &spec.schedule {
        let stop_ns = timeline.window_end_ns().min(clock.now_ns());
        out.behind_schedule = s.due_by(spec.task, stop_ns).saturating_sub(seq);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_slots_are_reused_only_after_their_report() {
        let ring = SendRing::new(1); // 1024 slots
        assert!(ring.try_occupy(0, 100));
        assert!(!ring.try_occupy(1024, 200), "slot 0 still held by seq 0");
        assert_eq!(ring.take(1024), None, "not the owner");
        assert_eq!(ring.take(0), Some(100));
        assert_eq!(ring.take(0), None, "taken once");
        assert!(ring.try_occupy(1024, 200));
        ring.release(1024);
        assert!(ring.try_occupy(1024, 300));
        assert_eq!(ring.take(1024), Some(300));
    }

    #[test]
    fn ring_is_sized_for_twice_the_in_flight_bound() {
        let ring = SendRing::new(100_000);
        assert_eq!(ring.mask + 1, 262_144);
    }
}
