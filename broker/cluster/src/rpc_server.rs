//! The server side of the raft RPC transport: accepts connections on
//! `raft_listen` and answers each request frame with one response frame.
//!
//! Owns: the listener and its connection tasks (in one `JoinSet`, so
//! aborting the accept task drops every connection: a shut-down node stops
//! answering at once). Raft RPCs go to openraft, controller requests to
//! `Controller::handle`. Must not: decide anything itself. A bad frame
//! gets an `RpcResponse::Error` (when decodable as a frame at all) and the
//! connection is closed; nothing a peer sends can panic the server.

use std::sync::Arc;

use openraft::raft::AppendEntriesResponse;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use crate::controller::Controller;
use crate::monitor::LeaderMonitor;
use crate::raft_types::Raft;
use crate::rpc::{decode, read_frame_bytes, write_frame, RpcRequest, RpcResponse};

/// What requests are dispatched to.
pub struct RpcHandler {
    pub raft: Raft,
    pub controller: Arc<Controller>,
    pub monitor: Arc<LeaderMonitor>,
}

/// Spawns the accept loop. Aborting the returned task closes the listener
/// and every open connection.
pub fn spawn(listener: TcpListener, handler: Arc<RpcHandler>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let _ = stream.set_nodelay(true);
                        let handler = handler.clone();
                        connections.spawn(async move {
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

async fn serve(mut stream: TcpStream, handler: &RpcHandler) -> std::io::Result<()> {
    while let Some(body) = read_frame_bytes(&mut stream).await? {
        let request: RpcRequest = match decode(&body) {
            Ok(request) => request,
            Err(e) => {
                let reply = RpcResponse::Error(format!("undecodable request: {e}"));
                write_frame(&mut stream, &reply).await?;
                return Err(e);
            }
        };
        let response = dispatch(request, handler).await;
        write_frame(&mut stream, &response).await?;
    }
    Ok(())
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
