//! The client side of the raft RPC transport: openraft's
//! `RaftNetworkFactory` / `RaftNetwork`, and one-shot calls to the
//! controller.
//!
//! Owns: outgoing connections. Each openraft peer connection keeps one
//! TCP stream and reconnects after any error; controller calls (forwarded
//! requests, heartbeats) connect per call, so "could not connect" reliably
//! means "not sent" and may be retried elsewhere. Every connection first
//! speaks the raft port's protocol (`transport`: TLS on SSL) and then
//! authenticates (`peer_auth::client_handshake`); a refusal of either counts as
//! "could not connect", and is logged with the target and what the peer
//! said, at most once per target every `REFUSAL_LOG_INTERVAL`. Every call is bounded by
//! a timeout (openraft's `RPCOption` TTL for raft RPCs). Acknowledged
//! AppendEntries are reported to the `quorum::ReplicationClock`. Must not:
//! serve anything (`rpc_server` does).

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Timeout, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::RPCTypes;

use crate::raft_types::QuorumNode;
use tokio::net::TcpStream;
use tokio::time::{timeout_at, Instant};

use crate::transport::{ControllerSecurity, RaftStream};

use crate::peer_auth::{
    client_handshake, ClusterSecret, HandshakeError, RefusalLog, REFUSAL_LOG_INTERVAL,
};
use crate::quorum::ReplicationClock;
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

/// What this node proves on every raft connection it opens.
#[derive(Clone, Debug)]
pub struct Credentials {
    pub node_id: i32,
    pub secret: ClusterSecret,
    /// This node's own address to connect from, when its peers host is an
    /// IP literal (on one host, 127.0.0.2's connections then come from
    /// 127.0.0.2, not from whatever loopback address the kernel picks).
    pub source: Option<std::net::IpAddr>,
    /// What the raft ports of this cluster speak (TLS or cleartext).
    pub security: ControllerSecurity,
}

/// Why a raft connection could not be opened.
#[derive(Debug)]
pub enum OpenError {
    /// No TCP connection (nothing listening, unreachable).
    Connect(io::Error),
    /// Connected, but the TLS or cluster-secret handshake failed.
    Handshake(HandshakeError),
}

impl Credentials {
    /// Opens an authenticated connection to the raft port at `addr`: TCP
    /// (from `source`), the transport's handshake (TLS on SSL), then the
    /// cluster-secret handshake. Unbounded: callers set the deadline.
    pub async fn open(&self, addr: &str) -> Result<Box<dyn RaftStream>, OpenError> {
        let stream = connect_from(addr, self.source)
            .await
            .map_err(OpenError::Connect)?;
        // Small request/response frames: don't wait for Nagle.
        let _ = stream.set_nodelay(true);
        let mut stream = crate::transport::connect(&self.security, stream, addr)
            .await
            .map_err(OpenError::Handshake)?;
        client_handshake(&mut stream, &self.secret, self.node_id)
            .await
            .map_err(OpenError::Handshake)?;
        Ok(stream)
    }
}

/// One request/response connection to a peer's RPC listener.
struct Channel {
    addr: String,
    credentials: Credentials,
    stream: Option<Box<dyn RaftStream>>,
}

impl Channel {
    fn new(addr: String, credentials: Credentials) -> Self {
        Channel {
            addr,
            credentials,
            stream: None,
        }
    }

