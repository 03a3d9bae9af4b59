//! The server side of the raft RPC transport: accepts connections on
//! `raft_listen` and answers each request frame with one response frame.
//! (Per-address counting lives here rather than shared with the Kafka
//! port's `connection_limits`: this crate must not depend on the server.)
//!
//! Owns: the listener and its connection tasks (in one `JoinSet`, so
//! aborting the accept task drops every connection: a shut-down node stops
//! answering at once), and the port's bounds: at most
//! `MAX_CONNECTIONS` at once and `MAX_CONNECTIONS_PER_IP` from one address
//! (more are closed at accept), the
//! authentication handshake first (`auth`: only a configured voter knowing
//! the cluster secret gets further), a frame body that must arrive within
//! `FRAME_READ_TIMEOUT` of its length prefix, and `IDLE_TIMEOUT` without a
//! frame. Raft RPCs go to openraft, controller requests to
//! `Controller::handle` — a heartbeat only for the node the connection
//! authenticated as. Must not: decide anything itself. A bad frame gets an
//! `RpcResponse::Error` (when decodable as a frame at all) and the
//! connection is closed; nothing a peer sends can panic the server.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use openraft::raft::AppendEntriesResponse;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::{JoinHandle, JoinSet};

use crate::auth::{server_handshake, ClusterSecret};
use crate::controller::Controller;
use crate::monitor::LeaderMonitor;
use crate::raft_types::Raft;
use crate::request::ControllerRequest;
use crate::rpc::{decode, read_frame_body, write_frame, RpcRequest, RpcResponse};

/// Connections open at once on the raft port (a voter set needs a few),
/// and from any one address.
pub const MAX_CONNECTIONS: usize = 64;
pub const MAX_CONNECTIONS_PER_IP: usize = 16;
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
    pub voters: Vec<i32>,
}

/// Spawns the accept loop. Aborting the returned task closes the listener
/// and every open connection.
pub fn spawn(listener: TcpListener, handler: Arc<RpcHandler>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut connections = JoinSet::new();
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        let per_ip: Arc<std::sync::Mutex<HashMap<IpAddr, usize>>> = Arc::default();
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let Ok(slot) = slots.clone().try_acquire_owned() else {
                            tracing::warn!(%peer, "raft rpc connection refused: {MAX_CONNECTIONS} already open");
                            continue;
                        };
                        let Some(ip_slot) = IpSlot::take(&per_ip, peer.ip()) else {
                            tracing::warn!(%peer, "raft rpc connection refused: {MAX_CONNECTIONS_PER_IP} already open from it");
                            continue;
                        };
                        let _ = stream.set_nodelay(true);
                        let handler = handler.clone();
                        connections.spawn(async move {
                            let _slots = (slot, ip_slot);
                            if let Err(e) = serve(stream, &handler).await {
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

/// One connection's place in the per-address count.
struct IpSlot {
    counts: Arc<std::sync::Mutex<HashMap<IpAddr, usize>>>,
    ip: IpAddr,
}

impl IpSlot {
    fn take(counts: &Arc<std::sync::Mutex<HashMap<IpAddr, usize>>>, ip: IpAddr) -> Option<IpSlot> {
        let mut map = counts.lock().unwrap_or_else(|e| e.into_inner());
        let n = map.entry(ip).or_insert(0);
        if *n >= MAX_CONNECTIONS_PER_IP {
            return None;
        }
        *n += 1;
        Some(IpSlot { counts: counts.clone(), ip })
    }
}

impl Drop for IpSlot {
    fn drop(&mut self) {
        let mut map = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = map.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.ip);
            }
        }
    }
}

async fn serve(mut stream: TcpStream, handler: &RpcHandler) -> std::io::Result<()> {
    let peer_id = server_handshake(&mut stream, &handler.secret, &handler.voters).await?;
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
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "frame body not received in time"))??;
        let request: RpcRequest = match decode(&body) {
            Ok(request) => request,
            Err(e) => {
                let reply = RpcResponse::Error(format!("undecodable request: {e}"));
                write_frame(&mut stream, &reply).await?;
                return Err(e);
            }
        };
        if let RpcRequest::Controller(ControllerRequest::Heartbeat(heartbeat)) = &request {
            if heartbeat.node_id != peer_id {
                let reply = RpcResponse::Error(format!("node {peer_id} may not heartbeat for node {}", heartbeat.node_id));
                write_frame(&mut stream, &reply).await?;
                return Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, "heartbeat for another node"));
            }
        }
        let response = dispatch(request, handler).await;
        write_frame(&mut stream, &response).await?;
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
