//! The batch-native producer (`--producer native`, the default): the Kafka
//! protocol spoken directly, one record batch per partition built as an
//! HTTP request's messages arrive, instead of librdkafka's per-message
//! queueing, batching and delivery reports.
//!
//! It keeps what librdkafka gave the ingestor: the idempotent producer
//! (InitProducerId, per-partition sequences, the same bytes on every retry,
//! a new producer id when the broker lost or refused the sequence),
//! retries within `message.timeout.ms`, leader changes through metadata
//! refreshes, TLS and SASL (`security.protocol`, `sasl.*`, `ssl.*`), and
//! compression.
//!
//! Layout: `settings` (flags and properties), `conn` (one connection: TLS,
//! SASL, ApiVersions, a request at a time), `metadata` (brokers, leaders,
//! producer ids), `records` (the record batch format), `queue` (per-partition
//! batches, placement, identities), `sender` (one task per broker: Produce
//! and its answer), `throttle` (KIP-219: holding a broker's requests for
//! the throttle time it answered), `errors` (what each error code means), and here the
//! shared state, the housekeeping task (expiry, identities, metadata,
//! senders) and the calls the ingestor makes.
//! Must not: know about HTTP or JSON.

mod conn;
mod errors;
mod metadata;
mod queue;
mod records;
mod sender;
mod settings;
mod throttle;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use chronik_harness::envelope::{Envelope, ENVELOPE_HEADER};
use rdkafka::error::RDKafkaErrorCode;
use tokio::sync::Notify;

use self::metadata::Metadata;
use self::queue::{Batch, Entry, Identity, Incoming, Queues, Refused, RequestPlacement, Settled};
use self::records::RecordRef;
use self::settings::Settings;
use super::{lock, BatchWaiter, Outcome, RunEnd, Shared, Staged, TopicAnswer};
use crate::config::Config;

/// How often housekeeping looks while anything is queued.
const TICK: Duration = Duration::from_millis(100);

pub struct Inner {
    settings: Settings,
    metadata: Metadata,
    queues: Mutex<Queues>,
    /// Senders wait on it for new batches or a new leader.
    wake: Notify,
    /// Housekeeping waits on it for stale metadata and identities.
    housekeeping: Notify,
    stale: AtomicBool,
    flushing: AtomicBool,
    senders: Mutex<HashSet<i32>>,
    shared: Arc<Shared>,
}

impl Inner {
    fn lock_queues(&self) -> MutexGuard<'_, Queues> {
        lock(&self.queues)
    }

    fn is_flushing(&self) -> bool {
        self.flushing.load(Ordering::Acquire)
    }

    fn metadata_stale(&self) {
        self.stale.store(true, Ordering::Release);
        self.housekeeping.notify_one();
    }

    fn sender_stopped(&self, broker: i32) {
        lock(&self.senders).remove(&broker);
    }

    fn retry_all(&self, taken: &[queue::Taken], backoff: Duration, sent: bool) {
        let at = Instant::now() + backoff;
        let mut q = self.lock_queues();
        for t in taken {
            q.retry_front(&t.topic, t.partition, at, sent, false);
        }
    }

    fn retry_with_new_identity(&self, t: &queue::Taken) {
        self.lock_queues()
            .retry_front(&t.topic, t.partition, Instant::now(), true, true);
        self.housekeeping.notify_one();
    }

    fn deliver(&self, topic: &str, partition: i32, base_offset: i64) {
        let batch = self
            .lock_queues()
            .finish_front(topic, partition, Settled::Delivered);
        if let Some(batch) = batch {
            self.settle(&batch, |i| Outcome::Delivered {
                partition,
                offset: if base_offset < 0 {
                    -1
                } else {
                    base_offset + i as i64
                },
            });
        }
        self.wake.notify_waiters();
    }

    fn fail(&self, topic: &str, partition: i32, outcome: Outcome) {
        let batch = self
            .lock_queues()
            .finish_front(topic, partition, Settled::NotWritten);
        if let Some(batch) = batch {
            self.settle(&batch, |_| outcome);
        }
        self.wake.notify_waiters();
    }

    fn expire_now(&self) {
        let expired = self.lock_queues().expire(&self.settings, Instant::now());
        for (topic, partition, batch) in expired {
            tracing::warn!(%topic, partition, messages = batch.entries.len(), sent = batch.sent,
                "batch not acknowledged within message.timeout.ms; failing it");
            self.settle(&batch, |_| {
                Outcome::Failed(RDKafkaErrorCode::MessageTimedOut)
            });
        }
    }

    /// Records a batch's outcomes in the ledger, the metrics and its requests' waiters.
    fn settle(&self, batch: &Batch, outcome_of: impl Fn(usize) -> Outcome) {
        self.shared.record_all(
            batch
                .entries
                .iter()
                .enumerate()
                .map(|(i, e)| (e.sequence, outcome_of(i))),
        );
        for (run, (start, waiter)) in batch.waiters.iter().enumerate() {
            let Some(waiter) = waiter else { continue };
            let end = batch
                .waiters
                .get(run + 1)
                .map_or(batch.entries.len(), |(s, _)| *s);
            waiter.complete_all(
                (*start..end).map(|i| (batch.entries[i].index as usize, outcome_of(i))),
            );
        }
    }

    fn ensure_senders(self: &Arc<Self>) {
        let snapshot = self.metadata.snapshot();
        let mut senders = lock(&self.senders);
        for &broker in snapshot.brokers.keys() {
            if senders.insert(broker) {
                tokio::spawn(sender::run(self.clone(), broker));
            }
        }
    }

    async fn give_identities(&self) -> Result<()> {
        let waiting = self.lock_queues().needing_identity();
        if waiting.is_empty() {
            return Ok(());
        }
        let initial = self.lock_queues().initial;
        for (topic, partition, fresh) in waiting {
            let identity = match (fresh, initial) {
                (false, Some(id)) => id,
                _ => {
                    let (producer_id, epoch) =
                        self.metadata.init_producer_id(&self.settings).await?;
                    let id = Identity { producer_id, epoch };
                    let mut q = self.lock_queues();
                    if !fresh && q.initial.is_none() {
                        q.initial = Some(id);
                    }
                    id
                }
            };
            self.lock_queues().set_identity(&topic, partition, identity);
            self.wake.notify_waiters();
        }
        Ok(())
    }

    async fn refresh(self: &Arc<Self>) -> Result<()> {
        let topics = self.lock_queues().topics();
        self.metadata.refresh(&self.settings, Some(&topics)).await?;
        self.stale.store(false, Ordering::Release);
        self.ensure_senders();
        self.wake.notify_waiters();
        Ok(())
    }
}

