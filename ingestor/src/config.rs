//! Command-line and environment configuration of `chronik-ingestor`.
//!
//! Owns: the clap `Args` (every flag also an env var: `CHRONIK_INGESTOR_*`,
//! and `KAFKA_BOOTSTRAP_SERVERS`), the plain `Config` the rest of the crate
//! receives, and its translation into librdkafka producer properties.
//! Defaults follow the seed's Test 6 ingestor: acks=1, linger.ms=5,
//! batch.num.messages=10000, snappy. linger.ms depends on acks when not
//! given: 5 ms for acks 0/1 (the seed), 20 ms for acks=all, where every
//! acknowledgement already waits for a follower's fetch round trip; larger
//! batches there halved the brokers' CPU per message in the 3-node pipeline
//! (docs/performance.md, "Where the cores go").
//! Must not: read the environment anywhere else.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Parser, ValueEnum};
use rdkafka::ClientConfig;

/// Producer acknowledgements (Kafka's `acks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// `0`: no broker response; delivery reports carry no offset.
    None,
    /// `1`: the partition leader wrote it.
    Leader,
    /// `all` / `-1`: every in-sync replica wrote it.
    All,
}

impl std::str::FromStr for Acks {
    type Err = String;
    fn from_str(s: &str) -> Result<Acks, String> {
        match s {
            "0" => Ok(Acks::None),
            "1" => Ok(Acks::Leader),
            "all" | "-1" => Ok(Acks::All),
            other => Err(format!("acks must be 0, 1, all or -1, not {other:?}")),
        }
    }
}

impl fmt::Display for Acks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Acks::None => "0",
            Acks::Leader => "1",
            Acks::All => "all",
        })
    }
}

/// Which producer talks to Kafka (`--producer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProducerEngine {
    /// The batch-native producer: one record batch per partition per request.
    Native,
    /// librdkafka, message by message (takes every librdkafka property).
    Librdkafka,
}

/// Batch compression (`compression.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    pub fn as_str(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

