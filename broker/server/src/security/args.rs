//! The security flags of `chronik-server`, each Kafka's setting in
//! kebab case (and a `CHRONIK_*` env var), flattened into `config::Args`,
//! and the plain `SecurityConfig` they become.
//!
//! Owns: defaults and cross-checks (`--listeners` or `--listen`, never
//! both; TLS listeners need a key store; client auth needs a trust store;
//! in a cluster, a TLS inter-broker listener needs a trust store and a SASL
//! one the JAAS file with the broker's own login and an enabled
//! `--sasl-mechanism-inter-broker-protocol`, never OAUTHBEARER;
//! OAUTHBEARER needs a JWKS file). Must not: open files or
//! sockets (`Security::load` and the server do).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use clap::Args as ClapArgs;

use super::listeners::{self, ListenerConfig, DEFAULT_PROTOCOL_MAP};
use super::sasl::login_failures::BackoffSettings;
use super::sasl::Mechanism;
use super::TlsSettings;

/// `--listen` when neither it nor `--listeners` is given.
const DEFAULT_LISTEN: &str = "0.0.0.0:9092";

#[derive(Debug, Clone, ClapArgs)]
pub struct SecurityArgs {
    /// Kafka's `listeners`: every listener as NAME://host:port, comma
    /// separated (e.g. `PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9094`;
    /// an empty host binds every interface). An alternative to --listen /
    /// --advertise; giving both is an error.
    #[arg(long, env = "CHRONIK_LISTENERS")]
    pub listeners: Option<String>,
    /// Kafka's `advertised.listeners`: NAME://host:port clients are given
    /// for each listener (default: its bound address; a wildcard host is
    /// replaced by this node's host).
    #[arg(long, env = "CHRONIK_ADVERTISED_LISTENERS")]
    pub advertised_listeners: Option<String>,
    /// Kafka's `listener.security.protocol.map`: NAME:PROTOCOL pairs.
    #[arg(long, env = "CHRONIK_LISTENER_SECURITY_PROTOCOL_MAP", default_value = DEFAULT_PROTOCOL_MAP)]
    pub listener_security_protocol_map: String,
    /// Kafka's `inter.broker.listener.name`: the listener other brokers'
    /// replica fetchers use, registered with the metadata quorum (default
    /// PLAINTEXT if there is one, else the first). Brokers connect to each
    /// other with its security protocol (TLS with the key store as client
    /// certificate, SASL with `--sasl-mechanism-inter-broker-protocol`).
    #[arg(long, env = "CHRONIK_INTER_BROKER_LISTENER_NAME")]
    pub inter_broker_listener_name: Option<String>,
    /// `ssl.keystore.location`, `ssl.truststore.location`,
    /// `ssl.client.auth` (chronik-tls, shared with the ingestor).
    #[command(flatten)]
    pub tls: chronik_tls::TlsArgs,
    /// Kafka's `sasl.enabled.mechanisms`: PLAIN, SCRAM-SHA-256,
    /// SCRAM-SHA-512, OAUTHBEARER.
    #[arg(
        long,
        env = "CHRONIK_SASL_ENABLED_MECHANISMS",
        default_value = "SCRAM-SHA-256,SCRAM-SHA-512"
    )]
    pub sasl_enabled_mechanisms: String,
    /// A JAAS file whose PlainLoginModule `user_<name>="<password>"`
    /// entries are the PLAIN users (Kafka's
    /// `listener.name.<listener>.plain.sasl.jaas.config`, or the
    /// `KafkaServer` section of `java.security.auth.login.config`); its
    /// `username="…" password="…"` options are this broker's own login to
    /// other brokers on a SASL inter-broker listener.
    #[arg(long, env = "CHRONIK_SASL_JAAS_CONFIG_FILE")]
    pub sasl_jaas_config_file: Option<PathBuf>,
    /// Kafka's `sasl.mechanism.inter.broker.protocol`: the mechanism this
    /// broker logs in to other brokers with on a SASL inter-broker
    /// listener (Kafka's default is GSSAPI, not served here; the default
    /// is PLAIN if enabled, else the first of --sasl-enabled-mechanisms).
    #[arg(long, env = "CHRONIK_SASL_MECHANISM_INTER_BROKER_PROTOCOL")]
    pub sasl_mechanism_inter_broker_protocol: Option<String>,
    /// SCRAM users loaded at start: one `SCRAM-SHA-512=[name=alice,password=…]`
    /// per line, the syntax of `kafka-storage.sh format --add-scram`. Only
    /// the salted keys are kept in memory.
    #[arg(long, env = "CHRONIK_SASL_SCRAM_CREDENTIALS_FILE")]
    pub sasl_scram_credentials_file: Option<PathBuf>,
    /// Kafka's `sasl.server.max.receive.size`: the largest frame accepted
    /// before a connection has authenticated.
    #[arg(long, env = "CHRONIK_SASL_SERVER_MAX_RECEIVE_SIZE", default_value_t = 524_288,
          value_parser = clap::value_parser!(u32).range(1024..=104_857_600))]
    pub sasl_server_max_receive_size: u32,
    /// Kafka's `connections.max.reauth.ms` (KIP-368): a SASL session
    /// expires this long after authentication; the client must
    /// re-authenticate or is disconnected. 0 = never.
    #[arg(long, env = "CHRONIK_CONNECTIONS_MAX_REAUTH_MS", default_value_t = 0)]
    pub connections_max_reauth_ms: u64,
    /// Kafka's `connection.failed.authentication.delay.ms`: a refused SASL
    /// step is answered (and the connection closed) this much later.
    #[arg(long, env = "CHRONIK_CONNECTION_FAILED_AUTHENTICATION_DELAY_MS", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub connection_failed_authentication_delay_ms: u64,
    /// After a failed PLAIN or SCRAM login for a user name (from any
    /// address), the next attempt for that name is answered this much after
    /// the failure, doubling with each failure in a row up to
    /// --failed-authentication-backoff-max-ms; a successful login resets
    /// it. 0 = off. (No Kafka equivalent: Kafka delays per connection only.)
    #[arg(long, env = "CHRONIK_FAILED_AUTHENTICATION_BACKOFF_MS", default_value_t = 200,
          value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub failed_authentication_backoff_ms: u64,
    /// The longest per-name back-off after failed logins.
    #[arg(long, env = "CHRONIK_FAILED_AUTHENTICATION_BACKOFF_MAX_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub failed_authentication_backoff_max_ms: u64,
    /// User names whose failed logins are tracked at once; beyond it the
    /// name with the oldest failure is forgotten (clients invent names).
    #[arg(long, env = "CHRONIK_FAILED_AUTHENTICATION_TRACKED_USERS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub failed_authentication_tracked_users: u32,
    /// Kafka's `sasl.oauthbearer.jwks.endpoint.url`: the JSON Web Key Set
    /// OAUTHBEARER tokens are verified with, as a `file:` URL or a path
    /// (http(s) endpoints are not supported). Required with OAUTHBEARER.
    #[arg(long, env = "CHRONIK_SASL_OAUTHBEARER_JWKS_ENDPOINT_URL")]
    pub sasl_oauthbearer_jwks_endpoint_url: Option<String>,
    /// Kafka's `sasl.oauthbearer.jwks.endpoint.refresh.ms`: how often the
    /// JWKS file is checked for changes (also soon after a token names an
    /// unknown key id).
    #[arg(long, env = "CHRONIK_SASL_OAUTHBEARER_JWKS_ENDPOINT_REFRESH_MS", default_value_t = 3_600_000,
          value_parser = clap::value_parser!(u64).range(100..=86_400_000))]
    pub sasl_oauthbearer_jwks_endpoint_refresh_ms: u64,
    /// Kafka's `sasl.oauthbearer.expected.audience`: comma-separated; a
    /// token's `aud` must name one of them (unset: not checked).
    #[arg(long, env = "CHRONIK_SASL_OAUTHBEARER_EXPECTED_AUDIENCE")]
    pub sasl_oauthbearer_expected_audience: Option<String>,
    /// Kafka's `sasl.oauthbearer.expected.issuer`: a token's `iss` must be
    /// this (unset: not checked).
    #[arg(long, env = "CHRONIK_SASL_OAUTHBEARER_EXPECTED_ISSUER")]
    pub sasl_oauthbearer_expected_issuer: Option<String>,
    /// Kafka's `sasl.oauthbearer.sub.claim.name`: the claim naming the
    /// principal (`User:<value>`).
    #[arg(
        long,
        env = "CHRONIK_SASL_OAUTHBEARER_SUB_CLAIM_NAME",
        default_value = "sub"
    )]
    pub sasl_oauthbearer_sub_claim_name: String,
    /// Kafka's `sasl.oauthbearer.clock.skew.seconds`: allowed clock
    /// difference when checking `exp`, `nbf` and `iat`.
    #[arg(long, env = "CHRONIK_SASL_OAUTHBEARER_CLOCK_SKEW_SECONDS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub sasl_oauthbearer_clock_skew_seconds: u64,
}

