//! Command line and environment: one clap `Args` (every flag also an
//! environment variable), turned into plain, typed `Config`s.
//!
//! Owns: flag names, defaults, parsing and validation. Must not: read the
//! environment anywhere else.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use chronik_harness::duration::parse_duration;
use clap::{Parser, Subcommand};

use crate::Error;

#[derive(Debug, Parser)]
#[command(
    name = "chronik-consumer",
    version,
    about = "Verifying Kafka consumer: proves every acknowledged message arrived exactly once, in order, intact, and how long it took.",
    args_conflicts_with_subcommands = true
)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Combine replica reports (interval-set union) and decide loss, gaps and
    /// duplicates globally.
    Merge(MergeArgs),
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Kafka bootstrap servers, host:port[,host:port...]
    #[arg(
        long,
        env = "KAFKA_BOOTSTRAP_SERVERS",
        default_value = "localhost:9092"
    )]
    pub bootstrap_servers: String,
    /// Topic to consume (repeatable; comma-separated in the environment)
    #[arg(long = "topic", env = "CHRONIK_CONSUMER_TOPIC", value_delimiter = ',')]
    pub topics: Vec<String>,
    /// Consumer group id; replicas with the same group split the partitions
    #[arg(
        long,
        env = "CHRONIK_CONSUMER_GROUP",
        default_value = "chronik-consumer"
    )]
    pub group: String,
    /// Serve /metrics, /summary and /health here (port 0 = any free port)
    #[arg(long, env = "CHRONIK_CONSUMER_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Write the final report JSON here (and the latency interval log beside
    /// it, same name with .hlog) on SIGTERM/SIGINT or when idle
    #[arg(long, env = "CHRONIK_CONSUMER_REPORT")]
    pub report: Option<PathBuf>,
    /// Stop once nothing new was consumed for this long (seconds, or e.g. "500ms")
    #[arg(long, env = "CHRONIK_CONSUMER_UNTIL_IDLE", value_parser = parse_duration)]
    pub until_idle: Option<Duration>,
    /// Start from the earliest offset when the group has no committed offset
    /// (otherwise from the latest)
    #[arg(long, env = "CHRONIK_CONSUMER_FROM_BEGINNING")]
    pub from_beginning: bool,
    /// Producer ledger: a JSON file or a plain http:// URL such as an
    /// ingestor's /ledger (repeatable; comma-separated in the environment)
    #[arg(
        long = "ledger",
        env = "CHRONIK_CONSUMER_LEDGER",
        value_delimiter = ','
    )]
    pub ledgers: Vec<String>,
    /// How often consumed offsets are committed (asynchronously); a final
    /// synchronous commit happens at shutdown
    #[arg(long, env = "CHRONIK_CONSUMER_COMMIT_INTERVAL", default_value = "1s", value_parser = parse_duration)]
    pub commit_interval: Duration,
    /// Length of each interval in the .hlog latency log
    #[arg(long, env = "CHRONIK_CONSUMER_HLOG_INTERVAL", default_value = "1s", value_parser = parse_duration)]
    pub hlog_interval: Duration,
    /// Kafka client.id (default: chronik-consumer-<hostname>-<pid>)
    #[arg(long, env = "CHRONIK_CONSUMER_CLIENT_ID")]
    pub client_id: Option<String>,
    /// Extra librdkafka consumer property KEY=VALUE (repeatable; comma-separated
    /// in the environment), e.g. partition.assignment.strategy=roundrobin
    #[arg(
        short = 'X',
        long = "consumer-property",
        env = "CHRONIK_CONSUMER_PROPERTIES",
        value_delimiter = ','
    )]
    pub consumer_properties: Vec<String>,
    /// Kafka client.rack: the rack (zone) this consumer runs in. A broker
    /// with a rack-aware replica.selector.class (KIP-392) then points its
    /// fetches at the in-sync replica in the same rack
    #[arg(long, env = "CHRONIK_CONSUMER_CLIENT_RACK")]
    pub client_rack: Option<String>,
    /// Share-group mode (KIP-932 queues): join share group NAME instead of
    /// a consumer group; records are acknowledged (ACCEPT) one by one and
    /// verified at least once (redeliveries counted, not faults)
    #[arg(long, env = "CHRONIK_CONSUMER_SHARE_GROUP")]
    pub share_group: Option<String>,
    /// Share mode: a group config KEY=VALUE set (IncrementalAlterConfigs on
    /// the GROUP resource) before joining, e.g.
    /// share.record.lock.duration.ms=15000 (repeatable; comma-separated in
    /// the environment). --from-beginning adds share.auto.offset.reset=earliest
    #[arg(
        long = "share-config",
        env = "CHRONIK_CONSUMER_SHARE_CONFIGS",
        value_delimiter = ','
    )]
    pub share_configs: Vec<String>,
    /// Share mode: how often the report is checkpointed while records come
    /// in; acknowledgements leave only once a checkpoint naming them is on
    /// disk, so a member killed with SIGKILL leaves a report covering every
    /// record it may have accepted
    #[arg(long, env = "CHRONIK_CONSUMER_CHECKPOINT_INTERVAL", default_value = "200ms", value_parser = parse_duration)]
    pub checkpoint_interval: Duration,
}

