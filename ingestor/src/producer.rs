//! The Kafka side: one rdkafka `ThreadedProducer` per process, sequence
//! numbering, envelope stamping, and routing of delivery reports.
//!
//! Hot path: a request's messages are staged (user headers built) outside any
//! lock; then, under the sequencer lock, each gets the next sequence number,
//! its envelope header, and is handed to librdkafka (which copies it). The
//! lock makes "sequence order = send order" hold across concurrent requests,
//! so a consumer can check per-partition order; a sequence number is consumed
//! only when librdkafka accepted the message, so the ledger has no holes.
//! Delivery reports arrive on the producer's poll thread; each carries a boxed
//! [`Token`] that records the outcome in the ledger and, for waiting requests,
//! in that request's [`BatchWaiter`] — no task or future per message.
//! Must not: know about HTTP or JSON; block the caller (send never blocks).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use chronik_harness::envelope::{Envelope, ENVELOPE_HEADER};
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Message, OwnedHeaders};
use rdkafka::metadata::Metadata;
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::ClientContext;
use tokio::sync::oneshot;

use crate::config::Config;
use crate::ledger::{Ledger, LedgerSnapshot};
use crate::message::Prepared;
use crate::metrics::{ErrorLabel, ErrorName, Metrics, ReasonLabel};

/// Locks, ignoring poisoning: every critical section here leaves its data
/// consistent at each step, so a panic elsewhere cannot leave it half-updated.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What happened to one message of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Pending,
    Delivered { partition: i32, offset: i64 },
    Failed(RDKafkaErrorCode),
}

/// Collects the outcomes of one request's messages; resolves its receiver
/// when the last one is known.
#[derive(Debug)]
pub struct BatchWaiter {
    remaining: AtomicUsize,
    outcomes: Mutex<Vec<Outcome>>,
    done: Mutex<Option<oneshot::Sender<()>>>,
}

impl BatchWaiter {
    pub fn new(len: usize) -> (Arc<BatchWaiter>, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        let waiter = BatchWaiter {
            remaining: AtomicUsize::new(len),
            outcomes: Mutex::new(vec![Outcome::Pending; len]),
            done: Mutex::new(Some(tx)),
        };
        if len == 0 {
            if let Some(tx) = lock(&waiter.done).take() {
                let _ = tx.send(());
            }
        }
        (Arc::new(waiter), rx)
    }

    /// Records message `index`'s outcome; the first outcome of a message wins.
    pub fn complete(&self, index: usize, outcome: Outcome) {
        {
            let mut outcomes = lock(&self.outcomes);
            match outcomes.get_mut(index) {
                Some(slot @ Outcome::Pending) => *slot = outcome,
                _ => return,
            }
        }
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            if let Some(tx) = lock(&self.done).take() {
                let _ = tx.send(());
            }
        }
    }

    /// The outcomes so far (`Pending` where none is known).
    pub fn outcomes(&self) -> Vec<Outcome> {
        lock(&self.outcomes).clone()
    }
}

/// Travels with each message through librdkafka and comes back in its
/// delivery report.
#[derive(Debug)]
pub struct Token {
    sequence: u64,
    index: u32,
    waiter: Option<Arc<BatchWaiter>>,
}

/// State shared by request handlers and the delivery callback.
#[derive(Debug)]
pub struct Shared {
    ledger: Mutex<Ledger>,
    /// Mirrors the sequencer: every sequence below it was handed to Kafka.
    next_sequence: AtomicU64,
    pub metrics: Arc<Metrics>,
}

impl Shared {
    fn record(&self, sequence: u64, outcome: Outcome) {
        match outcome {
            Outcome::Delivered { .. } => {
                lock(&self.ledger).acknowledged.insert(sequence);
                self.metrics.messages_delivered.inc();
            }
            Outcome::Failed(code) => {
                lock(&self.ledger).failed.insert(sequence);
                self.metrics.messages_failed.inc();
                self.metrics
                    .messages_failed_by_error
                    .get_or_create(&ErrorLabel {
                        error: ErrorName(format!("{code:?}")),
                    })
                    .inc();
            }
            Outcome::Pending => {}
        }
    }
}

/// The rdkafka context: routes delivery reports, forwards librdkafka's logs to tracing.
pub struct DeliveryRouter {
    shared: Arc<Shared>,
}

