//! Test scaffolding: a real chronik-server on 127.0.0.1 port 0
//! (`chronik_testkit`), a producer writing envelopes
//! (chronik_harness::Envelope) with a ledger of its acknowledgements, and
//! chronik-consumer processes (`chronik_testkit::Proc`). Every child process
//! is killed when dropped; waits poll readiness, never sleep blindly.

#![allow(dead_code)] // each test binary uses a different part

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use chronik_harness::intervals::IntervalSet;
use chronik_harness::{now_us, Envelope, ENVELOPE_HEADER};
use chronik_testkit::Proc;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::message::{DeliveryResult, Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::ClientContext;

pub const WAIT: Duration = Duration::from_secs(60);

/// A broker for one test (`chronik_testkit::Broker`) and a scratch dir for
/// the consumers' logs and reports.
pub struct Broker {
    pub bootstrap: String,
    pub dir: tempfile::TempDir,
    _server: chronik_testkit::Broker,
}

impl Broker {
    pub fn start() -> anyhow::Result<Broker> {
        let server = chronik_testkit::Broker::start(&[
            "--wal-profile",
            "low",
            "--group-initial-rebalance-delay-ms",
            "0",
        ])?;
        Ok(Broker {
            bootstrap: server.bootstrap(),
            dir: tempfile::tempdir()?,
            _server: server,
        })
    }

    pub fn create_topic(&self, topic: &str, partitions: i32) -> anyhow::Result<()> {
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .create()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
        let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
        for r in runtime.block_on(admin.create_topics([&new], &opts))? {
            r.map_err(|(t, e)| anyhow::anyhow!("creating {t}: {e}"))?;
        }
        Ok(())
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A chronik-consumer replica; `--listen 127.0.0.1:0` is always added and
    /// its address read from the LISTENING line.
    pub fn consumer(&self, name: &str, args: &[&str]) -> anyhow::Result<Replica> {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_chronik-consumer"));
        cmd.args([
            "--bootstrap-servers",
            &self.bootstrap,
            "--listen",
            "127.0.0.1:0",
        ])
        // Rebalances within a second instead of the 3 s heartbeat default.
        .args(["-X", "heartbeat.interval.ms=300"])
        .args(args)
        .env("CHRONIK_LOG", "info,librdkafka=warn");
        let mut process = Proc::spawn(name, cmd, &self.path(&format!("{name}.stderr")))?;
        let line = process.wait_line("LISTENING http=", WAIT)?;
        let http = line.trim_start_matches("LISTENING http=").to_string();
        Ok(Replica { process, http })
    }

    /// `chronik-consumer merge ...`: (exit code, merged report).
    pub fn merge(
        &self,
        reports: &[PathBuf],
        extra: &[&str],
    ) -> anyhow::Result<(i32, serde_json::Value)> {
        let out = self.path("merged.json");
        let status = Command::new(env!("CARGO_BIN_EXE_chronik-consumer"))
            .arg("merge")
            .args(reports)
            .args(extra)
            .arg("--report")
            .arg(&out)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()?;
        Ok((status.code().context("merge killed")?, read_json(&out)?))
    }
}

pub struct Replica {
    pub process: Proc,
    pub http: String,
}

impl Replica {
    pub fn get(&self, path: &str) -> anyhow::Result<String> {
        Ok(chronik_consumer::ledger::http_get(&format!(
            "http://{}{path}",
            self.http
        ))?)
    }

    pub fn summary(&self) -> anyhow::Result<serde_json::Value> {
        Ok(serde_json::from_str(&self.get("/summary")?)?)
    }

    /// Polls /summary until `ready` holds for it.
    pub fn wait_summary(
        &self,
        what: &str,
        ready: impl Fn(&serde_json::Value) -> bool,
    ) -> anyhow::Result<serde_json::Value> {
        let deadline = Instant::now() + WAIT;
        let mut last = serde_json::Value::Null;
        while Instant::now() < deadline {
            if let Ok(s) = self.summary() {
                if ready(&s) {
                    return Ok(s);
                }
                last = s;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!(
            "{}: {what} not reached; last summary {last}",
            self.process.name()
        )
    }
}

pub fn read_json(path: &Path) -> anyhow::Result<serde_json::Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(serde_json::from_str(&text)?)
}

pub fn count(report: &serde_json::Value, name: &str) -> u64 {
    report["counts"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("counts.{name} missing in report"))
}

/// Delivery outcomes per producer id.
#[derive(Default)]
pub struct Acks {
    pub acknowledged: std::collections::BTreeMap<u64, IntervalSet>,
    pub failed: u64,
}

pub struct Deliveries(Mutex<Acks>);

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    /// (producer id, sequence), or None for a record without an envelope.
    type DeliveryOpaque = Opaque;

    fn delivery(&self, result: &DeliveryResult<'_>, opaque: Self::DeliveryOpaque) {
        let mut acks = self.0.lock().expect("lock");
        match (result, *opaque) {
            (Ok(_), Some((p, s))) => {
                acks.acknowledged.entry(p).or_default().insert(s);
            }
            (Ok(_), None) => {}
            (Err(_), _) => acks.failed += 1,
        }
    }
}

/// What a delivery report carries back: (producer id, sequence) or None.
type Opaque = Box<Option<(u64, u64)>>;

/// Writes records with (or without) envelopes to chosen partitions, in order.
pub struct TestProducer {
    producer: BaseProducer<Deliveries>,
    topic: String,
}

impl TestProducer {
    pub fn new(bootstrap: &str, topic: &str) -> anyhow::Result<TestProducer> {
        let producer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("enable.idempotence", "true")
            .set("linger.ms", "2")
            .create_with_context(Deliveries(Mutex::new(Acks::default())))?;
        Ok(TestProducer {
            producer,
            topic: topic.to_string(),
        })
    }

    /// Sends `value` to `partition`; `envelope` = (producer id, sequence);
    /// `corrupt` makes the envelope's checksum describe another value.
    pub fn send(
        &self,
        partition: i32,
        envelope: Option<(u64, u64)>,
        value: &[u8],
        corrupt: bool,
    ) -> anyhow::Result<()> {
        let header = envelope.map(|(p, s)| {
            let checked: &[u8] = if corrupt { b"not the value" } else { value };
            Envelope::new(p, s, now_us(), checked).encode()
        });
        let mut record = BaseRecord::with_opaque_to(&self.topic, Box::new(envelope))
            .partition(partition)
            .payload(value);
        if let Some(h) = &header {
            record = record.headers(OwnedHeaders::new().insert(Header {
                key: ENVELOPE_HEADER,
                value: Some(&h[..]),
            }));
        }
        let mut record: BaseRecord<'_, (), [u8], Opaque> = record;
        loop {
            match self.producer.send(record) {
                Ok(()) => break,
                Err((
                    rdkafka::error::KafkaError::MessageProduction(
                        rdkafka::types::RDKafkaErrorCode::QueueFull,
                    ),
                    r,
                )) => {
                    record = r;
                    self.producer.poll(Duration::from_millis(5));
                }
                Err((e, _)) => bail!("send: {e}"),
            }
        }
        self.producer.poll(Duration::ZERO);
        Ok(())
    }

    /// Sends sequences `seqs` of producer `pid` with a 256-byte value.
    pub fn send_seqs(
        &self,
        partition: i32,
        pid: u64,
        seqs: impl IntoIterator<Item = u64>,
    ) -> anyhow::Result<()> {
        for s in seqs {
            self.send(partition, Some((pid, s)), &value_for(pid, s), false)?;
        }
        Ok(())
    }

    pub fn flush(&self) -> anyhow::Result<()> {
        self.producer.flush(Duration::from_secs(30))?;
        let acks = self.producer.context().0.lock().expect("lock");
        anyhow::ensure!(acks.failed == 0, "{} deliveries failed", acks.failed);
        Ok(())
    }

    /// The ledger JSON (README "Ledger JSON") of every acknowledged envelope.
    pub fn ledger(&self) -> serde_json::Value {
        let acks = self.producer.context().0.lock().expect("lock");
        serde_json::Value::Array(
            acks.acknowledged
                .iter()
                .map(|(p, set)| serde_json::json!({"producer_id": p, "acknowledged": set, "failed": []}))
                .collect(),
        )
    }
}

pub fn value_for(pid: u64, seq: u64) -> Vec<u8> {
    (0..256u64)
        .map(|i| (pid.wrapping_mul(31) ^ seq.wrapping_add(i)) as u8)
        .collect()
}
