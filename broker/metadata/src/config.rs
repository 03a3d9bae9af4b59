//! The quorum's static configuration: the voters (`Peer`s, parsed from the
//! `--controller-quorum-voters`-style string `id@host,…`) and the node's own
//! ports, directories and liveness timings.
//!
//! Owns: `Peer`, `parse_peers`, `ClusterConfig` and the addresses derived
//! from them. Must not: read the environment or the command line — the
//! server's `Args` build a `ClusterConfig`.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Default for `ClusterConfig::broker_session_timeout` (Kafka's
/// `broker.session.timeout.ms` is 9 s; ours is shorter so failover is quick).
pub const DEFAULT_BROKER_SESSION_TIMEOUT: Duration = Duration::from_secs(4);
/// Default for `ClusterConfig::heartbeat_interval`.
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_millis(500);

/// Kafka's `process.roles`: whether a node is a broker (serves clients,
/// hosts replicas, registers and heartbeats), a controller (a voter of the
/// metadata quorum) or both. A broker that is not a controller follows the
/// quorum's log as a non-voting observer (a raft learner).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Roles {
    pub broker: bool,
    pub controller: bool,
}

impl Roles {
    /// Both roles: every node of a combined cluster.
    pub const COMBINED: Roles = Roles {
        broker: true,
        controller: true,
    };

    /// Parses Kafka's form: `broker`, `controller` or `broker,controller`
    /// (either order).
    pub fn parse(s: &str) -> Result<Roles, String> {
        let mut roles = Roles {
            broker: false,
            controller: false,
        };
        for role in s.split(',').map(str::trim) {
            let seen = match role {
                "broker" => std::mem::replace(&mut roles.broker, true),
                "controller" => std::mem::replace(&mut roles.controller, true),
                other => {
                    return Err(format!(
                        "unknown role {other:?} in {s:?} (expected broker, controller or broker,controller)"
                    ))
                }
            };
            if seen {
                return Err(format!("role {role:?} appears twice in {s:?}"));
            }
        }
        Ok(roles)
    }
}

impl std::fmt::Display for Roles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.broker, self.controller) {
            (true, true) => write!(f, "broker,controller"),
            (true, false) => write!(f, "broker"),
            (false, true) => write!(f, "controller"),
            (false, false) => write!(f, "(none)"),
        }
    }
}

/// One voter of the metadata quorum (a controller, and a broker too when
/// its node has both roles).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    pub node_id: i32,
    pub host: String,
}

/// Parses `"1@127.0.0.1,2@127.0.0.2,3@127.0.0.3"`. Whitespace around items
/// is ignored; ids must be unique and `>= 0`, hosts non-empty.
pub fn parse_peers(s: &str) -> Result<Vec<Peer>, String> {
    let mut peers = Vec::new();
    let mut seen = BTreeSet::new();
    for item in s.split(',').map(str::trim) {
        if item.is_empty() {
            return Err(format!(
                "empty entry in peer list {s:?} (expected id@host,…)"
            ));
        }
        let (id, host) = item
            .split_once('@')
            .ok_or_else(|| format!("peer {item:?} is not of the form id@host"))?;
        let node_id: i32 = id
            .trim()
            .parse()
            .map_err(|_| format!("peer {item:?}: node id {id:?} is not an integer"))?;
        if node_id < 0 {
            return Err(format!("peer {item:?}: node id must be >= 0"));
        }
        let host = host.trim();
        if host.is_empty() {
            return Err(format!("peer {item:?}: empty host"));
        }
        if !seen.insert(node_id) {
            return Err(format!("node id {node_id} appears twice in {s:?}"));
        }
        peers.push(Peer {
            node_id,
            host: host.to_string(),
        });
    }
    Ok(peers)
}

#[derive(Clone, Debug)]
pub struct ClusterConfig {
    pub node_id: i32,
    /// What this node runs.
    pub roles: Roles,
    /// All voters; this node among them exactly when it is a controller.
    /// May be empty for a broker that finds the quorum through
    /// `bootstrap_servers`.
    pub peers: Vec<Peer>,
    /// Kafka's `controller.quorum.bootstrap.servers`: raft addresses
    /// (`host:port`) a broker that is not a voter asks to join through.
    /// Empty: the voters' addresses.
    pub bootstrap_servers: Vec<String>,
    /// This node's own host (what it registers and connects from); for a
    /// voter, its `peers` host.
    pub host: String,
    /// Every node's Kafka port (the same on all nodes, like pods).
    pub kafka_port: u16,
    /// This node's advertised listeners by name (registered with the
    /// quorum so every node answers Metadata per listener); may be empty.
    pub listeners: crate::image::ListenerEndpoints,
    /// Every node's raft port: node N's raft address is `peer(N).host:raft_port`.
    pub raft_port: u16,
    /// What this node binds for raft RPCs (e.g. `127.0.0.2:9093` or `0.0.0.0:9093`).
    pub raft_listen: SocketAddr,
    /// The raft log, vote and snapshot live under `data_dir/__cluster_metadata/`.
    pub data_dir: PathBuf,
    /// The controller fences a broker with no heartbeat for this long.
    pub broker_session_timeout: Duration,
    /// How often each broker heartbeats to the controller.
    pub heartbeat_interval: Duration,
    /// What every raft connection must prove knowledge of (`auth`).
    pub secret: crate::peer_auth::ClusterSecret,
    /// What the raft port speaks beneath that proof: cleartext or mutual
    /// TLS (`transport`); every node of a cluster must say the same.
    pub security: crate::transport::ControllerSecurity,
    /// Automatic preferred-leader elections (`leader_balance`).
    pub leader_balance: crate::leader_balance::LeaderBalance,
    /// Kafka's `broker.rack`, registered with the broker.
    pub rack: Option<String>,
    /// KIP-853: this node's metadata directory id (`directory.id` in its
    /// `meta.properties`), recorded with its place in the membership.
    pub directory_id: [u8; 16],
    /// Kafka's cluster-wide `min.insync.replicas` (`--min-insync-replicas`):
    /// the controller records it in the image for the ELR rules (KIP-966)
    /// of topics without their own.
    pub default_min_insync_replicas: i32,
}

