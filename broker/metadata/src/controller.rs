//! The controller: active on whichever node is the raft leader. It turns
//! requests into raft commands and fences brokers whose heartbeats stop.
//!
//! Owns: broker liveness (last heartbeat per broker, in memory, reset with
//! a full session of grace whenever this node starts a new term as
//! leader), replica assignment and topic ids for new topics and partitions (decided here,
//! before proposing, because `command::apply` may not use randomness), and
//! the fencing loop. Only a heartbeat registers a broker: one removed by
//! UnregisterBroker stays removed until it heartbeats again (the fencer
//! only looks at listed brokers). Must not: change the image other than by
//! proposing commands, or answer when it is not the leader (`NotController`);
//! DescribeQuorum (`quorum`) proposes nothing; voter changes are `voters`'.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::error::{CheckIsLeaderError, ClientWriteError, RaftError};
use openraft::ServerState;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::command::{validate_topic_name, Command, CommandResult};
use crate::error::ClusterError;
use crate::image::MetadataImage;
use crate::leader_balance::{partitions_to_elect, LeaderBalance};
use crate::observers;
use crate::placement;
use crate::quorum::{self, ReplicationClock};
use crate::raft_types::{kafka_id, Raft};
use crate::request::{
    ControllerReply, ControllerRequest, CreatePartitions, CreateTopic, ElectionType, Heartbeat,
};
use crate::voters::VoterChanges;

/// A proposal that takes longer than this to commit is reported as failed.
pub const PROPOSE_TIMEOUT: Duration = Duration::from_secs(10);
/// Refuse absurd partition counts before building assignments for them.
const MAX_PARTITIONS: i32 = 10_000;
/// A cluster id is a short printable token (Kafka's is 22 characters).
const MAX_CLUSTER_ID_LEN: usize = 64;

/// Kafka's rules for CreatePartitions, with its messages: the new count
/// must be above the current one (and within `MAX_PARTITIONS`).
pub fn check_partition_growth(current: i32, requested: i32) -> Result<(), ClusterError> {
    if requested < current {
        return Err(ClusterError::InvalidPartitions(format!(
            "Topic currently has {current} partitions, which is higher than the requested {requested}."
        )));
    }
    if requested == current {
        return Err(ClusterError::InvalidPartitions(format!(
            "Topic already has {current} partitions."
        )));
    }
    if requested > MAX_PARTITIONS {
        return Err(ClusterError::InvalidPartitions(format!(
            "{requested} (must be at most {MAX_PARTITIONS})"
        )));
    }
    Ok(())
}

/// The longest `broker.rack` a registration may carry.
const MAX_RACK_LEN: usize = 255;

/// Dynamic configs one broker resource may hold.
const MAX_BROKER_CONFIGS: usize = 64;

/// Configs one group may hold, its id's length, and how many groups may
/// have configs (each raft entry and the image stay bounded).
const MAX_GROUP_CONFIGS: usize = 32;
const MAX_GROUP_ID_BYTES: usize = 1024;
const MAX_CONFIGURED_GROUPS: usize = 100_000;

/// One reassignment or election command names at most this many
/// partitions (its raft entry stays small).
const MAX_PARTITIONS_PER_COMMAND: usize = 10_000;

fn check_partition_request(count: usize) -> Result<(), ClusterError> {
    if count > MAX_PARTITIONS_PER_COMMAND {
        return Err(ClusterError::InvalidRequest(format!(
            "{count} partitions in one request (at most {MAX_PARTITIONS_PER_COMMAND})"
        )));
    }
    Ok(())
}

/// Heartbeat bookkeeping, valid for one leader term.
struct Liveness {
    term: Option<u64>,
    /// When this node became leader: brokers not heard from since count
    /// from here (their grace period).
    since: Instant,
    last_seen: HashMap<i32, Instant>,
}

