//! How a topic's configs are validated and described — one path for
//! CreateTopics (v5+), the AlterConfigs pair and DescribeConfigs.
//!
//! Owns: checking a topic's full set of overrides (the log's own names and
//! values, plus `min.insync.replicas`, which the log knows nothing of), and
//! the effective value of every topic config Kafka names, from the topic's
//! overrides, its log config and this broker's defaults (the default of
//! `min.insync.replicas` is the broker's `--min-insync-replicas`; the
//! throttled-replica lists of `replica::throttle` are checked here). Must
//! not: store configs.

use chronik_log::{ConfigEntry, Error as LogError, LogConfig, LogManager};
use chronik_metadata::Cluster;
use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;

use crate::replica::throttle::{validate_replica_list, FOLLOWER_REPLICAS, LEADER_REPLICAS};
use crate::replica::MIN_INSYNC_REPLICAS;

/// The log config `overrides` (a topic's whole set) make from this broker's
/// defaults, or Kafka's error for the first bad name or value.
pub fn validate(
    log: &LogManager,
    overrides: &BTreeMap<String, String>,
) -> Result<LogConfig, (ResponseError, String)> {
    let mut log_overrides = overrides.clone();
    if let Some(v) = log_overrides.remove(MIN_INSYNC_REPLICAS) {
        if !v.parse::<i16>().is_ok_and(|n| n >= 1) {
            return Err((
                ResponseError::InvalidConfig,
                format!("{MIN_INSYNC_REPLICAS} must be an integer >= 1, got {v:?}"),
            ));
        }
    }
    for name in [LEADER_REPLICAS, FOLLOWER_REPLICAS] {
        if let Some(v) = log_overrides.get(name) {
            validate_replica_list(v)
                .map_err(|e| (ResponseError::InvalidConfig, format!("{name}: {e}")))?;
        }
    }
    log.default_log_config()
        .with_overrides(&log_overrides)
        .map_err(|e| log_error(&e))
}

/// Every topic config with its effective value, sorted by name. `overrides`
/// is what the topic set explicitly (`min.insync.replicas` included);
/// `min_insync_replicas` is the broker's default of it.
pub fn describe(
    min_insync_replicas: i16,
    config: &LogConfig,
    overrides: &BTreeMap<String, String>,
) -> Vec<ConfigEntry> {
    let mut entries = config.describe(overrides);
    for entry in entries
        .iter_mut()
        .filter(|e| e.name == MIN_INSYNC_REPLICAS && e.is_default)
    {
        entry.value = min_insync_replicas.to_string();
    }
    entries
}

/// The overrides a topic was created with: the quorum's record of them
/// (the log's own lacks `min.insync.replicas`).
pub fn overrides_of(cluster: &Cluster, topic: &chronik_log::TopicLog) -> BTreeMap<String, String> {
    cluster
        .image()
        .topics
        .get(&topic.name)
        .map(|t| t.configs.clone())
        .unwrap_or_else(|| topic.overrides.clone())
}

/// A topic change the log refused, as Kafka's error code and message.
pub fn log_error(e: &LogError) -> (ResponseError, String) {
    let code = match e {
        LogError::TopicAlreadyExists(_) => ResponseError::TopicAlreadyExists,
        LogError::InvalidTopicName { .. } => ResponseError::InvalidTopicException,
        LogError::InvalidPartitions(_) => ResponseError::InvalidPartitions,
        LogError::InvalidConfig { .. } => ResponseError::InvalidConfig,
        _ => ResponseError::UnknownServerError,
    };
    (code, e.to_string())
}
