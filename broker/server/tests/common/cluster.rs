//! A real 3-node `chronik-server` cluster for one test: node N listens on
//! 127.0.0.N with the same Kafka, raft and metrics ports on every node (as
//! pods do), peers `1@127.0.0.1,2@127.0.0.2,3@127.0.0.3`. Ports are chosen
//! free at start and kept across restarts. Helpers read the cluster's view
//! through Metadata (rdkafka admin-free: the blocking `kafka_client`).

use std::net::TcpListener;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::broker::Broker;
use super::kafka_client::Client;

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

pub struct Cluster {
    pub nodes: Vec<Broker>,
    /// Node i+1's host (its `--peers` entry).
    pub hosts: Vec<String>,
    pub kafka_port: u16,
    /// Nodes before this index are controllers only (`start_split`).
    pub first_broker: usize,
    /// Holds the shared `--cluster-secret-file`.
    _secret_dir: tempfile::TempDir,
}

/// A port free on 127.0.0.1–8 (every host a test cluster may use) right now, below Linux's ephemeral range
/// (32768–60999): nodes bind their outgoing connections to their own
/// address, so a port from that range could be taken by one of those
/// before the node that was given it binds its listener.
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

/// (leader, isr) of one partition as a node's Metadata answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionView {
    pub leader: i32,
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
    pub replicas: Vec<i32>,
}

