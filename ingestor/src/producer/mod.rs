//! The Kafka side: sequence numbering, the ledger and delivery routing,
//! shared by the two engines that talk to Kafka (`--producer`):
//! `native` (the default: one record batch per partition per request, see
//! `native/`) and `librdkafka` (rdkafka's `ThreadedProducer`, message by
//! message, see `librdkafka`).
//!
//! Hot path: a request's messages are staged outside any lock; then, under
//! the sequencer lock, each gets the next sequence number, its envelope
//! header, and is handed to the engine. The lock makes "sequence order = send
//! order" hold across concurrent requests, so a consumer can check
//! per-partition order; a sequence number is consumed only when the engine
//! accepted the message, so the ledger has no holes. Outcomes come back per
//! message (librdkafka's delivery reports) or per batch (native), and are
//! recorded in the ledger and, for waiting requests, in that request's
//! [`BatchWaiter`] — no task or future per message.
//! Must not: know about HTTP or JSON; block the caller (send never blocks).

mod librdkafka;
pub mod native;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rdkafka::error::RDKafkaErrorCode;
use rdkafka::message::OwnedHeaders;
use tokio::sync::oneshot;

use crate::config::{Config, ProducerEngine};
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
        self.complete_all(std::iter::once((index, outcome)));
    }

    /// Records several outcomes under one lock.
    pub fn complete_all(&self, items: impl IntoIterator<Item = (usize, Outcome)>) {
        let mut newly = 0;
        {
            let mut outcomes = lock(&self.outcomes);
            for (index, outcome) in items {
                if let Some(slot @ Outcome::Pending) = outcomes.get_mut(index) {
                    *slot = outcome;
                    newly += 1;
                }
            }
        }
        if newly > 0 && self.remaining.fetch_sub(newly, Ordering::AcqRel) == newly {
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

/// State shared by request handlers and the engines' outcome paths.
#[derive(Debug)]
pub struct Shared {
    ledger: Mutex<Ledger>,
    /// Mirrors the sequencer: every sequence below it was handed to Kafka.
    next_sequence: AtomicU64,
    pub metrics: Arc<Metrics>,
}

impl Shared {
    fn record(&self, sequence: u64, outcome: Outcome) {
        self.record_all(std::iter::once((sequence, outcome)));
    }

    /// Records outcomes in the ledger (one lock) and the metrics.
    pub fn record_all(&self, items: impl IntoIterator<Item = (u64, Outcome)>) {
        let (mut delivered, mut failed) = (0u64, Vec::new());
        {
            let mut ledger = lock(&self.ledger);
            for (sequence, outcome) in items {
                match outcome {
                    Outcome::Delivered { .. } => {
                        ledger.acknowledged.insert(sequence);
                        delivered += 1;
                    }
                    Outcome::Failed(code) => {
                        ledger.failed.insert(sequence);
                        failed.push(code);
                    }
                    Outcome::Pending => {}
                }
            }
        }
        self.metrics.messages_delivered.inc_by(delivered);
        for code in failed {
            self.metrics.messages_failed.inc();
            self.metrics
                .messages_failed_by_error
                .get_or_create(&ErrorLabel {
                    error: ErrorName(format!("{code:?}")),
                })
                .inc();
        }
    }
}

/// A message with what its engine needs prepared outside the sequencer
/// lock (librdkafka: the user headers), waiting for a sequence number.
#[derive(Debug)]
pub struct Staged<'a> {
    pub msg: Prepared<'a>,
    headers: Option<OwnedHeaders>,
}

/// How a [`KafkaProducer::send_run`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// Every message from `start` on was enqueued or failed to enqueue
    /// (the latter reported through `enqueue_errors`).
    Done,
    /// The engine's queue is full; messages from `at` on were not sent.
    QueueFull { at: usize },
}

/// A topic as a Metadata answer describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopicAnswer {
    /// The answer does not mention it.
    NotListed,
    Listed {
        error: Option<RDKafkaErrorCode>,
        partitions: usize,
    },
}