/// `chronik-ingestor`: HTTP JSON batches in, Kafka records out, every message accounted for.
#[derive(Debug, Parser)]
#[command(name = "chronik-ingestor", version, about)]
pub struct Args {
    /// Address the HTTP server binds (port 0 picks a free port; the bound
    /// address is printed as `LISTENING http=ADDR` on stdout).
    #[arg(long, env = "CHRONIK_INGESTOR_LISTEN", default_value = "0.0.0.0:8080")]
    pub listen: SocketAddr,
    /// HTTP connections open at once; more are closed at accept.
    #[arg(long, env = "CHRONIK_INGESTOR_HTTP_MAX_CONNECTIONS", default_value_t = 1024,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub http_max_connections: u32,
    /// A request's headers must arrive within this many ms (slowloris; also
    /// closes keep-alive connections idle that long).
    #[arg(long, env = "CHRONIK_INGESTOR_HTTP_HEADER_READ_TIMEOUT_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(100..))]
    pub http_header_read_timeout_ms: u64,
    /// A request's whole body must arrive within this many ms of its
    /// headers (a body dripped a byte at a time is cut off).
    #[arg(long, env = "CHRONIK_INGESTOR_HTTP_BODY_READ_TIMEOUT_MS", default_value_t = 30_000,
          value_parser = clap::value_parser!(u64).range(100..))]
    pub http_body_read_timeout_ms: u64,
    /// A response write to a client that stopped reading is given up (and
    /// the connection closed) after making no progress for this many ms.
    #[arg(long, env = "CHRONIK_INGESTOR_HTTP_WRITE_TIMEOUT_MS", default_value_t = 30_000,
          value_parser = clap::value_parser!(u64).range(100..))]
    pub http_write_timeout_ms: u64,
    /// A file holding the bearer token clients must send
    /// (`Authorization: Bearer <token>`) on every route but /health and
    /// /ready; unset: no authentication.
    #[arg(long, env = "CHRONIK_INGESTOR_AUTH_TOKEN_FILE")]
    pub auth_token_file: Option<std::path::PathBuf>,
    /// Serve /metrics, /health and /ready (without a token) on this address
    /// too, e.g. for a Prometheus that holds no token; unset: only --listen.
    #[arg(long, env = "CHRONIK_INGESTOR_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// HTTPS on --listen: `--ssl-keystore-location` (PEM key + chain), and
    /// mTLS with `--ssl-truststore-location` and `--ssl-client-auth`, as the
    /// broker's flags (chronik-tls). --metrics-listen stays plain HTTP.
    #[command(flatten)]
    pub tls: chronik_tls::TlsArgs,
    /// Kafka bootstrap servers (host:port[,host:port...]).
    #[arg(
        long,
        env = "KAFKA_BOOTSTRAP_SERVERS",
        default_value = "127.0.0.1:9092"
    )]
    pub bootstrap_servers: String,
    /// Topic of messages that do not name one.
    #[arg(long, env = "CHRONIK_INGESTOR_TOPIC", default_value = "chronik-ingest")]
    pub topic: String,
    /// Producer acks: 0, 1 or all (-1).
    #[arg(
        long,
        env = "CHRONIK_INGESTOR_ACKS",
        default_value = "1",
        allow_hyphen_values = true
    )]
    pub acks: Acks,
    /// How long librdkafka waits to fill a batch (linger.ms); default 5 for
    /// acks 0/1 and 20 for acks=all.
    #[arg(long, env = "CHRONIK_INGESTOR_LINGER_MS")]
    pub linger_ms: Option<u64>,
    /// Most messages in one produce batch (batch.num.messages).
    #[arg(long, env = "CHRONIK_INGESTOR_BATCH_NUM_MESSAGES", default_value_t = 10_000,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub batch_num_messages: u32,
    /// Batch compression: none | gzip | snappy | lz4 | zstd.
    #[arg(
        long,
        env = "CHRONIK_INGESTOR_COMPRESSION",
        value_enum,
        default_value = "snappy"
    )]
    pub compression: Compression,
    /// Idempotent producer (Kafka's enable.idempotence; requires --acks all).
    /// Default as Kafka's producer: on with --acks all, off otherwise.
    #[arg(long, env = "CHRONIK_INGESTOR_ENABLE_IDEMPOTENCE", action = clap::ArgAction::Set)]
    pub enable_idempotence: Option<bool>,
    /// Most messages queued in the producer (queue.buffering.max.messages);
    /// beyond it fire-and-forget requests get 503 + Retry-After.
    #[arg(long, env = "CHRONIK_INGESTOR_QUEUE_MAX_MESSAGES", default_value_t = 100_000,
          value_parser = clap::value_parser!(u32).range(1..=2_147_483_647))]
    pub queue_max_messages: u32,
    /// Most KiB queued in the producer (queue.buffering.max.kbytes).
    #[arg(long, env = "CHRONIK_INGESTOR_QUEUE_MAX_KBYTES", default_value_t = 1_048_576,
          value_parser = clap::value_parser!(u32).range(1..=2_147_483_647))]
    pub queue_max_kbytes: u32,
    /// How long a message may take from accept to acknowledgement
    /// (message.timeout.ms); also bounds how long a request waits.
    #[arg(long, env = "CHRONIK_INGESTOR_MESSAGE_TIMEOUT_MS", default_value_t = 30_000,
          value_parser = clap::value_parser!(u64).range(100..=3_600_000))]
    pub message_timeout_ms: u64,
    /// Largest request body accepted (413 above it).
    #[arg(long, env = "CHRONIK_INGESTOR_MAX_BODY_BYTES", default_value_t = 16 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// This ingestor's name in /ledger and logs (default: the hostname).
    #[arg(long, env = "CHRONIK_INGESTOR_ID")]
    pub ingestor_id: Option<String>,
    /// The producer: native (one record batch per partition per request) or
    /// librdkafka (message by message).
    #[arg(
        long,
        env = "CHRONIK_INGESTOR_PRODUCER",
        value_enum,
        default_value = "native"
    )]
    pub producer: ProducerEngine,
    /// Extra producer properties under their Kafka / librdkafka names,
    /// `key=value` (repeatable; the env var takes a comma-separated list).
    /// Applied last, so they override. The native producer takes
    /// security.protocol, sasl.*, ssl.{ca,certificate,key}.location and the
    /// batching, timeout and queue properties, and refuses others at start.
    #[arg(
        short = 'X',
        long = "producer-config",
        env = "CHRONIK_INGESTOR_PRODUCER_CONFIG",
        value_delimiter = ','
    )]
    pub producer_config: Vec<String>,
}

