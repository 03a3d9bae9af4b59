//! One connection of the native producer to one broker.
//!
//! Owns: connecting (the broker's host name resolved again on every
//! attempt, never an address kept from an earlier lookup: a broker pod that
//! comes back on a new IP is found on the next attempt; TCP, then TLS and the
//! SASL login when `security.protocol` asks for them, and ApiVersions, all
//! within `socket.connection.setup.timeout.ms`, so a dial to an address
//! that no longer answers is given up in seconds), ApiVersions
//! and choosing each API's version, and one request at a time: a frame out,
//! its answer back within the request timeout, checked against its
//! correlation id and bounded in size. One request at a time is the point:
//! a broker serves a connection's requests in order anyway, and a producer
//! that keeps one Produce in flight per broker keeps every partition's
//! batches in order without tracking several outstanding ones.
//! Must not: know about partitions, batches or HTTP; retry (callers decide).

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{anyhow, bail, ensure, Context, Result};
use bytes::{Buf, BufMut, BytesMut};
use kafka_protocol::messages::{
    ApiVersionsRequest, RequestHeader, ResponseHeader, SaslAuthenticateRequest,
    SaslHandshakeRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::settings::{Security, Settings};

/// Largest response frame accepted (a Metadata answer for a large cluster
/// is a few MiB; a Produce answer a few KiB).
const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// A connection that has said ApiVersions (and logged in, if asked to).
pub struct Conn {
    stream: Box<dyn Stream>,
    /// The broker's (min, max) version of each API key.
    versions: HashMap<i16, (i16, i16)>,
    next_correlation: i32,
    client_id: StrBytes,
    request_timeout: Duration,
    pub addr: String,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Conn {
    /// Connects to `host:port`, runs TLS and SASL as configured, and asks
    /// the broker's API versions, all of it within the connection-setup
    /// timeout (Kafka's and librdkafka's `socket.connection.setup.timeout.ms`:
    /// TCP, TLS and SASL). `host` is looked up afresh (getaddrinfo, every
    /// address it returns tried in turn) on each call.
    pub async fn open(settings: &Settings, host: &str, port: u16) -> Result<Conn> {
        tokio::time::timeout(settings.connect_timeout, Self::setup(settings, host, port))
            .await
            .map_err(|_| {
                anyhow!(
                    "connecting to {host}:{port}: not set up within {:?} \
                     (socket.connection.setup.timeout.ms)",
                    settings.connect_timeout
                )
            })?
    }

    async fn setup(settings: &Settings, host: &str, port: u16) -> Result<Conn> {
        let addr = format!("{host}:{port}");
        // (host, port), not a SocketAddr: tokio resolves the name on this call
        let tcp = TcpStream::connect((host, port))
            .await
            .with_context(|| format!("connecting to {addr}"))?;
        tcp.set_nodelay(true)?;
        let stream: Box<dyn Stream> = match &settings.security.tls {
            Some(tls) => Box::new(tls.connect(tcp, host).await?),
            None => Box::new(tcp),
        };
        let mut conn = Conn {
            stream,
            versions: HashMap::new(),
            next_correlation: 0,
            client_id: StrBytes::from_string(settings.client_id.clone()),
            request_timeout: settings.request_timeout,
            addr,
        };
        conn.api_versions().await?;
        conn.login(&settings.security).await?;
        Ok(conn)
    }

    async fn api_versions(&mut self) -> Result<()> {
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("chronik-ingestor"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let answer = self.call_at(request, 3).await?;
        ensure!(
            answer.error_code == 0,
            "ApiVersions: error {} from {}",
            answer.error_code,
            self.addr
        );
        self.versions = answer
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect();
        Ok(())
    }

    async fn login(&mut self, security: &Security) -> Result<()> {
        let Some(login) = &security.sasl else {
            return Ok(());
        };
        let mechanism = login.mechanism.name();
        let answer = self
            .call(
                SaslHandshakeRequest::default()
                    .with_mechanism(StrBytes::from_static_str(mechanism)),
            )
            .await?;
        if answer.error_code != 0 {
            let offered: Vec<&str> = answer.mechanisms.iter().map(|m| m.as_str()).collect();
            bail!(
                "SASL handshake with {}: mechanism {mechanism} refused (error {}; the broker offers {offered:?})",
                self.addr,
                answer.error_code
            );
        }
        let (mut client, mut message) = login.start()?;
        loop {
            let answer = self
                .call(SaslAuthenticateRequest::default().with_auth_bytes(message.into()))
                .await?;
            if answer.error_code != 0 {
                bail!(
                    "SASL authentication with {} failed (error {}): {}",
                    self.addr,
                    answer.error_code,
                    answer.error_message.as_deref().unwrap_or("")
                );
            }
            match client.step(&answer.auth_bytes)? {
                Some(next) => message = next,
                None => return Ok(()),
            }
        }
    }

    /// The version to speak of `R`: the highest both sides know, at most `max`.
    pub fn version<R: Request>(&self, max: i16) -> Result<i16> {
        let (broker_min, broker_max) = self
            .versions
            .get(&R::KEY)
            .copied()
            .with_context(|| format!("{} does not offer API key {}", self.addr, R::KEY))?;
        let ours = R::VERSIONS;
        let version = broker_max.min(max).min(ours.max);
        ensure!(
            version >= broker_min.max(ours.min),
            "{}: no common version of API key {} (broker {broker_min}..={broker_max}, ours {}..={max})",
            self.addr,
            R::KEY,
            ours.min
        );
        Ok(version)
    }

    /// Sends `request` at the highest common version up to `max` and waits for its answer.
    pub async fn call_max<R: Request>(&mut self, request: R, max: i16) -> Result<R::Response> {
        let version = self.version::<R>(max)?;
        self.call_at(request, version).await
    }

    async fn call<R: Request>(&mut self, request: R) -> Result<R::Response> {
        self.call_max(request, i16::MAX).await
    }

    /// Sends `request` without waiting for an answer (Produce with acks=0).
    pub async fn send_only<R: Request>(&mut self, request: R, version: i16) -> Result<()> {
        let frame = self.frame(&request, version)?;
        tokio::time::timeout(self.request_timeout, self.stream.write_all(&frame))
            .await
            .map_err(|_| anyhow!("{}: write timed out", self.addr))??;
        Ok(())
    }

    fn frame<R: Request>(&mut self, request: &R, version: i16) -> Result<BytesMut> {
        self.next_correlation = self.next_correlation.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.next_correlation)
            .with_client_id(Some(self.client_id.clone()));
        let mut frame = BytesMut::with_capacity(64);
        frame.put_i32(0);
        header.encode(&mut frame, R::header_version(version))?;
        request.encode(&mut frame, version)?;
        let len = i32::try_from(frame.len() - 4)?;
        frame[..4].copy_from_slice(&len.to_be_bytes());
        Ok(frame)
    }

    /// Sends `request` at `version` and reads its answer.
    pub async fn call_at<R: Request>(&mut self, request: R, version: i16) -> Result<R::Response> {
        let frame = self.frame(&request, version)?;
        let correlation = self.next_correlation;
        let addr = self.addr.clone();
        let exchange = async {
            self.stream.write_all(&frame).await?;
            let len = self.stream.read_i32().await?;
            let len = usize::try_from(len).map_err(|_| anyhow!("negative frame length {len}"))?;
            ensure!(
                len <= MAX_RESPONSE_BYTES,
                "a {len}-byte answer exceeds {MAX_RESPONSE_BYTES}"
            );
            let mut body = BytesMut::zeroed(len);
            self.stream.read_exact(&mut body).await?;
            Ok::<_, anyhow::Error>(body)
        };
        let mut body = tokio::time::timeout(self.request_timeout, exchange)
            .await
            .map_err(|_| {
                anyhow!(
                    "{addr}: no answer to API key {} within {:?}",
                    R::KEY,
                    self.request_timeout
                )
            })?
            .with_context(|| format!("{addr}: API key {}", R::KEY))?;
        let header = ResponseHeader::decode(&mut body, R::Response::header_version(version))?;
        ensure!(
            header.correlation_id == correlation,
            "{addr}: answer for correlation id {} while waiting for {correlation}",
            header.correlation_id
        );
        let response = R::Response::decode(&mut body, version).with_context(|| {
            format!(
                "{addr}: decoding the answer to API key {} v{version}",
                R::KEY
            )
        })?;
        if body.has_remaining() {
            tracing::debug!(
                addr,
                api_key = R::KEY,
                left = body.remaining(),
                "answer longer than its schema"
            );
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    /// A listener that accepts (the kernel's backlog does) and never
    /// answers, as an address that leads nowhere answers nothing: the
    /// attempt ends at `socket.connection.setup.timeout.ms`, not at the
    /// request timeout (30 s) of the ApiVersions inside it; and the broker
    /// is named, not given as an address (resolved on this call).
    #[test]
    fn setup_is_bounded_by_the_connection_setup_timeout() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let mut c = Config::for_bootstrap("127.0.0.1:9092");
        c.producer_overrides
            .0
            .push(("socket.connection.setup.timeout.ms".into(), "300".into()));
        let settings = Settings::from_config(&c).expect("valid");
        assert!(settings.request_timeout >= Duration::from_secs(10));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let started = std::time::Instant::now();
        let e = rt
            .block_on(Conn::open(&settings, "localhost", port))
            .expect_err("nothing answers");
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(300) && took < Duration::from_secs(3),
            "{took:?}"
        );
        assert!(
            format!("{e:#}").contains("socket.connection.setup.timeout.ms"),
            "{e:#}"
        );
        drop(listener);
    }
}
