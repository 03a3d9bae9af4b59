//! The client side of the raft RPC transport: openraft's
//! `RaftNetworkFactory` / `RaftNetwork`, and one-shot calls to the
//! controller.
//!
//! Owns: outgoing connections. Each openraft peer connection keeps one
//! TCP stream and reconnects after any error; controller calls (forwarded
//! requests, heartbeats) connect per call, so "could not connect" reliably
//! means "not sent" and may be retried elsewhere. Every call is bounded by
//! a timeout (openraft's `RPCOption` TTL for raft RPCs). Must not: serve
//! anything (`rpc_server` does).

use std::collections::BTreeMap;
use std::io;
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Timeout, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, RPCTypes};
use tokio::net::TcpStream;
use tokio::time::{timeout_at, Instant};

use crate::raft_types::{NodeId, TypeConfig};
use crate::rpc::{decode, read_frame_bytes, write_frame, RpcRequest, RpcResponse};

/// Why a call failed, and whether the request may have been delivered.
#[derive(Debug)]
pub enum CallError {
    /// Could not connect: the request was not sent.
    Connect(io::Error),
    /// Failed after sending began: the peer may have acted on it.
    Io(io::Error),
    /// No response in time (`sent`: the request was written).
    Timeout { sent: bool },
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Connect(e) => write!(f, "connect: {e}"),
            CallError::Io(e) => write!(f, "i/o: {e}"),
            CallError::Timeout { sent } => write!(f, "timed out (request sent: {sent})"),
        }
    }
}

impl std::error::Error for CallError {}

/// One request/response connection to a peer's RPC listener.
struct Channel {
    addr: String,
    stream: Option<TcpStream>,
}

impl Channel {
    fn new(addr: String) -> Self {
        Channel { addr, stream: None }
    }

    async fn call(
        &mut self,
        request: &RpcRequest,
        timeout: Duration,
    ) -> Result<RpcResponse, CallError> {
        let deadline = Instant::now() + timeout;
        let mut stream = match self.stream.take() {
            Some(stream) => stream,
            None => {
                let stream = timeout_at(deadline, TcpStream::connect(self.addr.as_str()))
                    .await
                    .map_err(|_| CallError::Timeout { sent: false })?
                    .map_err(CallError::Connect)?;
                // Small request/response frames: don't wait for Nagle.
                let _ = stream.set_nodelay(true);
                stream
            }
        };
        let exchange = async {
            write_frame(&mut stream, request).await?;
            match read_frame_bytes(&mut stream).await? {
                Some(body) => decode::<RpcResponse>(&body),
                None => Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed",
                )),
            }
        };
        match timeout_at(deadline, exchange).await {
            Ok(Ok(response)) => {
                self.stream = Some(stream);
                Ok(response)
            }
            Ok(Err(e)) => Err(CallError::Io(e)),
            Err(_) => Err(CallError::Timeout { sent: true }),
        }
    }
}

/// One call to `addr` on a fresh connection.
pub async fn call_once(
    addr: &str,
    request: &RpcRequest,
    timeout: Duration,
) -> Result<RpcResponse, CallError> {
    Channel::new(addr.to_string()).call(request, timeout).await
}

/// openraft's connection factory: one `PeerConnection` per target.
pub struct NetworkFactory {
    /// This node's raft id (named in timeout errors).
    pub own_id: NodeId,
    /// Raft addresses from this node's configuration; they win over the
    /// address recorded in the membership at bootstrap, so a changed host
    /// takes effect on restart.
    pub peers: BTreeMap<NodeId, String>,
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = PeerConnection;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerConnection {
        PeerConnection {
            own_id: self.own_id,
            target,
            channel: Channel::new(self.peers.get(&target).unwrap_or(&node.addr).clone()),
        }
    }
}

pub struct PeerConnection {
    own_id: NodeId,
    target: NodeId,
    channel: Channel,
}

impl PeerConnection {
    async fn call<E: std::error::Error>(
        &mut self,
        action: RPCTypes,
        request: RpcRequest,
        option: &RPCOption,
    ) -> Result<RpcResponse, RPCError<NodeId, BasicNode, E>> {
        let ttl = option.hard_ttl();
        self.channel.call(&request, ttl).await.map_err(|e| match e {
            CallError::Connect(e) => RPCError::Unreachable(Unreachable::new(&e)),
            CallError::Io(e) => RPCError::Network(NetworkError::new(&e)),
            CallError::Timeout { .. } => RPCError::Timeout(Timeout {
                action,
                id: self.own_id,
                target: self.target,
                timeout: ttl,
            }),
        })
    }

    fn unexpected<E: std::error::Error>(response: RpcResponse) -> RPCError<NodeId, BasicNode, E> {
        let message = match response {
            RpcResponse::Error(message) => message,
            other => format!("unexpected response {other:?}"),
        };
        RPCError::Network(NetworkError::new(&io::Error::other(message)))
    }
}

impl RaftNetwork<TypeConfig> for PeerConnection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        match self
            .call(
                RPCTypes::AppendEntries,
                RpcRequest::AppendEntries(rpc),
                &option,
            )
            .await?
        {
            RpcResponse::AppendEntries(Ok(response)) => Ok(response),
            RpcResponse::AppendEntries(Err(e)) => {
                Err(RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            other => Err(Self::unexpected(other)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        match self
            .call(
                RPCTypes::InstallSnapshot,
                RpcRequest::InstallSnapshot(rpc),
                &option,
            )
            .await?
        {
            RpcResponse::InstallSnapshot(Ok(response)) => Ok(response),
            RpcResponse::InstallSnapshot(Err(e)) => {
                Err(RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            other => Err(Self::unexpected(other)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        match self
            .call(RPCTypes::Vote, RpcRequest::Vote(rpc), &option)
            .await?
        {
            RpcResponse::Vote(Ok(response)) => Ok(response),
            RpcResponse::Vote(Err(e)) => {
                Err(RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            other => Err(Self::unexpected(other)),
        }
    }
}
