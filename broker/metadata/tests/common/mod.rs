//! A three-node metadata quorum in one process, on 127.0.0.1–3 with the
//! same raft port (Linux routes all of 127/8 to loopback), with temp data
//! dirs that survive node restarts. Waits poll state, never sleep blindly.

#![allow(dead_code)]

use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use chronik_metadata::{
    parse_peers, Cluster, ClusterConfig, ClusterSecret, CreateTopic, MetadataImage,
};
use tokio::time::Instant;

pub const SESSION_TIMEOUT: Duration = Duration::from_secs(3);
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(300);
pub const KAFKA_PORT: u16 = 9092;
pub const IDS: [i32; 3] = [1, 2, 3];

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("chronik_metadata=info")),
        )
        .with_test_writer()
        .try_init();
}

pub struct TestCluster {
    dirs: Vec<tempfile::TempDir>,
    raft_port: u16,
    nodes: Vec<Option<Arc<Cluster>>>,
}

/// A port free on 127.0.0.1–3, below Linux's ephemeral range (32768–60999):
/// nodes connect from their own address, so a port from that range could be
/// taken by an outgoing connection before a restarted node binds it.
fn free_port() -> u16 {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .subsec_nanos()
        ^ std::process::id();
    (0..1000u32)
        .map(|attempt| 20_000 + (seed.wrapping_add(attempt.wrapping_mul(7919)) % 12_000) as u16)
        .find(|&port| {
            (1..=3).all(|i| std::net::TcpListener::bind((format!("127.0.0.{i}"), port)).is_ok())
        })
        .expect("a free port on 127.0.0.1-3 in 20000-31999")
}

impl TestCluster {
    pub async fn start() -> TestCluster {
        init_tracing();
        let dirs = IDS
            .iter()
            .map(|_| tempfile::tempdir().expect("tempdir"))
            .collect();
        let mut cluster = TestCluster {
            dirs,
            raft_port: free_port(),
            nodes: vec![None, None, None],
        };
        for id in IDS {
            cluster.start_node(id).await;
        }
        cluster.wait_all_ready().await;
        cluster
    }

    pub fn config(&self, id: i32) -> ClusterConfig {
        let index = usize::try_from(id - 1).expect("ids start at 1");
        ClusterConfig {
            node_id: id,
            roles: chronik_metadata::Roles::COMBINED,
            peers: parse_peers("1@127.0.0.1,2@127.0.0.2,3@127.0.0.3").expect("peers"),
            bootstrap_servers: Vec::new(),
            host: format!("127.0.0.{id}"),
            listeners: Default::default(),
            kafka_port: KAFKA_PORT,
            raft_port: self.raft_port,
            raft_listen: SocketAddr::from((
                Ipv4Addr::new(127, 0, 0, u8::try_from(id).expect("small")),
                self.raft_port,
            )),
            data_dir: self.dirs[index].path().to_path_buf(),
            broker_session_timeout: SESSION_TIMEOUT,
            heartbeat_interval: HEARTBEAT_INTERVAL,
            secret: ClusterSecret::from_bytes(b"the test cluster's shared secret"),
            security: Default::default(),
            leader_balance: Default::default(),
            rack: None,
            directory_id: [u8::try_from(id).expect("small"); 16],
            default_min_insync_replicas: 1,
        }
    }

    pub async fn start_node(&mut self, id: i32) {
        let node = Cluster::start(self.config(id)).await.expect("start node");
        self.nodes[index(id)] = Some(node);
    }

    pub async fn stop_node(&mut self, id: i32) {
        if let Some(node) = self.nodes[index(id)].take() {
            node.shutdown().await;
        }
    }

    pub async fn stop_all(&mut self) {
        for id in IDS {
            self.stop_node(id).await;
        }
    }

    pub async fn wait_all_ready(&self) {
        for id in IDS {
            if let Some(node) = &self.nodes[index(id)] {
                node.wait_ready(Duration::from_secs(20))
                    .await
                    .unwrap_or_else(|e| panic!("node {id} not ready: {e}"));
            }
        }
    }

    pub fn node(&self, id: i32) -> &Arc<Cluster> {
        self.nodes[index(id)]
            .as_ref()
            .unwrap_or_else(|| panic!("node {id} is stopped"))
    }

    pub fn running(&self) -> impl Iterator<Item = (i32, &Arc<Cluster>)> {
        IDS.iter()
            .filter_map(|&id| Some((id, self.nodes[index(id)].as_ref()?)))
    }

    /// The controller as every running node sees it, once they agree.
    pub async fn controller(&self) -> i32 {
        eventually(
            Duration::from_secs(15),
            "running nodes agree on a controller",
            || {
                let mut views = self.running().map(|(_, n)| n.status().controller_id);
                let first = views.next().flatten()?;
                let agreed = views.all(|v| v == Some(first));
                let leads = self
                    .running()
                    .any(|(id, n)| id == first && n.status().is_controller);
                (agreed && leads).then_some(first)
            },
        )
        .await
    }
}

fn index(id: i32) -> usize {
    usize::try_from(id - 1).expect("ids start at 1")
}

/// Polls `check` every 50 ms until it returns `Some`, or panics naming `what`.
pub async fn eventually<T>(
    timeout: Duration,
    what: &str,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `eventually` for an async check.
pub async fn eventually_async<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Unfenced broker ids in an image.
pub fn live(image: &MetadataImage) -> Vec<i32> {
    image.live_brokers().map(|b| b.node_id).collect()
}

/// A CreateTopics request for `name`: no configs, no id, no assignments.
pub fn topic(name: &str, partitions: i32, replication_factor: i16) -> CreateTopic {
    CreateTopic {
        name: name.to_string(),
        partitions,
        replication_factor,
        configs: std::collections::BTreeMap::new(),
        topic_id: None,
        assignments: Vec::new(),
    }
}
