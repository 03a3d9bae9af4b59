//! Why a node is not serving clients while it joins its metadata quorum.
//! Until it has joined, its Kafka listeners are bound but not listening
//! (`server`), so a client's connection is refused at once instead of
//! waiting unanswered; this says why in the log. After `GRACE` it dials
//! every other voter's raft port as its raft connections do (TLS on an
//! SSL raft port, then the cluster-secret handshake,
//! `Credentials::open`) and logs one line naming what stands in the
//! way — handshakes refused and each peer's reason, peers not answering,
//! or the start-up step still waited for — and another only when that
//! changes.
//!
//! Owns: the probes and the "not serving clients" line. Must not: join,
//! retry or decide anything (`cluster_start` does); a probe authenticates
//! and closes without sending a frame.

use std::collections::BTreeMap;
use std::time::Duration;

use chronik_metadata::peer_auth::HANDSHAKE_TIMEOUT;
use chronik_metadata::{ClusterConfig, Credentials, OpenError};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

/// A healthy node joins well within this (an election takes 1–2 s).
const GRACE: Duration = Duration::from_secs(3);
/// How often the peers are probed again while the node still waits.
const REPROBE_INTERVAL: Duration = Duration::from_secs(15);

/// Logs why the node is not serving, until dropped (once it serves, or
/// gives up).
pub struct JoinDiagnosis {
    waiting_for: watch::Sender<String>,
    task: JoinHandle<()>,
}

impl JoinDiagnosis {
    pub fn start(config: &ClusterConfig) -> JoinDiagnosis {
        let (waiting_for, step) = watch::channel("starting the metadata quorum node".to_string());
        let prober = Prober {
            node_id: config.node_id,
            credentials: config.credentials(),
            peers: config
                .peers
                .iter()
                .filter(|p| p.node_id != config.node_id)
                .filter_map(|p| Some((p.node_id, config.raft_addr(p.node_id)?)))
                .collect(),
        };
        let task = tokio::spawn(prober.run(step));
        JoinDiagnosis { waiting_for, task }
    }

    /// The start-up step now waited for, as the line names it.
    pub fn waiting_for(&self, step: impl Into<String>) {
        self.waiting_for.send_replace(step.into());
    }
}

impl Drop for JoinDiagnosis {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Prober {
    node_id: i32,
    /// What this node's raft connections prove and speak (from its own
    /// address, TLS on an SSL raft port).
    credentials: Credentials,
    /// Every other voter: (node id, raft address).
    peers: Vec<(i32, String)>,
}

/// What dialling one peer's raft port found.
enum Probe {
    Accepted,
    Refused(String),
    NotAnswering(String),
}

impl Prober {
    async fn run(self, mut step: watch::Receiver<String>) {
        tokio::time::sleep(GRACE).await;
        let mut last_line = None;
        loop {
            let prober = &self;
            let probes =
                futures::future::join_all(self.peers.iter().map(|(id, addr)| async move {
                    (*id, addr.as_str(), prober.probe(addr).await)
                }))
                .await;
            let waiting_for = step.borrow_and_update().clone();
            let (line, refused) = summary(&waiting_for, self.peers.len() + 1, &probes);
            if last_line.as_ref() != Some(&line) {
                if refused {
                    warn!(node_id = self.node_id, "{line}");
                } else {
                    info!(node_id = self.node_id, "{line}");
                }
                last_line = Some(line);
            }
            tokio::select! {
                () = tokio::time::sleep(REPROBE_INTERVAL) => {}
                changed = step.changed() => if changed.is_err() { return },
            }
        }
    }

