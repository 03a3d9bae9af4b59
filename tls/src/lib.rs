//! `chronik-tls`: TLS for every Chronik port that serves or speaks it —
//! the broker's SSL and SASL_SSL listeners and its inter-broker
//! connections, the ingestor's HTTPS port and its Kafka client's
//! connections — with rustls and the ring provider, from PEM files as
//! Kafka's `ssl.keystore.type=PEM` / `ssl.truststore.type=PEM` name them,
//! reloaded when the files change.
//!
//! Owns: building the rustls server config (key store = private key and
//! certificate chain, trust store = CA certificates, Kafka's
//! `ssl.client.auth` none | requested | required), the bounded server
//! handshake, the client config of outgoing connections and its bounded
//! handshake (`TlsClient`: CA certificates as roots, optionally a client
//! certificate for mTLS listeners; a client without a server key store
//! loads one from its own files, a server's `TlsAcceptor` builds its own
//! from the trust store and the key store), and the reload loop: every
//! `reload_interval` the files' modification times and sizes are compared
//! and on a change both configs are rebuilt; new connections use them, a
//! broken file is logged and the previous configs kept. Must not: know
//! what is spoken over the stream (Kafka frames, HTTP) or map a
//! certificate to a principal (the broker's `security::principal` does).

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::ServerName;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::net::TcpStream;
use tracing::{info, warn};

mod args;
pub use args::{TlsArgs, TLS_HANDSHAKE_TIMEOUT};

pub use rustls::pki_types::CertificateDer as Certificate;
pub use tokio_rustls::server::TlsStream;

/// Reads a whole file of at most `max` bytes; `what` names it (the flag)
/// in errors. Key stores, trust stores and credential files are small:
/// a larger one is refused rather than read.
pub fn read_bounded_file(path: &Path, max: u64, what: &str) -> anyhow::Result<Vec<u8>> {
    let len = std::fs::metadata(path)
        .with_context(|| format!("{what} {}", path.display()))?
        .len();
    if len > max {
        bail!("{what} {} is larger than {max} bytes", path.display());
    }
    std::fs::read(path).with_context(|| format!("reading {what} {}", path.display()))
}

/// Kafka's `ssl.client.auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ClientAuth {
    /// No client certificate is asked for.
    None,
    /// Asked for; a client without one is `User:ANONYMOUS`, one with a
    /// certificate the trust store does not vouch for is refused.
    Requested,
    /// Required: the handshake fails without a trusted certificate.
    Required,
}

/// The TLS settings of a server's TLS ports.
#[derive(Debug, Clone)]
pub struct TlsSettings {
    /// `ssl.keystore.location`: PEM private key and certificate chain.
    pub keystore: PathBuf,
    /// `ssl.truststore.location`: PEM CA certificates client certificates
    /// must chain to.
    pub truststore: Option<PathBuf>,
    pub client_auth: ClientAuth,
    pub reload_interval: Duration,
    pub handshake_timeout: Duration,
}

/// Largest PEM file read (a key store or trust store is a few KiB).
const MAX_PEM_BYTES: u64 = 4 * 1024 * 1024;

/// The current server config (and client config, when there is a trust
/// store), replaced when the files change.
#[derive(Debug)]
pub struct TlsAcceptor {
    settings: TlsSettings,
    current: RwLock<Configs>,
}

#[derive(Debug, Clone)]
struct Configs {
    server: Arc<ServerConfig>,
    /// For outgoing inter-broker connections; None without a trust store.
    client: Option<TlsClient>,
}

/// The client side of TLS: outgoing connections verify the server against
/// CA certificates and, when an identity is given, present a client
/// certificate. Cheap to clone.
#[derive(Debug, Clone)]
pub struct TlsClient {
    config: Arc<ClientConfig>,
    handshake_timeout: Duration,
}

