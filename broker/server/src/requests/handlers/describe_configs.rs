//! DescribeConfigs for topics (effective log configs, overrides marked as
//! topic configs) and for this broker (its static settings under Kafka's
//! names, plus Chronik's profiles, and its dynamic replication throttles).

use chronik_log::LogManager;
use chronik_metadata::Cluster;
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handled;
use crate::config::Config;
use crate::replica::throttle::{FOLLOWER_RATE, LEADER_RATE};

pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
pub const RESOURCE_GROUP: i8 = 32;
/// Kafka's ConfigSource.GROUP_CONFIG.
const SOURCE_GROUP: i8 = 8;
pub const SOURCE_TOPIC: i8 = 1;
pub const SOURCE_DYNAMIC_BROKER: i8 = 2;
pub const SOURCE_DYNAMIC_DEFAULT_BROKER: i8 = 3;
pub const SOURCE_STATIC_BROKER: i8 = 4;
pub const SOURCE_DEFAULT: i8 = 5;

/// One config as described to clients.
struct Entry {
    name: String,
    value: String,
    read_only: bool,
    source: i8,
}

pub fn handle(
    cluster: &Cluster,
    log: &LogManager,
    config: &Config,
    advertised: &(String, u16),
    _version: i16,
    request: DescribeConfigsRequest,
) -> Option<Handled> {
    let results: Vec<DescribeConfigsResult> = request
        .resources
        .into_iter()
        .map(|r| describe(cluster, log, config, advertised, r))
        .collect();
    let has_error = results.iter().any(|r| r.error_code != 0);
    Handled::new(
        Response::DescribeConfigs(DescribeConfigsResponse::default().with_results(results)),
        has_error,
    )
}

fn describe(
    cluster: &Cluster,
    log: &LogManager,
    config: &Config,
    advertised: &(String, u16),
    resource: DescribeConfigsResource,
) -> DescribeConfigsResult {
    let name = resource.resource_name.to_string();
    let result = DescribeConfigsResult::default()
        .with_resource_type(resource.resource_type)
        .with_resource_name(resource.resource_name.clone());
    let entries = match resource.resource_type {
        RESOURCE_TOPIC => match log.topic(&name) {
            Some(topic) => Ok(crate::requests::topics::configs::describe(
                config.min_insync_replicas,
                &topic.config,
                &crate::requests::topics::configs::overrides_of(cluster, &topic),
            )
            .into_iter()
            .map(|e| Entry {
                name: e.name,
                value: e.value,
                read_only: e.read_only,
                source: if e.is_default {
                    SOURCE_DEFAULT
                } else {
                    SOURCE_TOPIC
                },
            })
            .collect::<Vec<_>>()),
            None => Err((
                ResponseError::UnknownTopicOrPartition,
                format!("topic {name} does not exist"),
            )),
        },
        RESOURCE_BROKER if name.is_empty() || name == config.node_id.to_string() => {
            let mut entries = broker_entries(cluster, log, config, advertised);
            entries.extend(dynamic_entries(cluster, config, name.is_empty()));
            Ok(entries)
        }
        RESOURCE_BROKER => Err((
            ResponseError::InvalidRequest,
            format!(
                "broker {name} is not this broker (node id {})",
                config.node_id
            ),
        )),
        RESOURCE_GROUP => {
            let image = cluster.image();
            let set = image.group_configs.get(&name);
            Ok(crate::coordinators::share::config::defaults()
                .into_iter()
                .map(|(key, default)| match set.and_then(|s| s.get(key)) {
                    Some(v) => Entry {
                        name: key.to_string(),
                        value: v.clone(),
                        read_only: false,
                        source: SOURCE_GROUP,
                    },
                    None => Entry {
                        name: key.to_string(),
                        value: default,
                        read_only: false,
                        source: SOURCE_DEFAULT,
                    },
                })
                .collect())
        }
        other => Err((
            ResponseError::InvalidRequest,
            format!("resource type {other} is not supported (topics, brokers and groups are)"),
        )),
    };
    match entries {
        Ok(entries) => {
            let wanted = resource
                .configuration_keys
                .map(|keys| keys.iter().map(|k| k.to_string()).collect::<Vec<_>>());
            let configs = entries
                .into_iter()
                .filter(|e| wanted.as_ref().is_none_or(|w| w.contains(&e.name)))
                .map(|e| {
                    DescribeConfigsResourceResult::default()
                        .with_name(StrBytes::from_string(e.name))
                        .with_value(Some(StrBytes::from_string(e.value)))
                        .with_read_only(e.read_only)
                        .with_config_source(e.source)
                })
                .collect();
            result.with_configs(configs)
        }
        Err((error, message)) => result
            .with_error_code(error.code())
            .with_error_message(Some(StrBytes::from_string(message))),
    }
}

