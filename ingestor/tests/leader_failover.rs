//! A partition leader dies while the ingestor produces: the real
//! `chronik-ingestor` (`--acks all`, idempotent) against a real 3-node
//! `chronik-server` cluster (RF 3, min.insync.replicas 2). Four HTTP clients
//! post `/produce/batch` at a fixed pace for 12 s; at 3 s the leader of
//! partition 0 is SIGKILLed, and restarted 4 s (and at least one new
//! leader) later. Then the ingestor's `/ledger` is reconciled, by the
//! harness's verifier, tally and `assess`, with the whole topic read back:
//! 0 acknowledged messages lost, 0 duplicated, 0 reordered within a
//! partition; every message an HTTP answer called delivered is at the
//! partition and offset it gave, every failed one is in the ledger's failed
//! set, and most (≥ 80 %) were acknowledged so the test cannot pass vacuously.
//!
//! Runs once per producer engine (`CHRONIK_INGESTOR_PRODUCER`); an engine
//! the binary refuses at start is skipped with a message. A binary without
//! the variable ignores it, so both runs then exercise librdkafka.
//! The two scenarios run one after the other (each starts three brokers).

mod common;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use chronik_harness::assess::assess;
use chronik_harness::envelope::{Envelope, ENVELOPE_HEADER};
use chronik_harness::ledger::Ledger;
use chronik_harness::now_us;
use chronik_harness::tally::Tally;
use chronik_harness::verify::{Observed, Verifier};
use chronik_testkit::cluster::{Cluster, FAST_FAILOVER};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::ClientConfig;
use serde_json::{json, Value};

use common::http::post_json;
use common::kafka::{consumer_from_beginning, create_replicated_topic};
use common::poll_json;
use common::procs::Ingestor;

const TOPIC: &str = "failover";
const PARTITIONS: i32 = 6;
const NODES: usize = 3;
/// Bounds how long a request waits (+ 5 s report slack): far below the test
/// HTTP client's 30 s read timeout, far above a failover.
const MESSAGE_TIMEOUT_MS: &str = "10000";

const CLIENTS: usize = 4;
const BATCH: usize = 50;
const VALUE_BYTES: usize = 100;
/// Per client: one request every 100 ms (≤ 2,000 msg/s in all).
const PACE: Duration = Duration::from_millis(100);
const LOAD_FOR: Duration = Duration::from_secs(12);
const KILL_AT: Duration = Duration::from_secs(3);
const RESTART_AFTER: Duration = Duration::from_secs(4);
const MIN_ACKED_FRACTION: f64 = 0.8;

/// One scenario at a time: each starts three brokers on a 2-core machine.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn leader_kill_native() -> Result<()> {
    scenario("native")
}

#[test]
fn leader_kill_librdkafka() -> Result<()> {
    scenario("librdkafka")
}

/// What the HTTP answer said about one message.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Answer {
    Delivered {
        partition: i32,
        offset: i64,
    },
    /// A per-message failure (`error` code): in the ledger's failed set.
    Failed(String),
    /// The request was refused without per-message results (e.g. 503
    /// `broker_unavailable`): nothing of it was sent.
    Refused(u16),
    /// No HTTP answer at all.
    Unanswered,
}

#[derive(Debug, Default)]
struct Answers {
    /// (value, answer) of every message posted.
    messages: Vec<(String, Answer)>,
    statuses: BTreeMap<u16, u64>,
    /// How long each request took to be answered.
    latencies: Vec<Duration>,
    transport_errors: Vec<String>,
}

