//! Raft commands and their deterministic application to the metadata image.
//!
//! Owns: `Command` (the raft log's application payload), `CommandResult`,
//! `apply` and the topic-name rule. Must not: read a clock, draw random
//! numbers or look at anything but the image and the command — every node
//! applies the same log and must reach the same image. Whatever needs
//! randomness or liveness (topic ids, replica assignment, when to fence) is
//! decided by the controller before it proposes.
//!
//! Partition rules on fencing and unfencing (clean election only):
//! - a fenced broker leaves every ISR that has another unfenced member;
//!   the last in-sync replica stays in the ISR so it can lead again;
//! - partitions it led get the first unfenced ISR member in replica order
//!   as leader, or none (-1) when there is none;
//! - an unfenced broker leads every leaderless partition whose ISR has it;
//!   it rejoins other ISRs only through AlterPartition from their leaders;
//! - a broker whose data directory goes offline is moved off as a fenced
//!   one is (it stays registered, and is not live), except that it keeps
//!   leading a partition no other live ISR member can take (still readable;
//!   writes fail with KAFKA_STORAGE_ERROR). When it reports the directory
//!   back, the partitions it still leads get leader epoch + 1 (its logs
//!   were cut back to their durable offsets: followers must truncate to
//!   the new epoch) and it is treated as unfenced again;
//! - a leader change bumps `leader_epoch` and `partition_epoch`, any other
//!   change only `partition_epoch`;
//! - an unregistered broker leaves the image's brokers; one that was live
//!   first leaves ISRs and leaderships as on fencing. Its replica
//!   assignments stay (offline replicas, as Kafka keeps them), and so does
//!   a last-ISR place, which it leads again if it ever registers again.
//!
//! With `eligible.leader.replicas.version` >= 1 (KIP-966) `elr` adds its
//! rules to every change of an ISR or a leader: a fenced (or shut down, or
//! unregistered) broker leaves the ISR even as its last member, replicas
//! that leave an ISR below min.insync.replicas become eligible leaders, and
//! a leaderless partition takes a live ELR member (or its last known
//! leader) when no ISR member is live. Turning the feature off, or changing
//! a min.insync.replicas, clears the ELR fields concerned, as Kafka does.

use std::collections::{BTreeMap, BTreeSet};

use chronik_replication::{choose_leader, PartitionRegistration};
use serde::{Deserialize, Serialize};

use crate::acl::{self, AclBinding, AclBindingFilter};
use crate::elr;
use crate::error::ClusterError;
use crate::features;
use crate::image::{
    BrokerImage, ListenerEndpoints, MetadataImage, PartitionImage, ScramCredentialImage, TopicImage,
};
use crate::reassign;
use crate::request::{AlterPartition, ElectionType, Reassignment};