/// OAUTHBEARER token validation settings (set when it is enabled).
#[derive(Debug, Clone)]
pub struct OAuthBearerSettings {
    pub jwks_file: PathBuf,
    pub jwks_refresh: Duration,
    pub expected_audience: Vec<String>,
    pub expected_issuer: Option<String>,
    pub sub_claim_name: String,
    pub clock_skew_seconds: u64,
}

/// SASL settings as the server uses them.
#[derive(Debug, Clone)]
pub struct SaslSettings {
    pub enabled: Vec<Mechanism>,
    pub jaas_config_file: Option<PathBuf>,
    pub scram_credentials_file: Option<PathBuf>,
    pub max_receive_size: usize,
    pub connections_max_reauth: Duration,
    pub failed_authentication_delay: Duration,
    /// The per-name back-off after failed logins.
    pub failed_authentication_backoff: BackoffSettings,
    /// The mechanism of outgoing inter-broker connections (set when the
    /// inter-broker listener uses SASL).
    pub inter_broker_mechanism: Option<Mechanism>,
    pub oauthbearer: Option<OAuthBearerSettings>,
}

/// The effective security configuration.
#[derive(Debug, Clone)]
pub struct SecurityConfig {
    /// Every listener; from `--listen` alone, one PLAINTEXT listener.
    pub listeners: Vec<ListenerConfig>,
    /// Index of the inter-broker listener in `listeners`.
    pub inter_broker: usize,
    /// Whether `--listeners` named them (then every advertised listener
    /// is registered with the quorum by name).
    pub named: bool,
    pub tls: Option<TlsSettings>,
    pub sasl: SaslSettings,
    /// Whether other brokers exist (then the inter-broker login must be
    /// complete at start).
    pub several_voters: bool,
}

