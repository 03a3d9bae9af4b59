//! Test fixtures: a real `chronik-server` on 127.0.0.1 port 0 with a temp
//! data dir (`chronik_testkit::Broker`), and `chronik-bench` runs against
//! it. Waiting is by polling, never by fixed sleeps; `Drop` kills every child.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use chronik_harness::histogram::read_hlog;
pub use chronik_testkit::Broker;
use serde_json::Value;

pub const BENCH: &str = env!("CARGO_BIN_EXE_chronik-bench");
/// Upper bound for one bench run in these tests (they ask for a few seconds).
pub const RUN_TIMEOUT: Duration = Duration::from_secs(180);

/// A broker for the bench's tests (`--wal-profile low`).
pub fn broker() -> Result<Broker> {
    Broker::start(&["--wal-profile", "low"])
}

/// A bench process; killed on drop if still running.
pub struct BenchChild {
    pub child: Child,
}

impl Drop for BenchChild {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `chronik-bench` against `broker` with `args`, environment cleaned of the
/// bench's variables so a developer's shell cannot change the test.
pub fn bench_command(broker: &Broker, args: &[&str]) -> Command {
    let mut command = Command::new(BENCH);
    for (key, _) in std::env::vars_os() {
        let k = key.to_string_lossy();
        if k.starts_with("CHRONIK_BENCH_") || k == "KAFKA_BOOTSTRAP_SERVERS" {
            command.env_remove(key);
        }
    }
    command
        .arg("--bootstrap-servers")
        .arg(broker.bootstrap())
        .args(args)
        .stdin(Stdio::null());
    command
}

pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    /// Panics, with both outputs, unless the run exited 0.
    pub fn assert_success(&self, what: &str) {
        assert!(
            self.status.success(),
            "{what} failed: {}\n{}",
            self.stdout,
            self.stderr
        );
    }
}

/// Runs the bench to completion (bounded by `RUN_TIMEOUT`).
pub fn run_bench(broker: &Broker, args: &[&str]) -> Result<Finished> {
    let mut child = BenchChild {
        child: bench_command(broker, args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?,
    };
    let stdout = child.child.stdout.take().context("stdout")?;
    let stderr = child.child.stderr.take().context("stderr")?;
    let out = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap_or_default());
    let err = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let deadline = Instant::now() + RUN_TIMEOUT;
    let status = loop {
        if let Some(s) = child.child.try_wait()? {
            break s;
        }
        if Instant::now() > deadline {
            bail!("chronik-bench {args:?} still running after {RUN_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok(Finished {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}

pub fn read_json(path: &Path) -> Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// The `.hlog` interval log the result `doc` lists for `stem` (e.g.
/// `publish-service`), and the samples it holds over all its intervals.
pub fn hlog(doc: &Value, stem: &str) -> Result<(PathBuf, u64)> {
    let name = format!("{stem}.hlog");
    let path = doc["hlogFiles"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .find(|p| p.ends_with(&name))
        .with_context(|| format!("no {name} in {}", doc["hlogFiles"]))?;
    let samples = read_hlog(Path::new(path))?
        .iter()
        .map(|i| i.histogram.len())
        .sum();
    Ok((PathBuf::from(path), samples))
}

pub fn num(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number: {}", v[key]))
}