/// Kafka's NO_LEADER.
pub const NO_LEADER: i32 = -1;
/// Kafka's limit on topic name length.
const MAX_TOPIC_NAME_LEN: usize = 249;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// Registers (or re-registers) a broker and unfences it.
    RegisterBroker {
        node_id: i32,
        host: String,
        port: u16,
        /// Every advertised listener; absent in entries written before
        /// brokers named their listeners (then `host:port` serves all).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        listeners: ListenerEndpoints,
        /// Its data directory is offline as it registers.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        log_dir_offline: bool,
        /// Its `broker.rack`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rack: Option<String>,
    },
    /// The broker's heartbeat reports its data directory offline (its
    /// leaderships and ISR places move as on fencing) or back online (it
    /// leads the leaderless partitions whose ISR holds it, and rejoins
    /// other ISRs through their leaders once caught up).
    SetLogDirOffline {
        node_id: i32,
        offline: bool,
    },
    FenceBroker {
        node_id: i32,
    },
    /// Adds or replaces SCRAM credentials (user, mechanism, credential) and
    /// removes others (user, mechanism); the server has validated both.
    AlterScramCredentials {
        upsertions: Vec<(String, String, ScramCredentialImage)>,
        deletions: Vec<(String, String)>,
    },
    /// Kafka's controlled shutdown: moves the broker's leaderships and ISR
    /// places to others as fencing does, but keeps it listed until fenced.
    ControlledShutdown {
        node_id: i32,
    },
    /// `assignments[p]` is partition p's replica list, leader first;
    /// `isrs[p]` its first ISR when not every replica is live (a manual
    /// assignment naming a fenced broker; empty: every replica).
    CreateTopic {
        name: String,
        topic_id: [u8; 16],
        configs: BTreeMap<String, String>,
        assignments: Vec<Vec<i32>>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        isrs: Vec<Vec<i32>>,
    },
    DeleteTopic {
        name: String,
    },
    /// Appends partitions to a topic: `assignments[i]` is the replica list
    /// of partition `current count + i`, leader first; `isrs` as for
    /// `CreateTopic`.
    CreatePartitions {
        name: String,
        assignments: Vec<Vec<i32>>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        isrs: Vec<Vec<i32>>,
    },
    /// Replaces a topic's config overrides.
    AlterTopicConfigs {
        name: String,
        configs: BTreeMap<String, String>,
    },
    AlterPartition(AlterPartition),
    /// Sets the cluster id unless one is set already (then a no-op); a new
    /// cluster also takes its first feature levels and default
    /// min.insync.replicas from it (absent from entries written before
    /// features: such a cluster has none, `features` says how that reads).
    InitClusterId {
        cluster_id: String,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        features: BTreeMap<String, i16>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        default_min_insync_replicas: Option<i32>,
    },
    /// UpdateFeatures (checked by the controller, `features::check_update`):
    /// sets these finalized levels, and records the controller's default
    /// min.insync.replicas.
    UpdateFeatures {
        levels: BTreeMap<String, i16>,
        default_min_insync_replicas: Option<i32>,
    },
    /// Adds ACLs (validated by the controller; existing ones are no-ops).
    CreateAcls {
        bindings: Vec<AclBinding>,
    },
    /// Removes every ACL each filter matches.
    DeleteAcls {
        filters: Vec<AclBindingFilter>,
    },
    /// Replaces the dynamic configs of one broker resource (a broker id,
    /// or `""` for the cluster default); an empty set removes it.
    AlterBrokerConfigs {
        resource: String,
        configs: BTreeMap<String, String>,
    },
    /// Replaces one group's configs; an empty set removes them.
    AlterGroupConfigs {
        group: String,
        configs: BTreeMap<String, String>,
    },
    /// KIP-455: starts, replaces or cancels reassignments (`reassign`).
    AlterPartitionReassignments {
        reassignments: Vec<Reassignment>,
    },
    /// KIP-460: preferred or unclean elections (`reassign::elect`).
    ElectLeaders {
        election: ElectionType,
        partitions: Vec<(String, i32)>,
    },
    /// Kafka's UnregisterBroker: removes the broker's registration.
    UnregisterBroker {
        node_id: i32,
    },
    /// AlterClientQuotas: sets and removes client quota values, all or
    /// none (`quotas::apply`).
    AlterClientQuotas {
        alterations: Vec<crate::quotas::QuotaAlteration>,
    },
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum CommandResult {
    /// Applied; nothing to report (also the result of raft's own entries).
    #[default]
    Done,
    Topic(TopicImage),
    Partition(PartitionImage),
    /// Per DeleteAcls filter, the ACLs it removed.
    DeletedAcls(Vec<Vec<AclBinding>>),
    /// Per partition of the command, in its order: `None` when applied.
    PerPartition(Vec<Option<ClusterError>>),
    /// The state machine refused the command; the image is unchanged.
    Rejected(ClusterError),
}

/// Kafka's topic name rule: 1..=249 characters of `[a-zA-Z0-9._-]`, not
/// `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), ClusterError> {
    let fail = |why: &str| Err(ClusterError::InvalidTopic(format!("{name:?}: {why}")));
    if name.is_empty() {
        return fail("empty");
    }
    if name.len() > MAX_TOPIC_NAME_LEN {
        return fail("longer than 249 characters");
    }
    if name == "." || name == ".." {
        return fail("'.' and '..' are not allowed");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return fail("only ASCII alphanumerics, '.', '_' and '-' are allowed");
    }
    Ok(())
}

