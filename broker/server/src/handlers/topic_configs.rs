//! How a topic's configs are described — one path for CreateTopics (v5+)
//! and DescribeConfigs.
//!
//! Owns: the effective value of every topic config Kafka names, from the
//! topic's overrides, its log config and this broker's defaults (the log
//! knows nothing of `min.insync.replicas`; its default is the broker's
//! `--min-insync-replicas`). Must not: validate or store configs.

use std::collections::BTreeMap;

use chronik_log::{ConfigEntry, LogConfig};

use crate::broker::Broker;
use crate::replica::MIN_INSYNC_REPLICAS;

/// Every topic config with its effective value, sorted by name. `overrides`
/// is what the topic set explicitly (`min.insync.replicas` included).
pub fn describe(
    broker: &Broker,
    config: &LogConfig,
    overrides: &BTreeMap<String, String>,
) -> Vec<ConfigEntry> {
    let mut entries = config.describe(overrides);
    for entry in entries
        .iter_mut()
        .filter(|e| e.name == MIN_INSYNC_REPLICAS && e.is_default)
    {
        entry.value = broker.config.min_insync_replicas.to_string();
    }
    entries
}

/// The overrides a topic was created with: the quorum's record of them
/// (the log's own lacks `min.insync.replicas`).
pub fn overrides_of(broker: &Broker, topic: &chronik_log::TopicLog) -> BTreeMap<String, String> {
    broker
        .replicas
        .cluster
        .image()
        .topics
        .get(&topic.name)
        .map(|t| t.configs.clone())
        .unwrap_or_else(|| topic.overrides.clone())
}