impl TlsClient {
    /// Loads `ca_pem` (the CA certificates servers must chain to) and, for
    /// listeners that require client certificates, `identity`: a PEM
    /// certificate chain and a PEM private key. The handshake of every
    /// connection must finish within `handshake_timeout`.
    pub fn load(
        ca_pem: &Path,
        identity: Option<(&Path, &Path)>,
        handshake_timeout: Duration,
    ) -> anyhow::Result<TlsClient> {
        let roots = trust_roots(ca_pem, "TLS CA file")?;
        let identity = match identity {
            Some((chain, key)) => {
                let chain_what = "TLS client certificate";
                let chain = certificate_chain(
                    &read_bounded_file(chain, MAX_PEM_BYTES, chain_what)?,
                    chain_what,
                )?;
                let key_what = "TLS client key";
                let key = private_key(&read_bounded_file(key, MAX_PEM_BYTES, key_what)?, key_what)?;
                Some((chain, key))
            }
            None => None,
        };
        TlsClient::new(
            Arc::new(rustls::crypto::ring::default_provider()),
            Arc::new(roots),
            identity,
            handshake_timeout,
        )
        .context("TLS client certificate and key")
    }

    /// The one place a client config is built (`load`, and a server's
    /// outgoing connections in `build`).
    fn new(
        provider: Arc<rustls::crypto::CryptoProvider>,
        roots: Arc<RootCertStore>,
        identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
        handshake_timeout: Duration,
    ) -> anyhow::Result<TlsClient> {
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .context("TLS protocol versions")?
            .with_root_certificates(roots);
        let config = match identity {
            Some((chain, key)) => builder
                .with_client_auth_cert(chain, key)
                .context("key does not match the certificate")?,
            None => builder.with_no_client_auth(),
        };
        Ok(TlsClient {
            config: Arc::new(config),
            handshake_timeout,
        })
    }

    /// The client handshake of an outgoing connection to `host` (a DNS
    /// name or an IP literal; the server's certificate must name it),
    /// within the handshake timeout.
    pub async fn connect(
        &self,
        stream: TcpStream,
        host: &str,
    ) -> anyhow::Result<tokio_rustls::client::TlsStream<TcpStream>> {
        let name = ServerName::try_from(host.to_string())
            .with_context(|| format!("{host} is not a valid TLS server name"))?;
        let connector = tokio_rustls::TlsConnector::from(self.config.clone());
        tokio::time::timeout(self.handshake_timeout, connector.connect(name, stream))
            .await
            .context("TLS handshake timed out")?
            .with_context(|| format!("TLS handshake with {host} failed"))
    }
}

/// What identifies a file's version: (modified, length) of each file.
type Stamp = Vec<Option<(SystemTime, u64)>>;

impl TlsAcceptor {
    /// Loads the files; any error is fatal at start.
    pub fn load(settings: TlsSettings) -> anyhow::Result<Arc<TlsAcceptor>> {
        let configs = build(&settings)?;
        Ok(Arc::new(TlsAcceptor {
            settings,
            current: RwLock::new(configs),
        }))
    }

    fn configs(&self) -> Configs {
        match self.current.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Whether outgoing connections can verify their peer (a trust store
    /// is configured).
    pub fn has_client_config(&self) -> bool {
        self.configs().client.is_some()
    }

    /// The client handshake of an outgoing connection to `host` (its
    /// certificate must name it), within the handshake timeout.
    pub async fn connect(
        &self,
        stream: TcpStream,
        host: &str,
    ) -> anyhow::Result<tokio_rustls::client::TlsStream<TcpStream>> {
        let client = self
            .configs()
            .client
            .context("outgoing TLS needs --ssl-truststore-location")?;
        client.connect(stream, host).await
    }

    /// Runs the TLS handshake within the handshake timeout.
    pub async fn accept(&self, stream: TcpStream) -> anyhow::Result<TlsStream<TcpStream>> {
        let acceptor = tokio_rustls::TlsAcceptor::from(self.configs().server);
        tokio::time::timeout(self.settings.handshake_timeout, acceptor.accept(stream))
            .await
            .context("TLS handshake timed out")?
            .context("TLS handshake failed")
    }

    /// Polls the files every `reload_interval` while the acceptor lives.
    pub fn spawn_reloader(self: &Arc<Self>) {
        let weak: Weak<TlsAcceptor> = Arc::downgrade(self);
        let interval = self.settings.reload_interval;
        let mut seen = stamp(&self.settings);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(interval).await;
                let Some(acceptor) = weak.upgrade() else {
                    return;
                };
                let now = stamp(&acceptor.settings);
                if now == seen {
                    continue;
                }
                seen = now;
                let settings = acceptor.settings.clone();
                match tokio::task::spawn_blocking(move || build(&settings)).await {
                    Ok(Ok(configs)) => {
                        match acceptor.current.write() {
                            Ok(mut c) => *c = configs,
                            Err(poisoned) => *poisoned.into_inner() = configs,
                        }
                        info!(keystore = %acceptor.settings.keystore.display(), "TLS key store / trust store reloaded");
                    }
                    Ok(Err(e)) => warn!(
                        error = format!("{e:#}"),
                        "TLS files changed but do not load; keeping the previous ones"
                    ),
                    Err(e) => warn!(error = %e, "TLS reload task failed"),
                }
            }
        });
    }
}

