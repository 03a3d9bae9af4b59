//! Who may talk to the broker: Kafka's listeners with their security
//! protocols, TLS (rustls), SASL (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER
//! with JWT validation against a JWKS file) with KIP-368
//! re-authentication, and the principal every request carries.
//!
//! Layout:
//! - `args`      — the clap flags (Kafka's names) and the plain `SecurityConfig`.
//! - `listeners` — `listeners`, `advertised.listeners`, the protocol map.
//! - TLS itself (PEM key/trust stores, `ssl.client.auth`, handshakes,
//!   reload) is the `chronik-tls` crate, shared with the ingestor.
//! - `principal` — `KafkaPrincipal`, a certificate's subject DN (RFC 2253).
//! - `sasl/`     — the per-connection SASL state machine and mechanisms
//!   (OAUTHBEARER's JWKS file is reloaded like the TLS files); the client
//!   side of PLAIN and SCRAM is the `chronik-sasl` crate.
//! - `client`    — the inter-broker protocol on this broker's outgoing
//!   connections to other brokers.
//! - `controller_listener` — what the raft port speaks beneath the
//!   cluster-secret handshake (PLAINTEXT or mutual TLS).
//! - `authorizer` — the ACL authorizer's flags and `Authorizer::allows`
//!   (which ACL each API needs is `requests::authorize`'s).
//! - `request_context` — who sent a request (peer, listener, principal).
//!
//! Owns: turning the configuration into what connections need
//! (`Security`, `ListenerContext`, `InterBrokerSecurity`), and answering
//! whether a principal holds an ACL. Must not: decide which ACL a request
//! needs (`requests::authorize`), or read frames beyond the SASL gate.

pub mod args;
pub mod authorizer;
pub mod client;
pub mod controller_listener;
pub mod listeners;
pub mod principal;
pub mod request_context;
pub mod sasl;

use std::sync::Arc;

use anyhow::Context;
use tracing::{info, warn};

pub use args::SecurityConfig;
pub use chronik_tls::{read_bounded_file, ClientAuth, TlsAcceptor, TlsSettings};
pub use listeners::{ListenerConfig, SecurityProtocol};
pub use principal::KafkaPrincipal;
use sasl::scram::ScramCredentials;
use sasl::SaslConfig;

/// Largest credentials file (JAAS, SCRAM bootstrap) read.
const MAX_CREDENTIALS_FILE: u64 = 1024 * 1024;

/// What one listener's connections need to know.
#[derive(Debug, Clone)]
pub struct ListenerContext {
    pub name: Arc<str>,
    pub protocol: SecurityProtocol,
    /// Set on SSL and SASL_SSL listeners.
    pub tls: Option<Arc<TlsAcceptor>>,
    /// Set on SASL_PLAINTEXT and SASL_SSL listeners.
    pub sasl: Option<Arc<SaslConfig>>,
}

/// The loaded security state every listener shares.
#[derive(Debug)]
pub struct Security {
    pub tls: Option<Arc<TlsAcceptor>>,
    pub sasl: Arc<SaslConfig>,
    /// What this broker's connections to other brokers use.
    pub inter_broker: Arc<client::InterBrokerSecurity>,
    /// The raft port's shared secret (also the key of unknown SCRAM users' salts).
    pub cluster_secret: chronik_metadata::ClusterSecret,
}