impl SecurityConfig {
    pub fn inter_broker(&self) -> &ListenerConfig {
        &self.listeners[self.inter_broker]
    }

    /// `listen` / `advertise` are the legacy `--listen` / `--advertise`.
    pub fn from_args(
        args: &SecurityArgs,
        listen: Option<SocketAddr>,
        advertise: Option<(String, u16)>,
        several_voters: bool,
    ) -> anyhow::Result<SecurityConfig> {
        let (listeners, named) = match &args.listeners {
            Some(spec) => {
                if listen.is_some() || advertise.is_some() {
                    bail!("--listeners replaces --listen / --advertise: give one or the other");
                }
                let parsed = listeners::parse_listeners(
                    spec,
                    args.advertised_listeners.as_deref(),
                    &args.listener_security_protocol_map,
                )?;
                (parsed, true)
            }
            None => {
                if args.advertised_listeners.is_some() {
                    bail!("--advertised-listeners needs --listeners");
                }
                let default: SocketAddr = DEFAULT_LISTEN
                    .parse()
                    .unwrap_or_else(|_| unreachable!("a literal address"));
                (
                    vec![listeners::legacy_listener(
                        listen.unwrap_or(default),
                        advertise,
                    )],
                    false,
                )
            }
        };
        let inter_broker =
            listeners::inter_broker_index(&listeners, args.inter_broker_listener_name.as_deref())?;
        let uses_tls = listeners.iter().any(|l| l.protocol.uses_tls());
        let tls = args.tls.settings(uses_tls)?;
        let mut enabled = Vec::new();
        for name in args
            .sasl_enabled_mechanisms
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
        {
            let mechanism = Mechanism::parse(&name.to_ascii_uppercase()).ok_or_else(|| {
                anyhow::anyhow!(
                    "--sasl-enabled-mechanisms: {name} is not served (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER)"
                )
            })?;
            if !enabled.contains(&mechanism) {
                enabled.push(mechanism);
            }
        }
        if enabled.is_empty() && listeners.iter().any(|l| l.protocol.uses_sasl()) {
            bail!("a SASL listener needs at least one --sasl-enabled-mechanisms");
        }
        let oauthbearer = oauthbearer_settings(args, &enabled)?;
        let inter_protocol = listeners[inter_broker].protocol;
        if several_voters && inter_protocol.uses_tls() && args.tls.ssl_truststore_location.is_none()
        {
            bail!(
                "the inter-broker listener {} is {inter_protocol}: brokers verify each other with --ssl-truststore-location",
                listeners[inter_broker].name
            );
        }
        let inter_broker_mechanism = match inter_protocol.uses_sasl() {
            true => inter_broker_mechanism(args, &enabled, several_voters)?,
            false => None,
        };
        if several_voters && inter_protocol.uses_sasl() && args.sasl_jaas_config_file.is_none() {
            bail!(
                "the inter-broker listener {} is {inter_protocol}: --sasl-jaas-config-file must give this broker's username=\"…\" password=\"…\"",
                listeners[inter_broker].name
            );
        }
        Ok(SecurityConfig {
            listeners,
            inter_broker,
            named,
            tls,
            sasl: SaslSettings {
                enabled,
                jaas_config_file: args.sasl_jaas_config_file.clone(),
                scram_credentials_file: args.sasl_scram_credentials_file.clone(),
                max_receive_size: args.sasl_server_max_receive_size as usize,
                connections_max_reauth: Duration::from_millis(args.connections_max_reauth_ms),
                failed_authentication_delay: Duration::from_millis(
                    args.connection_failed_authentication_delay_ms,
                ),
                failed_authentication_backoff: BackoffSettings {
                    initial: Duration::from_millis(args.failed_authentication_backoff_ms),
                    max: Duration::from_millis(args.failed_authentication_backoff_max_ms),
                    capacity: args.failed_authentication_tracked_users as usize,
                },
                inter_broker_mechanism,
                oauthbearer,
            },
            several_voters,
        })
    }
}

