//! The TLS flags every Chronik server takes, with Kafka's names
//! (`ssl.keystore.location`, `ssl.truststore.location`, `ssl.client.auth`),
//! flattened into the broker's and the ingestor's command lines so both
//! read and check them the same way.
//!
//! Owns: the flags and turning them into `TlsSettings`. Must not: read
//! the files (`TlsAcceptor::load` does).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;

use crate::{ClientAuth, TlsSettings};

/// How long a TLS handshake may take before the connection is dropped.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, clap::Args)]
pub struct TlsArgs {
    /// Kafka's `ssl.keystore.location` with `ssl.keystore.type=PEM`: one
    /// PEM file with the private key and the certificate chain.
    #[arg(long, env = "CHRONIK_SSL_KEYSTORE_LOCATION")]
    pub ssl_keystore_location: Option<PathBuf>,
    /// Kafka's `ssl.truststore.location` with `ssl.truststore.type=PEM`:
    /// the CA certificates client certificates (and the broker's peers'
    /// certificates on a TLS inter-broker listener) must chain to.
    #[arg(long, env = "CHRONIK_SSL_TRUSTSTORE_LOCATION")]
    pub ssl_truststore_location: Option<PathBuf>,
    /// Kafka's `ssl.client.auth`: none | requested | required.
    #[arg(
        long,
        env = "CHRONIK_SSL_CLIENT_AUTH",
        value_enum,
        default_value = "none"
    )]
    pub ssl_client_auth: ClientAuth,
    /// How often the key store and trust store files are checked for
    /// changes (no Kafka equivalent: Kafka reloads them through a dynamic
    /// config update); new connections use the new files.
    #[arg(long, env = "CHRONIK_SSL_RELOAD_INTERVAL_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(100..=3_600_000))]
    pub ssl_reload_interval_ms: u64,
}

impl TlsArgs {
    /// The settings when a key store is given; `required` says a TLS port
    /// is configured (an error without a key store).
    pub fn settings(&self, required: bool) -> anyhow::Result<Option<TlsSettings>> {
        if self.ssl_client_auth != ClientAuth::None && self.ssl_truststore_location.is_none() {
            bail!("--ssl-client-auth requested/required needs --ssl-truststore-location");
        }
        match &self.ssl_keystore_location {
            Some(keystore) => Ok(Some(TlsSettings {
                keystore: keystore.clone(),
                truststore: self.ssl_truststore_location.clone(),
                client_auth: self.ssl_client_auth,
                reload_interval: Duration::from_millis(self.ssl_reload_interval_ms),
                handshake_timeout: TLS_HANDSHAKE_TIMEOUT,
            })),
            None if required => bail!("a TLS port needs --ssl-keystore-location"),
            None => Ok(None),
        }
    }
}