/// The replication throttles (the only dynamic broker configs), for this
/// broker or, with `default_resource`, as the cluster default: set values
/// with their source, unset ones as Kafka's default (no limit).
fn dynamic_entries(cluster: &Cluster, config: &Config, default_resource: bool) -> Vec<Entry> {
    let image = cluster.image();
    let own = image.broker_configs.get(&config.node_id.to_string());
    let default = image.broker_configs.get("");
    [LEADER_RATE, FOLLOWER_RATE]
        .into_iter()
        .map(|name| {
            let own = own.filter(|_| !default_resource).and_then(|c| c.get(name));
            let (value, source) = match (own, default.and_then(|c| c.get(name))) {
                (Some(v), _) => (v.clone(), SOURCE_DYNAMIC_BROKER),
                (None, Some(v)) => (v.clone(), SOURCE_DYNAMIC_DEFAULT_BROKER),
                (None, None) => (i64::MAX.to_string(), SOURCE_DEFAULT),
            };
            Entry {
                name: name.to_string(),
                value,
                read_only: false,
                source,
            }
        })
        .collect()
}

fn broker_entries(
    cluster: &Cluster,
    log: &LogManager,
    config: &Config,
    advertised: &(String, u16),
) -> Vec<Entry> {
    let c = config;
    let defaults = log.default_log_config();
    let (host, port) = advertised;
    let security = &c.security;
    let joined = |items: Vec<String>| items.join(",");
    let listeners = joined(
        security
            .listeners
            .iter()
            .map(|l| format!("{}://{}", l.name, l.bind))
            .collect(),
    );
    let registered = cluster
        .image()
        .brokers
        .get(&c.node_id)
        .map(|b| b.listeners.clone())
        .unwrap_or_default();
    let advertised = match registered.is_empty() {
        true => format!("{}://{host}:{port}", security.inter_broker().name),
        false => joined(
            registered
                .iter()
                .map(|(name, e)| format!("{name}://{}:{}", e.host, e.port))
                .collect(),
        ),
    };
    let protocol_map = joined(
        security
            .listeners
            .iter()
            .map(|l| format!("{}:{}", l.name, l.protocol))
            .collect(),
    );
    let mechanisms = joined(
        security
            .sasl
            .enabled
            .iter()
            .map(|m| m.name().to_string())
            .collect(),
    );
    let pairs: Vec<(&str, String)> = vec![
        ("node.id", c.node_id.to_string()),
        ("broker.id", c.node_id.to_string()),
        ("listeners", listeners),
        ("advertised.listeners", advertised),
        (
            "inter.broker.listener.name",
            security.inter_broker().name.clone(),
        ),
        ("listener.security.protocol.map", protocol_map),
        ("sasl.enabled.mechanisms", mechanisms),
        (
            "connections.max.reauth.ms",
            security.sasl.connections_max_reauth.as_millis().to_string(),
        ),
        ("log.dirs", c.data_dir.display().to_string()),
        ("num.partitions", c.default_partitions.to_string()),
        (
            "default.replication.factor",
            c.default_replication_factor.to_string(),
        ),
        ("min.insync.replicas", c.min_insync_replicas.to_string()),
        (
            "auto.create.topics.enable",
            c.auto_create_topics.to_string(),
        ),
        ("socket.request.max.bytes", c.max_request_bytes.to_string()),
        ("message.max.bytes", defaults.max_message_bytes.to_string()),
        ("log.segment.bytes", defaults.segment_bytes.to_string()),
        ("log.retention.ms", defaults.retention_ms.to_string()),
        ("log.retention.bytes", defaults.retention_bytes.to_string()),
        ("log.cleaner.threads", c.log_cleaner.threads.to_string()),
        (
            "log.cleaner.dedupe.buffer.size",
            c.log_cleaner.dedupe_buffer_size.to_string(),
        ),
        (
            "log.cleaner.backoff.ms",
            c.log_cleaner.backoff.as_millis().to_string(),
        ),
        (
            "chronik.wal.profile",
            format!("{:?}", c.wal_profile).to_lowercase(),
        ),
        (
            "chronik.produce.profile",
            format!("{:?}", c.produce_profile),
        ),
        (
            "chronik.produce.memory.bytes",
            c.produce_profile.in_flight_bytes().to_string(),
        ),
    ];
    pairs
        .into_iter()
        .map(|(name, value)| Entry {
            name: name.to_string(),
            value,
            read_only: true,
            source: SOURCE_STATIC_BROKER,
        })
        .collect()
}
