//! The server side of the raft RPC transport: accepts connections on
//! `raft_listen` and answers each request frame with one response frame.
//!
//! Owns: the listener and its connection tasks (in one `JoinSet`, so
//! aborting the accept task drops every connection: a shut-down node stops
//! answering at once), and the port's bounds: a place for each connection
//! from `admission` (voters' addresses and strangers in separate pools,
//! per-address caps; none free → closed at accept), the transport first
//! (`transport`: on SSL the banner and a TLS handshake that requires the
//! peer's certificate; a cleartext client is refused), then the
//! authentication handshake (`auth`: only a node knowing the cluster
//! secret gets further); a refusal of either is logged with the peer's
//! address and the reason, at most once per address every
//! `REFUSAL_LOG_INTERVAL`,
//! a frame body that must arrive within
//! `FRAME_READ_TIMEOUT` of its length prefix, and `IDLE_TIMEOUT` without a
//! frame. Raft RPCs go to openraft, controller requests to
//! `Controller::handle` — raft RPCs only from voters, a heartbeat, a join
//! or an ISR change only on the authenticated node's own behalf
//! (`permitted`). Must not: decide
//! anything itself. A bad frame gets an `RpcResponse::Error` (when
//! decodable as a frame at all) and the connection is closed; nothing a
//! peer sends can panic the server.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::raft::AppendEntriesResponse;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use crate::admission::Admission;
use crate::controller::Controller;
use crate::monitor::LeaderMonitor;
use crate::peer_auth::{
    server_handshake, ClusterSecret, HandshakeError, RefusalLog, REFUSAL_LOG_INTERVAL,
};
use crate::raft_types::Raft;
use crate::request::ControllerRequest;
use crate::rpc::{decode, read_frame_body, write_frame, RpcRequest, RpcResponse};
use crate::transport::ControllerSecurity;

/// A frame's body must arrive within this of its length prefix.
pub const FRAME_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection with no frame for this long is closed (peers reconnect).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// What requests are dispatched to.
pub struct RpcHandler {
    pub raft: Raft,
    pub controller: Arc<Controller>,
    pub monitor: Arc<LeaderMonitor>,
    pub secret: ClusterSecret,
    /// What the port speaks: cleartext or mutual TLS.
    pub security: ControllerSecurity,
    pub voters: Vec<i32>,
    pub admission: Arc<Admission>,
}

/// Spawns the accept loop. Aborting the returned task closes the listener
/// and every open connection.
pub fn spawn(listener: TcpListener, handler: Arc<RpcHandler>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let _resolver = AbortOnDrop(handler.admission.spawn_resolver());
        let mut connections = JoinSet::new();
        let handshake_refusals = Arc::new(RefusalLog::new(REFUSAL_LOG_INTERVAL));
        // Connections refused at accept (no place free): one line for all
        // addresses, as a flood of them comes from many.
        let mut refused_since_log = 0u64;
        let mut last_refusal_log: Option<Instant> = None;
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let ticket = match handler.admission.admit(peer.ip()) {
                            Ok(ticket) => ticket,
                            Err(refusal) => {
                                refused_since_log += 1;
                                if last_refusal_log.is_none_or(|at| at.elapsed() >= REFUSAL_LOG_INTERVAL) {
                                    tracing::warn!(%peer, refused = refused_since_log, "raft rpc connections refused: {refusal}");
                                    refused_since_log = 0;
                                    last_refusal_log = Some(Instant::now());
                                }
                                continue;
                            }
                        };
                        let _ = stream.set_nodelay(true);
                        let handler = handler.clone();
                        let refusals = handshake_refusals.clone();
                        connections.spawn(async move {
                            let _ticket = ticket;
                            if let Err(e) = serve(stream, peer, &handler, &refusals).await {
                                tracing::debug!(%peer, error = %e, "raft rpc connection closed");
                            }
                        });
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "raft rpc accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
    })
}

/// Aborts a helper task when its owner (the accept task) is dropped.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    handler: &RpcHandler,
    refusals: &RefusalLog<IpAddr>,
) -> std::io::Result<()> {
    let mut stream = match crate::transport::accept(&handler.security, stream).await {
        Ok(stream) => stream,
        Err(e) => {
            log_refused_handshake(peer, &e, refusals);
            return Ok(());
        }
    };
    // Any node id that proves the cluster secret: brokers that are not
    // voters join and heartbeat too. What each id may ask is `permitted`.
    let peer_id = match server_handshake(&mut stream, &handler.secret, &|id| id >= 0).await {
        Ok(peer_id) => peer_id,
        Err(e) => {
            log_refused_handshake(peer, &e, refusals);
            return Ok(());
        }
    };
    loop {
        let mut len = [0u8; 4];
        match tokio::time::timeout(IDLE_TIMEOUT, stream.read_exact(&mut len)).await {
            Err(_) => return Ok(()),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Ok(Err(e)) => return Err(e),
            Ok(Ok(_)) => {}
        }
        let body = tokio::time::timeout(FRAME_READ_TIMEOUT, read_frame_body(&mut stream, len))
            .await
            .map_err(|_| {
                std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "frame body not received in time",
                )
            })??;
        let request: RpcRequest = match decode(&body) {
            Ok(request) => request,
            Err(e) => {
                let reply = RpcResponse::Error(format!("undecodable request: {e}"));
                write_frame(&mut stream, &reply).await?;
                return Err(e);
            }
        };
        if let Err(refusal) = permitted(&request, peer_id, &raft_senders(handler, peer_id)) {
            write_frame(&mut stream, &RpcResponse::Error(refusal.clone())).await?;
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                refusal,
            ));
        }
        let response = dispatch(request, handler).await;
        write_frame(&mut stream, &response).await?;
    }
}

