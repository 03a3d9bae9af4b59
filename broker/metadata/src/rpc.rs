//! The raft RPC wire format: one request frame, one response frame, each a
//! `u32` big-endian length followed by that many bytes of JSON.
//!
//! Owns: `RpcRequest` / `RpcResponse` and reading/writing frames with a
//! size bound. Must not: act on messages (`rpc_server` and `network` do).
//! A frame over `MAX_FRAME_LEN` or that is not valid JSON of the expected
//! type is an error for the connection, never a panic.

use std::io;

use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::raft_types::{NodeId, TypeConfig};
use crate::request::{ControllerReply, ControllerRequest};

/// Largest frame either side accepts (a whole snapshot chunk fits easily).
pub const MAX_FRAME_LEN: usize = 64 << 20;

#[derive(Debug, Serialize, Deserialize)]
#[allow(clippy::large_enum_variant)]
pub enum RpcRequest {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    /// A request for the controller from a node that is not it (the
    /// broker heartbeat travels this way too).
    Controller(ControllerRequest),
}

#[derive(Debug, Serialize, Deserialize)]
pub enum RpcResponse {
    AppendEntries(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    InstallSnapshot(
        Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>,
    ),
    Controller(ControllerReply),
    /// The request could not be decoded or served at all.
    Error(String),
}

/// Writes one frame.
pub async fn write_frame<W, T>(writer: &mut W, message: &T) -> io::Result<()>
where
    W: AsyncWrite + Unpin,
    T: Serialize,
{
    let body = serde_json::to_vec(message)?;
    if body.len() > MAX_FRAME_LEN {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("frame of {} bytes exceeds {MAX_FRAME_LEN}", body.len()),
        ));
    }
    let len = u32::try_from(body.len()).map_err(io::Error::other)?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&body);
    writer.write_all(&frame).await?;
    writer.flush().await
}

/// Reads one frame's bytes; `Ok(None)` on a clean end of stream before a
/// frame starts.
pub async fn read_frame_bytes<R>(reader: &mut R) -> io::Result<Option<Vec<u8>>>
where
    R: AsyncRead + Unpin,
{
    let mut len = [0u8; 4];
    match reader.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    read_frame_body(reader, len).await.map(Some)
}

/// Reads the body a length prefix `len` announced, after checking it.
pub async fn read_frame_body<R>(reader: &mut R, len: [u8; 4]) -> io::Result<Vec<u8>>
where
    R: AsyncRead + Unpin,
{
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME_LEN {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame of {len} bytes exceeds {MAX_FRAME_LEN}"),
        ));
    }
    // Grown as bytes arrive, not allocated from the prefix alone.
    let mut body = Vec::with_capacity(len.min(64 * 1024));
    reader.take(len as u64).read_to_end(&mut body).await?;
    if body.len() != len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "frame truncated",
        ));
    }
    Ok(body)
}

/// Decodes a frame's JSON body.
pub fn decode<T: DeserializeOwned>(body: &[u8]) -> io::Result<T> {
    serde_json::from_slice(body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Heartbeat;

    #[tokio::test]
    async fn frames_round_trip_and_garbage_is_an_error() {
        let request = RpcRequest::Controller(ControllerRequest::Heartbeat(Heartbeat {
            node_id: 2,
            host: "127.0.0.2".into(),
            port: 9092,
            listeners: Default::default(),
            log_dir_offline: false,
            rack: None,
        }));
        let mut buf = Vec::new();
        write_frame(&mut buf, &request).await.expect("write");
        let body = read_frame_bytes(&mut buf.as_slice())
            .await
            .expect("read")
            .expect("frame");
        match decode::<RpcRequest>(&body).expect("decode") {
            RpcRequest::Controller(ControllerRequest::Heartbeat(hb)) => assert_eq!(hb.node_id, 2),
            other => panic!("{other:?}"),
        }

        let oversized = (MAX_FRAME_LEN as u32 + 1).to_be_bytes();
        let err = read_frame_bytes(&mut oversized.as_slice())
            .await
            .expect_err("too big");
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);

        let truncated = [0u8, 0, 0, 10, b'{'];
        assert!(read_frame_bytes(&mut truncated.as_slice()).await.is_err());
        assert!(read_frame_bytes(&mut [].as_slice())
            .await
            .expect("eof")
            .is_none());
        assert!(decode::<RpcRequest>(b"{\"Nope\":1}").is_err());
        assert!(decode::<RpcRequest>(b"\xff\xfe").is_err());
    }
}
