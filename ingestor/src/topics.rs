//! Which topics exist and how many partitions they have, as the broker said.
//!
//! Owns: a cache of topic -> partition count, filled from Metadata requests
//! (run on the blocking pool). Requests are checked against it before any of
//! their messages is sent, so an unknown topic (broker auto-create off) is a
//! prompt 404 naming the Kafka error instead of a long wait for librdkafka to
//! give up, and a partition out of range is rejected before anything is sent.
//! Known topics are cached for the process lifetime; a partition beyond the
//! cached count triggers one refresh (the topic may have grown).
//! Must not: send messages.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rdkafka::error::RDKafkaErrorCode;

use crate::producer::{KafkaProducer, TopicAnswer};

/// Why a topic cannot be produced to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopicError {
    /// The broker does not know the topic (and did not create it).
    #[error("topic {topic:?}: {kafka_error}")]
    Unknown { topic: String, kafka_error: String },
    /// The broker could not be asked in time.
    #[error("metadata for topic {topic:?} unavailable: {kafka_error}")]
    Unavailable { topic: String, kafka_error: String },
    /// The broker answered with another error for this topic.
    #[error("topic {topic:?}: {kafka_error}")]
    Refused { topic: String, kafka_error: String },
}

#[derive(Debug, Default)]
pub struct TopicCache {
    partitions: RwLock<HashMap<String, i32>>,
}

/// How often a topic whose leader is not elected yet (e.g. just auto-created) is re-asked.
const LEADER_RETRIES: u32 = 10;

impl TopicCache {
    /// Cached partition count of `topic`.
    pub fn cached(&self, topic: &str) -> Option<i32> {
        self.partitions
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(topic)
            .copied()
    }

    /// Partition count of `topic`: from the cache when it covers
    /// `min_partitions`, else from the broker (waiting at most `timeout`).
    pub async fn partitions(
        &self,
        producer: &Arc<KafkaProducer>,
        topic: &str,
        min_partitions: i32,
        timeout: Duration,
    ) -> Result<i32, TopicError> {
        if let Some(n) = self.cached(topic) {
            if n >= min_partitions {
                return Ok(n);
            }
        }
        let n = fetch_partitions(producer.clone(), topic.to_owned(), timeout).await?;
        self.partitions
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(topic.to_owned(), n);
        Ok(n)
    }
}

async fn fetch_partitions(
    producer: Arc<KafkaProducer>,
    topic: String,
    timeout: Duration,
) -> Result<i32, TopicError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let left = deadline
            .saturating_duration_since(tokio::time::Instant::now())
            .max(Duration::from_millis(10));
        let answer =
            producer
                .lookup_topic(&topic, left)
                .await
                .map_err(|e| TopicError::Unavailable {
                    topic: topic.clone(),
                    kafka_error: format!("{e:#}"),
                })?;
        let TopicAnswer::Listed { error, partitions } = answer else {
            return Err(TopicError::Unknown {
                topic: topic.clone(),
                kafka_error: "the broker's metadata does not list it".into(),
            });
        };
        match error {
            None if partitions > 0 => return Ok(i32::try_from(partitions).unwrap_or(i32::MAX)),
            Some(RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic) => {
                return Err(TopicError::Unknown {
                    topic: topic.clone(),
                    kafka_error: describe(error),
                })
            }
            // Being created / electing a leader: ask again shortly.
            None | Some(RDKafkaErrorCode::LeaderNotAvailable) if attempt < LEADER_RETRIES => {
                if tokio::time::Instant::now() >= deadline {
                    return Err(TopicError::Unavailable {
                        topic: topic.clone(),
                        kafka_error: describe(error),
                    });
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            _ => {
                return Err(TopicError::Refused {
                    topic: topic.clone(),
                    kafka_error: describe(error),
                })
            }
        }
    }
}

/// The Kafka error, e.g. "UnknownTopicOrPartition (Broker: Unknown topic or partition)".
fn describe(err: Option<RDKafkaErrorCode>) -> String {
    match err {
        None => "no partitions".into(),
        // Display reads "UnknownTopicOrPartition (Broker: Unknown topic or partition)".
        Some(e) => e.to_string(),
    }
}
