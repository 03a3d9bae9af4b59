//! AlterConfigs and IncrementalAlterConfigs (kafka-configs.sh --alter) for
//! topics — one path: both are turned into a topic's new, whole set of
//! overrides, validated like CreateTopics' configs, and committed through
//! the controller, so every broker applies the same set (the log picks it
//! up from its next append, roll or retention pass).
//!
//! AlterConfigs replaces a topic's overrides with the request's; the
//! incremental form SETs, DELETEs, APPENDs to or SUBTRACTs from list
//! configs (`cleanup.policy`). A broker resource (an id, or `""` for the
//! default) has two dynamic configs, the replication throttles
//! (`replica::throttle`), kept in the quorum's image; any other is refused
//! with Kafka's INVALID_REQUEST, as Kafka refuses a static config. A group
//! resource takes KIP-932's `share.*` group configs.

use chronik_metadata::Cluster;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use chronik_log::LogManager;
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    alter_configs_response, incremental_alter_configs_request, incremental_alter_configs_response,
    AlterConfigsRequest, AlterConfigsResponse, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use tracing::info;

use super::describe_configs::{RESOURCE_BROKER, RESOURCE_GROUP, RESOURCE_TOPIC};
use super::Handled;
use crate::replica::throttle::{ALTER_LOG_DIRS_RATE, FOLLOWER_RATE, LEADER_RATE};
use crate::replica::ReplicaManager;
use crate::requests::errors::cluster::cluster_error_code;
use crate::requests::topics::lookup::INTERNAL_TOPICS;

/// Configs whose value is a comma-separated list (APPEND/SUBTRACT apply).
const LIST_CONFIGS: &[&str] = &["cleanup.policy"];

/// One requested change to a config.
enum Op {
    Set(String),
    Delete,
    Append(String),
    Subtract(String),
}

/// How a resource's changes combine with what the topic has.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// AlterConfigs: the changes are the topic's whole new set.
    Replace,
    /// IncrementalAlterConfigs: each change edits the current set.
    Incremental,
}

type Outcome = Result<(), (ResponseError, String)>;

/// One resource of either request, its changes already read (or the
/// reason they cannot be).
struct Requested {
    resource_type: i8,
    resource_name: StrBytes,
    changes: Result<Vec<(String, Op)>, (ResponseError, String)>,
}

/// One resource's answer: (type, name, error code, error message).
type Answer = (i8, StrBytes, i16, Option<StrBytes>);

/// Each resource's answer as the response type of the API (AlterConfigs
/// and IncrementalAlterConfigs have one each), and whether any failed.
macro_rules! answered {
    ($answers:expr, $resource:ty) => {{
        let answers = $answers;
        let has_error = answers.iter().any(|a| a.2 != 0);
        let responses: Vec<$resource> = answers
            .into_iter()
            .map(|(resource_type, resource_name, code, message)| {
                <$resource>::default()
                    .with_resource_type(resource_type)
                    .with_resource_name(resource_name)
                    .with_error_code(code)
                    .with_error_message(message)
            })
            .collect();
        (responses, has_error)
    }};
}

pub async fn handle(
    (replicas, cluster): (&Arc<ReplicaManager>, &Cluster),
    log: &LogManager,
    _version: i16,
    request: AlterConfigsRequest,
) -> Option<Handled> {
    let requested = request
        .resources
        .into_iter()
        .map(|r| Requested {
            resource_type: r.resource_type,
            changes: Ok(r
                .configs
                .iter()
                .map(|c| {
                    let op = match &c.value {
                        Some(v) => Op::Set(v.to_string()),
                        None => Op::Delete,
                    };
                    (c.name.to_string(), op)
                })
                .collect()),
            resource_name: r.resource_name,
        })
        .collect();
    let answers = alter_all(
        (replicas, cluster),
        log,
        requested,
        Mode::Replace,
        request.validate_only,
    )
    .await;
    let (responses, has_error) = answered!(
        answers,
        alter_configs_response::AlterConfigsResourceResponse
    );
    Handled::new(
        Response::AlterConfigs(AlterConfigsResponse::default().with_responses(responses)),
        has_error,
    )
}