impl ClientContext for DeliveryRouter {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error => {
                tracing::error!(target: "librdkafka", fac, "{message}")
            }
            RDKafkaLogLevel::Warning => tracing::warn!(target: "librdkafka", fac, "{message}"),
            RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
                tracing::info!(target: "librdkafka", fac, "{message}")
            }
            RDKafkaLogLevel::Debug => tracing::debug!(target: "librdkafka", fac, "{message}"),
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        // Connection loss is also in librdkafka's own log lines and repeats
        // while a broker is down; requests report it through their outcomes.
        match error.rdkafka_error_code() {
            Some(RDKafkaErrorCode::BrokerTransportFailure | RDKafkaErrorCode::AllBrokersDown) => {
                tracing::debug!(target: "librdkafka", %error, "{reason}")
            }
            _ => tracing::warn!(target: "librdkafka", %error, "{reason}"),
        }
    }
}

impl ProducerContext for DeliveryRouter {
    type DeliveryOpaque = Box<Token>;

    fn delivery(&self, result: &DeliveryResult<'_>, token: Box<Token>) {
        let outcome = match result {
            Ok(m) => Outcome::Delivered {
                partition: m.partition(),
                offset: m.offset(),
            },
            Err((e, _)) => Outcome::Failed(error_code(e)),
        };
        self.shared.record(token.sequence, outcome);
        if let Some(waiter) = &token.waiter {
            waiter.complete(token.index as usize, outcome);
        }
    }
}

/// The librdkafka error code of `e` (`Fail` for errors that carry none).
pub fn error_code(e: &KafkaError) -> RDKafkaErrorCode {
    e.rdkafka_error_code().unwrap_or(RDKafkaErrorCode::Fail)
}

/// A message with its user headers already built, waiting for a sequence number.
#[derive(Debug)]
pub struct Staged<'a> {
    pub msg: Prepared<'a>,
    headers: Option<OwnedHeaders>,
}

impl<'a> Staged<'a> {
    pub fn new(msg: Prepared<'a>) -> Staged<'a> {
        let headers = Some(user_headers(&msg));
        Staged { msg, headers }
    }
}

fn user_headers(msg: &Prepared<'_>) -> OwnedHeaders {
    let mut h = OwnedHeaders::new_with_capacity(msg.headers.len() + 1);
    for (k, v) in &msg.headers {
        h = h.insert(Header {
            key: k,
            value: Some(v.as_bytes()),
        });
    }
    h
}

/// How a [`KafkaProducer::send_run`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// Every message from `start` on was enqueued or failed to enqueue
    /// (the latter reported through `enqueue_errors`).
    Done,
    /// librdkafka's queue is full; messages from `at` on were not sent.
    QueueFull { at: usize },
}

pub struct KafkaProducer {
    producer: ThreadedProducer<DeliveryRouter>,
    /// The next sequence number; held while stamping and sending.
    sequencer: Mutex<u64>,
    producer_id: u64,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for KafkaProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaProducer")
            .field("producer_id", &self.producer_id)
            .finish_non_exhaustive()
    }
}

