//! chronik-compat-rdkafka: the compatibility driver for the Rust `rdkafka`
//! client (compat/README.md). One check per run against `--bootstrap` (the
//! security check: its SASL_SSL and SSL listeners, `security`); its JSON
//! result line(s) go to stdout, logs to stderr. Owns only the rdkafka calls;
//! verification lives in `verify`.

mod security;
mod transactions;
mod verify;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use clap::Parser;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

use verify::{Position, Record, Reporter, ResumeState};

const PRODUCE_PARTITIONS: i32 = 3;
const GROUP_PARTITIONS: i32 = 6;

#[derive(Parser, Debug, Clone)]
#[command(about = "rdkafka compatibility driver (compat/README.md)")]
struct Args {
    /// host:port of the broker
    #[arg(long, env = "COMPAT_BOOTSTRAP")]
    bootstrap: String,
    /// produce-fetch | group | commit-resume | idempotent | transactions | admin | security
    #[arg(long, env = "COMPAT_CHECK")]
    check: String,
    /// default | range | roundrobin | cooperative-sticky (group check)
    #[arg(long, env = "COMPAT_ASSIGNOR", default_value = "default")]
    assignor: String,
    /// commit-resume phase: a | b
    #[arg(long, env = "COMPAT_PHASE")]
    phase: Option<String>,
    /// commit-resume state file (phase a writes it, phase b reads it)
    #[arg(long, env = "COMPAT_STATE")]
    state: Option<PathBuf>,
    #[arg(long, env = "COMPAT_MESSAGES", default_value_t = 1000)]
    messages: usize,
    /// seconds one wait (a rebalance, a read-back) may take
    #[arg(long, env = "COMPAT_STAGE_TIMEOUT", default_value_t = 60.0)]
    stage_timeout: f64,
    #[command(flatten)]
    security: security::SecurityArgs,
    /// client settings every client of this run gets (the security check's TLS/SASL)
    #[arg(skip)]
    client_settings: Vec<(String, String)>,
}

impl Args {
    fn stage(&self) -> Duration {
        Duration::from_secs_f64(self.stage_timeout)
    }

    fn config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.bootstrap);
        for (k, v) in &self.client_settings {
            c.set(k, v);
        }
        c
    }

    fn group_check_name(&self) -> String {
        if self.assignor == "default" {
            "group".into()
        } else {
            format!("group:{}", self.assignor)
        }
    }
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let (_, librdkafka) = rdkafka::util::get_rdkafka_version();
    let mut rep = Reporter {
        client: "rdkafka (Rust)",
        version: format!(
            "{} (librdkafka {librdkafka})",
            env!("RDKAFKA_CRATE_VERSION")
        ),
        emitted: HashSet::new(),
    };
    let result = match args.check.as_str() {
        "produce-fetch" => produce_fetch(&mut rep, &args).await,
        "group" => group(&mut rep, &args).await,
        "commit-resume" => commit_resume(&mut rep, &args).await,
        "idempotent" => idempotent(&mut rep, &args).await,
        "transactions" => transactions::check(&mut rep, &args).await,
        "security" => security::check(&mut rep, &args).await,
        "admin" => {
            // n/a: the admin APIs have their own row
            rep.emit(
                "admin",
                "n/a",
                "admin APIs are checked with Kafka's own CLI tools (the kafka-cli row)",
            );
            Ok(())
        }
        other => {
            eprintln!("unknown check {other}");
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        verify::log(&format!("driver error: {e:#}"));
        let pending = match args.check.as_str() {
            "produce-fetch" => vec!["produce".to_string(), "fetch".to_string()],
            "group" => vec![args.group_check_name()],
            other => vec![other.to_string()],
        };
        for check in pending {
            if !rep.emitted.contains(&check) {
                rep.emit(&check, "fail", &format!("driver error: {e:#}"));
            }
        }
        std::process::exit(1);
    }
}

