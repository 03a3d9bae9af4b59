//! Command line and environment of `chronik-bench`.
//!
//! Owns: the clap [`Args`] (every flag also an environment variable: the
//! bootstrap servers as `KAFKA_BOOTSTRAP_SERVERS`, everything else as
//! `CHRONIK_BENCH_*`), the value enums, and the plain validated [`Config`]
//! the rest of the tool receives. Flag names are the seed tool's (seed 004).
//! Must not: read the environment anywhere else.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use chronik_harness::duration::parse_duration;
use clap::{Parser, ValueEnum};
use serde::Serialize;

/// What a run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Produce and measure acknowledgements.
    Produce,
    /// Consume (and verify envelopes where present).
    Consume,
    /// Produce and consume at the same time; verify every message end to end.
    RoundTrip,
    /// Send Metadata requests and measure their latency.
    Metadata,
}

impl Mode {
    /// The seed's spelling in the table and CSV (`Produce`, …).
    pub fn label(self) -> &'static str {
        match self {
            Mode::Produce => "Produce",
            Mode::Consume => "Consume",
            Mode::RoundTrip => "RoundTrip",
            Mode::Metadata => "Metadata",
        }
    }
}

/// Producer `acks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
pub enum Acks {
    #[value(name = "0")]
    #[serde(rename = "0")]
    None,
    #[value(name = "1")]
    #[serde(rename = "1")]
    Leader,
    #[value(name = "all", alias = "-1")]
    #[serde(rename = "all")]
    All,
}

impl Acks {
    pub fn as_kafka(self) -> &'static str {
        match self {
            Acks::None => "0",
            Acks::Leader => "1",
            Acks::All => "all",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    pub fn as_kafka(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    /// The seed's spelling (`None`, `Snappy`, …).
    pub fn label(self) -> &'static str {
        match self {
            Compression::None => "None",
            Compression::Gzip => "Gzip",
            Compression::Snappy => "Snappy",
            Compression::Lz4 => "Lz4",
            Compression::Zstd => "Zstd",
        }
    }
}

/// Record keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyPattern {
    /// No key: the client's partitioner spreads messages.
    None,
    /// The message's sequence number (8 bytes, big-endian): one key per message.
    Sequential,
    /// One of 1024 pre-generated random 16-byte keys.
    Random,
    /// The same key for every message (one partition).
    Fixed,
}

/// Record values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PayloadPattern {
    /// Random bytes (incompressible).
    Random,
    /// All zero bytes (maximally compressible).
    Zeros,
    /// Repeated ASCII text (compresses like logs).
    Text,
}

/// Where consume mode starts reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ConsumeFrom {
    Earliest,
    Latest,
}

fn parse_positive_f64(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("{s:?} is not a positive number")),
    }
}

