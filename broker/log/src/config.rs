//! Per-topic log configuration under Kafka's names.
//!
//! Owns: `LogConfig` (the settings the storage layer acts on), validation of
//! Kafka-named topic config overrides, and the DescribeConfigs view of them.
//! `cleanup.policy` decides whether retention deletes and whether the log
//! cleaner compacts (`compact`, `delete` or both). Kafka topic configs this
//! broker does not act on (compression.type, min.insync.replicas, ...) are
//! type-checked and kept so
//! clients that set them keep working; names Kafka does not know are
//! rejected, as Kafka does. Must not: touch files or hold runtime state.

use std::collections::BTreeMap;

use crate::error::{Error, Result};

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// Effective settings of one topic's partition logs.
#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`: roll the active segment before it would exceed this.
    pub segment_bytes: u64,
    /// `segment.ms`: roll a non-empty active segment older than this.
    pub segment_ms: i64,
    /// `retention.bytes`: per-partition size limit; negative means unlimited.
    pub retention_bytes: i64,
    /// `retention.ms`: delete segments whose newest timestamp is older; -1 = unlimited.
    pub retention_ms: i64,
    /// `index.interval.bytes`: bytes between sparse offset-index entries.
    pub index_interval_bytes: u32,
    /// `max.message.bytes`: largest record batch accepted.
    pub max_message_bytes: u32,
    /// `cleanup.policy` includes `delete`: retention.ms / retention.bytes
    /// delete old segments. A `compact`-only topic is never deleted by
    /// retention.
    pub delete_retention: bool,
    /// `cleanup.policy` includes `compact`: the log cleaner keeps each key's
    /// latest record, and Produce refuses keyless records.
    pub compact: bool,
    /// `min.cleanable.dirty.ratio`: clean once dirty bytes / all cleanable
    /// bytes reach this.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`: records younger than this stay uncompacted.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a log with dirty records older than this is
    /// cleaned whatever its dirty ratio.
    pub max_compaction_lag_ms: i64,
    /// `delete.retention.ms`: how long a tombstone (null value) survives
    /// after the segment holding it was cleaned.
    pub delete_retention_ms: i64,
}

/// The ratio is a number in 0..=1 (validated), never NaN.
impl Eq for LogConfig {}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            segment_bytes: 1 << 30,
            segment_ms: 7 * DAY_MS,
            retention_bytes: -1,
            retention_ms: 7 * DAY_MS,
            index_interval_bytes: 4096,
            max_message_bytes: 1_048_588,
            delete_retention: true,
            compact: false,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            delete_retention_ms: DAY_MS,
        }
    }
}

/// One row of a DescribeConfigs answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    pub name: String,
    pub value: String,
    /// True when the topic has no override for this config.
    pub is_default: bool,
    pub read_only: bool,
}

/// How a config's value is checked.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Int {
        min: i64,
        max: i64,
    },
    Long {
        min: i64,
    },
    Bool,
    Ratio,
    Choice(&'static [&'static str]),
    /// Comma-separated subset of the choices.
    ChoiceList(&'static [&'static str]),
    Text,
}

/// A Kafka topic config: name, type and Kafka's default value.
#[derive(Debug)]
struct Spec {
    name: &'static str,
    kind: Kind,
    default: &'static str,
}

const INT_MAX: i64 = i32::MAX as i64;
const LONG_MAX: &str = "9223372036854775807";

const fn int(min: i64) -> Kind {
    Kind::Int { min, max: INT_MAX }
}