/// Applies `command` to `image`. Rejections leave the image unchanged.
pub fn apply(image: &mut MetadataImage, command: &Command) -> CommandResult {
    let outcome = match command {
        Command::RegisterBroker {
            node_id,
            host,
            port,
            listeners,
            log_dir_offline,
            rack,
        } => {
            register_broker(
                image,
                BrokerImage {
                    node_id: *node_id,
                    host: host.clone(),
                    port: *port,
                    fenced: false,
                    in_controlled_shutdown: false,
                    listeners: listeners.clone(),
                    log_dir_offline: *log_dir_offline,
                    rack: rack.clone(),
                },
            );
            Ok(CommandResult::Done)
        }
        Command::SetLogDirOffline { node_id, offline } => {
            set_log_dir_offline(image, *node_id, *offline);
            Ok(CommandResult::Done)
        }
        Command::FenceBroker { node_id } => {
            fence_broker(image, *node_id);
            Ok(CommandResult::Done)
        }
        Command::AlterScramCredentials {
            upsertions,
            deletions,
        } => {
            for (user, mechanism) in deletions {
                if let Some(by_mechanism) = image.scram_credentials.get_mut(user) {
                    by_mechanism.remove(mechanism);
                    if by_mechanism.is_empty() {
                        image.scram_credentials.remove(user);
                    }
                }
            }
            for (user, mechanism, credential) in upsertions {
                image
                    .scram_credentials
                    .entry(user.clone())
                    .or_default()
                    .insert(mechanism.clone(), credential.clone());
            }
            Ok(CommandResult::Done)
        }
        Command::ControlledShutdown { node_id } => {
            begin_controlled_shutdown(image, *node_id);
            Ok(CommandResult::Done)
        }
        Command::CreateTopic {
            name,
            topic_id,
            configs,
            assignments,
            isrs,
        } => create_topic(image, name, *topic_id, configs, assignments, isrs)
            .map(CommandResult::Topic),
        Command::DeleteTopic { name } => image
            .topics
            .remove(name)
            .map(|_| CommandResult::Done)
            .ok_or_else(|| ClusterError::UnknownTopic(name.clone())),
        Command::CreatePartitions {
            name,
            assignments,
            isrs,
        } => create_partitions(image, name, assignments, isrs).map(CommandResult::Topic),
        Command::AlterTopicConfigs { name, configs } => image
            .topics
            .get_mut(name)
            .map(|topic| {
                let key = "min.insync.replicas";
                if topic.configs.get(key) != configs.get(key) {
                    // Kafka's ClearElrRecord for the topic.
                    topic.partitions.iter_mut().for_each(clear_elr);
                }
                topic.configs = configs.clone();
                CommandResult::Topic(topic.clone())
            })
            .ok_or_else(|| ClusterError::UnknownTopic(name.clone())),
        Command::AlterPartition(req) => alter_partition(image, req).map(CommandResult::Partition),
        Command::InitClusterId {
            cluster_id,
            features,
            default_min_insync_replicas,
        } => {
            if image.cluster_id.is_none() {
                image.cluster_id = Some(cluster_id.clone());
                image.features = features.clone();
                image.default_min_insync_replicas = *default_min_insync_replicas;
            }
            Ok(CommandResult::Done)
        }
        Command::UpdateFeatures {
            levels,
            default_min_insync_replicas,
        } => {
            update_features(image, levels, *default_min_insync_replicas);
            Ok(CommandResult::Done)
        }
        Command::CreateAcls { bindings } => {
            acl::create(&mut image.acls, bindings).map(|()| CommandResult::Done)
        }
        Command::DeleteAcls { filters } => Ok(CommandResult::DeletedAcls(acl::delete(
            &mut image.acls,
            filters,
        ))),
        Command::AlterClientQuotas { alterations } => {
            crate::quotas::apply(&mut image.client_quotas, alterations)
                .map(|()| CommandResult::Done)
        }
        Command::AlterBrokerConfigs { resource, configs } => {
            if configs.is_empty() {
                image.broker_configs.remove(resource);
            } else {
                image
                    .broker_configs
                    .insert(resource.clone(), configs.clone());
            }
            Ok(CommandResult::Done)
        }
        Command::AlterGroupConfigs { group, configs } => {
            if configs.is_empty() {
                image.group_configs.remove(group);
            } else {
                image.group_configs.insert(group.clone(), configs.clone());
            }
            Ok(CommandResult::Done)
        }
        Command::AlterPartitionReassignments { reassignments } => Ok(CommandResult::PerPartition(
            reassignments
                .iter()
                .map(|r| {
                    with_elr(image, &r.topic, r.partition, |image| {
                        reassign::alter(image, r)
                    })
                    .err()
                })
                .collect(),
        )),
        Command::ElectLeaders {
            election,
            partitions,
        } => Ok(CommandResult::PerPartition(
            partitions
                .iter()
                .map(|(topic, p)| {
                    with_elr(image, topic, *p, |image| {
                        reassign::elect(image, topic, *p, *election)
                    })
                    .err()
                })
                .collect(),
        )),
        Command::UnregisterBroker { node_id } => {
            unregister_broker(image, *node_id).map(|()| CommandResult::Done)
        }
    };
    outcome.unwrap_or_else(CommandResult::Rejected)
}