/// `chronik-bench`: measure a Kafka-compatible broker over the Kafka protocol.
///
/// Closed loop (no --rate): each producer sends as fast as its client
/// accepts. Open loop (--rate): messages follow a fixed schedule and latency
/// is measured from each message's intended send time.
#[derive(Debug, Parser)]
#[command(name = "chronik-bench", version, about, long_about = None)]
pub struct Args {
    /// Kafka bootstrap servers, host:port[,host:port…].
    #[arg(
        long,
        env = "KAFKA_BOOTSTRAP_SERVERS",
        default_value = "localhost:9092"
    )]
    pub bootstrap_servers: String,
    /// Topic to produce to / consume from.
    #[arg(long, env = "CHRONIK_BENCH_TOPIC", default_value = "chronik-bench")]
    pub topic: String,
    #[arg(
        long,
        env = "CHRONIK_BENCH_MODE",
        value_enum,
        default_value = "produce"
    )]
    pub mode: Mode,
    /// Producer tasks (each its own client, producer id and sequence); consume
    /// mode: consumer threads sharing the partitions; metadata mode: requesters.
    #[arg(long, env = "CHRONIK_BENCH_CONCURRENCY", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub concurrency: u32,
    /// Record value size in bytes (the 32-byte envelope travels as a header on top).
    #[arg(long, env = "CHRONIK_BENCH_MESSAGE_SIZE", default_value_t = 1024)]
    pub message_size: usize,
    /// Measured window (after warmup), e.g. 30s, 2m. Default 30s; with
    /// --message-count the run lasts until the count unless this is given.
    #[arg(long, env = "CHRONIK_BENCH_DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Load applied before the measured window, excluded from every figure.
    #[arg(long, env = "CHRONIK_BENCH_WARMUP_DURATION", default_value = "5s", value_parser = parse_duration)]
    pub warmup_duration: Duration,
    /// Stop after this many messages in the measured window (all tasks together).
    #[arg(long, env = "CHRONIK_BENCH_MESSAGE_COUNT")]
    pub message_count: Option<u64>,
    /// Producer acks: 0, 1, all (= -1).
    #[arg(
        long,
        env = "CHRONIK_BENCH_ACKS",
        value_enum,
        default_value = "all",
        allow_hyphen_values = true
    )]
    pub acks: Acks,
    #[arg(
        long,
        env = "CHRONIK_BENCH_COMPRESSION",
        value_enum,
        default_value = "none"
    )]
    pub compression: Compression,
    /// Producer batch.size in bytes.
    #[arg(long, env = "CHRONIK_BENCH_BATCH_SIZE", default_value_t = 16384)]
    pub batch_size: u32,
    /// Producer linger.ms.
    #[arg(long, env = "CHRONIK_BENCH_LINGER_MS", default_value_t = 0)]
    pub linger_ms: u32,
    /// Partitions when creating the topic.
    #[arg(long, env = "CHRONIK_BENCH_PARTITIONS", default_value_t = 1)]
    pub partitions: i32,
    /// Replication factor when creating the topic.
    #[arg(long, env = "CHRONIK_BENCH_REPLICATION_FACTOR", default_value_t = 1)]
    pub replication_factor: i32,
    /// Create the topic first (an existing topic is kept as it is).
    #[arg(long, env = "CHRONIK_BENCH_CREATE_TOPIC")]
    pub create_topic: bool,
    /// Delete the topic when the run ends.
    #[arg(long, env = "CHRONIK_BENCH_DELETE_TOPIC_AFTER")]
    pub delete_topic_after: bool,
    #[arg(
        long,
        env = "CHRONIK_BENCH_KEY_PATTERN",
        value_enum,
        default_value = "none"
    )]
    pub key_pattern: KeyPattern,
    #[arg(
        long,
        env = "CHRONIK_BENCH_PAYLOAD_PATTERN",
        value_enum,
        default_value = "random"
    )]
    pub payload_pattern: PayloadPattern,
    /// Seconds between periodic lines (interval rate and interval p99).
    #[arg(long, env = "CHRONIK_BENCH_REPORT_INTERVAL_SECS", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub report_interval_secs: u64,
    /// Append one CSV row per run (header written when the file is new).
    #[arg(long, env = "CHRONIK_BENCH_CSV_OUTPUT")]
    pub csv_output: Option<PathBuf>,
    /// Write the result as OpenMessaging-Benchmark-style JSON plus a `meta` block.
    #[arg(long, env = "CHRONIK_BENCH_JSON_OUTPUT")]
    pub json_output: Option<PathBuf>,
    /// Open loop: total intended msg/s across all producer tasks.
    #[arg(long, env = "CHRONIK_BENCH_RATE", value_parser = parse_positive_f64)]
    pub rate: Option<f64>,
    /// Directory for raw .hlog interval logs and result.json (one sub-directory per run).
    #[arg(long, env = "CHRONIK_BENCH_RESULTS_DIR")]
    pub results_dir: Option<PathBuf>,
    /// Exit non-zero when the run is invalid (achieved < 95 % of --rate) or
    /// verification found lost, duplicated, out-of-order or corrupt messages.
    #[arg(long, env = "CHRONIK_BENCH_STRICT")]
    pub strict: bool,
    /// Step the rate upward until the SLO or the validity gate fails; report the knee.
    #[arg(long, env = "CHRONIK_BENCH_SWEEP")]
    pub sweep: bool,
    /// First sweep rate (msg/s).
    #[arg(long, env = "CHRONIK_BENCH_SWEEP_START", default_value_t = 1000.0, value_parser = parse_positive_f64)]
    pub sweep_start: f64,
    /// Add this many msg/s per step (default: multiply by --sweep-factor).
    #[arg(long, env = "CHRONIK_BENCH_SWEEP_STEP", value_parser = parse_positive_f64, conflicts_with = "sweep_factor")]
    pub sweep_step: Option<f64>,
    /// Multiply the rate by this per step (> 1).
    #[arg(long, env = "CHRONIK_BENCH_SWEEP_FACTOR", value_parser = parse_positive_f64)]
    pub sweep_factor: Option<f64>,
    /// Highest rate a sweep tries.
    #[arg(long, env = "CHRONIK_BENCH_SWEEP_MAX", default_value_t = 1_000_000.0, value_parser = parse_positive_f64)]
    pub sweep_max: f64,
    /// Latency objective of a sweep step: p99 response time (round-trip: end-to-end) in ms.
    #[arg(long, env = "CHRONIK_BENCH_SLO_P99_MS", default_value_t = 100.0, value_parser = parse_positive_f64)]
    pub slo_p99_ms: f64,
    /// Broker process to sample CPU and RSS of (repeatable, or comma-separated in the env var).
    #[arg(
        long = "broker-pid",
        env = "CHRONIK_BENCH_BROKER_PID",
        value_delimiter = ','
    )]
    pub broker_pids: Vec<u32>,
    /// Unacknowledged messages one producer task may hold (queue.buffering.max.messages).
    #[arg(long, env = "CHRONIK_BENCH_MAX_IN_FLIGHT", default_value_t = 100_000,
          value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub max_in_flight: u32,
    /// After producing stops: how long to wait for outstanding acks and, in
    /// round-trip, for the consumer to read everything acknowledged.
    #[arg(long, env = "CHRONIK_BENCH_DRAIN_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub drain_timeout: Duration,
    /// Consume mode: where to start reading.
    #[arg(
        long,
        env = "CHRONIK_BENCH_CONSUME_FROM",
        value_enum,
        default_value = "earliest"
    )]
    pub consume_from: ConsumeFrom,
    /// Consume mode: end the run once every partition is read to its end.
    #[arg(long, env = "CHRONIK_BENCH_UNTIL_CAUGHT_UP")]
    pub until_caught_up: bool,
    /// Consumer fetch.wait.max.ms.
    #[arg(long, env = "CHRONIK_BENCH_FETCH_MAX_WAIT_MS", default_value_t = 100)]
    pub fetch_max_wait_ms: u32,
    /// Send records without the `chronik-env` envelope header (produce mode only).
    #[arg(long, env = "CHRONIK_BENCH_NO_ENVELOPE")]
    pub no_envelope: bool,
    /// Producer enable.idempotence.
    #[arg(long, env = "CHRONIK_BENCH_ENABLE_IDEMPOTENCE")]
    pub enable_idempotence: bool,
    /// Extra librdkafka property KEY=VALUE for every client (repeatable).
    #[arg(
        long = "client-property",
        env = "CHRONIK_BENCH_CLIENT_PROPERTY",
        value_delimiter = ';'
    )]
    pub client_properties: Vec<String>,
    /// Test hook: producer task 0 never sends this sequence number (a gap).
    #[arg(long, env = "CHRONIK_BENCH_INJECT_SKIP_SEQUENCE", hide = true)]
    pub inject_skip_sequence: Option<u64>,
    /// Test hook: producer task 0 records this sequence as acknowledged
    /// without sending it (a broker that acked and lost it).
    #[arg(long, env = "CHRONIK_BENCH_INJECT_PHANTOM_ACK", hide = true)]
    pub inject_phantom_ack: Option<u64>,
    /// Test hook: producer task 0 sends this sequence twice, same envelope.
    #[arg(long, env = "CHRONIK_BENCH_INJECT_DUPLICATE", hide = true)]
    pub inject_duplicate: Option<u64>,
}

