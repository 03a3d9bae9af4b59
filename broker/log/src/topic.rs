//! A topic: its identity, configuration and partition logs.
//!
//! Owns: `TopicLog` and Kafka's topic-name rules. Must not: create or
//! delete files (the manager does) — a `TopicLog` is an immutable handle.
//!
//! Thread-safety: immutable after construction; share it behind `Arc`.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::LogConfig;
use crate::error::{Error, Result};
use crate::partition::PartitionLog;

/// Kafka's limit: leaves room for `-<partition>` and suffixes in a 255-byte
/// file name.
pub const MAX_TOPIC_NAME_LEN: usize = 249;

/// Checks a topic name against Kafka's rules: 1 to 249 characters from
/// `[a-zA-Z0-9._-]`, and not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<()> {
    let reject = |reason: &str| {
        Err(Error::InvalidTopicName {
            name: name.to_string(),
            reason: reason.to_string(),
        })
    };
    if name.is_empty() {
        return reject("topic name is empty");
    }
    if name == "." || name == ".." {
        return reject("topic name cannot be \".\" or \"..\"");
    }
    if name.len() > MAX_TOPIC_NAME_LEN {
        return reject("topic name is longer than 249 characters");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return reject("topic name may only contain ASCII letters, digits, '.', '_' and '-'");
    }
    Ok(())
}

pub struct TopicLog {
    pub name: String,
    /// Kafka topic id (a UUID, never all zeros).
    pub topic_id: [u8; 16],
    /// Config overrides exactly as the topic was created with them.
    pub overrides: BTreeMap<String, String>,
    /// The effective config: broker defaults with `overrides` applied.
    pub config: LogConfig,
    partitions: Vec<Arc<PartitionLog>>,
}

impl TopicLog {
    pub(crate) fn new(
        name: String,
        topic_id: [u8; 16],
        overrides: BTreeMap<String, String>,
        config: LogConfig,
        partitions: Vec<Arc<PartitionLog>>,
    ) -> Self {
        Self {
            name,
            topic_id,
            overrides,
            config,
            partitions,
        }
    }

    /// Partition `index`, or None when out of range (including negative).
    pub fn partition(&self, index: i32) -> Option<&Arc<PartitionLog>> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.partitions.get(i))
    }

    pub fn partition_count(&self) -> usize {
        self.partitions.len()
    }

    /// All partitions, index i at position i.
    pub fn partitions(&self) -> &[Arc<PartitionLog>] {
        &self.partitions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_kafka_rules() {
        for ok in ["a", "orders", "Orders.v1_final-2", &"x".repeat(249)] {
            assert!(validate_topic_name(ok).is_ok(), "{ok:?} should be valid");
        }
        for bad in [
            "",
            ".",
            "..",
            "with space",
            "slash/name",
            "ümlaut",
            "star*",
            &"x".repeat(250),
        ] {
            match validate_topic_name(bad) {
                Err(Error::InvalidTopicName { name, .. }) => assert_eq!(name, bad),
                other => panic!("{bad:?} should be invalid, got {other:?}"),
            }
        }
    }
}
