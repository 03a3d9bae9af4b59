//! A minimal async Kafka client over one connection, used by one broker
//! to talk to another (the replica fetcher to a partition leader, the
//! transaction coordinator to send markers, a leader verifying a
//! transaction with its coordinator), always from this broker's
//! registered host (the receiver checks broker-only requests against it)
//! with the inter-broker listener's security protocol (TLS handshake and
//! SASL login from `security::client`, done before the first request):
//! encodes any kafka-protocol request
//! at a given version, reads the framed response and checks its correlation
//! id. Bounded: connect and every round trip have a timeout, and response
//! frames above `MAX_RESPONSE_BYTES` are refused.

use std::net::IpAddr;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    RequestHeader, ResponseHeader, SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::security::client::{BrokerStream, InterBrokerSecurity};

const MAX_RESPONSE_BYTES: usize = 256 * 1024 * 1024;

pub struct LeaderClient {
    stream: Box<dyn BrokerStream>,
    correlation_id: i32,
    client_id: StrBytes,
}

impl LeaderClient {
    /// Connects to `host:port` from `source` (this broker's own address:
    /// the leader accepts replica fetches only from a broker's registered
    /// host), then secures the connection as `security` says: TLS
    /// handshake, SASL login. All of it within `timeout`.
    pub async fn connect(
        (host, port): (&str, u16),
        source: Option<IpAddr>,
        security: &InterBrokerSecurity,
        client_id: String,
        timeout: Duration,
    ) -> Result<LeaderClient> {
        let addr = format!("{host}:{port}");
        tokio::time::timeout(timeout, async {
            let stream = chronik_metadata::connect_from(&addr, source)
                .await
                .with_context(|| format!("connecting to {addr}"))?;
            stream.set_nodelay(true)?;
            let mut client = LeaderClient {
                stream: security.secure(stream, host).await?,
                correlation_id: 0,
                client_id: StrBytes::from_string(client_id),
            };
            if let Some(login) = security.login()? {
                client
                    .authenticate(login)
                    .await
                    .with_context(|| format!("SASL login to {addr}"))?;
            }
            Ok(client)
        })
        .await
        .with_context(|| format!("connecting to {addr} timed out"))?
    }

    /// SaslHandshake v1, then SaslAuthenticate until the exchange is done.
    async fn authenticate(&mut self, login: &chronik_sasl::SaslLogin) -> Result<()> {
        let mechanism = login.mechanism.name();
        let handshake = self
            .round_trip(
                &SaslHandshakeRequest::default()
                    .with_mechanism(StrBytes::from_static_str(mechanism)),
                1,
            )
            .await?;
        ensure!(
            handshake.error_code == 0,
            "SaslHandshake {mechanism}: error {} (enabled: {:?})",
            handshake.error_code,
            handshake.mechanisms
        );
        let (mut exchange, mut message) = login.start()?;
        loop {
            let answer = self
                .round_trip(
                    &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(message)),
                    2,
                )
                .await?;
            ensure!(
                answer.error_code == 0,
                "SaslAuthenticate as {}: error {} ({})",
                login.username,
                answer.error_code,
                answer.error_message.as_deref().unwrap_or("")
            );
            match exchange.step(&answer.auth_bytes)? {
                Some(next) => message = next,
                None => return Ok(()),
            }
        }
    }

    /// Connects to broker `node_id` of the current metadata image (fenced
    /// brokers excluded), from this broker's own registered host.
    pub async fn connect_to_broker(
        manager: &super::ReplicaManager,
        node_id: i32,
        client_id: String,
        timeout: Duration,
    ) -> Result<LeaderClient> {
        let (host, port, own_host) = {
            let image = manager.cluster.image();
            let broker = image
                .brokers
                .get(&node_id)
                .filter(|b| !b.fenced)
                .with_context(|| format!("broker {node_id} is not live"))?;
            (
                broker.host.clone(),
                broker.port,
                image.brokers.get(&manager.node_id).map(|b| b.host.clone()),
            )
        };
        let source = match own_host {
            Some(host) => own_address(&host).await,
            None => None,
        };
        LeaderClient::connect(
            (&host, port),
            source,
            &manager.inter_broker,
            client_id,
            timeout,
        )
        .await
    }

    /// One request/response round trip, within `timeout`.
    pub async fn send<R: Request>(
        &mut self,
        request: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response> {
        tokio::time::timeout(timeout, self.round_trip(request, version))
            .await
            .context("request to the leader timed out")?
    }

    async fn round_trip<R: Request>(&mut self, request: &R, version: i16) -> Result<R::Response> {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation_id)
            .with_client_id(Some(self.client_id.clone()));
        let mut body = BytesMut::with_capacity(256);
        body.extend_from_slice(&[0, 0, 0, 0]);
        header.encode(&mut body, R::header_version(version))?;
        request.encode(&mut body, version)?;
        let len = i32::try_from(body.len() - 4).context("request too large")?;
        body[..4].copy_from_slice(&len.to_be_bytes());
        self.stream.write_all(&body).await?;
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).await?;
        let size = usize::try_from(i32::from_be_bytes(size)).context("negative response size")?;
        if size > MAX_RESPONSE_BYTES {
            bail!("response of {size} bytes exceeds {MAX_RESPONSE_BYTES}");
        }
        let mut buf = vec![0u8; size];
        self.stream.read_exact(&mut buf).await?;
        let mut buf = Bytes::from(buf);
        let header = ResponseHeader::decode(
            &mut buf,
            <R::Response as HeaderVersion>::header_version(version),
        )?;
        ensure!(
            header.correlation_id == self.correlation_id,
            "correlation id mismatch"
        );
        R::Response::decode(&mut buf, version)
    }
}

/// This broker's registered host as an address to connect from.
async fn own_address(host: &str) -> Option<IpAddr> {
    if let Ok(ip) = host.parse() {
        return Some(ip);
    }
    tokio::net::lookup_host((host, 0))
        .await
        .ok()?
        .map(|a| a.ip())
        .next()
}