impl Cluster {
    /// Starts nodes 1..=n on 127.0.0.1..=n with `extra` flags on each.
    pub fn start(n: usize, extra: &[&str]) -> Result<Cluster> {
        let (kafka, raft, metrics) = loop {
            let ports = (free_port()?, free_port()?, free_port()?);
            if ports.0 != ports.1 && ports.1 != ports.2 && ports.0 != ports.2 {
                break ports;
            }
        };
        let hosts: Vec<String> = (1..=n).map(|i| format!("127.0.0.{i}")).collect();
        Cluster::start_on(&hosts, None, (kafka, raft, metrics), extra)
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

    /// Kafka's split roles: nodes 1..=controllers on 127.0.0.1.. are
    /// controllers only (`--process-roles controller`, the voters), the next
    /// `brokers` nodes brokers only. Brokers with an even id find the quorum
    /// through `--controller-quorum-bootstrap-servers`, the others through
    /// `--peers`. `bootstrap()` names the brokers.
    pub fn start_split(controllers: usize, brokers: usize, extra: &[&str]) -> Result<Cluster> {
        let (kafka, raft, metrics) = loop {
            let ports = (free_port()?, free_port()?, free_port()?);
            if ports.0 != ports.1 && ports.1 != ports.2 && ports.0 != ports.2 {
                break ports;
            }
        };
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
            _secret_dir: secret_dir,
        })
    }

    /// `bootstrap.servers` naming every broker.
    pub fn bootstrap(&self) -> String {
        self.hosts[self.first_broker..]
            .iter()
            .map(|h| format!("{h}:{}", self.kafka_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The node with id `id` (1-based).
    pub fn node(&mut self, id: i32) -> &mut Broker {
        &mut self.nodes[usize::try_from(id - 1).expect("node ids start at 1")]
    }

    /// Partition views from the first running node that answers.
    pub fn partitions(&mut self, topic: &str) -> Result<Vec<PartitionView>> {
        let mut last = None;
        for node in self.nodes[self.first_broker..].iter_mut() {
            if !node.is_running() {
                continue;
            }
            match describe(node, topic) {
                Ok(v) => return Ok(v),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("no node is running")))
    }

    /// Partition views as node `id` answers them.
    pub fn partitions_at(&mut self, id: i32, topic: &str) -> Result<Vec<PartitionView>> {
        describe(self.node(id), topic)
    }

    /// The controller node `id` names in Metadata (-1: none).
    pub fn controller_at(&mut self, id: i32) -> Result<i32> {
        let mut client = Client::connect(self.node(id))?;
        Ok(client
            .send(&MetadataRequest::default().with_topics(Some(vec![])), 12)?
            .controller_id
            .0)
    }

    /// Creates `topic` with `partitions` partitions on every node (through
    /// node 1) and waits until each has its full ISR.
    pub fn create_replicated(&mut self, topic: &str, partitions: i32) -> Result<()> {
        let nodes = i16::try_from(self.nodes.len())?;
        Client::connect(self.node(1))?.create_topic_replicated(topic, partitions, nodes, &[])?;
        self.wait_for(
            topic,
            Duration::from_secs(20),
            "the topic's full ISR",
            |ps| {
                ps.iter()
                    .all(|p| p.isr.len() == usize::from(nodes.unsigned_abs()))
            },
        )?;
        Ok(())
    }

    /// The leader of the internal `topic`'s partition 0 (its coordinator)
    /// once every node is in its ISR, so a failover has somewhere to go.
    pub fn coordinator_of(&mut self, topic: &str) -> Result<i32> {
        let nodes = self.nodes.len();
        let views = self.wait_for(
            topic,
            Duration::from_secs(20),
            "a coordinator with a full ISR",
            |ps| ps.iter().all(|p| p.leader > 0 && p.isr.len() == nodes),
        )?;
        Ok(views[0].leader)
    }

    /// The node that leads the internal `topic`'s partition 0 once `old`
    /// (its coordinator, killed or stopped) no longer does.
    pub fn new_coordinator_of(&mut self, topic: &str, old: i32) -> Result<i32> {
        let views = self.wait_for(topic, Duration::from_secs(30), "a new coordinator", |ps| {
            ps.iter().all(|p| p.leader > 0 && p.leader != old)
        })?;
        Ok(views[0].leader)
    }

    /// Polls until `check` accepts the partition views, or fails after `timeout`.
    pub fn wait_for(
        &mut self,
        topic: &str,
        timeout: Duration,
        what: &str,
        check: impl Fn(&[PartitionView]) -> bool,
    ) -> Result<Vec<PartitionView>> {
        let deadline = Instant::now() + timeout;
        let mut seen = None;
        loop {
            if let Ok(v) = self.partitions(topic) {
                if check(&v) {
                    return Ok(v);
                }
                seen = Some(v);
            }
            if Instant::now() > deadline {
                bail!("timed out after {timeout:?} waiting for {what}; last view: {seen:?}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kills (SIGKILL) a follower of partition 0 of `topic` and waits for
    /// the ISR to drop it; returns (leader, follower).
    pub fn kill_a_follower(&mut self, topic: &str) -> Result<(i32, i32)> {
        let view = self.partitions(topic)?.remove(0);
        let leader = view.leader;
        let follower = *view
            .replicas
            .iter()
            .find(|&&r| r != leader)
            .context("no follower")?;
        self.node(follower).kill_hard()?;
        self.wait_for(
            topic,
            Duration::from_secs(20),
            "the ISR to drop the follower",
            |ps| !ps[0].isr.contains(&follower),
        )?;
        Ok((leader, follower))
    }

    /// Starts the killed `follower` again and waits (40 s at most) for it
    /// to rejoin the ISR of partition 0 of `topic`.
    pub fn restart_follower(&mut self, topic: &str, follower: i32) -> Result<()> {
        self.node(follower).respawn()?;
        self.node(follower)
            .finish_start()
            .with_context(|| self.logs())?;
        self.wait_for(
            topic,
            Duration::from_secs(40),
            "the follower back in the ISR",
            |ps| ps[0].isr.contains(&follower),
        )
        .with_context(|| self.logs())?;
        Ok(())
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

fn describe(node: &Broker, topic: &str) -> Result<Vec<PartitionView>> {
    let mut client = Client::connect(node)?;
    let request = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(topic.into()))))]))
        .with_allow_auto_topic_creation(false);
    let response = client.send(&request, 12)?;
    let t = response.topics.first().context("no topic in Metadata")?;
    if t.error_code != 0 {
        bail!("Metadata error {} for {topic}", t.error_code);
    }
    let mut views: Vec<(i32, PartitionView)> = t
        .partitions
        .iter()
        .map(|p| {
            (
                p.partition_index,
                PartitionView {
                    leader: p.leader_id.0,
                    leader_epoch: p.leader_epoch,
                    isr: p.isr_nodes.iter().map(|b| b.0).collect(),
                    replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
                },
            )
        })
        .collect();
    views.sort_by_key(|(i, _)| *i);
    Ok(views.into_iter().map(|(_, v)| v).collect())
}
