//! Test fixtures: a real `chronik-server` on 127.0.0.1 port 0 with a temp
//! data dir, and `chronik-bench` runs against it.
//!
//! The broker binary is found beside this package's `chronik-bench` (same
//! profile), else in `../target/{debug,release}`; if none exists it is built
//! once with `cargo build -p chronik-server`. Waiting is by polling the
//! `LISTENING` line, never by fixed sleeps; `Drop` kills every child.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value;
use tempfile::TempDir;

pub const BENCH: &str = env!("CARGO_BIN_EXE_chronik-bench");
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Upper bound for one bench run in these tests (they ask for a few seconds).
pub const RUN_TIMEOUT: Duration = Duration::from_secs(180);

static BUILD: Mutex<()> = Mutex::new(());

fn server_binary() -> Result<PathBuf> {
    let _guard = BUILD.lock().unwrap_or_else(|e| e.into_inner());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut candidates = Vec::new();
    if let Some(dir) = Path::new(BENCH).parent() {
        candidates.push(dir.join("chronik-server"));
    }
    candidates.push(manifest.join("../target/debug/chronik-server"));
    candidates.push(manifest.join("../target/release/chronik-server"));
    if let Some(found) = candidates.iter().find(|p| p.is_file()) {
        return Ok(found.clone());
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "-p", "chronik-server"])
        .current_dir(manifest.join(".."))
        .status()
        .context("running cargo build -p chronik-server")?;
    if !status.success() {
        bail!("cargo build -p chronik-server failed: {status}");
    }
    candidates
        .into_iter()
        .find(|p| p.is_file())
        .context("chronik-server still missing after building it")
}

/// A running broker; killed on drop.
pub struct Broker {
    child: Child,
    pub kafka: String,
    _dir: TempDir,
}

impl Broker {
    pub fn start() -> Result<Broker> {
        let dir = tempfile::tempdir()?;
        let log = std::fs::File::create(dir.path().join("broker.log"))?;
        let mut command = Command::new(server_binary()?);
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("CHRONIK_") {
                command.env_remove(key);
            }
        }
        let mut child = command
            .args([
                "--listen",
                "127.0.0.1:0",
                "--metrics-listen",
                "127.0.0.1:0",
                "--wal-profile",
                "low",
                "--data-dir",
            ])
            .arg(dir.path().join("data"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .context("spawning chronik-server")?;
        let stdout = child.stdout.take().context("stdout not piped")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.starts_with("LISTENING ") {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(line);
                    }
                }
            }
        });
        let mut broker = Broker {
            child,
            kafka: String::new(),
            _dir: dir,
        };
        let line = rx
            .recv_timeout(STARTUP_TIMEOUT)
            .context("chronik-server printed no LISTENING line")?;
        broker.kafka = line
            .split_whitespace()
            .find_map(|f| f.strip_prefix("kafka="))
            .context("LISTENING line without kafka=")?
            .to_string();
        Ok(broker)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The last lines of the broker's stderr, for failure messages.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self._dir.path().join("broker.log")).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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
        .arg(&broker.kafka)
        .args(args)
        .stdin(Stdio::null());
    command
}

pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
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

pub fn num(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number: {}", v[key]))
}