/// Every Kafka topic config accepted, sorted by name. Those acted upon are
/// listed in `apply` and `with_overrides`; the rest are validated and
/// stored only.
const SPECS: &[Spec] = &[
    Spec {
        name: "cleanup.policy",
        kind: Kind::ChoiceList(&["compact", "delete"]),
        default: "delete",
    },
    Spec {
        name: "compression.gzip.level",
        kind: Kind::Int { min: -1, max: 9 },
        default: "-1",
    },
    Spec {
        name: "compression.lz4.level",
        kind: Kind::Int { min: 1, max: 17 },
        default: "9",
    },
    Spec {
        name: "compression.type",
        kind: Kind::Choice(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]),
        default: "producer",
    },
    Spec {
        name: "compression.zstd.level",
        kind: Kind::Int {
            min: -131_072,
            max: 22,
        },
        default: "3",
    },
    Spec {
        name: "delete.retention.ms",
        kind: Kind::Long { min: 0 },
        default: "86400000",
    },
    Spec {
        name: "file.delete.delay.ms",
        kind: Kind::Long { min: 0 },
        default: "60000",
    },
    Spec {
        name: "flush.messages",
        kind: Kind::Long { min: 1 },
        default: LONG_MAX,
    },
    Spec {
        name: "flush.ms",
        kind: Kind::Long { min: 0 },
        default: LONG_MAX,
    },
    Spec {
        name: "follower.replication.throttled.replicas",
        kind: Kind::Text,
        default: "",
    },
    Spec {
        name: "index.interval.bytes",
        kind: int(0),
        default: "4096",
    },
    Spec {
        name: "leader.replication.throttled.replicas",
        kind: Kind::Text,
        default: "",
    },
    Spec {
        name: "local.retention.bytes",
        kind: Kind::Long { min: -2 },
        default: "-2",
    },
    Spec {
        name: "local.retention.ms",
        kind: Kind::Long { min: -2 },
        default: "-2",
    },
    Spec {
        name: "max.compaction.lag.ms",
        kind: Kind::Long { min: 1 },
        default: LONG_MAX,
    },
    Spec {
        name: "max.message.bytes",
        kind: int(0),
        default: "1048588",
    },
    Spec {
        name: "message.downconversion.enable",
        kind: Kind::Bool,
        default: "true",
    },
    Spec {
        name: "message.timestamp.after.max.ms",
        kind: Kind::Long { min: 0 },
        default: LONG_MAX,
    },
    Spec {
        name: "message.timestamp.before.max.ms",
        kind: Kind::Long { min: 0 },
        default: LONG_MAX,
    },
    Spec {
        name: "message.timestamp.difference.max.ms",
        kind: Kind::Long { min: 0 },
        default: LONG_MAX,
    },
    Spec {
        name: "message.timestamp.type",
        kind: Kind::Choice(&["CreateTime", "LogAppendTime"]),
        default: "CreateTime",
    },
    Spec {
        name: "min.cleanable.dirty.ratio",
        kind: Kind::Ratio,
        default: "0.5",
    },
    Spec {
        name: "min.compaction.lag.ms",
        kind: Kind::Long { min: 0 },
        default: "0",
    },
    Spec {
        name: "min.insync.replicas",
        kind: int(1),
        default: "1",
    },
    Spec {
        name: "preallocate",
        kind: Kind::Bool,
        default: "false",
    },
    Spec {
        name: "remote.storage.enable",
        kind: Kind::Bool,
        default: "false",
    },
    Spec {
        name: "retention.bytes",
        kind: Kind::Long { min: i64::MIN },
        default: "-1",
    },
    Spec {
        name: "retention.ms",
        kind: Kind::Long { min: -1 },
        default: "604800000",
    },
    // Kafka's lower bound: the smallest legacy record overhead.
    Spec {
        name: "segment.bytes",
        kind: int(14),
        default: "1073741824",
    },
    Spec {
        name: "segment.index.bytes",
        kind: int(4),
        default: "10485760",
    },
    Spec {
        name: "segment.jitter.ms",
        kind: Kind::Long { min: 0 },
        default: "0",
    },
    Spec {
        name: "segment.ms",
        kind: Kind::Long { min: 1 },
        default: "604800000",
    },
    Spec {
        name: "unclean.leader.election.enable",
        kind: Kind::Bool,
        default: "false",
    },
];

fn spec(name: &str) -> Option<&'static Spec> {
    SPECS.iter().find(|s| s.name == name)
}