/// Expiry, producer identities, metadata refreshes and senders.
async fn housekeeping(inner: Arc<Inner>) {
    let mut last_refresh = Instant::now();
    loop {
        let busy = inner.lock_queues().messages > 0;
        let wait = if busy {
            TICK
        } else {
            inner.settings.metadata_max_age.min(Duration::from_secs(5))
        };
        tokio::select! {
            () = inner.housekeeping.notified() => {}
            () = tokio::time::sleep(wait) => {}
        }
        inner.expire_now();
        if inner.settings.idempotence {
            if let Err(e) = inner.give_identities().await {
                tracing::warn!(error = %format!("{e:#}"), "no producer id yet; batches wait");
            }
        }
        let leaderless = inner.lock_queues().leaderless(&inner.metadata.snapshot());
        let due = inner.stale.load(Ordering::Acquire)
            || leaderless
            || last_refresh.elapsed() >= inner.settings.metadata_max_age;
        if due && last_refresh.elapsed() >= inner.settings.retry_backoff {
            last_refresh = Instant::now();
            if let Err(e) = inner.refresh().await {
                tracing::debug!(error = %format!("{e:#}"), "metadata refresh failed; retrying");
            }
        }
    }
}

/// The native producer, as the ingestor holds it.
pub struct NativeProducer {
    inner: Arc<Inner>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for NativeProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeProducer")
            .field("settings", &self.inner.settings)
            .finish_non_exhaustive()
    }
}

impl Drop for NativeProducer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl NativeProducer {
    /// Reads the settings (TLS files, SASL login) and starts housekeeping;
    /// the first broker is contacted on the first lookup.
    pub fn new(config: &Config, shared: Arc<Shared>) -> Result<NativeProducer> {
        let settings = Settings::from_config(config)?;
        let runtime = tokio::runtime::Handle::try_current()
            .context("the native producer needs a tokio runtime")?;
        let inner = Arc::new(Inner {
            settings,
            metadata: Metadata::new(),
            queues: Mutex::new(Queues::default()),
            wake: Notify::new(),
            housekeeping: Notify::new(),
            stale: AtomicBool::new(true),
            flushing: AtomicBool::new(false),
            senders: Mutex::new(HashSet::new()),
            shared,
        });
        let task = runtime.spawn(housekeeping(inner.clone()));
        Ok(NativeProducer { inner, task })
    }

