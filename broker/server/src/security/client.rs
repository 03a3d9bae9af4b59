//! This broker's side of its own connections to other brokers (replica
//! fetchers, transaction markers and verification): the inter-broker
//! listener's security protocol applied to an outgoing TCP stream — TLS
//! with the trust store and the key store as client certificate (`tls`),
//! and the SASL login (`chronik_sasl::SaslLogin`) the leader client runs
//! over it.
//!
//! Owns: choosing what an outgoing connection needs. Must not: read or
//! write Kafka frames (the leader client does), or log the password.

use std::sync::Arc;

use anyhow::{Context, Result};
use chronik_sasl::SaslLogin;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::listeners::SecurityProtocol;
use super::TlsAcceptor;

/// A byte stream to another broker, plain or TLS.
pub trait BrokerStream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> BrokerStream for T {}

/// How this broker connects to the others.
#[derive(Debug)]
pub struct InterBrokerSecurity {
    pub protocol: SecurityProtocol,
    /// Set when the protocol uses TLS (shares the listeners' reloaded files).
    tls: Option<Arc<TlsAcceptor>>,
    /// Set when the protocol uses SASL and the JAAS file gives a login.
    login: Option<SaslLogin>,
}

impl InterBrokerSecurity {
    pub fn new(
        protocol: SecurityProtocol,
        tls: Option<Arc<TlsAcceptor>>,
        login: Option<SaslLogin>,
    ) -> InterBrokerSecurity {
        InterBrokerSecurity {
            protocol,
            tls,
            login,
        }
    }

    /// PLAINTEXT (a broker without listeners security, and tests).
    pub fn plaintext() -> InterBrokerSecurity {
        InterBrokerSecurity::new(SecurityProtocol::Plaintext, None, None)
    }

    /// Runs the TLS handshake with `host` if the protocol uses TLS.
    pub async fn secure(&self, stream: TcpStream, host: &str) -> Result<Box<dyn BrokerStream>> {
        if !self.protocol.uses_tls() {
            return Ok(Box::new(stream));
        }
        let tls = self
            .tls
            .as_ref()
            .context("the inter-broker listener uses TLS but no key store is loaded")?;
        Ok(Box::new(tls.connect(stream, host).await?))
    }

    /// The SASL login to run after `secure`, if the protocol uses SASL.
    pub fn login(&self) -> Result<Option<&SaslLogin>> {
        if !self.protocol.uses_sasl() {
            return Ok(None);
        }
        self.login.as_ref().map(Some).context(
            "the inter-broker listener uses SASL but --sasl-jaas-config-file gives no username=\"…\" password=\"…\"",
        )
    }
}