    async fn call(
        &mut self,
        request: &RpcRequest,
        timeout: Duration,
    ) -> Result<RpcResponse, CallError> {
        let deadline = Instant::now() + timeout;
        let mut stream = match self.stream.take() {
            Some(stream) => stream,
            None => match timeout_at(deadline, self.credentials.open(&self.addr)).await {
                Err(_) => return Err(CallError::Timeout { sent: false }),
                Ok(Err(OpenError::Connect(e))) => return Err(CallError::Connect(e)),
                Ok(Err(OpenError::Handshake(e))) => {
                    return Err(CallError::Connect(self.handshake_failed(&e)));
                }
                Ok(Ok(stream)) => stream,
            },
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

    /// Logs a failed handshake with this channel's peer (bounded, see
    /// `HANDSHAKE_REFUSALS`) and turns it into the error callers (and
    /// openraft's own log lines) see.
    fn handshake_failed(&self, error: &HandshakeError) -> io::Error {
        let outcome = if error.is_refusal() {
            "refused"
        } else {
            "failed"
        };
        let key = (self.credentials.node_id, self.addr.clone());
        if error.is_routine() {
            tracing::debug!(target_addr = %self.addr, "raft handshake with {} {outcome}: {error}", self.addr);
        } else if let Some(suppressed) = HANDSHAKE_REFUSALS.admit(key, std::time::Instant::now()) {
            tracing::warn!(target_addr = %self.addr, suppressed, "raft handshake with {} {outcome}: {error}", self.addr);
        }
        io::Error::new(
            error.kind(),
            format!("raft handshake with {} {outcome}: {error}", self.addr),
        )
    }
}

/// Failed handshakes this process logged, by (own node id, target). One
/// for the process, not per channel: heartbeats and forwarded requests
/// open a channel per call, and a per-channel bound would bound nothing.
static HANDSHAKE_REFUSALS: LazyLock<RefusalLog<(i32, String)>> =
    LazyLock::new(|| RefusalLog::new(REFUSAL_LOG_INTERVAL));

/// A TCP connection to `addr`, bound to `source` when given (the broker's
/// replica fetchers use it too: a broker's connections come from its own address).
pub async fn connect_from(addr: &str, source: Option<std::net::IpAddr>) -> io::Result<TcpStream> {
    let Some(source) = source else {
        return TcpStream::connect(addr).await;
    };
    let mut last = None;
    for target in tokio::net::lookup_host(addr).await? {
        let socket = if target.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        if source.is_ipv4() == target.is_ipv4() {
            socket.bind(std::net::SocketAddr::new(source, 0))?;
        }
        match socket.connect(target).await {
            Ok(stream) => return Ok(stream),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("{addr} resolves to nothing"),
        )
    }))
}

/// One call to `addr` on a fresh connection.
pub async fn call_once(
    addr: &str,
    credentials: &Credentials,
    request: &RpcRequest,
    timeout: Duration,
) -> Result<RpcResponse, CallError> {
    Channel::new(addr.to_string(), credentials.clone())
        .call(request, timeout)
        .await
}

/// openraft's connection factory: one `PeerConnection` per target.
pub struct NetworkFactory {
    /// This node's raft id (named in timeout errors).
    pub own_id: NodeId,
    /// Raft addresses from this node's configuration; they win over the
    /// address recorded in the membership at bootstrap, so a changed host
    /// takes effect on restart.
    pub peers: BTreeMap<NodeId, String>,
    pub credentials: Credentials,
    /// Where acknowledged AppendEntries are recorded (DescribeQuorum).
    pub clock: Arc<ReplicationClock>,
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = PeerConnection;

    async fn new_client(&mut self, target: NodeId, node: &QuorumNode) -> PeerConnection {
        PeerConnection {
            own_id: self.own_id,
            target,
            channel: Channel::new(
                self.peers.get(&target).unwrap_or(&node.addr).clone(),
                self.credentials.clone(),
            ),
            clock: self.clock.clone(),
        }
    }
}

pub struct PeerConnection {
    own_id: NodeId,
    target: NodeId,
    channel: Channel,
    clock: Arc<ReplicationClock>,
}

impl PeerConnection {
    async fn call<E: std::error::Error>(
        &mut self,
        action: RPCTypes,
        request: RpcRequest,
        option: &RPCOption,
    ) -> Result<RpcResponse, RPCError<NodeId, QuorumNode, E>> {
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

    fn unexpected<E: std::error::Error>(response: RpcResponse) -> RPCError<NodeId, QuorumNode, E> {
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
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, QuorumNode, RaftError<NodeId>>>
    {
        let term = rpc.vote.leader_id().get_term();
        let through = rpc
            .entries
            .last()
            .map(|e| e.log_id.index)
            .or(rpc.prev_log_id.map(|l| l.index));
        match self
            .call(
                RPCTypes::AppendEntries,
                RpcRequest::AppendEntries(rpc),
                &option,
            )
            .await?
        {
            RpcResponse::AppendEntries(Ok(response)) => {
                let matched = match &response {
                    AppendEntriesResponse::Success => Some(through),
                    AppendEntriesResponse::PartialSuccess(m) => Some(m.map(|l| l.index)),
                    AppendEntriesResponse::Conflict | AppendEntriesResponse::HigherVote(_) => None,
                };
                if let Some(matched) = matched {
                    self.clock.acknowledged(term, self.target, matched);
                }
                Ok(response)
            }
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
        RPCError<NodeId, QuorumNode, RaftError<NodeId, InstallSnapshotError>>,
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
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, QuorumNode, RaftError<NodeId>>> {
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