pub async fn handle_incremental(
    (replicas, cluster): (&Arc<ReplicaManager>, &Cluster),
    log: &LogManager,
    _version: i16,
    request: IncrementalAlterConfigsRequest,
) -> Option<Handled> {
    let requested = request
        .resources
        .into_iter()
        .map(|r| Requested {
            resource_type: r.resource_type,
            changes: r.configs.iter().map(incremental_change).collect(),
            resource_name: r.resource_name,
        })
        .collect();
    let answers = alter_all(
        (replicas, cluster),
        log,
        requested,
        Mode::Incremental,
        request.validate_only,
    )
    .await;
    let (responses, has_error) = answered!(
        answers,
        incremental_alter_configs_response::AlterConfigsResourceResponse
    );
    Handled::new(
        Response::IncrementalAlterConfigs(
            IncrementalAlterConfigsResponse::default().with_responses(responses),
        ),
        has_error,
    )
}

fn incremental_change(
    c: &incremental_alter_configs_request::AlterableConfig,
) -> Result<(String, Op), (ResponseError, String)> {
    let name = c.name.to_string();
    let value = c.value.as_ref().map(|v| v.to_string());
    let op = match (c.config_operation, value) {
        (0, Some(v)) => Op::Set(v),
        (1, _) => Op::Delete,
        (2, Some(v)) => Op::Append(v),
        (3, Some(v)) => Op::Subtract(v),
        (0 | 2 | 3, None) => {
            return Err((
                ResponseError::InvalidRequest,
                format!("config {name}: a null value is only allowed with DELETE"),
            ))
        }
        (other, _) => {
            return Err((
                ResponseError::InvalidRequest,
                format!("config {name}: unknown config operation {other}"),
            ))
        }
    };
    Ok((name, op))
}

/// Alters each resource in turn; a resource named twice in the request
/// is refused both times, as Kafka does.
async fn alter_all(
    (replicas, cluster): (&Arc<ReplicaManager>, &Cluster),
    log: &LogManager,
    requested: Vec<Requested>,
    mode: Mode,
    validate_only: bool,
) -> Vec<Answer> {
    let mut seen = BTreeSet::new();
    let duplicated: BTreeSet<(i8, String)> = requested
        .iter()
        .map(|r| (r.resource_type, r.resource_name.to_string()))
        .filter(|key| !seen.insert(key.clone()))
        .collect();
    let mut answers = Vec::with_capacity(requested.len());
    for r in requested {
        let name = r.resource_name.to_string();
        let outcome = match r.changes {
            _ if duplicated.contains(&(r.resource_type, name.clone())) => Err(duplicate_resource()),
            Err(e) => Err(e),
            Ok(changes) => {
                alter(
                    (replicas, cluster),
                    log,
                    r.resource_type,
                    &name,
                    changes,
                    mode,
                    validate_only,
                )
                .await
            }
        };
        let (code, message) = match outcome {
            Ok(()) => (0, None),
            Err((error, message)) => (error.code(), Some(StrBytes::from_string(message))),
        };
        answers.push((r.resource_type, r.resource_name, code, message));
    }
    answers
}

fn duplicate_resource() -> (ResponseError, String) {
    (
        ResponseError::InvalidRequest,
        "Duplicate resource in request.".to_string(),
    )
}

async fn alter(
    (replicas, cluster): (&Arc<ReplicaManager>, &Cluster),
    log: &LogManager,
    resource_type: i8,
    name: &str,
    changes: Vec<(String, Op)>,
    mode: Mode,
    validate_only: bool,
) -> Outcome {
    match resource_type {
        RESOURCE_TOPIC => {}
        RESOURCE_BROKER => {
            return alter_broker(cluster, name, changes, mode, validate_only).await;
        }
        RESOURCE_GROUP => {
            return alter_group(cluster, name, changes, mode, validate_only).await;
        }
        other => {
            return Err((
                ResponseError::InvalidRequest,
                format!("resource type {other} is not supported (topics are)"),
            ))
        }
    }
    let current = cluster
        .image()
        .topics
        .get(name)
        .map(|t| t.configs.clone())
        .ok_or_else(|| {
            (
                ResponseError::UnknownTopicOrPartition,
                format!("topic {name} does not exist"),
            )
        })?;
    let overrides = apply_changes(&current, changes, mode)?;
    crate::requests::topics::configs::validate(log, &overrides)?;
    check_internal_topic(name, &overrides)?;
    if validate_only || overrides == current {
        return Ok(());
    }
    cluster
        .alter_topic_configs(name, overrides.clone())
        .await
        .map_err(|e| (cluster_error_code(&e), e.to_string()))?;
    info!(topic = name, ?overrides, "altered topic configs");
    replicas.apply_latest().await;
    Ok(())
}

