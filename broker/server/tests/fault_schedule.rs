//! A randomized fault schedule against a 3-node cluster in network
//! namespaces, under an idempotent acks=all producer and a committing
//! consumer group, then a checker.
//!
//! Faults, drawn from a seeded generator (the seed is printed; set
//! `CHRONIK_FAULT_SEED` to replay one): kill -9 and restart a node, freeze
//! one with SIGSTOP, isolate one from its peers, cut two apart (the third
//! reaching both). Each lasts 1–5 s, then the cluster is healed and given
//! up to 40 s to have a leader and a full ISR on every partition before the
//! next. The schedule runs `CHRONIK_FAULT_SECS` (default 40; the long run
//! is `scripts/fault-schedule.sh`).
//!
//! The checker: every acknowledged message is read back exactly once, each
//! partition in production order, and the group's committed offsets, read
//! back from the coordinator after every successful commit, never go
//! backwards.
//!
//! Skipped (with a message) where network namespaces cannot be made.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use common::clients::{assign_from_beginning, consumer_at, drain, producer_at};
use common::cluster::{Cluster, FAST_FAILOVER};
use common::kafka_client::Client;
use common::netns::Network;
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::producer::FutureRecord;

const TOPIC: &str = "faults";
const PARTITIONS: i32 = 3;
const PORTS: (u16, u16, u16) = (9092, 9093, 9644);
const RECOVERY: Duration = Duration::from_secs(40);

/// xorshift64*: a small seeded generator (no dependency, replayable).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    KillRestart { node: usize },
    Freeze { node: usize, ms: u64 },
    Isolate { node: usize, ms: u64 },
    Cut { a: usize, b: usize, ms: u64 },
}

fn draw(rng: &mut Rng) -> Fault {
    let node = usize::try_from(rng.below(3)).unwrap_or(0) + 1;
    let ms = 1000 + rng.below(4000);
    match rng.below(4) {
        0 => Fault::KillRestart { node },
        1 => Fault::Freeze { node, ms },
        2 => Fault::Isolate { node, ms },
        _ => Fault::Cut {
            a: node,
            b: node % 3 + 1,
            ms,
        },
    }
}

fn apply(fault: Fault, cluster: &mut Cluster, net: &mut Network) -> Result<()> {
    let id = |n: usize| i32::try_from(n).unwrap_or(1);
    match fault {
        Fault::KillRestart { node } => {
            cluster.node(id(node)).kill_hard()?;
            std::thread::sleep(Duration::from_millis(500));
            cluster.node(id(node)).respawn()?;
            cluster.node(id(node)).finish_start()?;
        }
        Fault::Freeze { node, ms } => {
            cluster.node(id(node)).pause()?;
            std::thread::sleep(Duration::from_millis(ms));
            cluster.node(id(node)).resume()?;
        }
        Fault::Isolate { node, ms } => {
            net.isolate(node)?;
            std::thread::sleep(Duration::from_millis(ms));
            net.heal()?;
        }
        Fault::Cut { a, b, ms } => {
            net.cut(a, b)?;
            std::thread::sleep(Duration::from_millis(ms));
            net.heal()?;
        }
    }
    Ok(())
}

