//! The native producer's settings: the ingestor's flags, then the
//! `--producer-config` properties under their Kafka / librdkafka names.
//!
//! Owns: reading those properties (security.protocol, sasl.*, ssl.*, and the
//! producer tunables), loading the TLS trust store and the SASL login once,
//! and refusing, at start-up, a property this producer does not implement
//! (it names `--producer librdkafka`, which takes every librdkafka property).
//! Must not: open connections.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use chronik_sasl::{SaslLogin, SaslMechanism};
use chronik_tls::TlsClient;

use crate::config::{Acks, Compression, Config};

/// TLS and SASL for every connection (`security.protocol`).
#[derive(Default)]
pub struct Security {
    pub tls: Option<TlsClient>,
    pub sasl: Option<SaslLogin>,
}

/// Everything the native producer is told.
pub struct Settings {
    pub bootstrap: Vec<(String, u16)>,
    pub client_id: String,
    /// `acks`: 0, 1 or -1.
    pub acks: i16,
    pub linger: Duration,
    /// Most bytes of records in one batch before compression (`batch.size`).
    pub batch_bytes: usize,
    /// Most records in one batch (`batch.num.messages`).
    pub batch_records: usize,
    pub compression: Compression,
    pub idempotence: bool,
    /// `message.timeout.ms` / `delivery.timeout.ms`: accept to outcome.
    pub message_timeout: Duration,
    /// `request.timeout.ms`: one request's answer.
    pub request_timeout: Duration,
    /// `retry.backoff.ms`.
    pub retry_backoff: Duration,
    /// `reconnect.backoff.ms`: the wait before the first reconnect to a
    /// broker, doubled on each failure up to `reconnect.backoff.max.ms`.
    pub reconnect_backoff: Duration,
    /// `reconnect.backoff.max.ms`.
    pub reconnect_backoff_max: Duration,
    /// `socket.connection.setup.timeout.ms`: TCP, TLS, SASL and ApiVersions
    /// of one connection attempt (the host name resolved anew each time).
    pub connect_timeout: Duration,
    /// `metadata.max.age.ms`.
    pub metadata_max_age: Duration,
    /// `allow.auto.create.topics`: a Metadata request for an unknown topic
    /// lets a broker with `auto.create.topics.enable` create it (the Kafka
    /// producer's default, true).
    pub allow_auto_create_topics: bool,
    /// `queue.buffering.max.messages` / `.kbytes` (in bytes).
    pub queue_max_messages: usize,
    pub queue_max_bytes: usize,
    pub security: Security,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("bootstrap", &self.bootstrap)
            .field("acks", &self.acks)
            .field("linger", &self.linger)
            .field("batch_bytes", &self.batch_bytes)
            .field("compression", &self.compression)
            .field("idempotence", &self.idempotence)
            .field("tls", &self.security.tls.is_some())
            .field(
                "sasl",
                &self.security.sasl.as_ref().map(|l| l.mechanism.name()),
            )
            .finish_non_exhaustive()
    }
}

/// librdkafka's `batch.size` default: 1,000,000 bytes (under Kafka's
/// default `max.message.bytes`, 1,048,588).
const BATCH_BYTES: usize = 1_000_000;

/// `socket.connection.setup.timeout.ms` default: 3 s, below Kafka's Java
/// client (10 s) and librdkafka (30 s). A broker pod that moved leaves its
/// old address unanswered (no RST): every attempt on it costs the whole
/// timeout, so the harness gives one up in 3 s, still ample for TCP, TLS
/// and SASL to a broker on the same network under load (k8s-perf/README.md).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// `reconnect.backoff.ms` default (librdkafka's 100 ms; Kafka's 50 ms).
pub const RECONNECT_BACKOFF: Duration = Duration::from_millis(100);
/// `reconnect.backoff.max.ms` default (Kafka's 1 s; librdkafka's 10 s): a
/// broker that returns is tried again within a second, a dead one at most
/// once a second per sender.
pub const RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(1);

fn millis(key: &str, v: &str) -> Result<Duration> {
    let ms: u64 = v
        .parse()
        .with_context(|| format!("{key}={v:?} is not a number of milliseconds"))?;
    Ok(Duration::from_millis(ms))
}

fn parse_bootstrap(list: &str) -> Result<Vec<(String, u16)>> {
    let mut out = Vec::new();
    for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let entry = entry
            .strip_prefix("PLAINTEXT://")
            .or_else(|| entry.strip_prefix("SSL://"))
            .or_else(|| entry.strip_prefix("SASL_SSL://"))
            .or_else(|| entry.strip_prefix("SASL_PLAINTEXT://"))
            .unwrap_or(entry);
        let (host, port) = entry
            .rsplit_once(':')
            .with_context(|| format!("bootstrap server {entry:?} is not host:port"))?;
        let port = port
            .parse()
            .with_context(|| format!("bootstrap server {entry:?}: bad port"))?;
        out.push((
            host.trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            port,
        ));
    }
    if out.is_empty() {
        bail!("no bootstrap servers in {list:?}");
    }
    Ok(out)
}