#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// Replica reports (written by --report) to combine
    #[arg(required = true)]
    pub reports: Vec<PathBuf>,
    /// Producer ledger file or http:// URL (repeatable)
    #[arg(
        long = "ledger",
        env = "CHRONIK_CONSUMER_LEDGER",
        value_delimiter = ','
    )]
    pub ledgers: Vec<String>,
    /// Write the merged report here (and the merged latency as .hlog beside
    /// it); without it the merged report goes to stdout
    #[arg(long, env = "CHRONIK_CONSUMER_MERGE_REPORT")]
    pub report: Option<PathBuf>,
}

/// The effective configuration of a consuming run.
#[derive(Debug, Clone)]
pub struct Config {
    pub bootstrap_servers: String,
    pub topics: Vec<String>,
    pub group: String,
    pub listen: Option<SocketAddr>,
    pub report: Option<PathBuf>,
    pub until_idle: Option<Duration>,
    pub from_beginning: bool,
    pub ledgers: Vec<String>,
    pub commit_interval: Duration,
    pub hlog_interval: Duration,
    pub client_id: String,
    /// librdkafka's `client.rack`, sent in Fetch v11+ as `rack_id`
    pub client_rack: Option<String>,
    pub consumer_properties: chronik_harness::results::ClientProperties,
    /// Share-group mode: the share group's name.
    pub share_group: Option<String>,
    /// Share mode: group configs set before joining.
    pub share_configs: Vec<(String, String)>,
    pub checkpoint_interval: Duration,
}

impl TryFrom<RunArgs> for Config {
    type Error = Error;