fn scenario(engine: &str) -> Result<()> {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let started = Instant::now();
    // Fencing and ISR shrink 3 s after a node goes silent.
    let mut cluster = Cluster::start(NODES, FAST_FAILOVER)?;
    let bootstrap = cluster.bootstrap();
    create_replicated_topic(
        &bootstrap,
        TOPIC,
        PARTITIONS,
        NODES as i32,
        &[("min.insync.replicas", "2")],
    )?;
    let meta = metadata_client(&bootstrap)?;
    wait_for_partitions(
        &meta,
        Duration::from_secs(30),
        "a full ISR everywhere",
        |ps| ps.iter().all(|p| p.leader > 0 && p.isr.len() == NODES),
    )?;

    let ingestor = match Ingestor::start_with_env(
        &bootstrap,
        &[
            "--topic",
            TOPIC,
            "--acks",
            "all",
            "--message-timeout-ms",
            MESSAGE_TIMEOUT_MS,
        ],
        &[("CHRONIK_INGESTOR_PRODUCER", engine)],
    ) {
        Ok(i) => i,
        Err(e) if refuses_engine(&format!("{e:#}")) => {
            println!(
                "SKIPPED leader_kill_{engine}: the ingestor binary refuses \
                 CHRONIK_INGESTOR_PRODUCER={engine}:\n{e:#}"
            );
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    poll_json(ingestor.http, "/ready", Duration::from_secs(30), |v| {
        v["status"] == "ready"
    })?;
    let reported = reported_engine(&ingestor.log_tail(200));
    println!(
        "[{engine}] cluster and ingestor up in {:.1} s; engine in the ingestor's effective configuration: {}",
        started.elapsed().as_secs_f64(),
        reported.as_deref().unwrap_or("not reported (a binary without engines)")
    );
    if let Some(reported) = &reported {
        ensure!(
            reported.eq_ignore_ascii_case(engine),
            "asked for the {engine} engine, the ingestor runs {reported}"
        );
    }

    // Load: CLIENTS threads at a fixed pace until LOAD_FOR has passed.
    let load_start = Instant::now();
    let answers = Arc::new(Mutex::new(Answers::default()));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (addr, answers, engine) = (ingestor.http, answers.clone(), engine.to_string());
            thread::spawn(move || load(addr, c, &engine, load_start, &answers))
        })
        .collect();

    // The fault: SIGKILL partition 0's leader, wait for another leader,
    // restart it RESTART_AFTER after the kill.
    sleep_until(load_start + KILL_AT);
    let before = partitions(&meta)?;
    let victim = before[0].leader;
    ensure!(victim > 0, "partition 0 has no leader: {before:?}");
    let led: Vec<usize> = (0..before.len())
        .filter(|&p| before[p].leader == victim)
        .collect();
    cluster.node(victim).kill_hard()?;
    let killed_at = Instant::now();
    println!(
        "[{engine}] t={:.1} s: killed node {victim}, leader of partitions {led:?}",
        load_start.elapsed().as_secs_f64()
    );
    let after = wait_for_partitions(&meta, Duration::from_secs(20), "a new leader", |ps| {
        ps.iter().all(|p| p.leader > 0 && p.leader != victim)
    })
    .with_context(|| cluster.logs())?;
    println!(
        "[{engine}] t={:.1} s: partition 0 led by node {} ({:.1} s after the kill)",
        load_start.elapsed().as_secs_f64(),
        after[0].leader,
        killed_at.elapsed().as_secs_f64()
    );
    sleep_until(killed_at + RESTART_AFTER);
    cluster.restart_node(victim)?;
    println!(
        "[{engine}] t={:.1} s: node {victim} restarted and ready",
        load_start.elapsed().as_secs_f64()
    );

    for c in clients {
        c.join()
            .map_err(|_| anyhow::anyhow!("a load thread panicked"))?;
    }
    let load_took = load_start.elapsed();
    let answers = std::mem::take(&mut *answers.lock().unwrap_or_else(|p| p.into_inner()));

    // Nothing in flight, then the ledger.
    let ledger_json = poll_json(ingestor.http, "/ledger", Duration::from_secs(30), |v| {
        v["in_flight"] == 0
    })?;
    let ledger: Ledger =
        serde_json::from_value(ledger_json.clone()).context("GET /ledger does not parse")?;
    let producer_id = ledger.id().context("ledger without a producer id")?;

    // The whole topic, verified by the harness's verifier.
    let consumed = consume_all(&bootstrap, Duration::from_secs(30))?;
    let tally = Tally::from_verifier(&consumed.verifier);
    let assessment = assess(&tally, &[&ledger]);
    let totals = assessment.totals;
    let sums = &assessment.ledgers;

    // What the HTTP answers said, message by message.
    let (mut delivered, mut failed, mut refused, mut no_answer) = (0u64, 0u64, 0u64, 0u64);
    let mut failed_written = 0u64;
    let mut failed_errors: BTreeMap<String, u64> = BTreeMap::new();
    let mut problems: Vec<String> = Vec::new();
    for (value, answer) in &answers.messages {
        let seen = consumed.by_value.get(value.as_bytes());
        match answer {
            Answer::Delivered { partition, offset } => {
                delivered += 1;
                match seen.map(Vec::as_slice) {
                    Some([(p, o, seq)]) => {
                        if (p, o) != (partition, offset) {
                            problems.push(format!(
                                "{value}: answered delivered at {partition}/{offset}, consumed at {p}/{o}"
                            ));
                        }
                        if !ledger.acknowledged.contains(*seq) {
                            problems.push(format!(
                                "{value}: answered delivered, sequence {seq} not acknowledged in the ledger"
                            ));
                        }
                    }
                    Some(many) => problems.push(format!(
                        "{value}: answered delivered at {partition}/{offset}, consumed {} times: {many:?}",
                        many.len()
                    )),
                    None => problems.push(format!(
                        "{value}: answered delivered at {partition}/{offset}, never consumed"
                    )),
                }
            }
            Answer::Failed(error) => {
                failed += 1;
                *failed_errors.entry(error.clone()).or_default() += 1;
                if let Some(seen) = seen {
                    failed_written += 1;
                    for (p, o, seq) in seen {
                        if !ledger.failed.contains(*seq) {
                            problems.push(format!(
                                "{value}: answered failed ({error}), consumed at {p}/{o} with sequence {seq} not failed in the ledger"
                            ));
                        }
                    }
                }
            }
            Answer::Refused(status) => {
                refused += 1;
                if seen.is_some() {
                    problems.push(format!(
                        "{value}: its request was refused ({status}) yet it was written"
                    ));
                }
            }
            Answer::Unanswered => no_answer += 1,
        }
    }
    let posted = answers.messages.len() as u64;
    let mut latencies = answers.latencies.clone();
    latencies.sort();
    let quantile = |q: f64| {
        latencies
            .get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };

    println!(
        "[{engine}] load {:.1} s: {posted} messages posted in {} requests; HTTP statuses {:?}; \
         answers: {delivered} delivered, {failed} failed {failed_errors:?} ({failed_written} of them written anyway), \
         {refused} refused, {no_answer} unanswered; transport errors {:?}",
        load_took.as_secs_f64(),
        answers.statuses.values().sum::<u64>() + answers.transport_errors.len() as u64,
        answers.statuses,
        answers.transport_errors.iter().take(3).collect::<Vec<_>>(),
    );
    println!(
        "[{engine}] request latency ms: p50 {:.0}, p99 {:.0}, max {:.0}; {} requests over 1 s",
        quantile(0.5),
        quantile(0.99),
        quantile(1.0),
        latencies.iter().filter(|d| d.as_secs() >= 1).count()
    );
    println!(
        "[{engine}] ledger: next_sequence {:?}, acknowledged {} {:?}, failed {} {:?}",
        ledger.next_sequence,
        ledger.acknowledged.len(),
        first_ranges(ledger.acknowledged.ranges()),
        ledger.failed.len(),
        first_ranges(ledger.failed.ranges()),
    );
    println!(
        "[{engine}] consumed {} records (high watermarks {:?}); lost {}, duplicates {}, reordered {}, corrupt {}, \
         foreign {}, gaps {} (unexplained {}), failed not consumed {}, delivered despite failure {}, \
         unknown not consumed {}, consumed not in ledger {}",
        totals.records.consumed,
        consumed.high_watermarks,
        totals.lost,
        totals.records.duplicates,
        totals.records.reordered,
        totals.records.corrupt,
        totals.records.foreign,
        totals.gaps,
        totals.unexplained_gaps,
        totals.failed_not_consumed,
        totals.delivered_despite_failure,
        totals.unknown_not_consumed,
        sums.consumed_not_in_ledger,
    );

    let lost: Vec<_> = assessment
        .producers
        .iter()
        .filter_map(|p| p.ledger.as_ref())
        .map(|r| first_ranges(r.lost.ranges()))
        .collect();
    ensure!(
        totals.lost == 0,
        "[{engine}] {} acknowledged sequences lost: {lost:?}",
        totals.lost
    );
    ensure!(
        totals.records.duplicates == 0,
        "[{engine}] {} duplicates, e.g. {:?}",
        totals.records.duplicates,
        tally.examples.duplicates.iter().take(5).collect::<Vec<_>>()
    );
    ensure!(
        totals.records.reordered == 0,
        "[{engine}] {} reordered within a partition, e.g. {:?}",
        totals.records.reordered,
        tally.examples.reordered.iter().take(5).collect::<Vec<_>>()
    );
    ensure!(
        totals.records.corrupt == 0 && totals.records.foreign == 0,
        "[{engine}] {} corrupt and {} foreign records",
        totals.records.corrupt,
        totals.records.foreign
    );
    ensure!(
        tally.producers.keys().copied().collect::<Vec<_>>() == vec![producer_id],
        "[{engine}] producer ids consumed {:?}, the ledger's is {producer_id}",
        tally.producers.keys().collect::<Vec<_>>()
    );
    ensure!(
        totals.unknown_not_consumed == 0 && sums.consumed_not_in_ledger == 0,
        "[{engine}] at rest every sequence has an outcome: {sums:?}"
    );
    ensure!(
        problems.is_empty(),
        "[{engine}] {} answers disagree with the topic or the ledger, e.g.:\n{}",
        problems.len(),
        problems
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    ensure!(
        answers.transport_errors.is_empty() && no_answer == 0,
        "[{engine}] {no_answer} messages without an HTTP answer: {:?}",
        answers.transport_errors
    );
    // Every message the ingestor took got exactly one answer.
    ensure!(
        (
            ledger.acknowledged.len(),
            ledger.failed.len(),
            ledger.next_sequence
        ) == (delivered, failed, Some(delivered + failed)),
        "[{engine}] ledger {ledger_json} vs answers: {delivered} delivered, {failed} failed"
    );
    let acked = delivered as f64 / posted.max(1) as f64;
    ensure!(
        acked >= MIN_ACKED_FRACTION,
        "[{engine}] only {delivered} of {posted} messages ({:.1} %) acknowledged",
        acked * 100.0
    );
    ensure!(
        consumed.partitions_written == PARTITIONS as usize,
        "[{engine}] keys should reach every partition: {:?}",
        consumed.high_watermarks
    );

    let stopped = {
        let mut ingestor = ingestor;
        ingestor.stop()?
    };
    ensure!(
        stopped.accepted == delivered + failed && stopped.in_flight == 0,
        "[{engine}] {stopped:?}"
    );
    println!(
        "[{engine}] PASS: {delivered} of {posted} acknowledged ({:.1} %), 0 lost, 0 duplicated, \
         0 reordered; {:.1} s in all",
        acked * 100.0,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The engine named in the ingestor's logged effective configuration
/// (`producer: Native`), if it names one.
fn reported_engine(log: &str) -> Option<String> {
    let line = log
        .lines()
        .find(|l| l.contains("effective configuration"))?;
    let rest = &line[line.find("producer: ")? + "producer: ".len()..];
    let name: String = rest
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect();
    (!name.is_empty()).then_some(name)
}

/// Whether a failed ingestor start is the binary refusing the engine value
/// (clap names the variable or the value it rejects).
fn refuses_engine(error: &str) -> bool {
    error.contains("CHRONIK_INGESTOR_PRODUCER")
        || (error.contains("invalid value") && error.contains("producer"))
}

/// One load client: a 50-message batch every PACE until LOAD_FOR has passed.
fn load(addr: SocketAddr, client: usize, engine: &str, start: Instant, answers: &Mutex<Answers>) {
    let mut next = start;
    let mut request = 0usize;
    while Instant::now() < start + LOAD_FOR {
        sleep_until(next);
        // Distinct keys (spread over the partitions), unique values.
        let keys: Vec<String> = (0..BATCH)
            .map(|i| format!("{engine}-c{client}-r{request:05}-m{i:02}"))
            .collect();
        let values: Vec<String> = keys.iter().map(|k| format!("{k:x<VALUE_BYTES$}")).collect();
        let body = Value::Array(
            keys.iter()
                .zip(&values)
                .map(|(k, v)| json!({"key": k, "value": v}))
                .collect(),
        );
        let sent = Instant::now();
        let result = post_json(addr, "/produce/batch", &body);
        let took = sent.elapsed();
        let per_message = classify(result, BATCH);
        let mut a = answers.lock().unwrap_or_else(|p| p.into_inner());
        a.latencies.push(took);
        match &per_message {
            Ok((status, _)) => *a.statuses.entry(*status).or_default() += 1,
            Err(e) => a.transport_errors.push(e.clone()),
        }
        let list = match per_message {
            Ok((_, list)) => list,
            Err(_) => vec![Answer::Unanswered; BATCH],
        };
        a.messages.extend(values.into_iter().zip(list));
        drop(a);
        request += 1;
        // A fixed pace without catching up in bursts after a slow answer.
        next = (next + PACE).max(Instant::now());
    }
}

/// (status, one answer per message) of a `/produce/batch` response.
fn classify(
    result: Result<common::http::HttpResponse>,
    n: usize,
) -> std::result::Result<(u16, Vec<Answer>), String> {
    let resp = result.map_err(|e| format!("{e:#}"))?;
    let status = resp.status;
    let body = resp.json().map_err(|e| format!("{e:#}"))?;
    let Some(results) = body["results"].as_array() else {
        return Ok((status, vec![Answer::Refused(status); n]));
    };
    if results.len() != n {
        return Err(format!("{n} messages, {} results: {body}", results.len()));
    }
    let list = results
        .iter()
        .map(|r| match (r["partition"].as_i64(), r["offset"].as_i64()) {
            (Some(p), Some(o)) => Answer::Delivered {
                partition: i32::try_from(p).unwrap_or(-1),
                offset: o,
            },
            _ => Answer::Failed(r["error"].as_str().unwrap_or("?").to_string()),
        })
        .collect();
    Ok((status, list))
}

fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        thread::sleep(t - now);
    }
}

fn first_ranges(r: &[[u64; 2]]) -> &[[u64; 2]] {
    &r[..r.len().min(8)]
}

/// Everything in the topic, read to the high watermarks.
struct Consumed {
    verifier: Verifier,
    /// Value -> every (partition, offset, sequence) it was consumed at.
    by_value: HashMap<Vec<u8>, Vec<(i32, i64, u64)>>,
    high_watermarks: Vec<i64>,
    partitions_written: usize,
}

fn consume_all(bootstrap: &str, timeout: Duration) -> Result<Consumed> {
    let deadline = Instant::now() + timeout;
    let consumer = consumer_from_beginning(bootstrap, TOPIC, PARTITIONS)?;
    let mut high_watermarks = Vec::new();
    for p in 0..PARTITIONS {
        let (low, high) = consumer
            .fetch_watermarks(TOPIC, p, Duration::from_secs(10))
            .with_context(|| format!("watermarks of partition {p}"))?;
        ensure!(low == 0, "partition {p} starts at {low}");
        high_watermarks.push(high);
    }
    let mut verifier = Verifier::new();
    let slots: Vec<usize> = (0..PARTITIONS)
        .map(|p| verifier.partition_slot(TOPIC, p))
        .collect();
    for (p, &high) in high_watermarks.iter().enumerate() {
        verifier.note_watermarks(slots[p], 0, high);
    }
    // The next offset to read per partition.
    let mut next = vec![0i64; PARTITIONS as usize];
    let mut by_value: HashMap<Vec<u8>, Vec<(i32, i64, u64)>> = HashMap::new();
    while next.iter().zip(&high_watermarks).any(|(n, h)| n < h) {
        if Instant::now() > deadline {
            bail!("read {next:?} of high watermarks {high_watermarks:?} within {timeout:?}");
        }
        let Some(result) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let m = result.context("consumer error")?;
        let p = usize::try_from(m.partition()).context("partition")?;
        let value = m.payload().unwrap_or_default();
        let header = m.headers().and_then(|hs| {
            hs.iter()
                .find(|h| h.key == ENVELOPE_HEADER)
                .and_then(|h| h.value)
        });
        verifier.observe(
            slots[p],
            &Observed {
                offset: m.offset(),
                envelope: header,
                value,
                consumed_at_us: now_us(),
            },
        );
        if let Some(Ok(e)) = header.map(Envelope::decode) {
            by_value.entry(value.to_vec()).or_default().push((
                m.partition(),
                m.offset(),
                e.sequence,
            ));
        }
        next[p] = next[p].max(m.offset() + 1);
    }
    Ok(Consumed {
        verifier,
        by_value,
        partitions_written: high_watermarks.iter().filter(|&&h| h > 0).count(),
        high_watermarks,
    })
}

/// One partition as Metadata describes it.
#[derive(Debug, Clone)]
struct PartitionView {
    leader: i32,
    isr: Vec<i32>,
}

/// A client for Metadata requests only.
fn metadata_client(bootstrap: &str) -> Result<BaseConsumer> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .context("creating metadata client")
}

