//! The metadata image: the state machine's whole state (brokers, topics,
//! partition registrations) as of one applied raft index.
//!
//! Owns: the image types and read-only lookups. Must not: change an image —
//! only `command::apply` does, inside the state machine.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::acl::AclBinding;
/// Where clients reach one listener of a broker (Kafka's `Endpoint`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
}

/// Every advertised listener of a broker, by listener name (Kafka's
/// `advertised.listeners`). Empty for a registration written before
/// brokers named their listeners: then `host:port` serves every name.
pub type ListenerEndpoints = BTreeMap<String, Endpoint>;

/// A registered broker and whether the controller has fenced it (no
/// heartbeat within the session timeout).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerImage {
    pub node_id: i32,
    pub host: String,
    pub port: u16,
    pub fenced: bool,
    /// Kafka's "in controlled shutdown": the broker is stopping; it leads
    /// nothing and joins no ISR, but stays listed in Metadata (clients
    /// still talking to it learn the new leaders from it) until it is
    /// fenced when its heartbeats stop. Registering again clears it.
    #[serde(default)]
    pub in_controlled_shutdown: bool,
    /// Every advertised listener; `host:port` is the inter-broker one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub listeners: ListenerEndpoints,
    /// Its data directory is offline (a write or fsync failed there, as its
    /// heartbeat reports): like a fenced broker it leads nothing and joins
    /// no ISR, but it stays listed and keeps its session; its replicas are
    /// Metadata's offline replicas until it reports the directory back.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub log_dir_offline: bool,
    /// Kafka's `broker.rack`: where replicas are spread over, and what a
    /// consumer's `client.rack` is matched with (KIP-392).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rack: Option<String>,
}

impl BrokerImage {
    /// May lead, join ISRs and get new replicas.
    pub fn is_live(&self) -> bool {
        !self.fenced && !self.in_controlled_shutdown && !self.log_dir_offline
    }

    /// The endpoint of `listener` that clients connected on that listener
    /// are given (Kafka answers each client with the endpoints of the
    /// listener it came in on). A broker registered without listener names
    /// serves every name at `host:port`; one that lacks `listener` is not
    /// reachable on it (`None`, as Kafka omits it).
    pub fn endpoint(&self, listener: &str) -> Option<(&str, u16)> {
        if self.listeners.is_empty() {
            return Some((self.host.as_str(), self.port));
        }
        self.listeners
            .get(listener)
            .map(|e| (e.host.as_str(), e.port))
    }
}

/// One partition's registration (Kafka's `PartitionRegistration`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionImage {
    pub partition: i32,
    /// Assigned replicas in preference order.
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// `-1`: no leader (every ISR member is fenced).
    pub leader: i32,
    pub leader_epoch: i32,
    /// Bumped on every change; AlterPartition proposals must name it.
    pub partition_epoch: i32,
    /// KIP-455: replicas an ongoing reassignment adds (also in `replicas`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adding_replicas: Vec<i32>,
    /// KIP-455: replicas an ongoing reassignment removes once the target
    /// replicas are all in the ISR (also in `replicas`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removing_replicas: Vec<i32>,
    /// KIP-966: replicas outside the ISR that hold every record acknowledged
    /// with acks=all, so they may lead (`elr`). Empty while the feature is
    /// off or the ISR is at or above min.insync.replicas.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub elr: Vec<i32>,
    /// KIP-966: the last leader, kept while the ISR and the ELR are empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub last_known_elr: Vec<i32>,
}

impl PartitionImage {
    /// A partition as it is created: `replicas` in preference order, `isr`,
    /// `leader`, both epochs 0, no reassignment and no ELR.
    pub fn new(partition: i32, replicas: Vec<i32>, isr: Vec<i32>, leader: i32) -> PartitionImage {
        PartitionImage {
            partition,
            replicas,
            isr,
            leader,
            leader_epoch: 0,
            partition_epoch: 0,
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
            elr: Vec::new(),
            last_known_elr: Vec::new(),
        }
    }

    /// Whether a reassignment is under way (Kafka lists it in
    /// ListPartitionReassignments).
    pub fn is_reassigning(&self) -> bool {
        !self.adding_replicas.is_empty() || !self.removing_replicas.is_empty()
    }

    /// The replicas the partition will have when its reassignment is done
    /// (all of `replicas` when none is under way).
    pub fn target_replicas(&self) -> Vec<i32> {
        self.replicas
            .iter()
            .copied()
            .filter(|r| !self.removing_replicas.contains(r))
            .collect()
    }

