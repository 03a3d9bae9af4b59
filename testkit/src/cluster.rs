//! A real multi-node `chronik-server` cluster for one test: node N listens
//! on 127.0.0.N with the same Kafka, raft and metrics ports on every node
//! (as pods do), peers `1@127.0.0.1,2@127.0.0.2,3@127.0.0.3`. Ports are
//! chosen free at start and kept across restarts.
//!
//! Owns: the nodes' addresses and ports, the flags that make them one
//! cluster (node id, raft listener, the shared `--cluster-secret-file`,
//! `--peers` or a role's own flags), starting every node and waiting for its
//! readiness, and the node by id for kills and restarts. Must not speak
//! Kafka: what the cluster reports (Metadata, ISRs, leaders) is read by the
//! tests' own clients.

use std::net::TcpListener;

use anyhow::{bail, Context, Result};

use crate::server::Broker;

/// Flags of the fault tests' clusters: fast fsync, fencing and ISR shrink
/// after 3 s, topics RF 3 with min.insync.replicas 2 by default.
pub const FAST_FAILOVER: &[&str] = &[
    "--wal-profile",
    "low",
    "--broker-session-timeout-ms",
    "3000",
    "--replica-lag-time-max-ms",
    "3000",
    "--min-insync-replicas",
    "2",
    "--default-replication-factor",
    "3",
];

/// A port free on 127.0.0.1–8 (every host a test cluster may use) right
/// now, below Linux's ephemeral range (32768–60999): nodes bind their
/// outgoing connections to their own address, so a port from that range
/// could be taken by one of those before the node that was given it binds
/// its listener.
pub fn free_port() -> Result<u16> {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .subsec_nanos()
        ^ std::process::id();
    for attempt in 0..1000u32 {
        let port = 20_000 + u16::try_from(seed.wrapping_add(attempt.wrapping_mul(7919)) % 12_000)?;
        if (1..=8)
            .all(|i| TcpListener::bind(("127.0.0.".to_string() + &i.to_string(), port)).is_ok())
        {
            return Ok(port);
        }
    }
    bail!("no port free on 127.0.0.1-8 in 20000-31999")
}

/// Three distinct free ports: (Kafka, raft, metrics).
fn free_ports() -> Result<(u16, u16, u16)> {
    loop {
        let ports = (free_port()?, free_port()?, free_port()?);
        if ports.0 != ports.1 && ports.1 != ports.2 && ports.0 != ports.2 {
            return Ok(ports);
        }
    }
}

/// The nodes of one cluster; node `id` is `nodes[id - 1]` at `hosts[id - 1]`.
pub struct Cluster {
    pub nodes: Vec<Broker>,
    /// Node i+1's host (its `--peers` entry).
    pub hosts: Vec<String>,
    pub kafka_port: u16,
    /// Nodes before this index are controllers only (`start_split`).
    pub first_broker: usize,
    /// Controllers started later (`start_joining_controller`), by node id.
    pub joined_controllers: Vec<i32>,
    /// The (Kafka, raft, metrics) ports every node uses.
    ports: (u16, u16, u16),
    /// The shared `--cluster-secret-file`.
    secret: String,
    /// Holds the shared `--cluster-secret-file`.
    _secret_dir: tempfile::TempDir,
}

impl Cluster {
    /// Starts nodes 1..=n on 127.0.0.1..=n with `extra` flags on each.
    pub fn start(n: usize, extra: &[&str]) -> Result<Cluster> {
        let hosts: Vec<String> = (1..=n).map(|i| format!("127.0.0.{i}")).collect();
        Cluster::start_on(&hosts, None, free_ports()?, extra)
    }

    /// Starts node i+1 at `hosts[i]` (inside network namespace `netns[i]`
    /// when given) with the same (Kafka, raft, metrics) ports on every node.
    pub fn start_on(
        hosts: &[String],
        netns: Option<&[String]>,
        ports: (u16, u16, u16),
        extra: &[&str],
    ) -> Result<Cluster> {
        Cluster::start_nodes(hosts, netns, ports, extra, hosts.len(), &|_| Vec::new())
    }

    /// `start`, with `node_args(i)` added to node i+1's flags (a rack of
    /// its own, say).
    pub fn start_each(
        n: usize,
        extra: &[&str],
        node_args: &dyn Fn(usize) -> Vec<String>,
    ) -> Result<Cluster> {
        let hosts: Vec<String> = (1..=n).map(|i| format!("127.0.0.{i}")).collect();
        Cluster::start_nodes(&hosts, None, free_ports()?, extra, n, node_args)
    }

    /// Kafka's split roles: nodes 1..=controllers on 127.0.0.1.. are
    /// controllers only (`--process-roles controller`, the voters), the next
    /// `brokers` nodes brokers only. Brokers with an even id find the quorum
    /// through `--controller-quorum-bootstrap-servers`, the others through
    /// `--peers`. `bootstrap()` names the brokers.
    pub fn start_split(controllers: usize, brokers: usize, extra: &[&str]) -> Result<Cluster> {
        let (kafka, raft, metrics) = free_ports()?;
        let hosts: Vec<String> = (1..=controllers + brokers)
            .map(|i| format!("127.0.0.{i}"))
            .collect();
        let quorum: Vec<String> = hosts[..controllers]
            .iter()
            .map(|h| format!("{h}:{raft}"))
            .collect();
        let quorum = quorum.join(",");
        let mut cluster = Cluster::start_nodes(
            &hosts,
            None,
            (kafka, raft, metrics),
            extra,
            controllers,
            &|i| match (i < controllers, (i + 1) % 2 == 0) {
                (true, _) => vec!["--process-roles".into(), "controller".into()],
                (false, true) => vec![
                    "--process-roles".into(),
                    "broker".into(),
                    "--controller-quorum-bootstrap-servers".into(),
                    quorum.clone(),
                    "--no-peers".into(),
                ],
                (false, false) => vec!["--process-roles".into(), "broker".into()],
            },
        )?;
        cluster.first_broker = controllers;
        Ok(cluster)
    }

