//! Share-group configs (KIP-932's group-level configs, IncrementalAlterConfigs
//! on a GROUP resource, kept in the metadata quorum's image): their names,
//! Kafka 4.3's broker defaults and bounds, their validation, and what a
//! group's settings are now.
//!
//! Owns: `validate` (Kafka's INVALID_CONFIG messages) and `settings_of`.
//! Must not: store configs (the quorum does) or apply them (the share
//! managers read `settings_of` at each use).

use std::collections::BTreeMap;

use chronik_coordinator_state::share_group::ShareGroupConfig;
use chronik_coordinator_state::share_partition::ShareConfig;
use chronik_metadata::MetadataImage;

pub const AUTO_OFFSET_RESET: &str = "share.auto.offset.reset";
pub const ISOLATION_LEVEL: &str = "share.isolation.level";
pub const RECORD_LOCK_DURATION_MS: &str = "share.record.lock.duration.ms";
pub const DELIVERY_COUNT_LIMIT: &str = "share.delivery.count.limit";
pub const PARTITION_MAX_RECORD_LOCKS: &str = "share.partition.max.record.locks";
pub const SESSION_TIMEOUT_MS: &str = "share.session.timeout.ms";
pub const HEARTBEAT_INTERVAL_MS: &str = "share.heartbeat.interval.ms";

/// (name, Kafka's default, min, max) of the numeric group configs, bounded
/// by Kafka 4.3's broker-side `group.share.min.*` / `group.share.max.*`.
pub const NUMERIC: &[(&str, i64, i64, i64)] = &[
    (RECORD_LOCK_DURATION_MS, 30_000, 15_000, 60_000),
    (DELIVERY_COUNT_LIMIT, 5, 2, 10),
    (PARTITION_MAX_RECORD_LOCKS, 2000, 100, 4000),
    (SESSION_TIMEOUT_MS, 45_000, 45_000, 60_000),
    (HEARTBEAT_INTERVAL_MS, 5_000, 5_000, 15_000),
];

/// Every group config this broker takes, with its default (DescribeConfigs).
pub fn defaults() -> Vec<(&'static str, String)> {
    let mut all: Vec<(&'static str, String)> = NUMERIC
        .iter()
        .map(|(n, d, _, _)| (*n, d.to_string()))
        .collect();
    all.push((AUTO_OFFSET_RESET, "latest".to_string()));
    all.push((ISOLATION_LEVEL, "read_uncommitted".to_string()));
    all
}

/// Where a share-partition with no stored state starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoOffsetReset {
    Earliest,
    Latest,
}

/// A group's settings now.
#[derive(Debug, Clone, Copy)]
pub struct ShareSettings {
    pub partition: ShareConfig,
    pub group: ShareGroupConfig,
    pub auto_offset_reset: AutoOffsetReset,
    pub read_committed: bool,
}

/// Kafka's check of a group's whole set of configs.
pub fn validate(configs: &BTreeMap<String, String>) -> Result<(), String> {
    for (name, value) in configs {
        let value = value.trim();
        if let Some((_, _, min, max)) = NUMERIC.iter().find(|(n, ..)| n == name) {
            let v: i64 = value.parse().map_err(|_| {
                format!("Invalid value {value} for configuration {name}: Not a number of type INT")
            })?;
            if v < *min || v > *max {
                return Err(format!(
                    "Invalid value {v} for configuration {name}: Value must be at least {min} and at most {max}"
                ));
            }
            continue;
        }
        match name.as_str() {
            AUTO_OFFSET_RESET if value == "earliest" || value == "latest" => {}
            AUTO_OFFSET_RESET => {
                return Err(format!(
                    "Invalid value {value} for configuration {name}: String must be one of: latest, earliest"
                ))
            }
            ISOLATION_LEVEL if value == "read_committed" || value == "read_uncommitted" => {}
            ISOLATION_LEVEL => {
                return Err(format!(
                    "Invalid value {value} for configuration {name}: String must be one of: read_committed, read_uncommitted"
                ))
            }
            other => return Err(format!("Unknown group config name: {other}")),
        }
    }
    let get = |name: &str| -> i64 {
        configs
            .get(name)
            .and_then(|v| v.trim().parse().ok())
            .or_else(|| {
                NUMERIC
                    .iter()
                    .find(|(n, ..)| *n == name)
                    .map(|(_, d, _, _)| *d)
            })
            .unwrap_or(0)
    };
    if get(HEARTBEAT_INTERVAL_MS) >= get(SESSION_TIMEOUT_MS) {
        return Err(format!(
            "{HEARTBEAT_INTERVAL_MS} must be less than {SESSION_TIMEOUT_MS}"
        ));
    }
    Ok(())
}

/// `group`'s settings in `image` (Kafka's defaults where unset).
pub fn settings_of(image: &MetadataImage, group: &str) -> ShareSettings {
    let configs = image.group_configs.get(group);
    let value = |name: &str| {
        configs
            .and_then(|c| c.get(name))
            .map(|v| v.trim().to_string())
    };
    let number = |name: &str| -> i64 {
        value(name)
            .and_then(|v| v.parse().ok())
            .or_else(|| {
                NUMERIC
                    .iter()
                    .find(|(n, ..)| *n == name)
                    .map(|(_, d, _, _)| *d)
            })
            .unwrap_or(0)
    };
    let to_u64 = |v: i64| u64::try_from(v).unwrap_or(0);
    ShareSettings {
        partition: ShareConfig {
            lock_duration_ms: to_u64(number(RECORD_LOCK_DURATION_MS)),
            delivery_count_limit: u16::try_from(number(DELIVERY_COUNT_LIMIT)).unwrap_or(5),
            max_record_locks: number(PARTITION_MAX_RECORD_LOCKS),
        },
        group: ShareGroupConfig {
            session_timeout_ms: to_u64(number(SESSION_TIMEOUT_MS)),
            heartbeat_interval_ms: i32::try_from(number(HEARTBEAT_INTERVAL_MS)).unwrap_or(5000),
            ..ShareGroupConfig::default()
        },
        auto_offset_reset: match value(AUTO_OFFSET_RESET).as_deref() {
            Some("earliest") => AutoOffsetReset::Earliest,
            _ => AutoOffsetReset::Latest,
        },
        read_committed: value(ISOLATION_LEVEL).as_deref() == Some("read_committed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn kafka_bounds_and_names_are_enforced() {
        assert!(validate(&map(&[
            (AUTO_OFFSET_RESET, "earliest"),
            (RECORD_LOCK_DURATION_MS, "15000")
        ]))
        .is_ok());
        assert!(validate(&map(&[(RECORD_LOCK_DURATION_MS, "1000")])).is_err());
        assert!(validate(&map(&[(DELIVERY_COUNT_LIMIT, "11")])).is_err());
        assert!(validate(&map(&[(AUTO_OFFSET_RESET, "none")])).is_err());
        let unknown = validate(&map(&[("share.bogus", "1")])).expect_err("unknown");
        assert_eq!(unknown, "Unknown group config name: share.bogus");
    }
}