fn register_broker(image: &mut MetadataImage, broker: BrokerImage) {
    let (node_id, offline) = (broker.node_id, broker.log_dir_offline);
    image.brokers.insert(node_id, broker);
    if offline {
        move_off_offline_dir(image, node_id);
    } else {
        lead_leaderless(image, node_id);
    }
}

/// The broker's data directory went offline or came back (rules in the
/// module header). Ignored for a fenced or unknown broker, and when nothing
/// changes.
fn set_log_dir_offline(image: &mut MetadataImage, node_id: i32, offline: bool) {
    match image.brokers.get_mut(&node_id) {
        Some(broker) if !broker.fenced && broker.log_dir_offline != offline => {
            broker.log_dir_offline = offline;
            if broker.in_controlled_shutdown {
                return;
            }
        }
        _ => return,
    }
    if offline {
        move_off_offline_dir(image, node_id);
    } else {
        for partition in all_partitions(image) {
            if partition.leader == node_id {
                partition.leader_epoch += 1;
                partition.partition_epoch += 1;
            }
        }
        lead_leaderless(image, node_id);
    }
}

/// `move_off` for a broker whose directory went offline: a partition no
/// other live ISR member can lead keeps it as leader.
fn move_off_offline_dir(image: &mut MetadataImage, node_id: i32) {
    move_off_keeping(image, node_id, true);
}

/// A broker that may lead again leads every leaderless partition whose ISR
/// has it (with ELR on: also one whose ISR has no live member and whose
/// ELR, or last known leader, elects it).
fn lead_leaderless(image: &mut MetadataImage, node_id: i32) {
    let elr_on = image.elr_enabled();
    let live: BTreeSet<i32> = image.live_brokers().map(|b| b.node_id).collect();
    let mins = min_isrs(image);
    for (partition, min_isr) in all_partitions_with(image, &mins) {
        if partition.leader != NO_LEADER {
            continue;
        }
        if partition.isr.contains(&node_id) {
            let before = elr_on.then(|| partition.clone());
            partition.leader = node_id;
            partition.leader_epoch += 1;
            partition.partition_epoch += 1;
            if let Some(before) = before {
                elr::update(&before, partition, min_isr);
            }
        } else if elr_on
            && !partition.isr.iter().any(|r| live.contains(r))
            && elr::choose_leader(partition, &live) == Some(node_id)
        {
            let before = partition.clone();
            tracing::info!(leader = node_id, elr = ?partition.elr, last_known_elr = ?partition.last_known_elr,
                "leader elected from the eligible leader replicas");
            partition.leader = node_id;
            partition.isr = vec![node_id];
            partition.leader_epoch += 1;
            partition.partition_epoch += 1;
            elr::update(&before, partition, min_isr);
        }
    }
}