async fn create_topic(args: &Args, topic: &str, partitions: i32) -> anyhow::Result<()> {
    let admin: AdminClient<DefaultClientContext> = args.config().create()?;
    let opts = AdminOptions::new()
        .request_timeout(Some(args.stage()))
        .operation_timeout(Some(args.stage()));
    let results = admin
        .create_topics(
            &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
            &opts,
        )
        .await?;
    for r in results {
        r.map_err(|(t, code)| anyhow!("CreateTopics {t}: {code}"))?;
    }
    Ok(())
}

/// Produces n keyed messages with acks=all (plus `extra` settings); returns
/// where each landed and the delivery errors.
async fn produce(
    args: &Args,
    topic: &str,
    extra: &[(&str, &str)],
) -> anyhow::Result<(HashMap<usize, Position>, Vec<String>)> {
    let mut config = args.config();
    config.set("acks", "all").set("linger.ms", "5");
    for (k, v) in extra {
        config.set(*k, *v);
    }
    let producer: FutureProducer = config.create()?;
    send_all(args, &producer, topic, topic, args.messages).await
}

/// Sends n keyed messages of `tag` to topic and flushes; returns where each
/// landed and the delivery errors.
async fn send_all(
    args: &Args,
    producer: &FutureProducer,
    topic: &str,
    tag: &str,
    n: usize,
) -> anyhow::Result<(HashMap<usize, Position>, Vec<String>)> {
    let mut pending = Vec::with_capacity(n);
    for i in 0..n {
        let key = verify::message_key(i);
        let value = verify::message_value(tag, i);
        let record = FutureRecord::to(topic).key(&key).payload(&value);
        let delivery = producer
            .send_result(record)
            .map_err(|(e, _)| anyhow!("enqueue i={i}: {e}"))?;
        pending.push((i, delivery));
    }
    producer.flush(args.stage())?;
    let (mut acks, mut errors) = (HashMap::new(), Vec::new());
    for (i, delivery) in pending {
        match tokio::time::timeout(args.stage(), delivery).await {
            Ok(Ok(Ok(d))) => {
                acks.insert(i, (d.partition, d.offset));
            }
            Ok(Ok(Err((e, _)))) => errors.push(format!("i={i}: {e}")),
            Ok(Err(_)) => errors.push(format!("i={i}: delivery report dropped")),
            Err(_) => errors.push(format!("i={i}: no delivery report")),
        }
    }
    Ok((acks, errors))
}

fn consumer(args: &Args, group: &str, extra: &[(&str, &str)]) -> anyhow::Result<BaseConsumer> {
    let mut config = args.config();
    config
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest");
    for (k, v) in extra {
        config.set(*k, *v);
    }
    Ok(config.create()?)
}

/// Polls until `done(records)` or the stage timeout; `max` > 0 stops at max.
fn poll_until(
    c: &BaseConsumer,
    timeout: Duration,
    max: usize,
    done: impl Fn(&[Record]) -> bool,
) -> anyhow::Result<Vec<Record>> {
    let mut records = Vec::new();
    let deadline = Instant::now() + timeout;
    while !done(&records) && Instant::now() < deadline && (max == 0 || records.len() < max) {
        match c.poll(Duration::from_millis(500)) {
            None => {}
            Some(Err(e)) => bail!("consume: {e}"),
            Some(Ok(m)) => records.push(Record {
                partition: m.partition(),
                offset: m.offset(),
                value: m.payload().unwrap_or_default().to_vec(),
            }),
        }
    }
    Ok(records)
}

fn read_assigned(args: &Args, topic: &str, partitions: i32) -> anyhow::Result<Vec<Record>> {
    let c = consumer(args, &verify::unique("compat-reader"), &[])?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)?;
    }
    c.assign(&tpl)?;
    poll_until(&c, args.stage(), 0, |rs| rs.len() >= args.messages)
}