    async fn probe(&self, addr: &str) -> Probe {
        let attempt = async {
            match self.credentials.open(addr).await {
                Ok(_) => Ok(()),
                Err(OpenError::Connect(e)) => Err(Probe::NotAnswering(e.to_string())),
                Err(OpenError::Handshake(e)) if e.is_refusal() => {
                    Err(Probe::Refused(e.to_string()))
                }
                Err(OpenError::Handshake(e)) => Err(Probe::NotAnswering(e.to_string())),
            }
        };
        // A TLS handshake (bounded alike) may come first.
        let bound = 2 * HANDSHAKE_TIMEOUT + Duration::from_secs(1);
        match tokio::time::timeout(bound, attempt).await {
            Ok(Ok(())) => Probe::Accepted,
            Ok(Err(probe)) => probe,
            Err(_) => Probe::NotAnswering(format!("no connection within {bound:?}")),
        }
    }
}

/// The line to log and whether it reports a refusal (a warning: a peer's
/// configuration differs, which waiting will not mend). `voters` counts
/// this node.
fn summary(waiting_for: &str, voters: usize, probes: &[(i32, &str, Probe)]) -> (String, bool) {
    let mut refused: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    let mut not_answering = Vec::new();
    let mut accepted = 0;
    for (node_id, addr, probe) in probes {
        match probe {
            Probe::Accepted => accepted += 1,
            Probe::Refused(reason) => refused.entry(reason).or_default().push(*node_id),
            Probe::NotAnswering(error) => {
                not_answering.push(format!("node {node_id} ({addr}): {error}"));
            }
        }
    }
    let refusals: Vec<String> = refused
        .iter()
        .map(|(reason, nodes)| {
            let nodes: Vec<String> = nodes.iter().map(i32::to_string).collect();
            let noun = if nodes.len() == 1 { "node" } else { "nodes" };
            format!(
                "raft handshakes refused by {noun} {}: {reason}",
                nodes.join(", ")
            )
        })
        .collect();
    let majority = voters / 2 + 1;
    let mut line = if !refusals.is_empty() && 1 + accepted < majority {
        format!(
            "not serving clients: cannot join the metadata quorum: {}; still {waiting_for}",
            refusals.join("; ")
        )
    } else if !refusals.is_empty() {
        format!(
            "not serving clients yet: {waiting_for}; {}",
            refusals.join("; ")
        )
    } else {
        format!("not serving clients yet: {waiting_for}")
    };
    if !not_answering.is_empty() {
        line.push_str("; raft port not answering: ");
        line.push_str(&not_answering.join("; "));
    }
    line.push_str(" (Kafka connections are refused until this node has joined)");
    (line, !refusals.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_says_whether_the_refusals_keep_the_node_out() {
        let wrong = "the peer says this node's proof does not match its cluster secret";
        let (line, refused) = summary(
            "waiting to be registered",
            3,
            &[
                (1, "h1:9093", Probe::Refused(wrong.into())),
                (2, "h2:9093", Probe::Refused(wrong.into())),
            ],
        );
        assert!(refused);
        assert!(
            line.starts_with(&format!(
                "not serving clients: cannot join the metadata quorum: raft handshakes refused by nodes 1, 2: {wrong}; still waiting to be registered"
            )),
            "{line}"
        );

        // One refusing peer of three: the other two can still make a quorum.
        let (line, refused) = summary(
            "creating __consumer_offsets",
            3,
            &[
                (2, "h2:9093", Probe::Accepted),
                (3, "h3:9093", Probe::Refused(wrong.into())),
            ],
        );
        assert!(refused);
        assert!(
            line.starts_with(&format!(
                "not serving clients yet: creating __consumer_offsets; raft handshakes refused by node 3: {wrong}"
            )),
            "{line}"
        );

        let (line, refused) = summary(
            "waiting to be registered",
            3,
            &[
                (2, "h2:9093", Probe::Accepted),
                (
                    3,
                    "h3:9093",
                    Probe::NotAnswering("connection refused".into()),
                ),
            ],
        );
        assert!(!refused);
        assert!(
            line.starts_with(
                "not serving clients yet: waiting to be registered; raft port not answering: node 3 (h3:9093): connection refused"
            ),
            "{line}"
        );
    }
}
