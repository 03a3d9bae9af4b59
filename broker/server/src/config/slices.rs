//! The slices of `Config` that the request handlers read, each lent by the
//! dispatcher instead of the whole configuration: the defaults a created
//! topic takes, and where consumers may read from (KIP-392). `Limits`
//! (`limits`) is the third.
//!
//! Owns: these small views. Must not: parse flags (`Args` does).

use super::limits::Limits;
use super::Config;
use crate::replica::read_replica::ReplicaSelector;

/// What a topic created without explicit settings gets (Kafka's
/// `num.partitions`, `default.replication.factor`, `min.insync.replicas`),
/// and whether Metadata may create one (`auto.create.topics.enable`).
#[derive(Debug, Clone, Copy)]
pub struct TopicDefaults {
    pub partitions: u32,
    pub replication_factor: i16,
    pub min_insync_replicas: i16,
    pub auto_create: bool,
}

/// What creating topics or partitions reads: the defaults and the caps
/// (`--max-topics`, `--max-broker-partitions`).
#[derive(Debug, Clone, Copy)]
pub struct TopicCreation<'a> {
    pub defaults: TopicDefaults,
    pub limits: &'a Limits,
}

/// Kafka's `replica.selector.class` and this broker's `broker.rack`.
#[derive(Debug, Clone, Copy)]
pub struct ReadReplicas<'a> {
    pub selector: Option<ReplicaSelector>,
    pub rack: Option<&'a str>,
}

impl Config {
    pub fn topic_defaults(&self) -> TopicDefaults {
        TopicDefaults {
            partitions: self.default_partitions,
            replication_factor: self.default_replication_factor,
            min_insync_replicas: self.min_insync_replicas,
            auto_create: self.auto_create_topics,
        }
    }

    pub fn topic_creation(&self) -> TopicCreation<'_> {
        TopicCreation {
            defaults: self.topic_defaults(),
            limits: &self.limits,
        }
    }

    pub fn read_replicas(&self) -> ReadReplicas<'_> {
        ReadReplicas {
            selector: self.replica_selector,
            rack: self.broker_rack.as_deref(),
        }
    }
}