fn invalid(name: &str, value: &str, reason: impl Into<String>) -> Error {
    Error::InvalidConfig {
        name: name.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// Checks `value` against the spec; returns it as a number when numeric.
fn check(spec: &Spec, value: &str) -> Result<Option<i64>> {
    let v = value.trim();
    let bad = |reason: String| invalid(spec.name, value, reason);
    if value.contains(['\n', '\r']) {
        return Err(bad("values must be a single line".into()));
    }
    match spec.kind {
        Kind::Int { min, max } => parse_in_range(v, min, max).map(Some).map_err(bad),
        Kind::Long { min } => parse_in_range(v, min, i64::MAX).map(Some).map_err(bad),
        Kind::Bool => match v.to_ascii_lowercase().as_str() {
            "true" | "false" => Ok(None),
            _ => Err(bad("expected true or false".into())),
        },
        Kind::Ratio => match v.parse::<f64>() {
            Ok(r) if (0.0..=1.0).contains(&r) => Ok(None),
            _ => Err(bad("expected a number between 0 and 1".into())),
        },
        Kind::Choice(choices) => {
            if choices.iter().any(|c| c.eq_ignore_ascii_case(v)) {
                Ok(None)
            } else {
                Err(bad(format!("expected one of {}", choices.join(", "))))
            }
        }
        Kind::ChoiceList(choices) => {
            let known = |item: &str| choices.iter().any(|c| c.eq_ignore_ascii_case(item.trim()));
            if !v.is_empty() && v.split(',').all(known) {
                Ok(None)
            } else {
                Err(bad(format!(
                    "expected a comma-separated list of {}",
                    choices.join(", ")
                )))
            }
        }
        Kind::Text => Ok(None),
    }
}

fn parse_in_range(v: &str, min: i64, max: i64) -> std::result::Result<i64, String> {
    match v.parse::<i64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        Ok(_) if min == i64::MIN => Err(format!("must be at most {max}")),
        Ok(_) => Err(format!("must be between {min} and {max}")),
        Err(_) => Err("not an integer".to_string()),
    }
}

impl LogConfig {
    /// Returns this config with Kafka-named topic overrides applied.
    /// Known-but-ignored Kafka configs are validated and otherwise have no
    /// effect; unknown names and bad values give `Error::InvalidConfig`.
    pub fn with_overrides(&self, overrides: &BTreeMap<String, String>) -> Result<LogConfig> {
        let mut config = self.clone();
        for (name, value) in overrides {
            let spec = spec(name).ok_or_else(|| invalid(name, value, "unknown topic config"))?;
            if let Some(n) = check(spec, value)? {
                config.apply(name, n);
            }
            match name.as_str() {
                "cleanup.policy" => {
                    let has = |policy: &str| {
                        value
                            .split(',')
                            .any(|p| p.trim().eq_ignore_ascii_case(policy))
                    };
                    config.delete_retention = has("delete");
                    config.compact = has("compact");
                }
                "min.cleanable.dirty.ratio" => {
                    // `check` accepted it as a number in 0..=1.
                    config.min_cleanable_dirty_ratio = value.trim().parse().unwrap_or(0.5);
                }
                _ => {}
            }
        }
        Ok(config)
    }

    /// Stores an already range-checked numeric value; the specs' bounds make
    /// every conversion below lossless.
    fn apply(&mut self, name: &str, n: i64) {
        match name {
            "segment.bytes" => self.segment_bytes = u64::try_from(n).unwrap_or(u64::MAX),
            "segment.ms" => self.segment_ms = n,
            "retention.bytes" => self.retention_bytes = n,
            "retention.ms" => self.retention_ms = n,
            "index.interval.bytes" => {
                self.index_interval_bytes = u32::try_from(n).unwrap_or(u32::MAX)
            }
            "max.message.bytes" => self.max_message_bytes = u32::try_from(n).unwrap_or(u32::MAX),
            "min.compaction.lag.ms" => self.min_compaction_lag_ms = n,
            "max.compaction.lag.ms" => self.max_compaction_lag_ms = n,
            "delete.retention.ms" => self.delete_retention_ms = n,
            _ => {}
        }
    }

    /// The value this config acts on, for the six settings it owns.
    fn effective_value(&self, name: &str) -> Option<String> {
        Some(match name {
            "segment.bytes" => self.segment_bytes.to_string(),
            "segment.ms" => self.segment_ms.to_string(),
            "retention.bytes" => self.retention_bytes.to_string(),
            "retention.ms" => self.retention_ms.to_string(),
            "index.interval.bytes" => self.index_interval_bytes.to_string(),
            "max.message.bytes" => self.max_message_bytes.to_string(),
            _ => return None,
        })
    }

    /// Every topic config with its effective value, sorted by name, for
    /// DescribeConfigs. `self` is the topic's effective config and
    /// `overrides` what the topic set explicitly.
    pub fn describe(&self, overrides: &BTreeMap<String, String>) -> Vec<ConfigEntry> {
        SPECS
            .iter()
            .map(|spec| {
                let overridden = overrides.get(spec.name);
                let value = self
                    .effective_value(spec.name)
                    .or_else(|| overridden.cloned())
                    .unwrap_or_else(|| spec.default.to_string());
                ConfigEntry {
                    name: spec.name.to_string(),
                    value,
                    is_default: overridden.is_none(),
                    read_only: false,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overrides(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn specs_are_sorted_and_unique() {
        assert!(SPECS.windows(2).all(|w| w[0].name < w[1].name));
    }

    #[test]
    fn overrides_change_the_effective_config() {
        let c = LogConfig::default()
            .with_overrides(&overrides(&[
                ("retention.ms", "-1"),
                ("segment.bytes", "1048576"),
                ("retention.bytes", "5000"),
                ("cleanup.policy", "delete"),
                ("min.insync.replicas", "2"),
            ]))
            .expect("valid overrides");
        assert_eq!(c.retention_ms, -1);
        assert_eq!(c.segment_bytes, 1_048_576);
        assert_eq!(c.retention_bytes, 5000);
        assert_eq!(c.max_message_bytes, LogConfig::default().max_message_bytes);
    }

    #[test]
    fn cleanup_policy_and_compaction_settings() {
        let c = LogConfig::default()
            .with_overrides(&overrides(&[
                ("cleanup.policy", "compact,delete"),
                ("min.cleanable.dirty.ratio", "0.01"),
                ("min.compaction.lag.ms", "5"),
                ("max.compaction.lag.ms", "60000"),
                ("delete.retention.ms", "100"),
            ]))
            .expect("valid overrides");
        assert!(c.compact && c.delete_retention);
        assert_eq!(c.min_cleanable_dirty_ratio, 0.01);
        assert_eq!(
            (
                c.min_compaction_lag_ms,
                c.max_compaction_lag_ms,
                c.delete_retention_ms
            ),
            (5, 60_000, 100)
        );
        let compact_only = LogConfig::default()
            .with_overrides(&overrides(&[("cleanup.policy", "compact")]))
            .expect("valid");
        assert!(compact_only.compact && !compact_only.delete_retention);
        assert!(!LogConfig::default().compact);
    }

    #[test]
    fn invalid_values_and_unknown_names_are_rejected() {
        let cases = [
            ("retention.ms", "-2"),
            ("retention.ms", "soon"),
            ("segment.bytes", "10"),
            ("segment.bytes", "4294967296"),
            ("segment.ms", "0"),
            ("cleanup.policy", "shred"),
            ("compression.type", "brotli"),
            ("min.insync.replicas", "0"),
            ("preallocate", "yes"),
            ("min.cleanable.dirty.ratio", "1.5"),
            ("no.such.config", "1"),
            ("message.timestamp.type", "Create\nTime"),
        ];
        for (name, value) in cases {
            match LogConfig::default().with_overrides(&overrides(&[(name, value)])) {
                Err(Error::InvalidConfig {
                    name: n, value: v, ..
                }) => {
                    assert_eq!((n.as_str(), v.as_str()), (name, value));
                }
                other => panic!("{name}={value:?} should be invalid, got {other:?}"),
            }
        }
    }

    #[test]
    fn describe_reports_effective_values_and_defaults() {
        let o = overrides(&[("retention.ms", "1000"), ("compression.type", "zstd")]);
        let c = LogConfig {
            segment_bytes: 4096,
            ..LogConfig::default()
        }
        .with_overrides(&o)
        .expect("valid");
        let entries = c.describe(&o);
        let get = |n: &str| {
            entries
                .iter()
                .find(|e| e.name == n)
                .cloned()
                .expect("listed")
        };
        assert_eq!(get("retention.ms").value, "1000");
        assert!(!get("retention.ms").is_default);
        assert_eq!(get("compression.type").value, "zstd");
        assert_eq!(get("segment.bytes").value, "4096");
        assert!(get("segment.bytes").is_default);
        assert_eq!(get("cleanup.policy").value, "delete");
        assert_eq!(entries.len(), SPECS.len());
    }

    #[test]
    fn only_a_delete_policy_lets_retention_delete() {
        let with = |policy: &str| {
            LogConfig::default()
                .with_overrides(&BTreeMap::from([(
                    "cleanup.policy".to_string(),
                    policy.to_string(),
                )]))
                .expect("a valid policy")
                .delete_retention
        };
        assert!(LogConfig::default().delete_retention);
        assert!(with("delete"));
        assert!(with("compact,delete"));
        assert!(!with("compact"));
    }
}