fn fence_broker(image: &mut MetadataImage, node_id: i32) {
    match image.brokers.get_mut(&node_id) {
        Some(broker) if !broker.fenced => {
            let was_moved_off = broker.in_controlled_shutdown;
            broker.fenced = true;
            broker.in_controlled_shutdown = false;
            if was_moved_off {
                return;
            }
        }
        _ => return,
    }
    move_off(image, node_id);
}

fn begin_controlled_shutdown(image: &mut MetadataImage, node_id: i32) {
    match image.brokers.get_mut(&node_id) {
        Some(broker) if !broker.fenced && !broker.in_controlled_shutdown => {
            broker.in_controlled_shutdown = true
        }
        _ => return,
    }
    move_off(image, node_id);
}

/// Kafka's `unregisterBroker`: the registration goes; a broker that was
/// live moves its leaderships and ISR places off first, as fencing does (a
/// fenced or shutting-down one has already).
fn unregister_broker(image: &mut MetadataImage, node_id: i32) -> Result<(), ClusterError> {
    let broker = image
        .brokers
        .remove(&node_id)
        .ok_or(ClusterError::BrokerIdNotRegistered(node_id))?;
    if !broker.fenced && !broker.in_controlled_shutdown {
        move_off(image, node_id);
    }
    Ok(())
}

/// A broker that may no longer lead (just fenced or shutting down) leaves
/// the ISRs it shares with a live broker, and its partitions get new
/// leaders (the partition rules in the module header).
fn move_off(image: &mut MetadataImage, node_id: i32) {
    move_off_keeping(image, node_id, false);
}

/// `move_off`; with `keep_sole_leader`, a partition whose leader is
/// `node_id` and that no other live ISR member can lead keeps its leader.
fn move_off_keeping(image: &mut MetadataImage, node_id: i32, keep_sole_leader: bool) {
    let elr_on = image.elr_enabled();
    let live: BTreeSet<i32> = image.live_brokers().map(|b| b.node_id).collect();
    let mins = min_isrs(image);
    for (partition, min_isr) in all_partitions_with(image, &mins) {
        if !partition.isr.contains(&node_id) {
            continue;
        }
        let before = partition.clone();
        let others_live = partition
            .isr
            .iter()
            .any(|&r| r != node_id && live.contains(&r));
        let sole_kept = keep_sole_leader && partition.leader == node_id && !others_live;
        if others_live || (elr_on && !sole_kept) {
            partition.isr.retain(|&r| r != node_id);
        }
        if partition.leader == node_id {
            let isr: BTreeSet<i32> = partition.isr.iter().copied().collect();
            let mut chosen = choose_leader(&partition.replicas, &isr, &live);
            if chosen.is_none() && elr_on && !sole_kept {
                // No live ISR member: a live eligible replica leads.
                let mut staged = partition.clone();
                staged.leader = NO_LEADER;
                elr::update(&before, &mut staged, min_isr);
                chosen = elr::choose_leader(&staged, &live);
                if let Some(leader) = chosen {
                    tracing::info!(leader, elr = ?staged.elr,
                        "leader elected from the eligible leader replicas");
                    partition.isr = vec![leader];
                }
            }
            match chosen {
                Some(leader) => partition.leader = leader,
                None if keep_sole_leader => continue,
                None => partition.leader = NO_LEADER,
            }
            partition.leader_epoch += 1;
        }
        partition.partition_epoch += 1;
        if elr_on {
            elr::update(&before, partition, min_isr);
        }
    }
}

/// Each topic's min.insync.replicas, by name.
fn min_isrs(image: &MetadataImage) -> BTreeMap<String, usize> {
    image
        .topics
        .values()
        .map(|t| (t.name.clone(), image.min_insync_replicas(t)))
        .collect()
}

/// Every partition with its topic's min.insync.replicas.
fn all_partitions_with<'a>(
    image: &'a mut MetadataImage,
    mins: &'a BTreeMap<String, usize>,
) -> impl Iterator<Item = (&'a mut PartitionImage, usize)> {
    image.topics.values_mut().flat_map(move |t| {
        let min = mins.get(&t.name).copied().unwrap_or(1);
        t.partitions.iter_mut().map(move |p| (p, min))
    })
}