/// `--sasl-mechanism-inter-broker-protocol`, or PLAIN if enabled, else the
/// first enabled mechanism but OAUTHBEARER; it must be enabled. None when
/// only OAUTHBEARER is enabled and there are no other brokers.
fn inter_broker_mechanism(
    args: &SecurityArgs,
    enabled: &[Mechanism],
    several_voters: bool,
) -> anyhow::Result<Option<Mechanism>> {
    let mechanism = match &args.sasl_mechanism_inter_broker_protocol {
        Some(name) => Mechanism::parse(&name.trim().to_ascii_uppercase()).ok_or_else(|| {
            anyhow::anyhow!(
                "--sasl-mechanism-inter-broker-protocol: {name} is not served (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"
            )
        })?,
        None if enabled.contains(&Mechanism::Plain) => Mechanism::Plain,
        None => match enabled.iter().find(|m| **m != Mechanism::OAuthBearer) {
            Some(m) => *m,
            None if !several_voters && !enabled.is_empty() => return Ok(None),
            None => bail!(
                "a SASL inter-broker listener needs PLAIN or SCRAM in --sasl-enabled-mechanisms"
            ),
        },
    };
    if mechanism == Mechanism::OAuthBearer {
        bail!("--sasl-mechanism-inter-broker-protocol: brokers log in to each other with PLAIN or SCRAM, not OAUTHBEARER");
    }
    if !enabled.contains(&mechanism) {
        bail!(
            "--sasl-mechanism-inter-broker-protocol {} is not in --sasl-enabled-mechanisms",
            mechanism.name()
        );
    }
    Ok(Some(mechanism))
}

