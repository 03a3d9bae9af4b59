//! What the native producer knows of the cluster: brokers, and each topic's
//! partitions and their leaders, from Metadata requests.
//!
//! Owns: the current snapshot (replaced whole, read without waiting), the
//! control connection that asks for it (any broker that answers: the known
//! ones, then the bootstrap list), and the rule that a refresh covers the
//! topics asked for and keeps the others. Also where the producer gets
//! producer ids from (InitProducerId goes to any broker).
//! Must not: hold a lock across a request for longer than that request, or
//! know about batches.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use anyhow::{bail, Context, Result};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    InitProducerIdRequest, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::conn::Conn;
use super::settings::Settings;

/// Metadata request version spoken at most (Kafka 4.x serves up to 13).
const METADATA_MAX_VERSION: i16 = 12;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionMeta {
    /// -1 while the partition has no leader.
    pub leader: i32,
    pub error: i16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMeta {
    pub error: i16,
    /// Indexed by partition id.
    pub partitions: Vec<PartitionMeta>,
}

/// One answer's view of the cluster.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    pub brokers: HashMap<i32, (String, u16)>,
    pub topics: HashMap<String, TopicMeta>,
}

impl Snapshot {
    pub fn leader(&self, topic: &str, partition: i32) -> Option<i32> {
        let p = self
            .topics
            .get(topic)?
            .partitions
            .get(usize::try_from(partition).ok()?)?;
        (p.leader >= 0 && self.brokers.contains_key(&p.leader)).then_some(p.leader)
    }

    pub fn partition_count(&self, topic: &str) -> Option<i32> {
        let t = self.topics.get(topic)?;
        (t.error == 0 && !t.partitions.is_empty())
            .then(|| i32::try_from(t.partitions.len()).unwrap_or(i32::MAX))
    }
}

pub struct Metadata {
    current: RwLock<Arc<Snapshot>>,
    control: tokio::sync::Mutex<Option<Conn>>,
}

impl std::fmt::Debug for Metadata {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metadata")
            .field("current", &self.snapshot())
            .finish_non_exhaustive()
    }
}

impl Metadata {
    pub fn new() -> Metadata {
        Metadata {
            current: RwLock::new(Arc::new(Snapshot::default())),
            control: tokio::sync::Mutex::new(None),
        }
    }

    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Runs `f` on the control connection, opening one to the first broker
    /// that answers; a failed request drops the connection, and the next
    /// broker is tried.
    async fn with_control<T, F>(&self, settings: &Settings, mut f: F) -> Result<T>
    where
        F: for<'c> FnMut(
            &'c mut Conn,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<T>> + Send + 'c>,
        >,
    {
        let mut control = self.control.lock().await;
        if let Some(conn) = control.as_mut() {
            match f(conn).await {
                Ok(v) => return Ok(v),
                Err(e) => {
                    tracing::debug!(error = %format!("{e:#}"), "control connection failed; trying the next broker");
                    *control = None;
                }
            }
        }
        let mut candidates: Vec<(String, u16)> =
            self.snapshot().brokers.values().cloned().collect();
        candidates.sort();
        for b in &settings.bootstrap {
            if !candidates.contains(b) {
                candidates.push(b.clone());
            }
        }
        let mut last = None;
        for (host, port) in candidates {
            let attempt = async {
                let mut conn = Conn::open(settings, &host, port).await?;
                let v = f(&mut conn).await?;
                Ok::<_, anyhow::Error>((conn, v))
            };
            match attempt.await {
                Ok((conn, v)) => {
                    *control = Some(conn);
                    return Ok(v);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("no broker to ask")))
    }

    /// Asks for `topics` (every topic when `None`) and merges the answer in.
    pub async fn refresh(
        &self,
        settings: &Settings,
        topics: Option<&[String]>,
    ) -> Result<Arc<Snapshot>> {
        let request = MetadataRequest::default()
            .with_allow_auto_topic_creation(settings.allow_auto_create_topics)
            .with_topics(topics.map(|ts| {
                ts.iter()
                    .map(|t| {
                        MetadataRequestTopic::default()
                            .with_name(Some(TopicName(StrBytes::from_string(t.clone()))))
                    })
                    .collect()
            }));
        let answer: MetadataResponse = self
            .with_control(settings, |conn| {
                let request = request.clone();
                Box::pin(async move { conn.call_max(request, METADATA_MAX_VERSION).await })
            })
            .await
            .context("Metadata request")?;
        let mut next = if topics.is_some() {
            (*self.snapshot()).clone()
        } else {
            Snapshot::default()
        };
        next.brokers = answer
            .brokers
            .iter()
            .filter_map(|b| {
                Some((
                    b.node_id.0,
                    (b.host.to_string(), u16::try_from(b.port).ok()?),
                ))
            })
            .collect();
        for t in &answer.topics {
            let Some(name) = &t.name else { continue };
            let count = t
                .partitions
                .iter()
                .map(|p| p.partition_index.saturating_add(1))
                .max()
                .unwrap_or(0)
                .max(0);
            let mut partitions = vec![
                PartitionMeta {
                    leader: -1,
                    error: 0
                };
                count as usize
            ];
            for p in &t.partitions {
                if let Some(slot) = usize::try_from(p.partition_index)
                    .ok()
                    .and_then(|i| partitions.get_mut(i))
                {
                    *slot = PartitionMeta {
                        leader: p.leader_id.0,
                        error: p.error_code,
                    };
                }
            }
            next.topics.insert(
                name.to_string(),
                TopicMeta {
                    error: t.error_code,
                    partitions,
                },
            );
        }
        let next = Arc::new(next);
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = next.clone();
        Ok(next)
    }

    /// A new idempotent producer id and epoch (InitProducerId without a
    /// transactional id).
    pub async fn init_producer_id(&self, settings: &Settings) -> Result<(i64, i16)> {
        let answer = self
            .with_control(settings, |conn| {
                Box::pin(async move {
                    let request = InitProducerIdRequest::default()
                        .with_transactional_id(None)
                        .with_transaction_timeout_ms(-1)
                        .with_producer_id((-1).into())
                        .with_producer_epoch(-1);
                    conn.call_max(request, 4).await
                })
            })
            .await
            .context("InitProducerId request")?;
        if answer.error_code != 0 {
            bail!("InitProducerId: {}", super::errors::name(answer.error_code));
        }
        Ok((answer.producer_id.0, answer.producer_epoch))
    }
}