/// Internal topics take config changes as Kafka's do (throttles,
/// retention, segments, ...), but the coordinators keep only the latest
/// record per key there: any `cleanup.policy` but `compact` would delete
/// committed offsets or transaction states, and is refused.
fn check_internal_topic(name: &str, overrides: &BTreeMap<String, String>) -> Outcome {
    if !INTERNAL_TOPICS.contains(&name) {
        return Ok(());
    }
    match overrides.get("cleanup.policy").map(|p| p.trim()) {
        Some("compact") => Ok(()),
        None => Err((
            ResponseError::InvalidConfig,
            format!(
                "Invalid value for configuration cleanup.policy: internal topic {name} must stay compact, and without its override it would fall back to the default delete"
            ),
        )),
        Some(other) => Err((
            ResponseError::InvalidConfig,
            format!(
                "Invalid value {other} for configuration cleanup.policy: internal topic {name} must stay compact (its coordinator keeps only the latest record per key)"
            ),
        )),
    }
}

/// A broker resource (a broker id, or `""` for every broker's default):
/// only the replication throttles are dynamic; Kafka's other broker
/// configs are refused as Kafka refuses a static one.
async fn alter_broker(
    cluster: &Cluster,
    name: &str,
    changes: Vec<(String, Op)>,
    mode: Mode,
    validate_only: bool,
) -> Outcome {
    if !name.is_empty() && name.parse::<i32>().map_or(true, |id| id < 0) {
        return Err((
            ResponseError::InvalidRequest,
            format!("broker resource {name:?} is not a broker id (or \"\" for the default)"),
        ));
    }
    let current = cluster
        .image()
        .broker_configs
        .get(name)
        .cloned()
        .unwrap_or_default();
    let configs = apply_changes(&current, changes, mode)?;
    for (key, value) in &configs {
        match key.as_str() {
            LEADER_RATE | FOLLOWER_RATE => {
                if !value.trim().parse::<i64>().is_ok_and(|v| v >= 0) {
                    return Err((
                        ResponseError::InvalidConfig,
                        format!("{key} must be a number of bytes per second >= 0, got {value:?}"),
                    ));
                }
            }
            ALTER_LOG_DIRS_RATE => {
                return Err((
                    ResponseError::InvalidConfig,
                    format!("{key}: a Chronik broker has one log directory, so there are no moves between directories to throttle"),
                ))
            }
            other => {
                return Err((
                    ResponseError::InvalidRequest,
                    format!("{other} is not a dynamic broker config here (only {LEADER_RATE} and {FOLLOWER_RATE}); set it at start-up"),
                ))
            }
        }
    }
    if validate_only || configs == current {
        return Ok(());
    }
    cluster
        .alter_broker_configs(name, configs.clone())
        .await
        .map_err(|e| (cluster_error_code(&e), e.to_string()))?;
    info!(broker = name, ?configs, "altered dynamic broker configs");
    Ok(())
}

/// A group resource: its `share.*` configs (KIP-932), checked against
/// Kafka 4.3's names and bounds (`coordinators::share::config`), kept in
/// the quorum's image.
async fn alter_group(
    cluster: &Cluster,
    name: &str,
    changes: Vec<(String, Op)>,
    mode: Mode,
    validate_only: bool,
) -> Outcome {
    if name.is_empty() {
        return Err((
            ResponseError::InvalidRequest,
            "a group resource needs a group id".to_string(),
        ));
    }
    let current = cluster
        .image()
        .group_configs
        .get(name)
        .cloned()
        .unwrap_or_default();
    let configs = apply_changes(&current, changes, mode)?;
    crate::coordinators::share::config::validate(&configs)
        .map_err(|m| (ResponseError::InvalidConfig, m))?;
    if validate_only || configs == current {
        return Ok(());
    }
    cluster
        .alter_group_configs(name, configs.clone())
        .await
        .map_err(|e| (cluster_error_code(&e), e.to_string()))?;
    info!(group = name, ?configs, "altered group configs");
    Ok(())
}

