//! How many topics and partitions this broker (or cluster) may hold: the
//! check every topic or partition creation path makes before it creates
//! anything — CreateTopics, Metadata auto-creation and CreatePartitions.
//!
//! Owns: counting what exists and comparing with `--max-topics` and
//! `--max-broker-partitions` (KIP-578's `max.broker.partitions`): the
//! partition replicas of the whole cluster against that cap times the live
//! brokers. Must not: create topics.

use chronik_metadata::Cluster;
use kafka_protocol::error::ResponseError;

use crate::config::limits::Limits;

/// POLICY_VIOLATION (Kafka's answer when a creation breaks a broker policy)
/// when `partitions` more partitions with `replication_factor` replicas
/// would exceed the caps.
pub fn check_capacity(
    cluster: &Cluster,
    limits: &Limits,
    partitions: i32,
    replication_factor: i16,
) -> Result<(), (ResponseError, String)> {
    let topics = cluster.image().topics.len();
    if topics >= limits.max_topics {
        return Err((
            ResponseError::PolicyViolation,
            format!(
                "this cluster already holds {topics} topics (--max-topics {})",
                limits.max_topics
            ),
        ));
    }
    check_partition_capacity(cluster, limits, partitions, replication_factor)
}

/// POLICY_VIOLATION when `partitions` more partitions (of a new topic or
/// an existing one) with `replication_factor` replicas would exceed
/// `--max-broker-partitions` times the live brokers.
pub fn check_partition_capacity(
    cluster: &Cluster,
    limits: &Limits,
    partitions: i32,
    replication_factor: i16,
) -> Result<(), (ResponseError, String)> {
    let new_replicas = i64::from(partitions.max(0)) * i64::from(replication_factor.max(1));
    let image = cluster.image();
    let replicas: usize = image
        .topics
        .values()
        .flat_map(|t| t.partitions.iter())
        .map(|p| p.replicas.len())
        .sum();
    let brokers = image.live_brokers().count().max(1);
    let cap =
        i64::try_from(limits.max_broker_partitions.saturating_mul(brokers)).unwrap_or(i64::MAX);
    let existing = i64::try_from(replicas).unwrap_or(i64::MAX);
    if existing.saturating_add(new_replicas) > cap {
        return Err((
            ResponseError::PolicyViolation,
            format!(
                "{new_replicas} more partition replicas would exceed max.broker.partitions ({} per broker, {brokers} brokers, {existing} already)",
                limits.max_broker_partitions
            ),
        ));
    }
    Ok(())
}