impl ClusterConfig {
    /// This node's own entry in `peers`.
    pub(crate) fn own_peer(&self) -> Option<&Peer> {
        self.peers.iter().find(|p| p.node_id == self.node_id)
    }

    /// This node's own host: its `peers` entry when it is a voter.
    pub(crate) fn own_host(&self) -> &str {
        self.own_peer()
            .map_or(self.host.as_str(), |p| p.host.as_str())
    }

    /// This node's raft address as other nodes dial it.
    pub(crate) fn own_raft_addr(&self) -> String {
        host_port(self.own_host(), self.raft_port)
    }

    /// Where a broker that is not a voter asks to join: the configured
    /// bootstrap servers, else every voter's raft address.
    pub(crate) fn join_addrs(&self) -> Vec<String> {
        if !self.bootstrap_servers.is_empty() {
            return self.bootstrap_servers.clone();
        }
        self.peers
            .iter()
            .map(|p| host_port(&p.host, self.raft_port))
            .collect()
    }

    /// The raft RPC address of `node_id` from the configuration, if it is
    /// a configured voter (`Cluster` also knows the members' recorded
    /// addresses).
    pub fn raft_addr(&self, node_id: i32) -> Option<String> {
        self.peers
            .iter()
            .find(|p| p.node_id == node_id)
            .map(|p| host_port(&p.host, self.raft_port))
    }

    /// What this node proves on the raft connections it opens.
    pub fn credentials(&self) -> crate::network::Credentials {
        crate::network::Credentials {
            node_id: self.node_id,
            secret: self.secret.clone(),
            source: self.own_host().parse().ok(),
            security: self.security.clone(),
        }
    }

    /// The configured voters' ids.
    pub(crate) fn voter_ids(&self) -> Vec<i32> {
        self.peers.iter().map(|p| p.node_id).collect()
    }

    /// Where the quorum's log and snapshots live (absent before the first start).
    pub fn metadata_dir(&self) -> PathBuf {
        self.data_dir.join("__cluster_metadata")
    }

    /// Rejects configurations the quorum cannot run with.
    pub(crate) fn validate(&self) -> Result<(), String> {
        match (self.roles.controller, self.own_peer().is_some()) {
            (true, false) if self.bootstrap_servers.is_empty() => {
                return Err(format!(
                    "node id {} is a controller but not among the voters {:?} (a controller to be added with AddRaftVoter needs controller.quorum.bootstrap.servers)",
                    self.node_id, self.peers
                ))
            }
            (false, true) => {
                return Err(format!(
                    "node id {} is among the voters {:?} but does not have the controller role",
                    self.node_id, self.peers
                ))
            }
            _ => {}
        }
        if !self.roles.broker && !self.roles.controller {
            return Err("a node needs the broker role, the controller role or both".to_string());
        }
        if self.own_peer().is_none() && self.join_addrs().is_empty() {
            return Err(
                "a broker that is not a controller needs the voters or controller.quorum.bootstrap.servers"
                    .to_string(),
            );
        }
        if self.heartbeat_interval.is_zero() {
            return Err("heartbeat interval must be > 0".to_string());
        }
        if self.broker_session_timeout <= self.heartbeat_interval {
            return Err(format!(
                "broker session timeout {:?} must exceed the heartbeat interval {:?}",
                self.broker_session_timeout, self.heartbeat_interval
            ));
        }
        Ok(())
    }
}

/// `host:port`, bracketing a bare IPv6 literal.
pub fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_peers_and_explains_bad_ones() {
        let peers = parse_peers("1@127.0.0.1, 2@broker-2.chronik ,3@127.0.0.3").expect("valid");
        assert_eq!(
            peers
                .iter()
                .map(|p| (p.node_id, p.host.as_str()))
                .collect::<Vec<_>>(),
            [(1, "127.0.0.1"), (2, "broker-2.chronik"), (3, "127.0.0.3")]
        );
        let table = [
            ("", "empty entry"),
            ("1@a,,2@b", "empty entry"),
            ("1", "not of the form id@host"),
            ("x@a", "is not an integer"),
            ("-1@a", "must be >= 0"),
            ("1@", "empty host"),
            ("1@a,1@b", "appears twice"),
        ];
        for (input, why) in table {
            match parse_peers(input) {
                Err(e) => assert!(e.contains(why), "{input:?}: {e}"),
                Ok(p) => panic!("{input:?} accepted: {p:?}"),
            }
        }
    }

    #[test]
    fn process_roles_parse_as_kafka_writes_them() {
        let parsed = |s: &str| Roles::parse(s).map(|r| (r.broker, r.controller));
        assert_eq!(parsed("broker,controller"), Ok((true, true)));
        assert_eq!(parsed("controller, broker"), Ok((true, true)));
        assert_eq!(parsed("broker"), Ok((true, false)));
        assert_eq!(parsed("controller"), Ok((false, true)));
        for bad in ["", "broker,broker", "voter", "broker,"] {
            assert!(Roles::parse(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(Roles::COMBINED.to_string(), "broker,controller");
    }

    #[test]
    fn ipv6_hosts_are_bracketed() {
        assert_eq!(host_port("::1", 9093), "[::1]:9093");
        assert_eq!(host_port("[::1]", 9093), "[::1]:9093");
        assert_eq!(host_port("a.b", 9093), "a.b:9093");
    }
}