impl KafkaProducer {
    /// Creates the producer (no broker contact yet: librdkafka connects lazily).
    pub fn new(
        config: &Config,
        producer_id: u64,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<KafkaProducer> {
        let shared = Arc::new(Shared {
            ledger: Mutex::new(Ledger::default()),
            next_sequence: AtomicU64::new(0),
            metrics,
        });
        let producer: ThreadedProducer<DeliveryRouter> = config
            .producer_properties()
            .create_with_context(DeliveryRouter {
                shared: shared.clone(),
            })
            .map_err(|e| anyhow::anyhow!("creating the Kafka producer: {e}"))?;
        Ok(KafkaProducer {
            producer,
            sequencer: Mutex::new(0),
            producer_id,
            shared,
        })
    }

    pub fn producer_id(&self) -> u64 {
        self.producer_id
    }

    pub fn metrics(&self) -> &Metrics {
        &self.shared.metrics
    }

    /// Stamps and enqueues `staged[start..]` until done or librdkafka's queue
    /// is full. Messages librdkafka refuses outright (e.g. too large, unknown
    /// partition) get no sequence number; they are appended to
    /// `enqueue_errors` and completed as failed in `waiter`.
    pub fn send_run(
        &self,
        staged: &mut [Staged<'_>],
        start: usize,
        accept_time_us: i64,
        waiter: Option<&Arc<BatchWaiter>>,
        enqueue_errors: &mut Vec<(usize, RDKafkaErrorCode)>,
    ) -> RunEnd {
        let mut sent = 0u64;
        let mut end = RunEnd::Done;
        let errors_before = enqueue_errors.len();
        {
            let mut next = lock(&self.sequencer);
            for (index, s) in staged.iter_mut().enumerate().skip(start) {
                let sequence = *next;
                let envelope = Envelope {
                    producer_id: self.producer_id,
                    sequence,
                    send_time_us: accept_time_us,
                    value_crc32c: s.msg.value_crc32c,
                }
                .encode();
                let headers = s
                    .headers
                    .take()
                    .unwrap_or_else(|| user_headers(&s.msg))
                    .insert(Header {
                        key: ENVELOPE_HEADER,
                        value: Some(&envelope[..]),
                    });
                let token = Box::new(Token {
                    sequence,
                    index: u32::try_from(index).unwrap_or(u32::MAX),
                    waiter: waiter.cloned(),
                });
                // The record's CreateTime is the HTTP accept time (ms); giving
                // it also spares librdkafka a clock read per message.
                let mut record = BaseRecord::with_opaque_to(&s.msg.topic, token)
                    .payload(&*s.msg.value)
                    .headers(headers)
                    .timestamp(accept_time_us / 1000);
                if let Some(key) = &s.msg.key {
                    record = record.key(key.as_bytes());
                }
                if let Some(partition) = s.msg.partition {
                    record = record.partition(partition);
                }
                match self.producer.send(record) {
                    Ok(()) => {
                        *next += 1;
                        sent += 1;
                    }
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                        // The returned headers already carry an envelope with
                        // this sequence; a retry rebuilds them (s.headers is None).
                        end = RunEnd::QueueFull { at: index };
                        break;
                    }
                    Err((e, _)) => {
                        let code = error_code(&e);
                        enqueue_errors.push((index, code));
                        if let Some(w) = waiter {
                            w.complete(index, Outcome::Failed(code));
                        }
                    }
                }
            }
            self.shared.next_sequence.store(*next, Ordering::Release);
        }
        self.shared.metrics.messages_accepted.inc_by(sent);
        let refused = (enqueue_errors.len() - errors_before) as u64;
        if refused > 0 {
            self.shared
                .metrics
                .messages_rejected
                .get_or_create(&ReasonLabel {
                    reason: "enqueue_error",
                })
                .inc_by(refused);
        }
        end
    }

    /// Counts valid messages that were never handed to Kafka.
    pub fn count_rejected(&self, reason: &'static str, n: usize) {
        if n > 0 {
            self.shared
                .metrics
                .messages_rejected
                .get_or_create(&ReasonLabel { reason })
                .inc_by(n as u64);
        }
    }

    /// The ledger as `GET /ledger` shows it.
    pub fn ledger_snapshot(&self, ingestor_id: &str) -> LedgerSnapshot {
        let ledger = lock(&self.shared.ledger);
        // Read under the ledger lock: every recorded sequence is below it.
        let next = self.shared.next_sequence.load(Ordering::Acquire);
        ledger.snapshot(ingestor_id, self.producer_id, next)
    }

    /// (accepted, delivered, failed) message counts.
    pub fn counts(&self) -> (u64, u64, u64) {
        let m = &self.shared.metrics;
        let failed = m.messages_failed.get();
        let delivered = m.messages_delivered.get();
        (m.messages_accepted.get(), delivered, failed)
    }

    /// Messages and requests in librdkafka's queues.
    pub fn queue_depth(&self) -> i32 {
        self.producer.in_flight_count()
    }

    /// Blocking: cluster metadata (one topic, or all when `None`).
    pub fn fetch_metadata(
        &self,
        topic: Option<&str>,
        timeout: Duration,
    ) -> Result<Metadata, KafkaError> {
        self.producer.client().fetch_metadata(topic, timeout)
    }

    /// Blocking: waits until every queued message has a delivery report.
    pub fn flush(&self, timeout: Duration) -> Result<(), KafkaError> {
        self.producer.flush(timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiter_resolves_once_after_every_outcome() {
        let (waiter, mut rx) = BatchWaiter::new(3);
        waiter.complete(
            1,
            Outcome::Delivered {
                partition: 0,
                offset: 7,
            },
        );
        waiter.complete(0, Outcome::Failed(RDKafkaErrorCode::MessageTimedOut));
        assert!(rx.try_recv().is_err(), "one outcome still pending");
        // A second report for the same message is ignored and does not count.
        waiter.complete(1, Outcome::Failed(RDKafkaErrorCode::Fail));
        assert!(rx.try_recv().is_err());
        waiter.complete(
            2,
            Outcome::Delivered {
                partition: 0,
                offset: 8,
            },
        );
        assert!(rx.try_recv().is_ok());
        assert_eq!(
            waiter.outcomes(),
            vec![
                Outcome::Failed(RDKafkaErrorCode::MessageTimedOut),
                Outcome::Delivered {
                    partition: 0,
                    offset: 7
                },
                Outcome::Delivered {
                    partition: 0,
                    offset: 8
                },
            ]
        );
        waiter.complete(9, Outcome::Pending); // out of range: ignored, no panic
    }

    #[test]
    fn empty_waiter_is_already_done() {
        let (_waiter, mut rx) = BatchWaiter::new(0);
        assert!(rx.try_recv().is_ok());
    }
}