/// linger.ms for acks 0 and 1 (the seed's).
pub const LINGER_MS: u64 = 5;
/// linger.ms for acks=all (see the module header).
pub const LINGER_MS_ACKS_ALL: u64 = 20;

/// The effective configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub http: chronik_http::HttpLimits,
    pub bootstrap_servers: String,
    pub topic: String,
    pub acks: Acks,
    pub linger: Duration,
    pub batch_num_messages: u32,
    pub compression: Compression,
    pub enable_idempotence: bool,
    pub queue_max_messages: u32,
    pub queue_max_kbytes: u32,
    pub message_timeout: Duration,
    pub max_body_bytes: usize,
    pub ingestor_id: String,
    pub producer: ProducerEngine,
    pub producer_overrides: chronik_harness::results::ClientProperties,
    /// Bearer token every route but /health and /ready requires.
    pub auth_token: Option<crate::auth::BearerToken>,
    /// A second listener for /metrics, /health and /ready only (no token).
    pub metrics_listen: Option<SocketAddr>,
    /// HTTPS on `listen` (and mTLS) when set.
    pub tls: Option<chronik_tls::TlsSettings>,
}

impl TryFrom<Args> for Config {
    type Error = anyhow::Error;

    fn try_from(args: Args) -> anyhow::Result<Config> {
        crate::message::validate_topic_name(&args.topic)
            .map_err(|why| anyhow::anyhow!("--topic {:?} {why}", args.topic))?;
        if args.enable_idempotence == Some(true) && args.acks != Acks::All {
            bail!(
                "--enable-idempotence requires --acks all (is {})",
                args.acks
            );
        }
        let enable_idempotence = args.enable_idempotence.unwrap_or(args.acks == Acks::All);
        if args.max_body_bytes == 0 {
            bail!("--max-body-bytes must be positive");
        }
        let producer_overrides = args
            .producer_config
            .iter()
            .filter(|kv| !kv.trim().is_empty())
            .map(|kv| {
                let (k, v) = kv
                    .split_once('=')
                    .with_context(|| format!("--producer-config {kv:?} is not key=value"))?;
                Ok((k.trim().to_owned(), v.trim().to_owned()))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let ingestor_id = match args.ingestor_id.filter(|s| !s.is_empty()) {
            Some(id) => id,
            None => hostname(),
        };
        Ok(Config {
            listen: args.listen,
            http: chronik_http::HttpLimits {
                max_connections: usize::try_from(args.http_max_connections).unwrap_or(usize::MAX),
                header_read_timeout: Duration::from_millis(args.http_header_read_timeout_ms),
                body_read_timeout: Duration::from_millis(args.http_body_read_timeout_ms),
                write_timeout: Duration::from_millis(args.http_write_timeout_ms),
            },
            bootstrap_servers: args.bootstrap_servers,
            topic: args.topic,
            acks: args.acks,
            linger: Duration::from_millis(args.linger_ms.unwrap_or(match args.acks {
                Acks::All => LINGER_MS_ACKS_ALL,
                _ => LINGER_MS,
            })),
            batch_num_messages: args.batch_num_messages,
            compression: args.compression,
            enable_idempotence,
            queue_max_messages: args.queue_max_messages,
            queue_max_kbytes: args.queue_max_kbytes,
            message_timeout: Duration::from_millis(args.message_timeout_ms),
            max_body_bytes: args.max_body_bytes,
            ingestor_id,
            producer: args.producer,
            producer_overrides: chronik_harness::results::ClientProperties(producer_overrides),
            auth_token: args
                .auth_token_file
                .as_deref()
                .map(crate::auth::load_token)
                .transpose()?,
            metrics_listen: args.metrics_listen,
            tls: args.tls.settings(false)?,
        })
    }
}

impl Config {
    /// A config for tests and embedding: defaults of every flag, this broker.
    pub fn for_bootstrap(bootstrap_servers: &str) -> Config {
        let args = Args::parse_from(["chronik-ingestor", "--bootstrap-servers", bootstrap_servers]);
        // Defaults are valid by construction (checked by `defaults_are_valid`).
        Config::try_from(args).unwrap_or_else(|e| panic!("default config is invalid: {e:#}"))
    }

    /// The librdkafka producer properties this config stands for.
    pub fn producer_properties(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.bootstrap_servers)
            .set(
                "client.id",
                format!("chronik-ingestor-{}", self.ingestor_id),
            )
            .set("acks", self.acks.to_string())
            .set("linger.ms", self.linger.as_millis().to_string())
            .set("batch.num.messages", self.batch_num_messages.to_string())
            .set("compression.type", self.compression.as_str())
            .set("enable.idempotence", self.enable_idempotence.to_string())
            .set(
                "queue.buffering.max.messages",
                self.queue_max_messages.to_string(),
            )
            .set(
                "queue.buffering.max.kbytes",
                self.queue_max_kbytes.to_string(),
            )
            .set(
                "message.timeout.ms",
                self.message_timeout.as_millis().to_string(),
            );
        // Come back quickly after a broker restart or move (librdkafka's
        // defaults: 30 s connection setup, backoff to 10 s); -X overrides.
        for (k, v) in chronik_harness::reconnect::LIBRDKAFKA_RECONNECT {
            c.set(k, v);
        }
        for (k, v) in self.producer_overrides.iter() {
            c.set(k, v);
        }
        c
    }
}

/// The machine's hostname (Linux), falling back to `$HOSTNAME`, then "ingestor".
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "ingestor".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_follow_test_6() {
        let c = Config::for_bootstrap("127.0.0.1:9092");
        assert_eq!(c.acks, Acks::Leader);
        assert_eq!(c.linger, Duration::from_millis(5));
        assert_eq!(c.batch_num_messages, 10_000);
        assert_eq!(c.compression, Compression::Snappy);
        assert!(!c.ingestor_id.is_empty());
        let props = c.producer_properties();
        assert_eq!(props.get("acks"), Some("1"));
        assert_eq!(props.get("compression.type"), Some("snappy"));
        assert_eq!(
            props.get("socket.connection.setup.timeout.ms"),
            Some("3000")
        );
        assert_eq!(props.get("reconnect.backoff.max.ms"), Some("1000"));
        let mut own = Config::for_bootstrap("127.0.0.1:9092");
        own.producer_overrides
            .0
            .push(("socket.connection.setup.timeout.ms".into(), "10000".into()));
        assert_eq!(
            own.producer_properties()
                .get("socket.connection.setup.timeout.ms"),
            Some("10000"),
            "-X wins over the harness's default"
        );
    }