    /// Starts node i+1 at `hosts[i]` with `role_args(i)` and `extra`; the
    /// first `voters` nodes are the quorum's voters (`--peers`).
    fn start_nodes(
        hosts: &[String],
        netns: Option<&[String]>,
        ports: (u16, u16, u16),
        extra: &[&str],
        voters: usize,
        role_args: &dyn Fn(usize) -> Vec<String>,
    ) -> Result<Cluster> {
        let (kafka, raft, metrics) = ports;
        let peers: Vec<String> = hosts[..voters]
            .iter()
            .enumerate()
            .map(|(i, h)| format!("{}@{h}", i + 1))
            .collect();
        let peers = peers.join(",");
        // One secret file for all nodes, as on one host; it outlives them.
        let secret_dir = tempfile::tempdir()?;
        let secret = secret_dir.path().join("cluster.secret");
        let secret = secret
            .to_str()
            .context("temp path is not UTF-8")?
            .to_string();
        let mut nodes = Vec::new();
        for (i, host) in hosts.iter().enumerate() {
            let id = (i + 1).to_string();
            let raft_listen = format!("{host}:{raft}");
            let roles = role_args(i);
            let mut args: Vec<&str> = vec![
                "--node-id",
                &id,
                "--raft-listen",
                &raft_listen,
                "--cluster-secret-file",
                &secret,
            ];
            // "--no-peers": this node finds the quorum another way.
            if !roles.iter().any(|a| a == "--no-peers") {
                args.extend_from_slice(&["--peers", &peers]);
            }
            args.extend(
                roles
                    .iter()
                    .map(String::as_str)
                    .filter(|a| *a != "--no-peers"),
            );
            args.extend_from_slice(extra);
            let (listen, metrics_listen) = (format!("{host}:{kafka}"), format!("{host}:{metrics}"));
            nodes.push(match netns {
                Some(ns) => Broker::spawn_in_netns(&ns[i], &listen, &metrics_listen, &args)?,
                None => Broker::spawn_at(&listen, &metrics_listen, &args)?,
            });
        }
        for node in &mut nodes {
            node.finish_start()?;
        }
        Ok(Cluster {
            nodes,
            hosts: hosts.to_vec(),
            kafka_port: kafka,
            first_broker: 0,
            joined_controllers: Vec::new(),
            ports,
            secret,
            _secret_dir: secret_dir,
        })
    }

    /// Starts a new controller-only node (the next id, at 127.0.0.<id>,
    /// same ports) with no `--peers`: it finds the quorum through
    /// `--controller-quorum-bootstrap-servers` (the first `first_broker`
    /// controllers' raft addresses) and follows the log as an observer
    /// until AddRaftVoter makes it a voter. Returns its node id.
    pub fn start_joining_controller(&mut self, extra: &[&str]) -> Result<i32> {
        let id = self.nodes.len() + 1;
        let host = format!("127.0.0.{id}");
        let (kafka, raft, metrics) = self.ports;
        let quorum: Vec<String> = self.hosts[..self.first_broker.max(1)]
            .iter()
            .map(|h| format!("{h}:{raft}"))
            .collect();
        let (quorum, node_id) = (quorum.join(","), id.to_string());
        let raft_listen = format!("{host}:{raft}");
        let mut args = vec![
            "--node-id",
            &node_id,
            "--raft-listen",
            &raft_listen,
            "--cluster-secret-file",
            &self.secret,
            "--process-roles",
            "controller",
            "--controller-quorum-bootstrap-servers",
            &quorum,
        ];
        args.extend_from_slice(extra);
        let mut node = Broker::spawn_at(
            &format!("{host}:{kafka}"),
            &format!("{host}:{metrics}"),
            &args,
        )?;
        node.finish_start()?;
        self.nodes.push(node);
        self.hosts.push(host);
        let id = i32::try_from(id)?;
        self.joined_controllers.push(id);
        Ok(id)
    }

    /// `bootstrap.servers` naming every broker.
    pub fn bootstrap(&self) -> String {
        self.hosts
            .iter()
            .enumerate()
            .skip(self.first_broker)
            .filter(|(i, _)| {
                !self
                    .joined_controllers
                    .iter()
                    .any(|id| usize::try_from(*id).is_ok_and(|id| id == i + 1))
            })
            .map(|(_, h)| format!("{h}:{}", self.kafka_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The node with id `id` (1-based).
    pub fn node(&mut self, id: i32) -> &mut Broker {
        &mut self.nodes[usize::try_from(id - 1).expect("node ids start at 1")]
    }

    /// Starts node `id` again (killed or stopped) on its data dir and
    /// addresses and waits for it to be ready; a failure carries every
    /// node's log tail.
    pub fn restart_node(&mut self, id: i32) -> Result<()> {
        self.node(id).respawn()?;
        self.node(id).finish_start().with_context(|| self.logs())
    }

    /// Stderr tails of every node, for failure messages.
    pub fn logs(&self) -> String {
        self.nodes
            .iter()
            .enumerate()
            .map(|(i, n)| format!("--- node {} ---\n{}", i + 1, n.log_tail(400)))
            .collect()
    }
}