/// Test hooks applied by producer task 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Injections {
    pub skip_sequence: Option<u64>,
    pub phantom_ack: Option<u64>,
    pub duplicate: Option<u64>,
}

impl Injections {
    pub fn any(&self) -> bool {
        self.skip_sequence.is_some() || self.phantom_ack.is_some() || self.duplicate.is_some()
    }
}

/// How a sweep moves from one rate to the next.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum SweepStep {
    Add(f64),
    Multiply(f64),
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepConfig {
    pub start: f64,
    pub step: SweepStep,
    pub max: f64,
    pub slo_p99_ms: f64,
}

/// The validated settings of a run, as the rest of the tool sees them.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Config {
    pub bootstrap_servers: String,
    pub topic: String,
    pub mode: Mode,
    pub concurrency: u32,
    pub message_size: usize,
    /// `None`: until `message_count` is reached.
    #[serde(serialize_with = "opt_secs")]
    pub duration: Option<Duration>,
    #[serde(serialize_with = "secs")]
    pub warmup_duration: Duration,
    pub message_count: Option<u64>,
    pub acks: Acks,
    pub compression: Compression,
    pub batch_size: u32,
    pub linger_ms: u32,
    pub partitions: i32,
    pub replication_factor: i32,
    pub create_topic: bool,
    pub delete_topic_after: bool,
    pub key_pattern: KeyPattern,
    pub payload_pattern: PayloadPattern,
    pub report_interval_secs: u64,
    pub csv_output: Option<PathBuf>,
    pub json_output: Option<PathBuf>,
    pub rate: Option<f64>,
    pub results_dir: Option<PathBuf>,
    pub strict: bool,
    pub sweep: Option<SweepConfig>,
    pub broker_pids: Vec<u32>,
    pub max_in_flight: u32,
    #[serde(serialize_with = "secs")]
    pub drain_timeout: Duration,
    pub consume_from: ConsumeFrom,
    pub until_caught_up: bool,
    pub fetch_max_wait_ms: u32,
    pub envelope: bool,
    pub enable_idempotence: bool,
    pub client_properties: chronik_harness::results::ClientProperties,
    pub injections: Injections,
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