    #[test]
    fn flags_parse_and_are_checked() {
        let parse = |extra: &[&str]| {
            let mut argv = vec!["chronik-ingestor"];
            argv.extend_from_slice(extra);
            Args::try_parse_from(argv)
                .map_err(|e| anyhow::anyhow!("{e}"))
                .and_then(Config::try_from)
        };
        let c = parse(&[
            "--acks",
            "-1",
            "--enable-idempotence",
            "true",
            "-X",
            "socket.nagle.disable=true",
            "--ingestor-id",
            "i-1",
        ])
        .expect("valid");
        assert_eq!(
            (c.acks, c.enable_idempotence, c.ingestor_id.as_str()),
            (Acks::All, true, "i-1")
        );
        assert_eq!(c.linger, Duration::from_millis(LINGER_MS_ACKS_ALL));
        let explicit = parse(&["--acks", "all", "--linger-ms", "7"]).expect("valid");
        assert_eq!(explicit.linger, Duration::from_millis(7));
        // Kafka's producer default: idempotent with acks=all, unless turned off
        assert!(explicit.enable_idempotence);
        assert!(!parse(&["--acks", "1"]).expect("valid").enable_idempotence);
        assert!(
            !parse(&["--acks", "all", "--enable-idempotence", "false"])
                .expect("valid")
                .enable_idempotence
        );
        assert_eq!(
            parse(&["--acks", "0"]).expect("valid").linger,
            Duration::from_millis(LINGER_MS)
        );
        assert_eq!(
            c.producer_properties().get("socket.nagle.disable"),
            Some("true")
        );
        assert!(parse(&["--acks", "2"]).is_err());
        assert!(
            parse(&["--enable-idempotence", "true"]).is_err(),
            "idempotence needs acks=all"
        );
        assert!(parse(&["--topic", "no spaces"]).is_err());
        assert!(parse(&["-X", "novalue"]).is_err());
    }
}