enum Engine {
    Librdkafka(librdkafka::Engine),
    Native(native::NativeProducer),
}

pub struct KafkaProducer {
    engine: Engine,
    /// The next sequence number; held while stamping and sending.
    sequencer: Mutex<u64>,
    producer_id: u64,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for KafkaProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaProducer")
            .field("producer_id", &self.producer_id)
            .field(
                "engine",
                &match self.engine {
                    Engine::Librdkafka(_) => "librdkafka",
                    Engine::Native(_) => "native",
                },
            )
            .finish_non_exhaustive()
    }
}

impl KafkaProducer {
    /// Creates the producer (no broker contact yet: both engines connect
    /// lazily). The native engine needs a tokio runtime.
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
        let engine = match config.producer {
            ProducerEngine::Librdkafka => {
                Engine::Librdkafka(librdkafka::Engine::new(config, shared.clone())?)
            }
            ProducerEngine::Native => {
                Engine::Native(native::NativeProducer::new(config, shared.clone())?)
            }
        };
        Ok(KafkaProducer {
            engine,
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

    /// Stages a validated message for this producer's engine.
    pub fn stage<'a>(&self, msg: Prepared<'a>) -> Staged<'a> {
        let headers = match self.engine {
            Engine::Librdkafka(_) => Some(librdkafka::user_headers(&msg)),
            Engine::Native(_) => None,
        };
        Staged { msg, headers }
    }

    /// Stamps and enqueues `staged[start..]` until done or the engine's
    /// queue is full. Messages the engine refuses outright (e.g. too large,
    /// unknown partition) get no sequence number; they are appended to
    /// `enqueue_errors` and completed as failed in `waiter`.
    pub fn send_run(
        &self,
        staged: &mut [Staged<'_>],
        start: usize,
        accept_time_us: i64,
        waiter: Option<&Arc<BatchWaiter>>,
        enqueue_errors: &mut Vec<(usize, RDKafkaErrorCode)>,
    ) -> RunEnd {
        let errors_before = enqueue_errors.len();
        let (end, sent) = {
            let mut next = lock(&self.sequencer);
            let result = match &self.engine {
                Engine::Librdkafka(e) => e.send_run(
                    &mut next,
                    self.producer_id,
                    staged,
                    start,
                    accept_time_us,
                    waiter,
                    enqueue_errors,
                ),
                Engine::Native(n) => n.send_run(
                    &mut next,
                    self.producer_id,
                    staged,
                    start,
                    accept_time_us,
                    waiter,
                    enqueue_errors,
                ),
            };
            self.shared.next_sequence.store(*next, Ordering::Release);
            result
        };
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

    /// Messages (and, for librdkafka, requests) in the engine's queues.
    pub fn queue_depth(&self) -> i64 {
        match &self.engine {
            Engine::Librdkafka(e) => i64::from(e.queue_depth()),
            Engine::Native(n) => i64::try_from(n.queue_depth()).unwrap_or(i64::MAX),
        }
    }

    /// A topic as a fresh Metadata answer describes it.
    pub async fn lookup_topic(
        &self,
        topic: &str,
        timeout: Duration,
    ) -> anyhow::Result<TopicAnswer> {
        match &self.engine {
            Engine::Librdkafka(e) => e.lookup_topic(topic, timeout).await,
            Engine::Native(n) => n.lookup_topic(topic, timeout).await,
        }
    }

    /// (brokers, topics) a broker reports: is the cluster reachable?
    pub async fn probe(&self, timeout: Duration) -> anyhow::Result<(usize, usize)> {
        match &self.engine {
            Engine::Librdkafka(e) => e.probe(timeout).await,
            Engine::Native(n) => n.probe(timeout).await,
        }
    }

    /// Waits until every queued message has an outcome, at most `timeout`.
    pub async fn flush(&self, timeout: Duration) -> anyhow::Result<()> {
        match &self.engine {
            Engine::Librdkafka(e) => e.flush(timeout).await,
            Engine::Native(n) => n.flush(timeout).await,
        }
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
