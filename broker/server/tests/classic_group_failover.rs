//! A real 3-node cluster on 127.0.0.1-3: a classic consumer group outlives
//! its coordinator. Three real members share a topic — two librdkafka
//! consumers (`group.protocol=classic`) and a kafka-python KafkaConsumer
//! (`tests/support/kafka_python_member.py`, run with the project's venv:
//! $CHRONIK_PYTHON, else <repo>/.venv/bin/python, which `make python-deps`
//! fills) — reading and committing; the group coordinator (the leader of
//! `__consumer_offsets`) is killed with SIGKILL. The new coordinator loads
//! the group's GroupMetadataValue and answers the members at their
//! generation: they read on with no rebalance callback (no revoke, no
//! assign), at the same generation, and no record is read twice.
//!
//! Prints (stderr) the stall: from the SIGKILL to each member's first record
//! after it (compare `consumer_group_failover`, the KIP-848 twin).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use chronik_testkit::Proc;
use common::cluster::{Cluster, FAST_FAILOVER as FLAGS};
use common::group_members::{
    assignment, callbacks, consume_until, produce_numbers, read_twice, real_member,
};

const OFFSETS: &str = "__consumer_offsets";
const TOPIC: &str = "failover_classic";
const PARTITIONS: i32 = 6;
const GROUP: &str = "classic-failover";

/// The kafka-python member: its process and what its stdout said so far.
struct PythonMember {
    proc: Proc,
    read_lines: usize,
    assigned: BTreeSet<i32>,
    callbacks: usize,
    generations: Vec<i32>,
    /// Commits the group refused (e.g. ILLEGAL_GENERATION after a rejoin).
    commit_failures: Vec<String>,
    first_read: Option<Instant>,
}

fn python() -> PathBuf {
    match std::env::var_os("CHRONIK_PYTHON") {
        Some(python) => PathBuf::from(python),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python"),
    }
}

impl PythonMember {
    fn spawn(bootstrap: &str, logs: &Path) -> Result<PythonMember> {
        let python = python();
        ensure!(
            python.is_file(),
            "{} not found: run `make python-deps` (kafka-python is in tests/python/requirements.txt) \
             or set CHRONIK_PYTHON",
            python.display()
        );
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/kafka_python_member.py");
        let mut command = Command::new(python);
        command
            .arg(script)
            .args([bootstrap, GROUP, TOPIC])
            .env("PYTHONUNBUFFERED", "1");
        let proc = Proc::spawn("kafka-python", command, &logs.join("kafka-python.log"))?;
        Ok(PythonMember {
            proc,
            read_lines: 0,
            assigned: BTreeSet::new(),
            callbacks: 0,
            generations: Vec::new(),
            commit_failures: Vec::new(),
            first_read: None,
        })
    }

    /// Takes in what the member printed since the last call.
    fn drain(&mut self, seen: &mut BTreeMap<u64, usize>) -> Result<()> {
        let lines = self.proc.stdout_lines();
        for line in &lines[self.read_lines..] {
            let (what, rest) = line.split_once(' ').unwrap_or((line, ""));
            match what {
                "N" => {
                    *seen.entry(rest.parse().context("a record")?).or_default() += 1;
                    self.first_read.get_or_insert_with(Instant::now);
                }
                "ASSIGNED" | "REVOKED" => {
                    self.callbacks += 1;
                    let partitions: BTreeSet<i32> = rest
                        .split(',')
                        .filter(|p| !p.is_empty())
                        .map(str::parse)
                        .collect::<Result<_, _>>()?;
                    if what == "ASSIGNED" {
                        self.assigned = partitions;
                    } else {
                        self.assigned.retain(|p| !partitions.contains(p));
                    }
                }
                "GENERATION" => self.generations.push(rest.parse()?),
                "COMMIT_FAILED" => self.commit_failures.push(rest.to_string()),
                _ => bail!("the kafka-python member said {line:?}"),
            }
        }
        self.read_lines = lines.len();
        if !self.proc.is_running() {
            bail!(
                "the kafka-python member exited; log:\n{}",
                self.proc.log_tail(40)
            );
        }
        Ok(())
    }
}