/// Runs `change` on one partition and, with ELR on, applies the ELR rules
/// to what it did.
fn with_elr(
    image: &mut MetadataImage,
    topic: &str,
    index: i32,
    change: impl FnOnce(&mut MetadataImage) -> Result<(), ClusterError>,
) -> Result<(), ClusterError> {
    let before = image
        .elr_enabled()
        .then(|| image.partition(topic, index).cloned())
        .flatten();
    change(image)?;
    let Some(before) = before else { return Ok(()) };
    let Some(min_isr) = image
        .topics
        .get(topic)
        .map(|t| image.min_insync_replicas(t))
    else {
        return Ok(());
    };
    let index = usize::try_from(index).unwrap_or(usize::MAX);
    if let Some(after) = image
        .topics
        .get_mut(topic)
        .and_then(|t| t.partitions.get_mut(index))
    {
        elr::update(&before, after, min_isr);
    }
    Ok(())
}

fn clear_elr(partition: &mut PartitionImage) {
    partition.elr.clear();
    partition.last_known_elr.clear();
}

/// UpdateFeatures: records the levels; turning ELR off, or a new cluster
/// default min.insync.replicas, clears every ELR (Kafka's ClearElrRecord).
fn update_features(
    image: &mut MetadataImage,
    levels: &BTreeMap<String, i16>,
    default_min_insync_replicas: Option<i32>,
) {
    for (name, level) in levels {
        image.features.insert(name.clone(), *level);
    }
    let min_changed = default_min_insync_replicas.is_some()
        && default_min_insync_replicas != image.default_min_insync_replicas;
    if min_changed {
        image.default_min_insync_replicas = default_min_insync_replicas;
    }
    if !features::elr_enabled(&image.features) || min_changed {
        all_partitions(image).for_each(clear_elr);
    }
}

fn all_partitions(image: &mut MetadataImage) -> impl Iterator<Item = &mut PartitionImage> {
    image
        .topics
        .values_mut()
        .flat_map(|t| t.partitions.iter_mut())
}

fn create_topic(
    image: &mut MetadataImage,
    name: &str,
    topic_id: [u8; 16],
    configs: &BTreeMap<String, String>,
    assignments: &[Vec<i32>],
    isrs: &[Vec<i32>],
) -> Result<TopicImage, ClusterError> {
    validate_topic_name(name)?;
    if image.topics.contains_key(name) {
        return Err(ClusterError::TopicAlreadyExists(name.to_string()));
    }
    if assignments.is_empty() {
        return Err(ClusterError::InvalidPartitions("no partitions".to_string()));
    }
    let topic = TopicImage {
        name: name.to_string(),
        topic_id,
        configs: configs.clone(),
        partitions: new_partitions(0, assignments, isrs)?,
    };
    image.topics.insert(name.to_string(), topic.clone());
    Ok(topic)
}

/// Registrations for partitions `first..` with `assignments`: every
/// replica in the ISR (or `isrs[i]`, when given), the first ISR member
/// in replica order leading.
fn new_partitions(
    first: usize,
    assignments: &[Vec<i32>],
    isrs: &[Vec<i32>],
) -> Result<Vec<PartitionImage>, ClusterError> {
    if !isrs.is_empty() && isrs.len() != assignments.len() {
        return Err(ClusterError::InvalidReplicaAssignment(format!(
            "{} ISRs for {} partitions",
            isrs.len(),
            assignments.len()
        )));
    }
    let mut partitions = Vec::with_capacity(assignments.len());
    for (index, replicas) in assignments.iter().enumerate() {
        let registration = PartitionRegistration::new(replicas.clone())
            .map_err(|e| ClusterError::InvalidReplicationFactor(e.to_string()))?;
        let isr = isrs.get(index).unwrap_or(replicas);
        if isr.is_empty() || isr.iter().any(|r| !replicas.contains(r)) {
            return Err(ClusterError::InvalidReplicaAssignment(format!(
                "ISR {isr:?} of partition {} is not a non-empty subset of its replicas {replicas:?}",
                first + index
            )));
        }
        let leader = replicas
            .iter()
            .copied()
            .find(|r| isr.contains(r))
            .or(registration.leader)
            .unwrap_or(NO_LEADER);
        let partition = i32::try_from(first + index)
            .map_err(|_| ClusterError::InvalidPartitions(format!("{}", first + index)))?;
        partitions.push(PartitionImage::new(
            partition,
            replicas.clone(),
            isr.clone(),
            leader,
        ));
    }
    Ok(partitions)
}