fn stamp(settings: &TlsSettings) -> Stamp {
    std::iter::once(&settings.keystore)
        .chain(settings.truststore.as_ref())
        .map(|path| {
            let meta = std::fs::metadata(path).ok()?;
            Some((meta.modified().ok()?, meta.len()))
        })
        .collect()
}

/// Builds the configs from the files as they are now.
fn build(settings: &TlsSettings) -> anyhow::Result<Configs> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let keystore_what = "--ssl-keystore-location";
    let keystore = read_bounded_file(&settings.keystore, MAX_PEM_BYTES, keystore_what)?;
    let chain = certificate_chain(&keystore, keystore_what)?;
    let key = private_key(&keystore, keystore_what)?;
    let roots = match &settings.truststore {
        Some(path) => Some(Arc::new(trust_roots(path, "--ssl-truststore-location")?)),
        None => None,
    };
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?;
    let builder = match (settings.client_auth, &roots) {
        (ClientAuth::None, _) => builder.with_no_client_auth(),
        (_, None) => {
            bail!("--ssl-client-auth requested/required needs --ssl-truststore-location")
        }
        (auth, Some(roots)) => {
            let verifier =
                WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone());
            let verifier = match auth {
                ClientAuth::Requested => verifier.allow_unauthenticated(),
                _ => verifier,
            };
            builder.with_client_cert_verifier(verifier.build().context("client verifier")?)
        }
    };
    let client = match roots {
        Some(roots) => Some(
            TlsClient::new(
                provider,
                roots,
                Some((chain.clone(), key.clone_key())),
                settings.handshake_timeout,
            )
            .context("--ssl-keystore-location")?,
        ),
        None => None,
    };
    let server = builder
        .with_single_cert(chain, key)
        .context("--ssl-keystore-location: key does not match the certificate")?;
    Ok(Configs {
        server: Arc::new(server),
        client,
    })
}

/// The certificate chain of a PEM file (`what` names it in errors).
fn certificate_chain(pem: &[u8], what: &str) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("{what}: bad certificate: {e}"))?;
    if chain.is_empty() {
        bail!("{what} holds no certificate");
    }
    Ok(chain)
}

/// The private key of a PEM file (`what` names it in errors).
fn private_key(pem: &[u8], what: &str) -> anyhow::Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_slice(pem)
        .map_err(|e| anyhow::anyhow!("{what}: no usable private key: {e}"))
}

/// The CA certificates of a trust store file (`what` names it in errors).
fn trust_roots(path: &Path, what: &str) -> anyhow::Result<RootCertStore> {
    let pem = read_bounded_file(path, MAX_PEM_BYTES, what)?;
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| anyhow::anyhow!("{what}: bad certificate: {e}"))?;
        roots
            .add(cert)
            .with_context(|| format!("{what}: unusable CA certificate"))?;
    }
    if roots.is_empty() {
        bail!("{what} holds no CA certificate");
    }
    Ok(roots)
}

/// The client certificate a finished handshake verified (its leaf), if the
/// client presented one.
pub fn peer_certificate<S>(stream: &TlsStream<S>) -> Option<&Certificate<'static>> {
    stream.get_ref().1.peer_certificates()?.first()
}