    /// The replicas the partition had before its reassignment began.
    pub fn original_replicas(&self) -> Vec<i32> {
        self.replicas
            .iter()
            .copied()
            .filter(|r| !self.adding_replicas.contains(r))
            .collect()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicImage {
    pub name: String,
    pub topic_id: [u8; 16],
    pub configs: BTreeMap<String, String>,
    /// Indexed by partition id.
    pub partitions: Vec<PartitionImage>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataImage {
    /// The raft log index this image reflects.
    pub applied_index: u64,
    /// The cluster id, chosen once by the quorum (the first
    /// `InitClusterId` applied wins); every node reports it in Metadata.
    #[serde(default)]
    pub cluster_id: Option<String>,
    pub brokers: BTreeMap<i32, BrokerImage>,
    pub topics: BTreeMap<String, TopicImage>,
    /// Kafka ACLs (CreateAcls / DeleteAcls), enforced by every node's authorizer.
    #[serde(default)]
    pub acls: BTreeSet<AclBinding>,
    /// SCRAM credentials by user, then mechanism name (`SCRAM-SHA-512`),
    /// as Kafka keeps them in its metadata log (UserScramCredentialRecord).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scram_credentials: BTreeMap<String, BTreeMap<String, ScramCredentialImage>>,
    /// Dynamic broker configs (Kafka's ConfigRecord for BROKER resources):
    /// by resource name, a broker id or `""` for the cluster-wide default.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub broker_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Group configs (Kafka's ConfigRecord for GROUP resources, KIP-848 and
    /// KIP-932's `share.*`), by group id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub group_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Finalized feature levels by name (Kafka's FeatureLevelRecord), as
    /// the cluster was created with or UpdateFeatures set them; empty for
    /// a cluster created before Chronik had features (`features` says how
    /// that reads).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub features: BTreeMap<String, i16>,
    /// The cluster-wide default min.insync.replicas the controller last
    /// recorded (its `--min-insync-replicas`), for the ELR rules of topics
    /// without their own; `None` in images older than ELR (then 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_min_insync_replicas: Option<i32>,
    /// Client quotas by entity (Kafka's ClientQuotaRecord), enforced by
    /// every broker.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub client_quotas: crate::quotas::ClientQuotas,
}

/// One user's salted SCRAM credential for one mechanism: never the
/// password (Kafka's `ScramCredential`).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredentialImage {
    pub salt: Vec<u8>,
    pub iterations: u32,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl std::fmt::Debug for ScramCredentialImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramCredentialImage")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

impl MetadataImage {
    /// Brokers that may lead, join ISRs and get new replicas: registered,
    /// not fenced, not shutting down, their data directory online. By node id.
    pub fn live_brokers(&self) -> impl Iterator<Item = &BrokerImage> {
        self.brokers.values().filter(|b| b.is_live())
    }

    /// Brokers Metadata lists: registered and not fenced (brokers in
    /// controlled shutdown included). By node id.
    pub fn listed_brokers(&self) -> impl Iterator<Item = &BrokerImage> {
        self.brokers.values().filter(|b| !b.fenced)
    }

    pub fn partition(&self, topic: &str, p: i32) -> Option<&PartitionImage> {
        let index = usize::try_from(p).ok()?;
        self.topics.get(topic)?.partitions.get(index)
    }

    pub fn topic_by_id(&self, id: [u8; 16]) -> Option<&TopicImage> {
        self.topics.values().find(|t| t.topic_id == id)
    }

    /// Dynamic broker config `name` for broker `node_id`: its own value,
    /// else the cluster-wide default (Kafka's order of precedence).
    pub fn broker_config(&self, node_id: i32, name: &str) -> Option<&str> {
        let own = self.broker_configs.get(&node_id.to_string());
        own.and_then(|c| c.get(name))
            .or_else(|| self.broker_configs.get("").and_then(|c| c.get(name)))
            .map(String::as_str)
    }

    /// The min.insync.replicas in force for `topic`: its own config, else
    /// the cluster default (at least 1).
    pub fn min_insync_replicas(&self, topic: &TopicImage) -> usize {
        topic
            .configs
            .get("min.insync.replicas")
            .and_then(|v| v.parse::<usize>().ok())
            .or_else(|| {
                self.default_min_insync_replicas
                    .and_then(|v| usize::try_from(v).ok())
            })
            .unwrap_or(1)
            .max(1)
    }

    /// Whether KIP-966's eligible leader replicas are on.
    pub fn elr_enabled(&self) -> bool {
        crate::features::elr_enabled(&self.features)
    }

    /// Kafka's offline replicas of `p`: those on a broker that is not
    /// registered, is fenced or has its log directory offline.
    pub fn offline_replicas(&self, p: &PartitionImage) -> Vec<i32> {
        p.replicas
            .iter()
            .copied()
            .filter(|r| {
                self.brokers
                    .get(r)
                    .is_none_or(|b| b.fenced || b.log_dir_offline)
            })
            .collect()
    }

    pub fn is_live(&self, node_id: i32) -> bool {
        self.brokers.get(&node_id).is_some_and(BrokerImage::is_live)
    }
}
