//! The librdkafka engine (`--producer librdkafka`): rdkafka's
//! `ThreadedProducer`, one message at a time, every librdkafka property
//! accepted through `--producer-config`.
//!
//! Owns: the producer's creation from `Config::producer_properties`, handing
//! it each stamped message (the envelope as a header, the request's accept
//! time as CreateTime), and the delivery callback: each message carries a
//! boxed [`Token`] that records its outcome in the ledger and its request's
//! waiter. Also the blocking metadata calls and flush.
//! Must not: know about HTTP or JSON.

use std::sync::Arc;
use std::time::Duration;

use chronik_harness::envelope::{Envelope, ENVELOPE_HEADER};
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::ClientContext;

use super::{BatchWaiter, Outcome, RunEnd, Shared, Staged, TopicAnswer};
use crate::config::Config;
use crate::message::Prepared;

/// Travels with each message through librdkafka and comes back in its
/// delivery report.
#[derive(Debug)]
pub struct Token {
    sequence: u64,
    index: u32,
    waiter: Option<Arc<BatchWaiter>>,
}

/// The rdkafka context: routes delivery reports, forwards librdkafka's logs to tracing.
pub struct DeliveryRouter {
    shared: Arc<Shared>,
}

impl ClientContext for DeliveryRouter {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        chronik_harness::librdkafka_log::forward(level, fac, message);
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

/// A message's user headers as librdkafka takes them (built before the
/// sequencer lock; the envelope is added under it).
pub fn user_headers(msg: &Prepared<'_>) -> OwnedHeaders {
    let mut h = OwnedHeaders::new_with_capacity(msg.headers.len() + 1);
    for (k, v) in &msg.headers {
        h = h.insert(Header {
            key: k,
            value: Some(v.as_bytes()),
        });
    }
    h
}

pub struct Engine {
    producer: Arc<ThreadedProducer<DeliveryRouter>>,
}

impl Engine {
    pub fn new(config: &Config, shared: Arc<Shared>) -> anyhow::Result<Engine> {
        let producer: ThreadedProducer<DeliveryRouter> = config
            .producer_properties()
            .create_with_context(DeliveryRouter { shared })
            .map_err(|e| anyhow::anyhow!("creating the Kafka producer: {e}"))?;
        Ok(Engine {
            producer: Arc::new(producer),
        })
    }

    /// Stamps and enqueues `staged[start..]` (sequence numbers from `next`);
    /// returns how it ended and how many librdkafka accepted.
    #[allow(clippy::too_many_arguments)]
    pub fn send_run(
        &self,
        next: &mut u64,
        producer_id: u64,
        staged: &mut [Staged<'_>],
        start: usize,
        accept_time_us: i64,
        waiter: Option<&Arc<BatchWaiter>>,
        enqueue_errors: &mut Vec<(usize, RDKafkaErrorCode)>,
    ) -> (RunEnd, u64) {
        let mut sent = 0u64;
        for (index, s) in staged.iter_mut().enumerate().skip(start) {
            let sequence = *next;
            let envelope = Envelope {
                producer_id,
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
                    return (RunEnd::QueueFull { at: index }, sent);
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
        (RunEnd::Done, sent)
    }

    /// Messages and requests in librdkafka's queues.
    pub fn queue_depth(&self) -> i32 {
        self.producer.in_flight_count()
    }

    /// Runs a blocking librdkafka call off the async workers.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&ThreadedProducer<DeliveryRouter>) -> anyhow::Result<T> + Send + 'static,
    ) -> anyhow::Result<T> {
        let producer = self.producer.clone();
        tokio::task::spawn_blocking(move || f(&producer)).await?
    }

    /// One topic's metadata.
    pub async fn lookup_topic(
        &self,
        topic: &str,
        timeout: Duration,
    ) -> anyhow::Result<TopicAnswer> {
        let topic = topic.to_owned();
        self.blocking(move |p| {
            let metadata = p.client().fetch_metadata(Some(&topic), timeout)?;
            Ok(match metadata.topics().iter().find(|t| t.name() == topic) {
                None => TopicAnswer::NotListed,
                Some(t) => TopicAnswer::Listed {
                    error: t.error().map(RDKafkaErrorCode::from),
                    partitions: t.partitions().len(),
                },
            })
        })
        .await
    }

    /// (brokers, topics) of a full Metadata answer.
    pub async fn probe(&self, timeout: Duration) -> anyhow::Result<(usize, usize)> {
        self.blocking(move |p| {
            let metadata = p.client().fetch_metadata(None, timeout)?;
            Ok((metadata.brokers().len(), metadata.topics().len()))
        })
        .await
    }

    /// Waits until every queued message has a delivery report.
    pub async fn flush(&self, timeout: Duration) -> anyhow::Result<()> {
        self.blocking(move |p| Ok(p.flush(timeout)?)).await
    }
}