async fn produce_fetch(rep: &mut Reporter, args: &Args) -> anyhow::Result<()> {
    let topic = verify::unique("compat-produce");
    create_topic(args, &topic, PRODUCE_PARTITIONS).await?;
    let (acks, errors) = produce(args, &topic, &[]).await?;
    rep.verdict(
        "produce",
        &verify::verify_acks(args.messages, &acks, &errors),
        &format!("{} acked (acks=all)", args.messages),
    );
    let records = read_assigned(args, &topic, PRODUCE_PARTITIONS)?;
    rep.verdict(
        "fetch",
        &verify::verify_read_back(&topic, args.messages, &records, Some(&acks)),
        &format!(
            "{} read back via assign(), per partition {:?}, order and offsets as acked",
            records.len(),
            verify::partition_counts(&records)
        ),
    );
    Ok(())
}

async fn idempotent(rep: &mut Reporter, args: &Args) -> anyhow::Result<()> {
    let topic = verify::unique("compat-idempotent");
    create_topic(args, &topic, PRODUCE_PARTITIONS).await?;
    let (acks, errors) = produce(args, &topic, &[("enable.idempotence", "true")]).await?;
    let mut problems = verify::verify_acks(args.messages, &acks, &errors);
    if problems.is_empty() {
        let records = read_assigned(args, &topic, PRODUCE_PARTITIONS)?;
        problems = verify::verify_read_back(&topic, args.messages, &records, Some(&acks));
    }
    rep.verdict(
        "idempotent",
        &problems,
        &format!(
            "enable.idempotence=true: {} acked and read back once, in order",
            args.messages
        ),
    );
    Ok(())
}