/// The OAUTHBEARER settings when it is enabled; it needs a JWKS file.
fn oauthbearer_settings(
    args: &SecurityArgs,
    enabled: &[Mechanism],
) -> anyhow::Result<Option<OAuthBearerSettings>> {
    if !enabled.contains(&Mechanism::OAuthBearer) {
        return Ok(None);
    }
    let Some(url) = &args.sasl_oauthbearer_jwks_endpoint_url else {
        bail!(
            "OAUTHBEARER needs --sasl-oauthbearer-jwks-endpoint-url (a JWKS file) to verify tokens"
        );
    };
    let claim = args.sasl_oauthbearer_sub_claim_name.trim();
    if claim.is_empty() {
        bail!("--sasl-oauthbearer-sub-claim-name must not be empty");
    }
    let list = |value: &Option<String>| -> Vec<String> {
        value
            .iter()
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_string)
            .collect()
    };
    Ok(Some(OAuthBearerSettings {
        jwks_file: super::sasl::jwks::jwks_path(url)?,
        jwks_refresh: Duration::from_millis(args.sasl_oauthbearer_jwks_endpoint_refresh_ms),
        expected_audience: list(&args.sasl_oauthbearer_expected_audience),
        expected_issuer: args
            .sasl_oauthbearer_expected_issuer
            .clone()
            .filter(|i| !i.is_empty()),
        sub_claim_name: claim.to_string(),
        clock_skew_seconds: args.sasl_oauthbearer_clock_skew_seconds,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    use crate::security::sasl::scram::ScramMechanism;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        security: SecurityArgs,
    }

    fn config(flags: &[&str], several_voters: bool) -> anyhow::Result<SecurityConfig> {
        let cli = Cli::try_parse_from([&["chronik-server"], flags].concat())?;
        SecurityConfig::from_args(&cli.security, None, None, several_voters)
    }

    #[test]
    fn any_inter_broker_protocol_with_what_brokers_need_to_log_in() {
        let sasl_ssl = [
            "--listeners",
            "SASL_SSL://127.0.0.1:9094",
            "--ssl-keystore-location",
            "broker.pem",
        ];
        let with = |extra: &[&'static str]| [&sasl_ssl[..], extra].concat();
        let mechanism = |flags: &[&str]| {
            config(flags, false)
                .expect("config")
                .sasl
                .inter_broker_mechanism
        };
        assert_eq!(
            mechanism(&with(&["--sasl-enabled-mechanisms", "SCRAM-SHA-512,PLAIN"])),
            Some(Mechanism::Plain),
            "PLAIN when enabled"
        );
        assert_eq!(
            mechanism(&sasl_ssl),
            Some(Mechanism::Scram(ScramMechanism::Sha256)),
            "else the first enabled"
        );
        assert_eq!(
            mechanism(&with(&[
                "--sasl-mechanism-inter-broker-protocol",
                "scram-sha-512"
            ])),
            Some(Mechanism::Scram(ScramMechanism::Sha512))
        );
        assert!(config(
            &with(&["--sasl-mechanism-inter-broker-protocol", "PLAIN"]),
            false
        )
        .is_err());
        assert!(config(
            &with(&["--sasl-mechanism-inter-broker-protocol", "GSSAPI"]),
            false
        )
        .is_err());
        // With other brokers: a trust store to verify them and a JAAS
        // file with this broker's login.
        assert!(config(&sasl_ssl, true).is_err());
        assert!(config(&with(&["--ssl-truststore-location", "ca.pem"]), true).is_err());
        let full = with(&[
            "--ssl-truststore-location",
            "ca.pem",
            "--sasl-jaas-config-file",
            "jaas.conf",
        ]);
        let cluster = config(&full, true).expect("a SASL_SSL inter-broker listener");
        assert_eq!(cluster.inter_broker().protocol.to_string(), "SASL_SSL");
        let plain = config(&["--listeners", "PLAINTEXT://127.0.0.1:9092"], true).expect("plain");
        assert_eq!(plain.sasl.inter_broker_mechanism, None);
    }

    #[test]
    fn oauthbearer_needs_a_jwks_file_and_is_not_inter_broker() {
        let sasl = [
            "--listeners",
            "SASL_PLAINTEXT://127.0.0.1:9094",
            "--sasl-enabled-mechanisms",
        ];
        let with = |extra: &[&'static str]| [&sasl[..], extra].concat();
        let no_jwks = config(&with(&["OAUTHBEARER,PLAIN"]), false).expect_err("no JWKS");
        assert!(no_jwks
            .to_string()
            .contains("--sasl-oauthbearer-jwks-endpoint-url"));
        let http = config(
            &with(&[
                "OAUTHBEARER,PLAIN",
                "--sasl-oauthbearer-jwks-endpoint-url",
                "https://idp.test/jwks",
            ]),
            false,
        )
        .expect_err("https");
        assert!(http.to_string().contains("only files are supported"));
        let ok = config(
            &with(&[
                "OAUTHBEARER,SCRAM-SHA-512",
                "--sasl-oauthbearer-jwks-endpoint-url",
                "file:///etc/jwks.json",
                "--sasl-oauthbearer-expected-audience",
                "kafka, other",
            ]),
            false,
        )
        .expect("OAUTHBEARER");
        let oauth = ok.sasl.oauthbearer.expect("settings");
        assert_eq!(oauth.jwks_file, PathBuf::from("/etc/jwks.json"));
        assert_eq!(oauth.expected_audience, ["kafka", "other"]);
        assert_eq!(
            (oauth.sub_claim_name.as_str(), oauth.clock_skew_seconds),
            ("sub", 30)
        );
        assert_eq!(
            ok.sasl.inter_broker_mechanism,
            Some(Mechanism::Scram(ScramMechanism::Sha512)),
            "the first enabled that brokers can log in with"
        );
        let jwks = ["--sasl-oauthbearer-jwks-endpoint-url", "jwks.json"];
        let only = [&with(&["OAUTHBEARER"])[..], &jwks].concat();
        assert_eq!(
            config(&only, false)
                .expect("one broker")
                .sasl
                .inter_broker_mechanism,
            None
        );
        assert!(config(&only, true).is_err(), "other brokers cannot log in");
        assert!(config(
            &[
                &with(&["OAUTHBEARER,PLAIN"])[..],
                &jwks,
                &["--sasl-mechanism-inter-broker-protocol", "OAUTHBEARER"]
            ]
            .concat(),
            false
        )
        .is_err());
    }
}
