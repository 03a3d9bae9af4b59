//! A real 3-node `chronik-server` cluster for one test
//! (`chronik_testkit::cluster`: node N on 127.0.0.N, the same Kafka, raft
//! and metrics ports on every node, peers `1@127.0.0.1,2@127.0.0.2,3@127.0.0.3`)
//! and the cluster's view read through Metadata (rdkafka admin-free: the
//! blocking `kafka_client`).

use std::ops::{Deref, DerefMut};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use kafka_protocol::messages::MetadataRequest;

pub use chronik_testkit::cluster::{free_port, FAST_FAILOVER};

use super::broker::Broker;
use super::kafka_client::{topic_metadata_request, Client};

/// The testkit's cluster (its `nodes`, `hosts`, `kafka_port`,
/// `bootstrap()`, `node(id)`, `restart_node(id)`, `logs()` through `Deref`)
/// with the Metadata views below.
pub struct Cluster(chronik_testkit::Cluster);

impl Deref for Cluster {
    type Target = chronik_testkit::Cluster;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl DerefMut for Cluster {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

/// (leader, isr) of one partition as a node's Metadata answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionView {
    pub leader: i32,
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
    pub replicas: Vec<i32>,
}

impl PartitionView {
    /// The replicas other than the leader, in replica order.
    pub fn followers(&self) -> Vec<i32> {
        self.replicas
            .iter()
            .copied()
            .filter(|&r| r != self.leader)
            .collect()
    }
}

impl Cluster {
    /// Starts nodes 1..=n on 127.0.0.1..=n with `extra` flags on each.
    pub fn start(n: usize, extra: &[&str]) -> Result<Cluster> {
        chronik_testkit::Cluster::start(n, extra).map(Cluster)
    }

    /// Starts node i+1 at `hosts[i]` (inside network namespace `netns[i]`
    /// when given) with the same (Kafka, raft, metrics) ports on every node.
    pub fn start_on(
        hosts: &[String],
        netns: Option<&[String]>,
        ports: (u16, u16, u16),
        extra: &[&str],
    ) -> Result<Cluster> {
        chronik_testkit::Cluster::start_on(hosts, netns, ports, extra).map(Cluster)
    }

    /// `start`, with `node_args(i)` added to node i+1's flags.
    pub fn start_each(
        n: usize,
        extra: &[&str],
        node_args: &dyn Fn(usize) -> Vec<String>,
    ) -> Result<Cluster> {
        chronik_testkit::Cluster::start_each(n, extra, node_args).map(Cluster)
    }

    /// Kafka's split roles: `controllers` controller-only nodes, then
    /// `brokers` broker-only ones (`chronik_testkit::Cluster::start_split`).
    pub fn start_split(controllers: usize, brokers: usize, extra: &[&str]) -> Result<Cluster> {
        chronik_testkit::Cluster::start_split(controllers, brokers, extra).map(Cluster)
    }

    /// Partition views from the first running node that answers.
    pub fn partitions(&mut self, topic: &str) -> Result<Vec<PartitionView>> {
        let mut last = None;
        let first_broker = self.first_broker;
        for node in self.nodes[first_broker..].iter_mut() {
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

    /// Polls until every partition of `topic` has a leader and every node
    /// in its ISR, or fails after `timeout`; returns the partitions' views.
    pub fn wait_for_full_isr(
        &mut self,
        topic: &str,
        timeout: Duration,
    ) -> Result<Vec<PartitionView>> {
        let nodes = self.nodes.len();
        self.wait_for(topic, timeout, "leaders with a full ISR", |ps| {
            ps.iter().all(|p| p.leader > 0 && p.isr.len() == nodes)
        })
    }

    /// Polls until partition 0 of `topic` has a leader other than `old`, or
    /// fails after 20 s; returns the new leader.
    pub fn new_leader_of(&mut self, topic: &str, old: i32, what: &str) -> Result<i32> {
        let views = self.wait_for(topic, Duration::from_secs(20), what, |ps| {
            ps[0].leader > 0 && ps[0].leader != old
        })?;
        Ok(views[0].leader)
    }

    /// Runs `attempt` every `every` until `done` accepts what it returned,
    /// and returns that. After `timeout` it fails with `timed_out` of the
    /// last answer and the nodes' logs; an error from `attempt` ends the
    /// wait at once. For what a test can only see by asking again: an ACL
    /// on every node, a new controller, acks=all accepted again.
    pub fn poll_until<T>(
        &mut self,
        timeout: Duration,
        every: Duration,
        mut attempt: impl FnMut(&mut Cluster) -> Result<T>,
        done: impl Fn(&T) -> bool,
        timed_out: impl Fn(&T) -> String,
    ) -> Result<T> {
        let deadline = Instant::now() + timeout;
        loop {
            let answer = attempt(self)?;
            if done(&answer) {
                return Ok(answer);
            }
            ensure!(
                Instant::now() < deadline,
                "{}\n{}",
                timed_out(&answer),
                self.logs()
            );
            std::thread::sleep(every);
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
        self.restart_node(follower)?;
        self.wait_for(
            topic,
            Duration::from_secs(40),
            "the follower back in the ISR",
            |ps| ps[0].isr.contains(&follower),
        )
        .with_context(|| self.logs())?;
        Ok(())
    }
}

fn describe(node: &Broker, topic: &str) -> Result<Vec<PartitionView>> {
    let mut client = Client::connect(node)?;
    let response = client.send(&topic_metadata_request(topic, false), 12)?;
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