/// One group member polling on its own thread; `assigned` is what
/// assignment() said after the latest poll.
struct Member {
    assigned: Arc<Mutex<Vec<i32>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Member {
    fn start(args: &Args, group: &str, topic: &str) -> anyhow::Result<Self> {
        let mut extra = Vec::new();
        if args.assignor != "default" {
            extra.push(("partition.assignment.strategy", args.assignor.as_str()));
        }
        let c = consumer(args, group, &extra)?;
        c.subscribe(&[topic])?;
        let assigned = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (a, s) = (assigned.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                if let Some(Err(e)) = c.poll(Duration::from_millis(200)) {
                    verify::log(&format!("member poll: {e}"));
                }
                let mut now: Vec<i32> = c
                    .assignment()
                    .map(|tpl| tpl.elements().iter().map(|e| e.partition()).collect())
                    .unwrap_or_default();
                now.sort_unstable();
                *a.lock().unwrap_or_else(|p| p.into_inner()) = now;
            }
            a.lock().unwrap_or_else(|p| p.into_inner()).clear();
            // dropping the consumer closes it: LeaveGroup
            drop(c);
        });
        Ok(Member {
            assigned,
            stop,
            thread: Some(thread),
        })
    }

    fn partitions(&self) -> Vec<i32> {
        self.assigned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn close(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn group(rep: &mut Reporter, args: &Args) -> anyhow::Result<()> {
    let (topic, group) = (
        verify::unique("compat-group"),
        verify::unique("compat-group"),
    );
    create_topic(args, &topic, GROUP_PARTITIONS).await?;
    let mut members: Vec<Member> = Vec::new();
    let (mut stages, mut problems) = (Vec::new(), Vec::new());
    for (label, per_member, change) in [
        ("3 members", 2, "join3"),
        ("1 left", 3, "leave"),
        ("1 joined", 2, "join"),
    ] {
        match change {
            "join3" => {
                for _ in 0..3 {
                    members.push(Member::start(args, &group, &topic)?);
                }
            }
            "leave" => members.remove(0).close(),
            _ => members.push(Member::start(args, &group, &topic)?),
        }
        let split = |ms: &[Member]| ms.iter().map(Member::partitions).collect::<Vec<_>>();
        let t0 = Instant::now();
        let ok = verify::wait_stable(
            || verify::split_ok(&split(&members), per_member, GROUP_PARTITIONS as usize),
            args.stage(),
            Duration::from_secs(1),
        );
        let now = verify::describe_split(&split(&members));
        stages.push(format!(
            "{label}: {now} after {:.1}s",
            t0.elapsed().as_secs_f64()
        ));
        verify::log(stages.last().map(String::as_str).unwrap_or_default());
        if !ok {
            problems.push(format!(
                "{label}: wanted {per_member} each within {:?}, have {now}",
                args.stage()
            ));
            break;
        }
    }
    for m in &mut members {
        m.close();
    }
    rep.verdict(&args.group_check_name(), &problems, &stages.join("; "));
    Ok(())
}

async fn commit_resume(rep: &mut Reporter, args: &Args) -> anyhow::Result<()> {
    let state_path = args.state.clone().context("--state is required")?;
    if args.phase.as_deref() == Some("a") {
        return resume_phase_a(rep, args, &state_path).await;
    }
    let text = std::fs::read_to_string(&state_path).context("reading the phase a state")?;
    let state = ResumeState::from_text(&text)?;
    let c = consumer(args, &state.group, &[])?;
    c.subscribe(&[&state.topic])?;
    let records = poll_until(&c, args.stage(), 0, |rs| state.done(rs))?;
    drop(c);
    rep.verdict(
        "commit-resume",
        &state.verify(&records),
        &format!(
            "resumed after broker restart at {:?}, read the other {}",
            state.committed,
            records.len()
        ),
    );
    Ok(())
}

async fn resume_phase_a(
    rep: &mut Reporter,
    args: &Args,
    state_path: &PathBuf,
) -> anyhow::Result<()> {
    let (topic, group) = (
        verify::unique("compat-resume"),
        verify::unique("compat-resume"),
    );
    create_topic(args, &topic, PRODUCE_PARTITIONS).await?;
    let (acks, errors) = produce(args, &topic, &[]).await?;
    let problems = verify::verify_acks(args.messages, &acks, &errors);
    if !problems.is_empty() {
        rep.emit(
            "commit-resume",
            "fail",
            &format!("phase a produce: {}", problems.join("; ")),
        );
        return Ok(());
    }
    let half = args.messages / 2;
    let c = consumer(args, &group, &[])?;
    c.subscribe(&[&topic])?;
    let records = poll_until(&c, args.stage(), half, |rs| rs.len() >= half)?;
    if records.len() != half {
        rep.emit(
            "commit-resume",
            "fail",
            &format!("phase a consumed {} of {half}", records.len()),
        );
        return Ok(());
    }
    let mut committed: BTreeMap<i32, i64> = BTreeMap::new();
    for r in &records {
        committed.insert(r.partition, r.offset + 1);
    }
    let mut tpl = TopicPartitionList::new();
    for (&p, &o) in &committed {
        tpl.add_partition_offset(&topic, p, Offset::Offset(o))?;
    }
    c.commit(&tpl, CommitMode::Sync)?;
    let fetched = c.committed_offsets(tpl, args.stage())?;
    for e in fetched.elements() {
        if Some(&e.offset().to_raw().unwrap_or(-1)) != committed.get(&e.partition()) {
            rep.emit(
                "commit-resume",
                "fail",
                &format!(
                    "committed {committed:?}, OffsetFetch says {:?} for {}",
                    e.offset(),
                    e.partition()
                ),
            );
            return Ok(());
        }
    }
    drop(c);
    let mut end_offsets: BTreeMap<i32, i64> = BTreeMap::new();
    for &(p, o) in acks.values() {
        let e = end_offsets.entry(p).or_insert(0);
        *e = (*e).max(o + 1);
    }
    let state = ResumeState {
        topic,
        group,
        committed,
        end_offsets,
        consumed: records.iter().map(|r| (r.partition, r.offset)).collect(),
    };
    std::fs::write(state_path, state.to_text())?;
    verify::log(&format!(
        "phase a: consumed {}, committed {:?}",
        records.len(),
        state.committed
    ));
    Ok(())
}
