//! One connection to one broker, for the share-group client: framing,
//! correlation ids, a size cap on every frame read and a timeout on every
//! call.
//!
//! Owns: `Conn::connect` (bounded by `CONNECT_TIMEOUT`) and `Conn::call`
//! (encode header + body at the caller's version, write, read one frame,
//! check its correlation id, decode). A failed call leaves the connection
//! unusable: callers drop it and connect again. Must not: retry, interpret
//! error codes or know which broker leads what (`metadata`).

use std::time::Duration;

use anyhow::{bail, Context as _};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The largest response frame read (a ShareFetch answer is bounded by the
/// request's `max_bytes`, 8 MiB here, plus one batch that may exceed it).
pub const MAX_FRAME: usize = 64 * 1024 * 1024;
/// How long a TCP connect may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection to one broker.
#[derive(Debug)]
pub struct Conn {
    stream: TcpStream,
    addr: String,
    client_id: StrBytes,
    correlation: i32,
}

impl Conn {
    /// Connects to `addr` (host:port) within `CONNECT_TIMEOUT`.
    pub async fn connect(addr: &str, client_id: &str) -> anyhow::Result<Conn> {
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
            .await
            .with_context(|| format!("connecting to {addr}: timed out"))?
            .with_context(|| format!("connecting to {addr}"))?;
        let _ = stream.set_nodelay(true);
        Ok(Conn {
            stream,
            addr: addr.to_string(),
            client_id: StrBytes::from_string(client_id.to_string()),
            correlation: 0,
        })
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Sends `request` at `version` and reads its response, all within
    /// `timeout`.
    pub async fn call<R: Request>(
        &mut self,
        request: &R,
        version: i16,
        timeout: Duration,
    ) -> anyhow::Result<R::Response> {
        let addr = self.addr.clone();
        tokio::time::timeout(timeout, self.exchange(request, version))
            .await
            .with_context(|| {
                format!(
                    "api {} v{version} to {addr}: no answer within {timeout:?}",
                    R::KEY
                )
            })?
            .with_context(|| format!("api {} v{version} to {addr}", R::KEY))
    }

    async fn exchange<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> anyhow::Result<R::Response> {
        self.correlation = self.correlation.wrapping_add(1);
        let correlation = self.correlation;
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation)
            .with_client_id(Some(self.client_id.clone()));
        let mut body = BytesMut::new();
        header.encode(&mut body, R::header_version(version))?;
        request.encode(&mut body, version)?;
        let mut frame = BytesMut::with_capacity(body.len() + 4);
        frame.put_i32(i32::try_from(body.len()).context("request too large")?);
        frame.extend_from_slice(&body);
        self.stream.write_all(&frame).await?;
        let mut buf = read_frame(&mut self.stream).await?;
        let response_header =
            ResponseHeader::decode(&mut buf, R::Response::header_version(version))?;
        if response_header.correlation_id != correlation {
            bail!(
                "correlation id {} answered where {correlation} was asked",
                response_header.correlation_id
            );
        }
        let response = R::Response::decode(&mut buf, version)?;
        Ok(response)
    }
}

/// Reads one length-prefixed frame of at most `MAX_FRAME` bytes.
async fn read_frame(stream: &mut TcpStream) -> anyhow::Result<Bytes> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).await?;
    let len = (&len[..]).get_i32();
    let Ok(len) = usize::try_from(len) else {
        bail!("negative frame length {len}");
    };
    if len == 0 || len > MAX_FRAME {
        bail!("frame of {len} bytes (allowed 1..={MAX_FRAME})");
    }
    let mut buf = vec![0u8; len];
    stream.read_exact(&mut buf).await?;
    Ok(Bytes::from(buf))
}