pub struct Controller {
    raft: Raft,
    images: watch::Receiver<Arc<MetadataImage>>,
    session_timeout: Duration,
    /// The configured voters and their hosts (a voter registers as a
    /// broker only at its own host; other brokers are observers).
    voters: HashMap<i32, String>,
    liveness: Mutex<Liveness>,
    /// Where the next topic's replica assignment starts (rotates per topic
    /// so partition leaders spread over the brokers).
    rotation: AtomicUsize,
    /// The voters' replication times, for DescribeQuorum.
    clock: Arc<ReplicationClock>,
    /// KIP-853 voter changes, one at a time.
    voter_changes: VoterChanges,
    /// This node's id, for UpdateFeatures' messages.
    node_id: i32,
    /// Its `--min-insync-replicas`, recorded with a new cluster's features
    /// and with every UpdateFeatures (the ELR rules' cluster default).
    default_min_insync_replicas: i32,
}

impl Controller {
    pub fn new(
        raft: Raft,
        images: watch::Receiver<Arc<MetadataImage>>,
        session_timeout: Duration,
        voters: HashMap<i32, String>,
        clock: Arc<ReplicationClock>,
        (node_id, default_min_insync_replicas): (i32, i32),
    ) -> Self {
        Controller {
            raft,
            images,
            session_timeout,
            voters,
            liveness: Mutex::new(Liveness {
                term: None,
                since: Instant::now(),
                last_seen: HashMap::new(),
            }),
            rotation: AtomicUsize::new(0),
            clock,
            voter_changes: VoterChanges::default(),
            node_id,
            default_min_insync_replicas,
        }
    }

    /// The current term if this node is the leader, else `Err(leader)`.
    fn leader_term(&self) -> Result<u64, Option<i32>> {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        if m.state == ServerState::Leader {
            Ok(m.current_term)
        } else {
            Err(m.current_leader.and_then(kafka_id))
        }
    }