impl Security {
    /// Loads key stores and credential files; errors are fatal at start.
    /// Must run inside the runtime (the TLS reload loop is spawned).
    /// `secret` (the cluster secret) keys the salts made up for unknown
    /// SCRAM users, so every node and every restart gives the same one.
    pub fn load(
        config: &SecurityConfig,
        secret: &chronik_metadata::ClusterSecret,
    ) -> anyhow::Result<Security> {
        let tls = match &config.tls {
            Some(settings) => {
                let acceptor = TlsAcceptor::load(settings.clone())?;
                acceptor.spawn_reloader();
                Some(acceptor)
            }
            None => None,
        };
        let (plain_users, own_login) = match &config.sasl.jaas_config_file {
            Some(path) => {
                let bytes =
                    read_bounded_file(path, MAX_CREDENTIALS_FILE, "--sasl-jaas-config-file")?;
                let text = String::from_utf8(bytes).with_context(|| {
                    format!("--sasl-jaas-config-file {} is not UTF-8", path.display())
                })?;
                let users = sasl::plain::PlainUsers::from_jaas(&text)
                    .with_context(|| format!("--sasl-jaas-config-file {}", path.display()))?;
                (users, sasl::plain::jaas_login(&text))
            }
            None => (sasl::plain::PlainUsers::default(), None),
        };
        let inter_protocol = config.inter_broker().protocol;
        let login = match config.sasl.inter_broker_mechanism {
            Some(mechanism) => match own_login {
                Some((username, password)) => {
                    let mechanism = mechanism.client().with_context(|| {
                        format!("{} cannot be the inter-broker mechanism", mechanism.name())
                    })?;
                    info!(mechanism = mechanism.name(), username = %username, "inter-broker SASL login");
                    Some(chronik_sasl::SaslLogin::new(mechanism, username, password))
                }
                None if config.several_voters => anyhow::bail!(
                    "the inter-broker listener is {inter_protocol}: --sasl-jaas-config-file must give this broker's username=\"…\" password=\"…\""
                ),
                None => None,
            },
            None => None,
        };
        if config.several_voters
            && inter_protocol.uses_tls()
            && !tls.as_ref().is_some_and(|t| t.has_client_config())
        {
            anyhow::bail!("the inter-broker listener is {inter_protocol}: brokers verify each other with --ssl-truststore-location");
        }
        let inter_broker = Arc::new(client::InterBrokerSecurity::new(
            inter_protocol,
            tls.clone().filter(|_| inter_protocol.uses_tls()),
            login,
        ));
        let scram = Arc::new(ScramCredentials::default());
        if let Some(path) = &config.sasl.scram_credentials_file {
            let count = sasl::bootstrap::load_file(path, &scram)?;
            info!(path = %path.display(), credentials = count, "SCRAM credentials loaded");
        }
        let uses_sasl = config.listeners.iter().any(|l| l.protocol.uses_sasl());
        if uses_sasl
            && config.sasl.enabled.contains(&sasl::Mechanism::Plain)
            && plain_users.is_empty()
        {
            warn!("PLAIN is enabled but --sasl-jaas-config-file names no user_ entries: every PLAIN login fails");
        }
        let oauthbearer = match &config.sasl.oauthbearer {
            Some(settings) => {
                let jwks =
                    sasl::jwks::JwksFile::load(settings.jwks_file.clone(), settings.jwks_refresh)?;
                jwks.spawn_reloader();
                Some(Arc::new(sasl::oauthbearer::OAuthBearerValidator {
                    jwks,
                    expected_audience: settings.expected_audience.clone(),
                    expected_issuer: settings.expected_issuer.clone(),
                    sub_claim_name: settings.sub_claim_name.clone(),
                    clock_skew_seconds: settings.clock_skew_seconds,
                }))
            }
            None => None,
        };
        let fake_salt_key = secret.derive(b"scram unknown-user salt");
        let cluster_secret = secret.clone();
        Ok(Security {
            tls,
            inter_broker,
            cluster_secret,
            sasl: Arc::new(SaslConfig {
                enabled: config.sasl.enabled.clone(),
                plain_users,
                scram,
                oauthbearer,
                max_reauth: config.sasl.connections_max_reauth,
                max_receive_size: config.sasl.max_receive_size,
                failed_authentication_delay: config.sasl.failed_authentication_delay,
                fake_salt_key,
                login_failures: sasl::login_failures::LoginFailures::new(
                    config.sasl.failed_authentication_backoff,
                ),
            }),
        })
    }

    /// The context of connections on `listener`.
    pub fn context(&self, listener: &ListenerConfig) -> ListenerContext {
        ListenerContext {
            name: Arc::from(listener.name.as_str()),
            protocol: listener.protocol,
            tls: listener
                .protocol
                .uses_tls()
                .then(|| self.tls.clone())
                .flatten(),
            sasl: listener.protocol.uses_sasl().then(|| self.sasl.clone()),
        }
    }
}