fn create_partitions(
    image: &mut MetadataImage,
    name: &str,
    assignments: &[Vec<i32>],
    isrs: &[Vec<i32>],
) -> Result<TopicImage, ClusterError> {
    let topic = image
        .topics
        .get_mut(name)
        .ok_or_else(|| ClusterError::UnknownTopic(name.to_string()))?;
    if assignments.is_empty() {
        return Err(ClusterError::InvalidPartitions(
            "no new partitions".to_string(),
        ));
    }
    let added = new_partitions(topic.partitions.len(), assignments, isrs)?;
    topic.partitions.extend(added);
    Ok(topic.clone())
}

fn alter_partition(
    image: &mut MetadataImage,
    req: &AlterPartition,
) -> Result<PartitionImage, ClusterError> {
    let unknown = || ClusterError::UnknownTopic(format!("{}-{}", req.topic, req.partition));
    let current = image
        .partition(&req.topic, req.partition)
        .ok_or_else(unknown)?;
    let new_isr: BTreeSet<i32> = req.new_isr.iter().copied().collect();
    if new_isr.len() != req.new_isr.len() {
        return Err(ClusterError::InvalidRequest(format!(
            "duplicate broker in proposed ISR {:?}",
            req.new_isr
        )));
    }
    let registration = PartitionRegistration {
        replicas: current.replicas.clone(),
        isr: current.isr.iter().copied().collect(),
        leader: (current.leader != NO_LEADER).then_some(current.leader),
        leader_epoch: current.leader_epoch,
        partition_epoch: current.partition_epoch,
    };
    let next = registration
        .alter_partition(
            req.leader_id,
            req.leader_epoch,
            req.partition_epoch,
            new_isr,
        )
        .map_err(|e| match e {
            chronik_replication::Error::NotLeader { .. }
            | chronik_replication::Error::FencedLeaderEpoch { .. }
            | chronik_replication::Error::UnknownLeaderEpoch { .. } => {
                ClusterError::FencedLeaderEpoch
            }
            chronik_replication::Error::InvalidUpdateVersion { .. } => {
                ClusterError::InvalidUpdateVersion
            }
            chronik_replication::Error::InvalidRegistration { reason, .. } => {
                ClusterError::InvalidRequest(format!("proposed ISR {:?}: {reason}", req.new_isr))
            }
            other => ClusterError::InvalidRequest(other.to_string()),
        })?;
    if let Some(added) = req
        .new_isr
        .iter()
        .find(|r| !current.isr.contains(r) && !image.is_live(**r))
    {
        return Err(ClusterError::InvalidRequest(format!(
            "broker {added} cannot join the ISR: it is fenced or unregistered"
        )));
    }
    let index = usize::try_from(req.partition).map_err(|_| unknown())?;
    let before = current.clone();
    let elr_on = image.elr_enabled();
    let min_isr = image
        .topics
        .get(&req.topic)
        .map_or(1, |t| image.min_insync_replicas(t));
    let partition = image
        .topics
        .get_mut(&req.topic)
        .and_then(|t| t.partitions.get_mut(index))
        .ok_or_else(unknown)?;
    partition.isr = req.new_isr.clone();
    partition.partition_epoch = next.partition_epoch;
    if elr_on {
        elr::update(&before, partition, min_isr);
    }
    // The ISR change that admits a reassignment's last newcomer finishes it.
    let live = reassign::live_set(image);
    let partition = image
        .topics
        .get_mut(&req.topic)
        .and_then(|t| t.partitions.get_mut(index))
        .ok_or_else(unknown)?;
    reassign::maybe_complete(partition, &live);
    Ok(partition.clone())
}

#[cfg(test)]
#[path = "command_tests.rs"]
mod tests;