/// Every partition has a leader and a full ISR, as every node sees it.
fn wait_recovered(cluster: &mut Cluster) -> Result<()> {
    let deadline = Instant::now() + RECOVERY;
    loop {
        let healthy = (1..=3).all(|n| {
            cluster.partitions_at(n, TOPIC).is_ok_and(|ps| {
                ps.len() == 3 && ps.iter().all(|p| p.leader > 0 && p.isr.len() == 3)
            })
        });
        if healthy {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "not recovered {RECOVERY:?} after the fault\n{}",
                cluster.logs()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// (partition, sequence) of every acknowledged message.
fn produce(bootstrap: String, stop: Arc<AtomicBool>) -> Result<Vec<(i32, u64)>> {
    let producer = producer_at(
        &bootstrap,
        &[
            ("acks", "all"),
            ("enable.idempotence", "true"),
            ("message.timeout.ms", "180000"),
            ("linger.ms", "5"),
        ],
    )?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let mut pending = Vec::new();
        let mut seq = 0u64;
        let start = Instant::now();
        // 50 messages per partition per second, bounded by the stop flag
        // and by 2 hours whatever happens.
        while !stop.load(Ordering::Relaxed) && start.elapsed() < Duration::from_secs(7200) {
            for p in 0..PARTITIONS {
                let value = format!("{p}:{seq}");
                let future = producer
                    .send_result(
                        FutureRecord::<(), _>::to(TOPIC)
                            .partition(p)
                            .payload(&value),
                    )
                    .map_err(|(e, _)| anyhow::anyhow!("enqueue failed: {e}"))?;
                pending.push((p, seq, future));
            }
            seq += 1;
            if let Some(wait) = Duration::from_millis(seq * 20).checked_sub(start.elapsed()) {
                tokio::time::sleep(wait).await;
            }
        }
        let mut acked = Vec::new();
        for (p, s, future) in pending {
            if let Ok(Ok(_)) = future.await {
                acked.push((p, s));
            }
        }
        Ok(acked)
    })
}

/// A group member that commits its position every 300 ms and checks, after
/// each successful commit, that the committed offsets it reads back never
/// went backwards. Returns (records consumed, commits checked).
fn consume_and_commit(bootstrap: String, stop: Arc<AtomicBool>) -> Result<(usize, usize)> {
    let consumer = consumer_at(
        &bootstrap,
        &[
            ("group.id", "fault-schedule"),
            ("enable.auto.offset.store", "true"),
            ("enable.partition.eof", "false"),
            ("session.timeout.ms", "10000"),
        ],
    )?;
    consumer.subscribe(&[TOPIC])?;
    let mut highest: HashMap<i32, i64> = HashMap::new();
    let (mut consumed, mut checked) = (0usize, 0usize);
    let mut last_commit = Instant::now();
    let start = Instant::now();
    while !stop.load(Ordering::Relaxed) && start.elapsed() < Duration::from_secs(7200) {
        if let Some(Ok(_)) = consumer.poll(Duration::from_millis(100)) {
            consumed += 1;
        }
        if last_commit.elapsed() < Duration::from_millis(300) {
            continue;
        }
        last_commit = Instant::now();
        if consumer.commit_consumer_state(CommitMode::Sync).is_err() {
            continue; // a coordinator moving or unreachable: try again later
        }
        let Ok(committed) = consumer.committed(Duration::from_secs(5)) else {
            continue;
        };
        for e in committed.elements() {
            let Some(offset) = e.offset().to_raw().filter(|o| *o >= 0) else {
                continue;
            };
            let before = highest.entry(e.partition()).or_insert(offset);
            ensure!(
                offset >= *before,
                "partition {}: committed offset went back from {before} to {offset}",
                e.partition()
            );
            *before = offset;
        }
        checked += 1;
    }
    Ok((consumed, checked))
}

#[test]
fn a_random_fault_schedule_loses_reorders_and_duplicates_nothing() -> Result<()> {
    if !Network::usable() {
        eprintln!("skipped: network namespaces need root and iproute2");
        return Ok(());
    }
    let secs: u64 = std::env::var("CHRONIK_FAULT_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let seed: u64 = std::env::var("CHRONIK_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                | 1
        });
    println!(
        "fault schedule: seed {seed} (CHRONIK_FAULT_SEED={seed} replays it), {secs} s of faults"
    );
    let mut net = Network::new(3)?;
    let mut flags = FAST_FAILOVER.to_vec();
    flags.extend_from_slice(&["--group-initial-rebalance-delay-ms", "0"]);
    let mut cluster = Cluster::start_on(net.hosts(), Some(net.namespaces()), PORTS, &flags)?;
    Client::connect(cluster.node(1))?.create_topic_replicated(
        TOPIC,
        PARTITIONS,
        3,
        &[("min.insync.replicas", "2")],
    )?;
    wait_recovered(&mut cluster)?;

    let stop_producing = Arc::new(AtomicBool::new(false));
    let stop_consuming = Arc::new(AtomicBool::new(false));
    let producer = {
        let (b, s) = (cluster.bootstrap(), stop_producing.clone());
        std::thread::spawn(move || produce(b, s))
    };
    let consumer = {
        let (b, s) = (cluster.bootstrap(), stop_consuming.clone());
        std::thread::spawn(move || consume_and_commit(b, s))
    };

    let mut rng = Rng(seed);
    let started = Instant::now();
    let mut faults = Vec::new();
    while started.elapsed() < Duration::from_secs(secs) {
        std::thread::sleep(Duration::from_millis(500 + rng.below(1500)));
        let fault = draw(&mut rng);
        println!("[{:>6.1} s] {fault:?}", started.elapsed().as_secs_f64());
        apply(fault, &mut cluster, &mut net)
            .with_context(|| format!("applying {fault:?} (seed {seed})"))?;
        wait_recovered(&mut cluster).with_context(|| format!("after {fault:?} (seed {seed})"))?;
        faults.push(fault);
    }
    stop_producing.store(true, Ordering::Relaxed);
    let acked = producer
        .join()
        .map_err(|_| anyhow::anyhow!("producer panicked"))??;
    // Let the group catch up and commit a few more times, then stop it.
    std::thread::sleep(Duration::from_secs(3));
    stop_consuming.store(true, Ordering::Relaxed);
    let (consumed, commits_checked) = consumer
        .join()
        .map_err(|_| anyhow::anyhow!("consumer panicked"))??;

    // Read everything back and check it against what was acknowledged.
    let reader = consumer_at(&cluster.bootstrap(), &[])?;
    assign_from_beginning(&reader, TOPIC, &[0, 1, 2])?;
    let records = drain(&reader, &[0, 1, 2], acked.len(), Duration::from_secs(60))?;
    let mut per_partition: BTreeMap<i32, Vec<u64>> = BTreeMap::new();
    let mut seen: HashSet<(i32, u64)> = HashSet::new();
    for r in &records {
        let value = r.value_str();
        let (p, s) = value.split_once(':').context("foreign record")?;
        let (p, s): (i32, u64) = (p.parse()?, s.parse()?);
        ensure!(
            p == r.partition,
            "record {value} in partition {}",
            r.partition
        );
        ensure!(seen.insert((p, s)), "duplicate: {value} (seed {seed})");
        per_partition.entry(p).or_default().push(s);
    }
    for (p, seqs) in &per_partition {
        ensure!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "partition {p} out of order (seed {seed})"
        );
    }
    let lost: Vec<&(i32, u64)> = acked
        .iter()
        .filter(|k| !seen.contains(k))
        .take(10)
        .collect();
    ensure!(
        lost.is_empty(),
        "acknowledged but lost (seed {seed}): {lost:?}"
    );
    ensure!(commits_checked > 0, "no commit ever succeeded");
    println!(
        "fault schedule passed: seed {seed}, {} faults in {:.0} s, {} messages acknowledged, {} read back once and in order, \
         {consumed} consumed by the group, {commits_checked} commits read back, none going backwards",
        faults.len(),
        started.elapsed().as_secs_f64(),
        acked.len(),
        records.len()
    );
    drop(cluster);
    drop(net);
    Ok(())
}
