//! A node that cannot join its metadata quorum — restarted with a
//! `--cluster-secret-file` its peers do not share — refuses Kafka clients at
//! once instead of leaving them unanswered (librdkafka used to wait out
//! 10 s in ApiVersions), and both ends of every refused raft handshake log
//! the reason: the refusing node names the peer and the bad proof, the
//! refused one what the peer told it, and the node that cannot join says
//! why it is not serving.

mod common;

use std::io::ErrorKind;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use common::broker::Broker;
use common::cluster::free_port;
use common::wire;

const PEERS: &str = "1@127.0.0.1,2@127.0.0.2,3@127.0.0.3";

/// How long a client may wait for an answer or a refusal.
const CLIENT_BOUND: Duration = Duration::from_secs(2);

fn secret_file(dir: &std::path::Path, name: &str, contents: &str) -> Result<String> {
    let path = dir.join(name);
    std::fs::write(&path, contents)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    Ok(path.to_str().context("temp path is not UTF-8")?.to_string())
}

fn spawn_node(id: u8, ports: (u16, u16, u16), secret: &str) -> Result<Broker> {
    let (kafka, raft, metrics) = ports;
    let host = format!("127.0.0.{id}");
    let (node_id, raft_listen) = (id.to_string(), format!("{host}:{raft}"));
    Broker::spawn_at(
        &format!("{host}:{kafka}"),
        &format!("{host}:{metrics}"),
        &[
            "--node-id",
            &node_id,
            "--peers",
            PEERS,
            "--raft-listen",
            &raft_listen,
            "--cluster-secret-file",
            secret,
        ],
    )
}

/// Polls the logs of `nodes` until one has a line containing every one of
/// `parts`.
fn wait_for_line(nodes: &[&Broker], parts: &[&str], timeout: Duration) -> Result<String> {
    let deadline = Instant::now() + timeout;
    loop {
        for node in nodes {
            let log = node.log_tail(1_000_000);
            if let Some(line) = log.lines().find(|l| parts.iter().all(|p| l.contains(p))) {
                return Ok(line.to_string());
            }
        }
        if Instant::now() > deadline {
            let tails: Vec<String> = nodes.iter().map(|n| n.log_tail(40)).collect();
            bail!(
                "no log line with {parts:?} within {timeout:?}; log tails:\n{}",
                tails.join("\n---\n")
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What a Kafka client gets from `addr` within `CLIENT_BOUND`: a refused
/// connection, or an answer (or a close) to ApiVersions. Fails if the
/// connection is accepted and left unanswered.
fn client_outcome(addr: SocketAddr) -> Result<String> {
    let started = Instant::now();
    let mut stream = match TcpStream::connect_timeout(&addr, CLIENT_BOUND) {
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
            return Ok(format!("connection refused after {:?}", started.elapsed()));
        }
        Err(e) => bail!("connecting to {addr}: {e} after {:?}", started.elapsed()),
        Ok(stream) => stream,
    };
    stream.set_write_timeout(Some(CLIENT_BOUND))?;
    ensure!(
        wire::send(&mut stream, &wire::api_versions_v3(1))?,
        "closed before the request"
    );
    match wire::read_reply(&mut stream, CLIENT_BOUND)? {
        wire::Reply::Silent => bail!(
            "{addr} accepted the connection and left ApiVersions unanswered for {:?}",
            started.elapsed()
        ),
        reply => Ok(format!("{reply:?} after {:?}", started.elapsed())),
    }
}

#[test]
fn a_node_with_another_cluster_secret_refuses_clients_at_once_and_both_ends_say_why() -> Result<()>
{
    let ports = loop {
        let ports = (free_port()?, free_port()?, free_port()?);
        if ports.0 != ports.1 && ports.1 != ports.2 && ports.0 != ports.2 {
            break ports;
        }
    };
    let secrets = tempfile::tempdir()?;
    let good = secret_file(
        secrets.path(),
        "good.secret",
        "the cluster's own shared secret",
    )?;
    let bad = secret_file(
        secrets.path(),
        "bad.secret",
        "a secret from some other cluster",
    )?;

    let mut nodes = Vec::new();
    for id in 1..=3 {
        nodes.push(spawn_node(id, ports, &good)?);
    }
    for node in &mut nodes {
        node.finish_start()?;
    }
    // Node 3 comes back with another secret (and an empty data directory).
    nodes[2].kill_hard()?;
    nodes[2] = spawn_node(3, ports, &bad)?;
    let bad_node = &nodes[2];
    // Its Kafka port is bound before it starts to join.
    wait_for_line(
        &[bad_node],
        &["waiting for the metadata quorum"],
        Duration::from_secs(30),
    )?;

    // (a) A client is answered or refused at once, not left waiting.
    let kafka: SocketAddr = format!("127.0.0.3:{}", ports.0).parse()?;
    let outcome = client_outcome(kafka)?;
    eprintln!("a client of the node that cannot join: {outcome}");

    // (b) Both ends of the refused handshakes say why.
    let raft_3 = format!("127.0.0.3:{}", ports.1);
    let refusing = wait_for_line(
        &[bad_node],
        &[
            "raft handshake from 127.0.0.",
            "refused",
            "does not match this node's cluster secret",
        ],
        Duration::from_secs(20),
    )?;
    // The controller's replication to node 3 is what is refused.
    let refused = wait_for_line(
        &[&nodes[0], &nodes[1]],
        &[
            &format!("raft handshake with {raft_3} refused"),
            "the peer says this node's proof does not match its cluster secret",
        ],
        Duration::from_secs(20),
    )?;
    let not_serving = wait_for_line(
        &[bad_node],
        &[
            "not serving clients: cannot join the metadata quorum",
            "raft handshakes refused by nodes 1, 2",
        ],
        Duration::from_secs(20),
    )?;
    eprintln!("{refusing}\n{refused}\n{not_serving}");
    Ok(())
}