    /// Stamps and queues `staged[start..]` (sequence numbers from `next`)
    /// until done or the queue is full; returns how many were queued.
    #[allow(clippy::too_many_arguments)]
    pub fn send_run(
        &self,
        next: &mut u64,
        producer_id: u64,
        staged: &[Staged<'_>],
        start: usize,
        accept_time_us: i64,
        waiter: Option<&Arc<BatchWaiter>>,
        enqueue_errors: &mut Vec<(usize, RDKafkaErrorCode)>,
    ) -> (RunEnd, u64) {
        let snapshot = self.inner.metadata.snapshot();
        let now = Instant::now();
        let mut placement = RequestPlacement::new();
        let mut sent = 0u64;
        let mut end = RunEnd::Done;
        let mut user_headers: Vec<(&[u8], &[u8])> = Vec::new();
        {
            let mut queues = self.inner.lock_queues();
            for (index, s) in staged.iter().enumerate().skip(start) {
                let envelope = Envelope {
                    producer_id,
                    sequence: *next,
                    send_time_us: accept_time_us,
                    value_crc32c: s.msg.value_crc32c,
                }
                .encode();
                user_headers.clear();
                user_headers.extend(
                    s.msg
                        .headers
                        .iter()
                        .map(|(k, v)| (k.as_bytes(), v.as_bytes())),
                );
                let incoming = Incoming {
                    topic: &s.msg.topic,
                    partition: s.msg.partition,
                    record: RecordRef {
                        timestamp_ms: accept_time_us / 1000,
                        key: s.msg.key.as_deref().map(str::as_bytes),
                        value: &s.msg.value,
                        headers: &user_headers,
                        last_header: Some((ENVELOPE_HEADER.as_bytes(), &envelope)),
                    },
                    entry: Entry {
                        sequence: *next,
                        index: u32::try_from(index).unwrap_or(u32::MAX),
                    },
                };
                match queues.append(
                    &self.inner.settings,
                    &snapshot,
                    &mut placement,
                    &incoming,
                    waiter,
                    now,
                ) {
                    Ok(()) => {
                        *next += 1;
                        sent += 1;
                    }
                    Err(Refused::Full) => {
                        end = RunEnd::QueueFull { at: index };
                        break;
                    }
                    Err(Refused::Error(code)) => {
                        enqueue_errors.push((index, code));
                        if let Some(w) = waiter {
                            w.complete(index, Outcome::Failed(code));
                        }
                    }
                }
            }
        }
        if sent > 0 {
            self.inner.wake.notify_waiters();
            if self.inner.settings.idempotence && self.inner.lock_queues().initial.is_none() {
                self.inner.housekeeping.notify_one();
            }
        }
        (end, sent)
    }

    /// Messages queued or in flight.
    pub fn queue_depth(&self) -> usize {
        self.inner.lock_queues().messages
    }

    /// Sends everything queued now (linger ends) and waits until every
    /// message has an outcome, at most `timeout`.
    pub async fn flush(&self, timeout: Duration) -> Result<()> {
        self.inner.flushing.store(true, Ordering::Release);
        self.inner.wake.notify_waiters();
        let deadline = Instant::now() + timeout;
        let result = loop {
            let left = self.queue_depth();
            if left == 0 {
                break Ok(());
            }
            if Instant::now() >= deadline {
                break Err(anyhow::anyhow!(
                    "{left} messages still without an outcome after {timeout:?}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        self.inner.flushing.store(false, Ordering::Release);
        result
    }

    /// A topic as the cluster describes it (a fresh Metadata request).
    pub async fn lookup_topic(&self, topic: &str, timeout: Duration) -> Result<TopicAnswer> {
        let topics = [topic.to_owned()];
        let snapshot = tokio::time::timeout(
            timeout,
            self.inner
                .metadata
                .refresh(&self.inner.settings, Some(&topics)),
        )
        .await
        .map_err(|_| anyhow::anyhow!("no metadata within {timeout:?}"))??;
        self.inner.ensure_senders();
        Ok(match snapshot.topics.get(topic) {
            None => TopicAnswer::NotListed,
            Some(t) => TopicAnswer::Listed {
                error: (t.error != 0).then(|| errors::code(t.error)),
                partitions: t.partitions.len(),
            },
        })
    }

    /// Brokers and topics known after asking a broker for the broker list.
    pub async fn probe(&self, timeout: Duration) -> Result<(usize, usize)> {
        let snapshot = tokio::time::timeout(
            timeout,
            self.inner.metadata.refresh(&self.inner.settings, Some(&[])),
        )
        .await
        .map_err(|_| anyhow::anyhow!("no metadata within {timeout:?}"))??;
        self.inner.ensure_senders();
        Ok((snapshot.brokers.len(), snapshot.topics.len()))
    }
}