/// The topic's new overrides: `changes` applied to `current` (or replacing
/// them). A config named twice is Kafka's INVALID_REQUEST; APPEND and
/// SUBTRACT on a config that is not a list are INVALID_CONFIG.
fn apply_changes(
    current: &BTreeMap<String, String>,
    changes: Vec<(String, Op)>,
    mode: Mode,
) -> Result<BTreeMap<String, String>, (ResponseError, String)> {
    let mut seen = BTreeSet::new();
    let mut overrides = match mode {
        Mode::Replace => BTreeMap::new(),
        Mode::Incremental => current.clone(),
    };
    for (name, op) in changes {
        if !seen.insert(name.clone()) {
            return Err((
                ResponseError::InvalidRequest,
                format!("Error due to duplicate config keys: {name}"),
            ));
        }
        let is_list = LIST_CONFIGS.contains(&name.as_str());
        match op {
            Op::Set(value) => {
                overrides.insert(name, value);
            }
            Op::Delete => {
                overrides.remove(&name);
            }
            Op::Append(_) | Op::Subtract(_) if !is_list => {
                return Err((
                    ResponseError::InvalidConfig,
                    format!("config {name} is not a list: APPEND and SUBTRACT do not apply"),
                ))
            }
            Op::Append(value) => {
                let mut items = list_items(overrides.get(&name));
                for item in list_items(Some(&value)) {
                    if !items.contains(&item) {
                        items.push(item);
                    }
                }
                overrides.insert(name, items.join(","));
            }
            Op::Subtract(value) => {
                let removed = list_items(Some(&value));
                let items: Vec<String> = list_items(overrides.get(&name))
                    .into_iter()
                    .filter(|i| !removed.contains(i))
                    .collect();
                if items.is_empty() {
                    overrides.remove(&name);
                } else {
                    overrides.insert(name, items.join(","));
                }
            }
        }
    }
    Ok(overrides)
}

fn list_items(value: Option<&String>) -> Vec<String> {
    value
        .map(|v| {
            v.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default()
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
    fn incremental_changes_edit_the_current_set() {
        let current = map(&[("retention.ms", "1000"), ("cleanup.policy", "delete")]);
        let changes = vec![
            ("retention.ms".to_string(), Op::Delete),
            ("segment.bytes".to_string(), Op::Set("2048".into())),
            ("cleanup.policy".to_string(), Op::Append("compact".into())),
        ];
        let got = apply_changes(&current, changes, Mode::Incremental).expect("valid changes");
        assert_eq!(
            got,
            map(&[
                ("cleanup.policy", "delete,compact"),
                ("segment.bytes", "2048")
            ])
        );
        let changes = vec![(
            "cleanup.policy".to_string(),
            Op::Subtract("delete,compact".into()),
        )];
        let got = apply_changes(&got, changes, Mode::Incremental).expect("valid changes");
        assert_eq!(got, map(&[("segment.bytes", "2048")]));
    }

    #[test]
    fn replace_drops_what_is_not_named() {
        let current = map(&[("retention.ms", "1000")]);
        let changes = vec![("segment.bytes".to_string(), Op::Set("2048".into()))];
        let got = apply_changes(&current, changes, Mode::Replace).expect("valid changes");
        assert_eq!(got, map(&[("segment.bytes", "2048")]));
    }

    #[test]
    fn duplicates_and_list_ops_on_scalars_are_refused() {
        let current = BTreeMap::new();
        let twice = vec![
            ("retention.ms".to_string(), Op::Set("1".into())),
            ("retention.ms".to_string(), Op::Delete),
        ];
        let err = apply_changes(&current, twice, Mode::Incremental).expect_err("duplicate");
        assert_eq!(err.0, ResponseError::InvalidRequest);
        let append = vec![("retention.ms".to_string(), Op::Append("1".into()))];
        let err = apply_changes(&current, append, Mode::Incremental).expect_err("not a list");
        assert_eq!(err.0, ResponseError::InvalidConfig);
    }
}