impl Settings {
    pub fn from_config(config: &Config) -> Result<Settings> {
        let mut s = Settings {
            bootstrap: parse_bootstrap(&config.bootstrap_servers)?,
            client_id: format!("chronik-ingestor-{}", config.ingestor_id),
            acks: match config.acks {
                Acks::None => 0,
                Acks::Leader => 1,
                Acks::All => -1,
            },
            linger: config.linger,
            batch_bytes: BATCH_BYTES,
            batch_records: config.batch_num_messages as usize,
            compression: config.compression,
            idempotence: config.enable_idempotence,
            message_timeout: config.message_timeout,
            request_timeout: Duration::from_secs(30),
            retry_backoff: Duration::from_millis(100),
            reconnect_backoff: RECONNECT_BACKOFF,
            reconnect_backoff_max: RECONNECT_BACKOFF_MAX,
            connect_timeout: CONNECT_TIMEOUT,
            metadata_max_age: Duration::from_secs(300),
            allow_auto_create_topics: true,
            queue_max_messages: config.queue_max_messages as usize,
            queue_max_bytes: (config.queue_max_kbytes as usize).saturating_mul(1024),
            security: Security::default(),
        };
        let mut protocol = "PLAINTEXT".to_owned();
        let (mut mechanism, mut username, mut password) = (None, None, None);
        let (mut ca, mut cert, mut key) = (None::<PathBuf>, None::<PathBuf>, None::<PathBuf>);
        for (k, v) in config.producer_overrides.iter() {
            match k.as_str() {
                "security.protocol" => protocol = v.to_ascii_uppercase(),
                "sasl.mechanism" | "sasl.mechanisms" => mechanism = Some(v.clone()),
                "sasl.username" => username = Some(v.clone()),
                "sasl.password" => password = Some(v.clone()),
                "ssl.ca.location" => ca = Some(v.into()),
                "ssl.certificate.location" => cert = Some(v.into()),
                "ssl.key.location" => key = Some(v.into()),
                // The server's certificate must name the host connected to
                // (librdkafka's default, https); skipping that is librdkafka's.
                "ssl.endpoint.identification.algorithm" if v.eq_ignore_ascii_case("https") => {}
                "ssl.endpoint.identification.algorithm" => bail!(
                    "ssl.endpoint.identification.algorithm={v:?}: the native producer always verifies \
                     the broker's host name (https); use --producer librdkafka to turn that off"
                ),
                "client.id" => s.client_id = v.clone(),
                "acks" | "request.required.acks" => {
                    s.acks = match v.as_str() {
                        "all" | "-1" => -1,
                        "1" => 1,
                        "0" => 0,
                        _ => bail!("acks={v:?}: must be 0, 1, all or -1"),
                    }
                }
                "enable.idempotence" => {
                    s.idempotence = v.parse().with_context(|| format!("{k}={v:?}"))?
                }
                "linger.ms" | "queue.buffering.max.ms" => s.linger = millis(k, v)?,
                "batch.size" => s.batch_bytes = v.parse().with_context(|| format!("{k}={v:?}"))?,
                "batch.num.messages" => {
                    s.batch_records = v.parse().with_context(|| format!("{k}={v:?}"))?
                }
                "compression.type" | "compression.codec" => {
                    s.compression = <Compression as clap::ValueEnum>::from_str(v, true)
                        .map_err(|e| anyhow::anyhow!("{k}={v:?}: {e}"))?
                }
                "message.timeout.ms" | "delivery.timeout.ms" => s.message_timeout = millis(k, v)?,
                "request.timeout.ms" => s.request_timeout = millis(k, v)?,
                "retry.backoff.ms" => s.retry_backoff = millis(k, v)?,
                "reconnect.backoff.ms" => s.reconnect_backoff = millis(k, v)?,
                "reconnect.backoff.max.ms" => s.reconnect_backoff_max = millis(k, v)?,
                "socket.connection.setup.timeout.ms" => s.connect_timeout = millis(k, v)?,
                "metadata.max.age.ms" => s.metadata_max_age = millis(k, v)?,
                "allow.auto.create.topics" => {
                    s.allow_auto_create_topics = v.parse().with_context(|| format!("{k}={v:?}"))?
                }
                "queue.buffering.max.messages" => {
                    s.queue_max_messages = v.parse().with_context(|| format!("{k}={v:?}"))?
                }
                "queue.buffering.max.kbytes" => {
                    s.queue_max_bytes = v
                        .parse::<usize>()
                        .with_context(|| format!("{k}={v:?}"))?
                        .saturating_mul(1024)
                }
                other => bail!(
                    "producer property {other:?} is not implemented by the native producer; \
                     use --producer librdkafka for librdkafka's properties"
                ),
            }
        }
        if s.idempotence && s.acks != -1 {
            bail!("enable.idempotence requires acks=all");
        }
        if s.batch_bytes == 0 || s.batch_records == 0 {
            bail!("batch.size and batch.num.messages must be positive");
        }
        if s.connect_timeout.is_zero() {
            bail!("socket.connection.setup.timeout.ms must be positive");
        }
        // as librdkafka: the initial backoff never exceeds the maximum
        s.reconnect_backoff = s.reconnect_backoff.min(s.reconnect_backoff_max);
        let (tls, sasl) = match protocol.as_str() {
            "PLAINTEXT" => (false, false),
            "SSL" => (true, false),
            "SASL_PLAINTEXT" => (false, true),
            "SASL_SSL" => (true, true),
            other => bail!(
                "security.protocol={other:?}: must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
            ),
        };
        if tls {
            let ca = ca.context("security.protocol SSL / SASL_SSL needs ssl.ca.location")?;
            let identity = match (cert, key) {
                (Some(c), Some(k)) => Some((c, k)),
                (None, None) => None,
                _ => bail!("ssl.certificate.location and ssl.key.location go together"),
            };
            s.security.tls = Some(TlsClient::load(
                &ca,
                identity.as_ref().map(|(c, k)| (c.as_path(), k.as_path())),
                s.connect_timeout,
            )?);
        }
        if sasl {
            let name = mechanism.unwrap_or_else(|| "PLAIN".to_owned());
            let mechanism: SaslMechanism = name
                .parse()
                .map_err(|e| anyhow::anyhow!("sasl.mechanism={name:?}: {e}"))?;
            s.security.sasl = Some(SaslLogin::new(
                mechanism,
                username.context("SASL needs sasl.username")?,
                password.context("SASL needs sasl.password")?,
            ));
        }
        // A request never outlives the message it carries.
        s.request_timeout = s.request_timeout.min(s.message_timeout);
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bootstrap_lists() {
        assert_eq!(
            parse_bootstrap("127.0.0.1:9092, PLAINTEXT://b:29092,[::1]:1").expect("valid"),
            vec![
                ("127.0.0.1".to_owned(), 9092),
                ("b".to_owned(), 29092),
                ("::1".to_owned(), 1)
            ]
        );
        assert!(parse_bootstrap("nohost").is_err());
        assert!(parse_bootstrap(" , ").is_err());
    }

    #[test]
    fn unknown_properties_are_refused_at_start() {
        let mut c = Config::for_bootstrap("127.0.0.1:9092");
        c.producer_overrides
            .0
            .push(("sticky.partitioning.linger.ms".into(), "1".into()));
        let e = Settings::from_config(&c).expect_err("refused").to_string();
        assert!(e.contains("--producer librdkafka"), "{e}");
    }

    #[test]
    fn properties_override_flags() {
        let mut c = Config::for_bootstrap("127.0.0.1:9092");
        c.producer_overrides
            .0
            .push(("linger.ms".into(), "7".into()));
        c.producer_overrides
            .0
            .push(("compression.type".into(), "zstd".into()));
        let s = Settings::from_config(&c).expect("valid");
        assert_eq!(s.linger, Duration::from_millis(7));
        assert_eq!(s.compression, Compression::Zstd);
        assert!(s.security.tls.is_none() && s.security.sasl.is_none());
    }

    #[test]
    fn reconnect_settings_default_short_and_override() {
        let s = Settings::from_config(&Config::for_bootstrap("127.0.0.1:9092")).expect("valid");
        assert_eq!(s.connect_timeout, Duration::from_secs(3));
        assert_eq!(s.reconnect_backoff, Duration::from_millis(100));
        assert_eq!(s.reconnect_backoff_max, Duration::from_secs(1));
        let mut c = Config::for_bootstrap("127.0.0.1:9092");
        for (k, v) in [
            ("socket.connection.setup.timeout.ms", "10000"),
            ("reconnect.backoff.ms", "50"),
            ("reconnect.backoff.max.ms", "20"),
        ] {
            c.producer_overrides.0.push((k.into(), v.into()));
        }
        let s = Settings::from_config(&c).expect("valid");
        assert_eq!(s.connect_timeout, Duration::from_secs(10));
        assert_eq!(s.reconnect_backoff, Duration::from_millis(20));
        assert_eq!(s.reconnect_backoff_max, Duration::from_millis(20));
    }
}
