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

/// One voter of the metadata quorum; every voter is also a broker.
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
    /// All voters, including this node.
    pub peers: Vec<Peer>,
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
    pub secret: crate::auth::ClusterSecret,
    /// Automatic preferred-leader elections (`leader_balance`).
    pub leader_balance: crate::leader_balance::LeaderBalance,
}

impl ClusterConfig {
    /// This node's own entry in `peers`.
    pub(crate) fn own_peer(&self) -> Option<&Peer> {
        self.peers.iter().find(|p| p.node_id == self.node_id)
    }

    /// The raft RPC address of `node_id`, if it is a voter.
    pub fn raft_addr(&self, node_id: i32) -> Option<String> {
        self.peers
            .iter()
            .find(|p| p.node_id == node_id)
            .map(|p| host_port(&p.host, self.raft_port))
    }

    /// What this node proves on the raft connections it opens.
    pub(crate) fn credentials(&self) -> crate::network::Credentials {
        crate::network::Credentials {
            node_id: self.node_id,
            secret: self.secret.clone(),
            source: self.own_peer().and_then(|p| p.host.parse().ok()),
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
        if self.own_peer().is_none() {
            return Err(format!(
                "node id {} is not among the peers {:?}",
                self.node_id, self.peers
            ));
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
pub(crate) fn host_port(host: &str, port: u16) -> String {
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
    fn ipv6_hosts_are_bracketed() {
        assert_eq!(host_port("::1", 9093), "[::1]:9093");
        assert_eq!(host_port("[::1]", 9093), "[::1]:9093");
        assert_eq!(host_port("a.b", 9093), "a.b:9093");
    }
}