fn opt_secs<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

/// The measured window when neither --duration nor --message-count is given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(30);

/// Share of `--rate` a run must achieve to be valid.
pub const VALIDITY_THRESHOLD: f64 = 0.95;

impl TryFrom<Args> for Config {
    type Error = anyhow::Error;

    fn try_from(a: Args) -> Result<Config> {
        if a.message_size == 0 || a.message_size > 64 * 1024 * 1024 {
            bail!(
                "--message-size must be 1 ..= 64 MiB, got {}",
                a.message_size
            );
        }
        if a.partitions < 1 {
            bail!("--partitions must be at least 1, got {}", a.partitions);
        }
        if a.replication_factor < 1 {
            bail!(
                "--replication-factor must be at least 1, got {}",
                a.replication_factor
            );
        }
        let duration = match (a.duration, a.message_count) {
            (Some(d), _) if d.is_zero() => bail!("--duration must be above 0"),
            (Some(d), _) => Some(d),
            (None, Some(_)) => None,
            (None, None) => Some(DEFAULT_DURATION),
        };
        if a.message_count == Some(0) {
            bail!("--message-count must be at least 1");
        }
        if a.topic.is_empty() {
            bail!("--topic must not be empty");
        }
        let sweep = if a.sweep {
            let step = match (a.sweep_step, a.sweep_factor) {
                (Some(add), _) => SweepStep::Add(add),
                (None, Some(f)) if f > 1.0 => SweepStep::Multiply(f),
                (None, Some(f)) => bail!("--sweep-factor must be above 1, got {f}"),
                (None, None) => SweepStep::Multiply(1.5),
            };
            if !matches!(a.mode, Mode::Produce | Mode::RoundTrip) {
                bail!("--sweep needs --mode produce or round-trip");
            }
            if a.sweep_start > a.sweep_max {
                bail!(
                    "--sweep-start {} is above --sweep-max {}",
                    a.sweep_start,
                    a.sweep_max
                );
            }
            Some(SweepConfig {
                start: a.sweep_start,
                step,
                max: a.sweep_max,
                slo_p99_ms: a.slo_p99_ms,
            })
        } else {
            None
        };
        let client_properties = a
            .client_properties
            .iter()
            .filter(|p| !p.trim().is_empty())
            .map(|p| {
                p.split_once('=')
                    .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                    .with_context(|| format!("--client-property {p:?} is not KEY=VALUE"))
            })
            .collect::<Result<Vec<_>>>()?;
        let envelope = !a.no_envelope || a.mode == Mode::RoundTrip;
        Ok(Config {
            bootstrap_servers: a.bootstrap_servers,
            topic: a.topic,
            mode: a.mode,
            concurrency: a.concurrency,
            message_size: a.message_size,
            duration,
            warmup_duration: a.warmup_duration,
            message_count: a.message_count,
            acks: a.acks,
            compression: a.compression,
            batch_size: a.batch_size,
            linger_ms: a.linger_ms,
            partitions: a.partitions,
            replication_factor: a.replication_factor,
            create_topic: a.create_topic,
            delete_topic_after: a.delete_topic_after,
            key_pattern: a.key_pattern,
            payload_pattern: a.payload_pattern,
            report_interval_secs: a.report_interval_secs,
            csv_output: a.csv_output,
            json_output: a.json_output,
            rate: a.rate,
            results_dir: a.results_dir,
            strict: a.strict,
            sweep,
            broker_pids: a.broker_pids,
            max_in_flight: a.max_in_flight,
            drain_timeout: a.drain_timeout,
            consume_from: a.consume_from,
            until_caught_up: a.until_caught_up,
            fetch_max_wait_ms: a.fetch_max_wait_ms,
            envelope,
            enable_idempotence: a.enable_idempotence,
            client_properties: chronik_harness::results::ClientProperties(client_properties),
            injections: Injections {
                skip_sequence: a.inject_skip_sequence,
                phantom_ack: a.inject_phantom_ack,
                duplicate: a.inject_duplicate,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Config> {
        let mut full = vec!["chronik-bench"];
        full.extend_from_slice(args);
        Config::try_from(Args::try_parse_from(full)?)
    }

    #[test]
    fn seed_flags_parse() {
        let c = parse(&[
            "--bootstrap-servers",
            "h:1",
            "--topic",
            "t",
            "--concurrency",
            "16",
            "--message-size",
            "2048",
            "--duration",
            "20s",
            "--warmup-duration",
            "3s",
            "--compression",
            "snappy",
            "--report-interval-secs",
            "5",
            "--csv-output",
            "/tmp/x.csv",
            "--acks",
            "-1",
            "--batch-size",
            "65536",
            "--linger-ms",
            "5",
        ])
        .expect("parses");
        assert_eq!(c.bootstrap_servers, "h:1");
        assert_eq!(c.concurrency, 16);
        assert_eq!(c.duration, Some(Duration::from_secs(20)));
        assert_eq!(c.warmup_duration, Duration::from_secs(3));
        assert_eq!(c.compression, Compression::Snappy);
        assert_eq!(c.acks, Acks::All);
        assert_eq!(c.batch_size, 65536);
        assert!(c.sweep.is_none());
        assert!(c.envelope);
    }

    #[test]
    fn acks_accept_every_spelling() {
        for (s, want) in [
            ("0", Acks::None),
            ("1", Acks::Leader),
            ("all", Acks::All),
            ("-1", Acks::All),
        ] {
            assert_eq!(parse(&["--acks", s]).expect("parses").acks, want, "{s}");
        }
        assert!(parse(&["--acks", "2"]).is_err());
    }

    #[test]
    fn durations_accept_plain_seconds_and_units() {
        assert_eq!(
            parse(&["--duration", "1.5"]).expect("p").duration,
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            parse(&["--duration", "2m"]).expect("p").duration,
            Some(Duration::from_secs(120))
        );
        assert_eq!(parse(&[]).expect("p").duration, Some(DEFAULT_DURATION));
        assert_eq!(parse(&["--message-count", "10"]).expect("p").duration, None);
        assert!(parse(&["--duration", "soon"]).is_err());
    }

    #[test]
    fn sweep_defaults_to_a_factor_and_rejects_consume() {
        let c = parse(&["--sweep", "--sweep-start", "100", "--sweep-max", "1000"]).expect("p");
        let s = c.sweep.expect("sweep");
        assert_eq!(s.step, SweepStep::Multiply(1.5));
        let c = parse(&["--sweep", "--sweep-step", "500"]).expect("p");
        assert_eq!(c.sweep.expect("sweep").step, SweepStep::Add(500.0));
        assert!(parse(&["--sweep", "--mode", "consume"]).is_err());
        assert!(parse(&["--sweep", "--sweep-factor", "0.5"]).is_err());
    }

    #[test]
    fn invalid_values_are_refused() {
        assert!(parse(&["--rate", "0"]).is_err());
        assert!(parse(&["--message-size", "0"]).is_err());
        assert!(parse(&["--concurrency", "0"]).is_err());
        assert!(parse(&["--client-property", "novalue"]).is_err());
        let c = parse(&[
            "--client-property",
            "socket.nagle.disable=true;debug=broker",
        ])
        .expect("p");
        assert_eq!(c.client_properties.len(), 2);
    }

    #[test]
    fn round_trip_always_carries_the_envelope() {
        assert!(!parse(&["--no-envelope"]).expect("p").envelope);
        assert!(
            parse(&["--no-envelope", "--mode", "round-trip"])
                .expect("p")
                .envelope
        );
    }
}