    /// The liveness table for `term`, reset (every broker gets a full
    /// session of grace) when `term` is new.
    fn liveness(&self, term: u64) -> std::sync::MutexGuard<'_, Liveness> {
        // Plain maps: a poisoned lock still holds usable data.
        let mut liveness = self.liveness.lock().unwrap_or_else(|e| e.into_inner());
        if liveness.term != Some(term) {
            liveness.term = Some(term);
            liveness.since = Instant::now();
            liveness.last_seen.clear();
        }
        liveness
    }

    /// Serves a request if this node is the controller.
    pub async fn handle(&self, request: ControllerRequest) -> ControllerReply {
        let term = match self.leader_term() {
            Ok(term) => term,
            Err(leader) => return ControllerReply::NotController { leader },
        };
        match request {
            ControllerRequest::Heartbeat(heartbeat) => self.heartbeat(term, heartbeat).await,
            ControllerRequest::CreateTopic(create) => match self.plan_create_topic(&create) {
                Ok(command) => self.propose(command).await,
                Err(e) => ControllerReply::Failed(e),
            },
            ControllerRequest::DeleteTopic(name) => {
                self.propose(Command::DeleteTopic { name }).await
            }
            ControllerRequest::CreatePartitions(create) => {
                match self.plan_create_partitions(&create) {
                    Ok(command) => self.propose(command).await,
                    Err(e) => ControllerReply::Failed(e),
                }
            }
            ControllerRequest::AlterTopicConfigs { topic, configs } => {
                self.propose(Command::AlterTopicConfigs {
                    name: topic,
                    configs,
                })
                .await
            }
            ControllerRequest::AlterPartition(alter) => {
                self.propose(Command::AlterPartition(alter)).await
            }
            ControllerRequest::AlterScramCredentials {
                upsertions,
                deletions,
            } => {
                self.propose(Command::AlterScramCredentials {
                    upsertions,
                    deletions,
                })
                .await
            }
            ControllerRequest::InitClusterId(cluster_id) => {
                if cluster_id.is_empty() || cluster_id.len() > MAX_CLUSTER_ID_LEN {
                    return ControllerReply::Failed(ClusterError::InvalidRequest(format!(
                        "cluster id must be 1..={MAX_CLUSTER_ID_LEN} bytes"
                    )));
                }
                self.propose(Command::InitClusterId {
                    cluster_id,
                    features: crate::features::bootstrap_levels(),
                    default_min_insync_replicas: Some(self.default_min_insync_replicas),
                })
                .await
            }
            ControllerRequest::CreateAcls(bindings) => {
                if let Err(e) = check_acl_request(bindings.len()) {
                    return ControllerReply::Failed(e);
                }
                if let Some(e) = bindings.iter().find_map(|b| b.validate().err()) {
                    return ControllerReply::Failed(e);
                }
                self.propose(Command::CreateAcls { bindings }).await
            }
            ControllerRequest::DeleteAcls(filters) => {
                if let Err(e) = check_acl_request(filters.len()) {
                    return ControllerReply::Failed(e);
                }
                if let Some(e) = filters.iter().find_map(|f| f.validate().err()) {
                    return ControllerReply::Failed(e);
                }
                self.propose(Command::DeleteAcls { filters }).await
            }
            ControllerRequest::AlterBrokerConfigs { resource, configs } => {
                let bad_resource = !resource.is_empty() && resource.parse::<i32>().is_err();
                if bad_resource || configs.len() > MAX_BROKER_CONFIGS {
                    return ControllerReply::Failed(ClusterError::InvalidRequest(format!(
                        "broker resource {resource:?} with {} configs (a broker id or \"\", at most {MAX_BROKER_CONFIGS})",
                        configs.len()
                    )));
                }
                self.propose(Command::AlterBrokerConfigs { resource, configs })
                    .await
            }
            ControllerRequest::AlterGroupConfigs { group, configs } => {
                if group.is_empty()
                    || group.len() > MAX_GROUP_ID_BYTES
                    || configs.len() > MAX_GROUP_CONFIGS
                    || (!configs.is_empty()
                        && !self.images.borrow().group_configs.contains_key(&group)
                        && self.images.borrow().group_configs.len() >= MAX_CONFIGURED_GROUPS)
                {
                    return ControllerReply::Failed(ClusterError::InvalidRequest(format!(
                        "group {group:?} with {} configs (a group id of 1 to {MAX_GROUP_ID_BYTES} bytes, at most {MAX_GROUP_CONFIGS} configs, {MAX_CONFIGURED_GROUPS} configured groups)",
                        configs.len()
                    )));
                }
                self.propose(Command::AlterGroupConfigs { group, configs })
                    .await
            }
            ControllerRequest::AlterClientQuotas(alterations) => {
                if let Err(e) = alterations
                    .iter()
                    .try_for_each(crate::quotas::check_alteration)
                {
                    return ControllerReply::Failed(e);
                }
                self.propose(Command::AlterClientQuotas { alterations })
                    .await
            }
            ControllerRequest::AlterPartitionReassignments(reassignments) => {
                if let Err(e) = check_partition_request(reassignments.len()) {
                    return ControllerReply::Failed(e);
                }
                for r in &reassignments {
                    tracing::info!(topic = r.topic, partition = r.partition, target = ?r.target,
                        "partition reassignment requested");
                }
                self.propose(Command::AlterPartitionReassignments { reassignments })
                    .await
            }
            ControllerRequest::ElectLeaders {
                election,
                partitions,
            } => {
                if let Err(e) = check_partition_request(partitions.len()) {
                    return ControllerReply::Failed(e);
                }
                self.propose(Command::ElectLeaders {
                    election,
                    partitions,
                })
                .await
            }
            ControllerRequest::DescribeQuorum => quorum::describe(&self.raft, &self.clock).await,
            ControllerRequest::UpdateFeatures {
                updates,
                validate_only,
            } => {
                let features = self.images.borrow().features.clone();
                let levels = match crate::features::check_update(&features, self.node_id, &updates)
                {
                    Ok(levels) => levels,
                    Err(e) => {
                        return ControllerReply::Failed(ClusterError::FeatureUpdateFailed(
                            e.to_string(),
                        ))
                    }
                };
                if validate_only {
                    return ControllerReply::Applied {
                        log_index: self.images.borrow().applied_index,
                        result: CommandResult::Done,
                    };
                }
                tracing::info!(?levels, "updating finalized feature levels");
                self.propose(Command::UpdateFeatures {
                    levels,
                    default_min_insync_replicas: Some(self.default_min_insync_replicas),
                })
                .await
            }
            ControllerRequest::AddObserver {
                node_id,
                raft_addr,
                directory_id,
            } => {
                let voters = self.voters.keys().copied().collect();
                observers::add(&self.raft, &voters, node_id, raft_addr, directory_id).await
            }
            ControllerRequest::AddVoter {
                node_id,
                directory_id,
                raft_addr,
            } => {
                self.voter_changes
                    .add(&self.raft, &self.clock, node_id, directory_id, raft_addr)
                    .await
            }
            ControllerRequest::RemoveVoter {
                node_id,
                directory_id,
            } => {
                self.voter_changes
                    .remove(&self.raft, node_id, directory_id)
                    .await
            }
            ControllerRequest::UpdateVoter {
                node_id,
                directory_id,
                raft_addr,
            } => {
                self.voter_changes
                    .update(&self.raft, node_id, directory_id, raft_addr)
                    .await
            }
            ControllerRequest::UnregisterBroker { node_id } => {
                // The state machine refuses it too; this spares a log entry.
                if !self.images.borrow().brokers.contains_key(&node_id) {
                    return ControllerReply::Failed(ClusterError::BrokerIdNotRegistered(node_id));
                }
                tracing::info!(broker = node_id, "unregistering broker");
                let reply = self.propose(Command::UnregisterBroker { node_id }).await;
                if !matches!(
                    reply,
                    ControllerReply::Applied {
                        result: CommandResult::Done,
                        ..
                    }
                ) {
                    return reply;
                }
                // A broker that is not a controller stops following the log too.
                match observers::remove(&self.raft, node_id).await {
                    ControllerReply::Failed(e) => {
                        tracing::warn!(broker = node_id, error = %e, "unregistered, but still an observer of the quorum");
                        reply
                    }
                    _ => reply,
                }
            }
            ControllerRequest::ControlledShutdown { node_id } => {
                if !self.images.borrow().brokers.contains_key(&node_id) {
                    return ControllerReply::Failed(ClusterError::BrokerIdNotRegistered(node_id));
                }
                tracing::info!(
                    broker = node_id,
                    "controlled shutdown: moving the broker's leaderships and ISR places"
                );
                self.propose(Command::ControlledShutdown { node_id }).await
            }
        }
    }

    async fn heartbeat(&self, term: u64, heartbeat: Heartbeat) -> ControllerReply {
        // Clients and followers connect to a registered broker's host: a
        // voter registers only at its configured host, any other broker
        // only as an observer of the quorum, at the host it joined with.
        let allowed_host = match self.voters.get(&heartbeat.node_id) {
            Some(host) => Some(host.clone()),
            None => observers::registered_host(&self.raft, heartbeat.node_id),
        };
        if allowed_host.as_deref() != Some(heartbeat.host.as_str()) {
            tracing::warn!(broker = heartbeat.node_id, host = %heartbeat.host, allowed = ?allowed_host, "heartbeat refused: neither a configured voter nor an observer at that host");
            return ControllerReply::Failed(ClusterError::InvalidRequest(format!(
                "broker {} at {} is neither a configured voter nor an observer of the quorum at that host",
                heartbeat.node_id, heartbeat.host
            )));
        }
        if heartbeat
            .rack
            .as_ref()
            .is_some_and(|r| r.len() > MAX_RACK_LEN)
        {
            return ControllerReply::Failed(ClusterError::InvalidRequest(format!(
                "broker {}'s rack is longer than {MAX_RACK_LEN} bytes",
                heartbeat.node_id
            )));
        }
        self.liveness(term)
            .last_seen
            .insert(heartbeat.node_id, Instant::now());
        let image = self.images.borrow().clone();
        let current = image.brokers.get(&heartbeat.node_id);
        let registered = current.is_some_and(|b| {
            !b.fenced
                && !b.in_controlled_shutdown
                && b.host == heartbeat.host
                && b.port == heartbeat.port
                && b.listeners == heartbeat.listeners
                && b.rack == heartbeat.rack
        });
        if registered {
            if current.is_some_and(|b| b.log_dir_offline != heartbeat.log_dir_offline) {
                let offline = heartbeat.log_dir_offline;
                if offline {
                    tracing::warn!(broker = heartbeat.node_id, "broker reports its log directory offline: moving its leaderships and ISR places");
                } else {
                    tracing::info!(
                        broker = heartbeat.node_id,
                        "broker reports its log directory back online"
                    );
                }
                return self
                    .propose(Command::SetLogDirOffline {
                        node_id: heartbeat.node_id,
                        offline,
                    })
                    .await;
            }
            return self.confirm_registration(heartbeat.node_id).await;
        }
        tracing::info!(
            broker = heartbeat.node_id,
            host = %heartbeat.host,
            port = heartbeat.port,
            was_fenced = current.is_some_and(|b| b.fenced),
            "registering / unfencing broker"
        );
        self.propose(Command::RegisterBroker {
            node_id: heartbeat.node_id,
            host: heartbeat.host,
            port: heartbeat.port,
            listeners: heartbeat.listeners,
            log_dir_offline: heartbeat.log_dir_offline,
            rack: heartbeat.rack,
        })
        .await
    }

    /// Answers a heartbeat from a broker already registered, from this
    /// node's image — but only after confirming, through a quorum, that this
    /// node still leads and has applied everything committed (a linearizable
    /// read). A controller restarted from its own log is restored as leader
    /// by openraft before it learns it was deposed; answering from its
    /// pre-crash image let it declare itself ready (`Cluster::wait_ready`)
    /// and serve that stale image — ISRs that still listed it, partitions it
    /// no longer led.
    async fn confirm_registration(&self, node_id: i32) -> ControllerReply {
        match tokio::time::timeout(PROPOSE_TIMEOUT, self.raft.ensure_linearizable()).await {
            Ok(Ok(_)) => {}
            Ok(Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(forward)))) => {
                return ControllerReply::NotController {
                    leader: forward.leader_id.and_then(kafka_id),
                }
            }
            Ok(Err(e)) => return ControllerReply::Failed(ClusterError::Unavailable(e.to_string())),
            Err(_) => return ControllerReply::Failed(ClusterError::Timeout),
        }
        let image = self.images.borrow().clone();
        if image.brokers.get(&node_id).is_none_or(|b| b.fenced) {
            // Fenced by what was committed meanwhile: the next heartbeat
            // registers it again.
            return ControllerReply::Failed(ClusterError::Unavailable(format!(
                "broker {node_id} was fenced; it registers again at its next heartbeat"
            )));
        }
        ControllerReply::Applied {
            log_index: image.applied_index,
            result: CommandResult::Done,
        }
    }

    /// Validates a CreateTopics request and places its replicas
    /// (`placement`), or checks the caller's manual assignment.
    fn plan_create_topic(&self, create: &CreateTopic) -> Result<Command, ClusterError> {
        validate_topic_name(&create.name)?;
        let image = self.images.borrow().clone();
        if image.topics.contains_key(&create.name) {
            return Err(ClusterError::TopicAlreadyExists(create.name.clone()));
        }
        if !(1..=MAX_PARTITIONS).contains(&create.partitions) {
            return Err(ClusterError::InvalidPartitions(format!(
                "{} (must be 1..={MAX_PARTITIONS})",
                create.partitions
            )));
        }
        let (assignments, isrs) = if create.assignments.is_empty() {
            let placed = self.assign(
                &image,
                0..create.partitions,
                usize::try_from(create.replication_factor).unwrap_or(0),
            )?;
            (placed, Vec::new())
        } else {
            let isrs = placement::check_manual_assignment(&image, 0, &create.assignments, None)?;
            (create.assignments.clone(), isrs)
        };
        Ok(Command::CreateTopic {
            name: create.name.clone(),
            topic_id: create
                .topic_id
                .unwrap_or_else(|| *uuid::Uuid::new_v4().as_bytes()),
            configs: create.configs.clone(),
            assignments,
            isrs,
        })
    }

    /// Validates a CreatePartitions request (Kafka's rules and messages)
    /// and places the new partitions' replicas as for a new topic, with
    /// the replication factor of the topic's first partition — or checks
    /// the caller's assignment of them.
    fn plan_create_partitions(&self, create: &CreatePartitions) -> Result<Command, ClusterError> {
        let image = self.images.borrow().clone();
        let topic = image
            .topics
            .get(&create.topic)
            .ok_or_else(|| ClusterError::UnknownTopic(create.topic.clone()))?;
        let current = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
        check_partition_growth(current, create.total)?;
        let replication_factor = topic.partitions.first().map_or(1, |p| p.replicas.len());
        let (assignments, isrs) = if create.assignments.is_empty() {
            let placed = self.assign(&image, current..create.total, replication_factor)?;
            (placed, Vec::new())
        } else {
            let isrs = placement::check_added_partitions(
                &image,
                (current, create.total),
                &create.assignments,
                replication_factor,
            )?;
            (create.assignments.clone(), isrs)
        };
        Ok(Command::CreatePartitions {
            name: create.topic.clone(),
            assignments,
            isrs,
        })
    }

    /// Rack-aware round-robin replica lists over the live brokers for
    /// `partitions` (`placement::place`), starting where the last
    /// assignment left off (leaders spread).
    fn assign(
        &self,
        image: &MetadataImage,
        partitions: std::ops::Range<i32>,
        replication_factor: usize,
    ) -> Result<Vec<Vec<i32>>, ClusterError> {
        let slots = placement::live_slots(image);
        let start = self.rotation.fetch_add(1, Ordering::Relaxed);
        placement::place(&slots, partitions, replication_factor, start)
    }

    /// Commits `command` through raft; returns once applied on this node.
    async fn propose(&self, command: Command) -> ControllerReply {
        match tokio::time::timeout(PROPOSE_TIMEOUT, self.raft.client_write(command)).await {
            Ok(Ok(response)) => ControllerReply::Applied {
                log_index: response.log_id.index,
                result: response.data,
            },
            Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(forward)))) => {
                ControllerReply::NotController {
                    leader: forward.leader_id.and_then(kafka_id),
                }
            }
            Ok(Err(e)) => ControllerReply::Failed(ClusterError::Unavailable(e.to_string())),
            Err(_) => ControllerReply::Failed(ClusterError::Timeout),
        }
    }

    /// Fences, while this node leads, every unfenced broker whose last
    /// heartbeat is older than the session timeout. Runs until aborted.
    pub fn spawn_fencer(self: Arc<Self>, tick: Duration) -> JoinHandle<()> {
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(tick);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                interval.tick().await;
                let Ok(term) = self.leader_term() else {
                    continue;
                };
                for node_id in self.expired_brokers(term) {
                    tracing::info!(
                        broker = node_id,
                        session_timeout = ?self.session_timeout,
                        "fencing broker: no heartbeat within the session timeout"
                    );
                    if let ControllerReply::Failed(e) =
                        self.propose(Command::FenceBroker { node_id }).await
                    {
                        tracing::warn!(broker = node_id, error = %e, "fencing broker failed");
                    }
                }
            }
        })
    }

    /// Kafka's `auto.leader.rebalance.enable`: while this node leads, every
    /// check interval, preferred elections for the partitions of brokers
    /// over the imbalance threshold (`leader_balance`). Runs until aborted.
    pub fn spawn_leader_balancer(self: Arc<Self>, balance: LeaderBalance) -> JoinHandle<()> {
        tokio::spawn(async move {
            if !balance.enabled {
                return;
            }
            let mut interval = tokio::time::interval(balance.check_interval);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            interval.tick().await;
            loop {
                interval.tick().await;
                if self.leader_term().is_err() {
                    continue;
                }
                let image = self.images.borrow().clone();
                let partitions = partitions_to_elect(&image, balance.imbalance_percentage);
                if partitions.is_empty() {
                    continue;
                }
                tracing::info!(
                    partitions = partitions.len(),
                    "leader imbalance: electing preferred leaders"
                );
                let command = Command::ElectLeaders {
                    election: ElectionType::Preferred,
                    partitions,
                };
                if let ControllerReply::Failed(e) = self.propose(command).await {
                    tracing::warn!(error = %e, "preferred leader elections failed");
                }
            }
        })
    }

    fn expired_brokers(&self, term: u64) -> Vec<i32> {
        let image = self.images.borrow().clone();
        let liveness = self.liveness(term);
        let now = Instant::now();
        image
            .listed_brokers()
            .map(|b| b.node_id)
            .filter(|id| {
                let last = liveness
                    .last_seen
                    .get(id)
                    .copied()
                    .unwrap_or(liveness.since);
                now.duration_since(last) > self.session_timeout
            })
            .collect()
    }
}

/// One CreateAcls / DeleteAcls may carry at most `acl::MAX_PER_REQUEST` entries.
fn check_acl_request(entries: usize) -> Result<(), ClusterError> {
    if entries > crate::acl::MAX_PER_REQUEST {
        return Err(ClusterError::InvalidRequest(format!(
            "at most {} ACLs or filters per request",
            crate::acl::MAX_PER_REQUEST
        )));
    }
    Ok(())
}