/// The topic's partitions (index = partition) from a fresh Metadata request.
fn partitions(client: &BaseConsumer) -> Result<Vec<PartitionView>> {
    let metadata = client.fetch_metadata(Some(TOPIC), Duration::from_secs(5))?;
    let topic = metadata
        .topics()
        .iter()
        .find(|t| t.name() == TOPIC)
        .context("topic not in Metadata")?;
    if let Some(e) = topic.error() {
        bail!("Metadata error for {TOPIC}: {e:?}");
    }
    let mut views: Vec<(i32, PartitionView)> = topic
        .partitions()
        .iter()
        .map(|p| {
            (
                p.id(),
                PartitionView {
                    leader: p.leader(),
                    isr: p.isr().to_vec(),
                },
            )
        })
        .collect();
    views.sort_by_key(|(id, _)| *id);
    ensure!(
        views.len() == PARTITIONS as usize,
        "{} partitions in Metadata",
        views.len()
    );
    Ok(views.into_iter().map(|(_, v)| v).collect())
}

/// Polls Metadata until `check` accepts the partitions, or fails after `timeout`.
fn wait_for_partitions(
    client: &BaseConsumer,
    timeout: Duration,
    what: &str,
    check: impl Fn(&[PartitionView]) -> bool,
) -> Result<Vec<PartitionView>> {
    let deadline = Instant::now() + timeout;
    loop {
        let last = match partitions(client) {
            Ok(v) if check(&v) => return Ok(v),
            Ok(v) => format!("{v:?}"),
            Err(e) => format!("{e:#}"),
        };
        if Instant::now() > deadline {
            bail!("no {what} within {timeout:?}; last: {last}");
        }
        thread::sleep(Duration::from_millis(100));
    }
}
