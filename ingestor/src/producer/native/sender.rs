//! One sender per broker: takes the ready batches of the partitions that
//! broker leads, sends them as one Produce request, and settles each
//! partition's answer.
//!
//! Owns: the broker's connection (opened on demand, dropped on any error),
//! the Produce request and its answer, and what each partition's error code
//! means for its batch: delivered (ledger, waiters, offsets), sent again as
//! is (same producer id and sequence, so the broker drops a copy it already
//! has), sent again under a new producer identity, or failed. An answer that
//! never came is an unknown outcome: the batch is sent again as is. An
//! answer's `throttle_time_ms` is counted and holds the broker's next
//! request until it has passed (KIP-219, `throttle`).
//! Must not: build batches (the queue does) or decide leaders (metadata does).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::conn::Conn;
use super::errors::{self, Action};
use super::queue::Taken;
use super::throttle::Throttle;
use super::Inner;
use crate::producer::Outcome;

/// Produce request version spoken at most (v13 names topics by id).
const PRODUCE_MAX_VERSION: i16 = 11;
/// Most batch bytes in one Produce request.
const MAX_REQUEST_BYTES: usize = 16 * 1024 * 1024;

pub async fn run(inner: Arc<Inner>, broker: i32) {
    let mut conn: Option<Conn> = None;
    let mut reconnect_backoff = inner.settings.reconnect_backoff;
    let mut throttle = Throttle::default();
    loop {
        if let Some(until) = throttle.hold_until(Instant::now()) {
            // The broker muted this client: its batches wait in the queue.
            tokio::time::sleep_until(until.into()).await;
            continue;
        }
        let notified = inner.wake.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let snapshot = inner.metadata.snapshot();
        let Some((host, port)) = snapshot.brokers.get(&broker).cloned() else {
            // No longer in the cluster: a later sender takes over if it returns.
            inner.sender_stopped(broker);
            return;
        };
        let now = Instant::now();
        let (taken, next_due) = inner.lock_queues().take_ready(
            &inner.settings,
            &snapshot,
            broker,
            now,
            inner.is_flushing(),
            MAX_REQUEST_BYTES,
        );
        if taken.is_empty() {
            let idle = next_due.unwrap_or(now + Duration::from_secs(1));
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep_until(idle.into()) => {}
            }
            continue;
        }
        if conn.is_none() {
            match Conn::open(&inner.settings, &host, port).await {
                Ok(c) => {
                    conn = Some(c);
                    reconnect_backoff = inner.settings.reconnect_backoff;
                }
                Err(e) => {
                    tracing::debug!(broker, error = %format!("{e:#}"), "cannot connect; batches wait");
                    inner.retry_all(&taken, reconnect_backoff, false);
                    inner.metadata_stale();
                    reconnect_backoff =
                        (reconnect_backoff * 2).min(inner.settings.reconnect_backoff_max);
                    continue;
                }
            }
        }
        let Some(c) = conn.as_mut() else { continue };
        match produce(&inner, c, &taken).await {
            Ok(Some(answer)) => {
                let throttle_time_ms = answer.throttle_time_ms;
                inner
                    .shared
                    .metrics
                    .record_produce_throttle(throttle_time_ms);
                if let Some(held) = throttle.record(throttle_time_ms, Instant::now()) {
                    tracing::debug!(
                        broker,
                        held_ms = held.as_millis() as u64,
                        "throttled by the broker's quota"
                    );
                }
                settle(&inner, &taken, &answer);
            }
            Ok(None) => {
                // acks=0: written as far as anyone will know.
                for t in &taken {
                    inner.deliver(&t.topic, t.partition, -1);
                }
            }
            Err(e) => {
                tracing::debug!(broker, error = %format!("{e:#}"), "produce request failed; retrying its batches");
                conn = None;
                inner.retry_all(&taken, inner.settings.retry_backoff, true);
                inner.metadata_stale();
            }
        }
        inner.expire_now();
    }
}

async fn produce(
    inner: &Inner,
    conn: &mut Conn,
    taken: &[Taken],
) -> Result<Option<ProduceResponse>> {
    let mut topics: Vec<TopicProduceData> = Vec::new();
    for t in taken {
        let data = PartitionProduceData::default()
            .with_index(t.partition)
            .with_records(Some(t.bytes.clone()));
        match topics.iter_mut().find(|d| *d.name.0 == *t.topic) {
            Some(d) => d.partition_data.push(data),
            None => topics.push(
                TopicProduceData::default()
                    .with_name(TopicName(StrBytes::from_string(t.topic.to_string())))
                    .with_partition_data(vec![data]),
            ),
        }
    }
    let timeout_ms = i32::try_from(inner.settings.request_timeout.as_millis()).unwrap_or(i32::MAX);
    let request = ProduceRequest::default()
        .with_acks(inner.settings.acks)
        .with_timeout_ms(timeout_ms)
        .with_topic_data(topics);
    let version = conn.version::<ProduceRequest>(PRODUCE_MAX_VERSION)?;
    if inner.settings.acks == 0 {
        conn.send_only(request, version).await?;
        return Ok(None);
    }
    Ok(Some(conn.call_at(request, version).await?))
}

fn settle(inner: &Inner, taken: &[Taken], answer: &ProduceResponse) {
    let backoff = inner.settings.retry_backoff;
    let mut refresh = false;
    for t in taken {
        let result = answer
            .responses
            .iter()
            .filter(|r| *r.name.0 == *t.topic)
            .flat_map(|r| r.partition_responses.iter())
            .find(|p| p.index == t.partition);
        let Some(p) = result else {
            // The answer skipped it: as if it had not come.
            inner.retry_all(std::slice::from_ref(t), backoff, true);
            continue;
        };
        match errors::classify(p.error_code) {
            Action::Delivered => inner.deliver(&t.topic, t.partition, p.base_offset),
            Action::Retry { refresh: r } => {
                refresh |= r;
                tracing::debug!(topic = %t.topic, partition = t.partition, error = %errors::name(p.error_code), "retrying a batch");
                inner.retry_all(std::slice::from_ref(t), backoff, true);
            }
            Action::NewIdentity => {
                tracing::info!(topic = %t.topic, partition = t.partition, error = %errors::name(p.error_code),
                    "the broker has no sequence state for this producer; retrying under a new producer id");
                inner.retry_with_new_identity(t);
            }
            Action::Fail => {
                tracing::warn!(topic = %t.topic, partition = t.partition, error = %errors::name(p.error_code),
                    detail = p.error_message.as_deref().unwrap_or(""), "batch refused");
                inner.fail(
                    &t.topic,
                    t.partition,
                    Outcome::Failed(errors::code(p.error_code)),
                );
            }
        }
    }
    if refresh {
        inner.metadata_stale();
    }
}