    fn try_from(a: RunArgs) -> Result<Config, Error> {
        let topics: Vec<String> = a
            .topics
            .into_iter()
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .collect();
        if topics.is_empty() {
            return Err(Error::Config("at least one --topic is required".into()));
        }
        if a.commit_interval.is_zero() || a.hlog_interval.is_zero() {
            return Err(Error::Config(
                "--commit-interval and --hlog-interval must be positive".into(),
            ));
        }
        let consumer_properties = a
            .consumer_properties
            .iter()
            .filter(|p| !p.trim().is_empty())
            .map(|p| match p.split_once('=') {
                Some((k, v)) if !k.trim().is_empty() => {
                    Ok((k.trim().to_string(), v.trim().to_string()))
                }
                _ => Err(Error::Config(format!(
                    "consumer property {p:?} is not KEY=VALUE"
                ))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let share_configs = a
            .share_configs
            .iter()
            .filter(|p| !p.trim().is_empty())
            .map(|p| match p.split_once('=') {
                Some((k, v)) if k.trim().starts_with("share.") => {
                    Ok((k.trim().to_string(), v.trim().to_string()))
                }
                _ => Err(Error::Config(format!(
                    "share config {p:?} is not share.KEY=VALUE"
                ))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let share_group = a
            .share_group
            .map(|g| g.trim().to_string())
            .filter(|g| !g.is_empty());
        if share_group.is_none() && !share_configs.is_empty() {
            return Err(Error::Config("--share-config needs --share-group".into()));
        }
        if a.checkpoint_interval.is_zero() {
            return Err(Error::Config(
                "--checkpoint-interval must be positive".into(),
            ));
        }
        let client_rack = match a.client_rack.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(rack) if consumer_properties.iter().any(|(k, _)| k == "client.rack") => {
                return Err(Error::Config(format!(
                    "--client-rack {rack:?} and -X client.rack both given: give one"
                )))
            }
            Some(rack) => Some(rack.to_string()),
        };
        let client_id = a.client_id.unwrap_or_else(|| {
            let host =
                std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string());
            format!(
                "chronik-consumer-{}-{}",
                host.unwrap_or_else(|_| "host".into()),
                std::process::id()
            )
        });
        Ok(Config {
            bootstrap_servers: a.bootstrap_servers,
            topics,
            group: a.group,
            listen: a.listen,
            report: a.report,
            until_idle: a.until_idle,
            from_beginning: a.from_beginning,
            ledgers: a.ledgers,
            commit_interval: a.commit_interval,
            hlog_interval: a.hlog_interval,
            client_id,
            client_rack,
            consumer_properties: chronik_harness::results::ClientProperties(consumer_properties),
            share_group,
            share_configs,
            checkpoint_interval: a.checkpoint_interval,
        })
    }
}

impl Config {
    /// The settings block of the report's metadata.
    pub fn settings_json(&self) -> serde_json::Value {
        serde_json::json!({
            "bootstrapServers": self.bootstrap_servers,
            "topics": self.topics,
            "group": self.group,
            "listen": self.listen.map(|a| a.to_string()),
            "report": self.report.as_ref().map(|p| p.display().to_string()),
            "untilIdleSecs": self.until_idle.map(|d| d.as_secs_f64()),
            "fromBeginning": self.from_beginning,
            "ledgers": self.ledgers,
            "commitIntervalSecs": self.commit_interval.as_secs_f64(),
            "hlogIntervalSecs": self.hlog_interval.as_secs_f64(),
            "clientId": self.client_id,
            "clientRack": self.client_rack,
            "consumerProperties": self.consumer_properties.shown(),
            "shareGroup": self.share_group,
            "shareConfigs": self.share_configs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
            "checkpointIntervalSecs": self.checkpoint_interval.as_secs_f64(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_become_a_config() {
        let args = Args::try_parse_from([
            "chronik-consumer",
            "--topic",
            "a",
            "--topic",
            "b",
            "--until-idle",
            "2",
            "-X",
            "session.timeout.ms=6000",
            "--from-beginning",
        ])
        .expect("parses");
        assert!(args.command.is_none());
        let c = Config::try_from(args.run).expect("valid");
        assert_eq!(c.topics, ["a", "b"]);
        assert_eq!(c.until_idle, Some(Duration::from_secs(2)));
        assert!(c.from_beginning);
        assert_eq!(
            *c.consumer_properties,
            [("session.timeout.ms".to_string(), "6000".to_string())]
        );
    }

    #[test]
    fn client_rack_is_client_rack_once() {
        let parse = |extra: &[&str]| {
            let mut argv = vec!["chronik-consumer", "--topic", "t"];
            argv.extend_from_slice(extra);
            Config::try_from(Args::try_parse_from(argv).expect("parses").run)
        };
        let c = parse(&["--client-rack", "b"]).expect("valid");
        assert_eq!(c.client_rack.as_deref(), Some("b"));
        assert_eq!(c.settings_json()["clientRack"], "b");
        // empty (an unset zone label) means no rack, as when not given
        assert_eq!(
            parse(&["--client-rack", " "]).expect("valid").client_rack,
            None
        );
        assert_eq!(parse(&[]).expect("valid").client_rack, None);
        assert!(parse(&["--client-rack", "b", "-X", "client.rack=c"]).is_err());
    }

    #[test]
    fn merge_is_a_subcommand_and_run_needs_a_topic() {
        let args = Args::try_parse_from([
            "chronik-consumer",
            "merge",
            "a.json",
            "b.json",
            "--ledger",
            "l.json",
        ])
        .expect("parses");
        match args.command {
            Some(Command::Merge(m)) => {
                assert_eq!(m.reports.len(), 2);
                assert_eq!(m.ledgers, ["l.json"]);
            }
            None => panic!("merge not parsed"),
        }
        let no_topic = Args::try_parse_from(["chronik-consumer"]).expect("parses");
        assert!(Config::try_from(no_topic.run).is_err());
        let bad = Args::try_parse_from(["chronik-consumer", "--topic", "t", "-X", "novalue"])
            .expect("parses");
        assert!(Config::try_from(bad.run).is_err());
    }

    #[test]
    fn share_mode_flags() {
        let parse = |extra: &[&str]| {
            let mut argv = vec!["chronik-consumer", "--topic", "t"];
            argv.extend_from_slice(extra);
            Config::try_from(Args::try_parse_from(argv).expect("parses").run)
        };
        let c = parse(&[
            "--share-group",
            "q",
            "--share-config",
            "share.record.lock.duration.ms=15000",
            "--from-beginning",
        ])
        .expect("valid");
        assert_eq!(c.share_group.as_deref(), Some("q"));
        assert_eq!(
            crate::share::run::group_configs(&c),
            [
                (
                    "share.record.lock.duration.ms".to_string(),
                    "15000".to_string()
                ),
                (
                    "share.auto.offset.reset".to_string(),
                    "earliest".to_string()
                )
            ]
        );
        assert_eq!(c.checkpoint_interval, Duration::from_millis(200));
        assert!(
            parse(&["--share-config", "share.x=1"]).is_err(),
            "needs --share-group"
        );
        assert!(parse(&["--share-group", "q", "--share-config", "lock=1"]).is_err());
        assert!(parse(&["--share-group", "q", "--checkpoint-interval", "0"]).is_err());
        assert_eq!(parse(&[]).expect("valid").share_group, None);
    }
}