#[test]
fn classic_members_read_on_through_a_coordinator_failover_without_a_rebalance() -> Result<()> {
    const HALF: u64 = 3_000;
    let logs = tempfile::tempdir()?;
    let mut cluster = Cluster::start(3, FLAGS)?;
    cluster.create_replicated(TOPIC, PARTITIONS)?;
    let coordinator = cluster.coordinator_of(OFFSETS)?;
    let bootstrap = cluster.bootstrap();
    produce_numbers(&bootstrap, TOPIC, PARTITIONS, 0, HALF)?;
    let member = |name| real_member(&bootstrap, GROUP, "classic", TOPIC, name);
    let members = [member("a")?, member("b")?];
    let mut py = PythonMember::spawn(&bootstrap, logs.path())?;
    let mut seen = BTreeMap::new();
    consume_until(&members, &mut seen, HALF, &mut |seen| py.drain(seen))?;
    // The three members hold a share of the partitions each, and the group
    // is quiet.
    let all: BTreeSet<i32> = (0..PARTITIONS).collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    let (before, callbacks_before) = loop {
        for (consumer, _) in &members {
            ensure!(
                !matches!(consumer.poll(Duration::from_millis(100)), Some(Ok(_))),
                "a record beyond the first half"
            );
        }
        py.drain(&mut seen)?;
        let shares = [
            assignment(&members[0].0)?,
            assignment(&members[1].0)?,
            py.assigned.clone(),
        ];
        let union: BTreeSet<i32> = shares.iter().flatten().copied().collect();
        let total: usize = shares.iter().map(BTreeSet::len).sum();
        if shares.iter().all(|s| !s.is_empty()) && union == all && total == all.len() {
            let mut counts = callbacks(&members);
            counts.push(py.callbacks);
            break (shares, counts);
        }
        ensure!(
            Instant::now() < deadline,
            "the three members never shared the topic: {shares:?}\n{}",
            cluster.logs()
        );
    };
    let generations_before = py.generations.clone();

    let killed = Instant::now();
    cluster.node(coordinator).kill_hard()?;
    cluster.new_coordinator_of(OFFSETS, coordinator)?;
    produce_numbers(&bootstrap, TOPIC, PARTITIONS, HALF, 2 * HALF)?;
    py.first_read = None;
    let mut first_read = consume_until(&members, &mut seen, 2 * HALF, &mut |seen| py.drain(seen))?;
    first_read.push(py.first_read);
    let stall: Vec<String> = first_read
        .iter()
        .map(|t| {
            t.map_or("-".into(), |t| {
                format!("{:.2} s", (t - killed).as_secs_f64())
            })
        })
        .collect();
    eprintln!(
        "classic group: from SIGKILL of the coordinator to each member's first record after it \
         (librdkafka a, b, kafka-python): {stall:?}; all {HALF} records read after {:.2} s",
        killed.elapsed().as_secs_f64()
    );
    // A few more heartbeats (librdkafka every 3 s, kafka-python every 3 s)
    // and commits at the new coordinator.
    let settle = Instant::now() + Duration::from_secs(4);
    while Instant::now() < settle {
        for (consumer, _) in &members {
            let extra = consumer.poll(Duration::from_millis(100));
            ensure!(!matches!(extra, Some(Ok(_))), "a record beyond the last");
        }
        py.drain(&mut seen)?;
    }
    let twice = read_twice(&seen);
    ensure!(
        twice.is_empty(),
        "{} records read twice, e.g. {:?}\n{}",
        twice.len(),
        &twice[..twice.len().min(5)],
        cluster.logs()
    );
    ensure!(
        seen.len() as u64 == 2 * HALF,
        "read {} distinct records",
        seen.len()
    );
    let after = [
        assignment(&members[0].0)?,
        assignment(&members[1].0)?,
        py.assigned.clone(),
    ];
    let mut callbacks_after = callbacks(&members);
    callbacks_after.push(py.callbacks);
    println!(
        "assignments {before:?}, rebalance callbacks {callbacks_before:?}, kafka-python generations \
         {generations_before:?} before the failover; {after:?}, {callbacks_after:?}, {:?} after",
        py.generations
    );
    ensure!(
        py.commit_failures.is_empty(),
        "the kafka-python member's commits failed: {:?}",
        py.commit_failures
    );
    ensure!(
        callbacks_after == callbacks_before
            && after == before
            && py.generations == generations_before,
        "the members rebalanced through the failover: callbacks {callbacks_before:?} -> \
         {callbacks_after:?}, assignments {before:?} -> {after:?}, kafka-python generations \
         {generations_before:?} -> {:?}\n{}",
        py.generations,
        cluster.logs()
    );
    Ok(())
}