/// Says why a handshake from `peer` was refused: at most one line per
/// address every `REFUSAL_LOG_INTERVAL` (ports change per connection), and
/// a connection closed before it sent a byte (a port probe) only at debug.
fn log_refused_handshake(peer: SocketAddr, error: &HandshakeError, refusals: &RefusalLog<IpAddr>) {
    if error.is_routine() {
        tracing::debug!(%peer, "raft connection closed before its handshake: {error}");
        return;
    }
    if let Some(suppressed) = refusals.admit(peer.ip(), Instant::now()) {
        tracing::warn!(%peer, suppressed, "raft handshake from {peer} refused: {error}");
    }
}

/// Who may send this node raft RPCs.
struct RaftSenders {
    /// The peer is a voter: in the membership, or configured (`--peers`)
    /// while this node knows no membership yet.
    voter: bool,
    /// This node has no membership yet (an observer that has not joined,
    /// found the quorum through bootstrap servers and knows no voter): the
    /// leader's first AppendEntries is how it learns them.
    unjoined: bool,
}

fn raft_senders(handler: &RpcHandler, peer_id: i32) -> RaftSenders {
    let metrics = handler.raft.metrics();
    let m = metrics.borrow();
    let membership = m.membership_config.membership();
    let id = crate::raft_types::raft_id(peer_id);
    let unjoined = membership.nodes().next().is_none();
    // Once the membership is known it decides: a configured voter removed
    // with RemoveRaftVoter no longer votes here.
    let voter = match unjoined {
        true => handler.voters.contains(&peer_id),
        false => membership.voter_ids().any(|v| v == id),
    };
    RaftSenders { voter, unjoined }
}

/// Raft RPCs come from voters only (an observer that has not joined yet
/// takes the log from whoever proves the secret); a broker speaks only for itself: a
/// heartbeat, a join or a controlled shutdown only for the node the
/// connection authenticated as, an ISR change only from the leader it names
/// (each broker forwards its own requests over its own connection).
fn permitted(request: &RpcRequest, peer_id: i32, senders: &RaftSenders) -> Result<(), String> {
    match request {
        // Only voters run elections and replicate the log: an observer (or
        // any other holder of the secret) must not be able to depose the
        // leader with a higher term.
        RpcRequest::Vote(_) if !senders.voter => Err(format!(
            "node {peer_id} is not a voter of the metadata quorum: raft RPCs refused"
        )),
        RpcRequest::AppendEntries(_) | RpcRequest::InstallSnapshot(_)
            if !senders.voter && !senders.unjoined =>
        {
            Err(format!(
                "node {peer_id} is not a voter of the metadata quorum: raft RPCs refused"
            ))
        }
        RpcRequest::Controller(ControllerRequest::AddObserver { node_id, .. })
            if *node_id != peer_id =>
        {
            Err(format!(
                "node {peer_id} may not ask to join for node {node_id}"
            ))
        }
        RpcRequest::Controller(ControllerRequest::Heartbeat(heartbeat))
            if heartbeat.node_id != peer_id =>
        {
            Err(format!(
                "node {peer_id} may not heartbeat for node {}",
                heartbeat.node_id
            ))
        }
        RpcRequest::Controller(ControllerRequest::ControlledShutdown { node_id })
            if *node_id != peer_id =>
        {
            Err(format!("node {peer_id} may not shut down node {node_id}"))
        }
        RpcRequest::Controller(ControllerRequest::AlterPartition(alter))
            if alter.leader_id != peer_id =>
        {
            Err(format!(
                "node {peer_id} may not alter {}-{} in the name of its leader {}",
                alter.topic, alter.partition, alter.leader_id
            ))
        }
        _ => Ok(()),
    }
}

async fn dispatch(request: RpcRequest, handler: &RpcHandler) -> RpcResponse {
    match request {
        RpcRequest::AppendEntries(rpc) => {
            let result = handler.raft.append_entries(rpc).await;
            if matches!(&result, Ok(r) if !matches!(r, AppendEntriesResponse::HigherVote(_))) {
                handler.monitor.note_leader_contact();
            }
            RpcResponse::AppendEntries(result)
        }
        RpcRequest::Vote(rpc) => RpcResponse::Vote(handler.raft.vote(rpc).await),
        RpcRequest::InstallSnapshot(rpc) => {
            RpcResponse::InstallSnapshot(handler.raft.install_snapshot(rpc).await)
        }
        RpcRequest::Controller(request) => {
            RpcResponse::Controller(handler.controller.handle(request).await)
        }
    }
}
