//! The real `chronik-server` and `chronik-ingestor` binaries as child
//! processes of one test.
//!
//! Each guard owns its child, a scratch dir (data dir, stderr log) and the
//! addresses the child printed on its `LISTENING` line. Waiting is by polling
//! (the stdout line, then readiness), never fixed sleeps. `Drop` SIGKILLs a
//! child still running so a failing test never leaks a process.

use std::fs::{self, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tempfile::TempDir;

use super::http;

pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(40);

/// The broker binary: `$CHRONIK_SERVER_BIN`, else target/{debug,release}/chronik-server
/// beside this test executable, else built once with `cargo build -p chronik-server`.
pub fn broker_binary() -> Result<PathBuf> {
    static BIN: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| locate_or_build_broker().map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(|e| anyhow::anyhow!(e))
}

fn locate_or_build_broker() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("CHRONIK_SERVER_BIN").map(PathBuf::from) {
        if p.is_file() {
            return Ok(p);
        }
    }
    // <target>/<profile>/deps/<test-exe>
    let exe = std::env::current_exe()?;
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .context("test executable has no target dir")?;
    let target_dir = profile_dir.parent().context("no target dir")?;
    let candidates = [
        profile_dir.join("chronik-server"),
        target_dir.join("debug/chronik-server"),
        target_dir.join("release/chronik-server"),
    ];
    if let Some(found) = candidates.iter().find(|p| p.is_file()) {
        return Ok(found.clone());
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "-p", "chronik-server"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .context("running cargo build -p chronik-server")?;
    if !status.success() {
        bail!("cargo build -p chronik-server failed: {status}");
    }
    let built = target_dir.join("debug/chronik-server");
    if built.is_file() {
        Ok(built)
    } else {
        bail!(
            "cargo build -p chronik-server produced no {}",
            built.display()
        )
    }
}

fn scratch(prefix: &str) -> Result<TempDir> {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .context("creating scratch dir")
}

/// A child whose stdout is drained by a thread forwarding lines we wait for.
struct Proc {
    child: Child,
    lines: mpsc::Receiver<String>,
    log_path: PathBuf,
}

impl Proc {
    fn spawn(mut command: Command, log_path: &Path) -> Result<Proc> {
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_path)?;
        writeln!(log, "===== test harness: start =====")?;
        // A CHRONIK_* / KAFKA_* variable in the developer's shell must not change the test.
        for (key, _) in std::env::vars_os() {
            let k = key.to_string_lossy();
            if k.starts_with("CHRONIK_") || k.starts_with("KAFKA_") {
                command.env_remove(&key);
            }
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .with_context(|| format!("spawning {command:?}"))?;
        let stdout = child.stdout.take().context("stdout not piped")?;
        let (tx, rx) = mpsc::channel();
        // Keeps draining so the child never blocks on a full pipe.
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Proc {
            child,
            lines: rx,
            log_path: log_path.to_path_buf(),
        })
    }

    /// The next stdout line starting with `prefix`.
    fn wait_line(&mut self, prefix: &str, timeout: Duration) -> Result<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => return Ok(line),
                Ok(_) => continue,
                Err(e) => {
                    let status = self.child.try_wait().ok().flatten();
                    bail!("no {prefix:?} line within {timeout:?} ({e}); exit status {status:?}; log tail:\n{}", self.log_tail(40))
                }
            }
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn sigterm(&mut self) -> Result<()> {
        if self.child.try_wait()?.is_some() {
            return Ok(());
        }
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .context("running kill")?;
        if !status.success() {
            bail!("kill -TERM {} failed", self.pid());
        }
        Ok(())
    }

    fn wait_exit(&mut self, timeout: Duration) -> Result<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                bail!(
                    "process did not exit within {timeout:?} (killed); log tail:\n{}",
                    self.log_tail(40)
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn log_tail(&self, lines: usize) -> String {
        match fs::read_to_string(&self.log_path) {
            Ok(text) => {
                let all: Vec<&str> = text.lines().collect();
                all[all.len().saturating_sub(lines)..].join("\n")
            }
            Err(e) => format!("<no log: {e}>"),
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Parses `key=ADDR` out of a `LISTENING ...` line.
fn addr_in(line: &str, key: &str) -> Result<SocketAddr> {
    line.split_whitespace()
        .find_map(|t| t.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .with_context(|| format!("no {key}= in {line:?}"))?
        .parse()
        .with_context(|| format!("{key}= in {line:?}"))
}

pub struct Broker {
    proc: Option<Proc>,
    kafka: SocketAddr,
    metrics: SocketAddr,
    data_dir: PathBuf,
    extra: Vec<String>,
    /// Declared last: outlives the child killed in `Drop`.
    scratch: TempDir,
}

impl Broker {
    /// `extra` flags, e.g. `["--auto-create-topics", "false"]`.
    pub fn start(extra: &[&str]) -> Result<Broker> {
        let scratch = scratch("chronik-ingestor-broker-")?;
        let data_dir = scratch.path().join("data");
        let mut broker = Broker {
            proc: None,
            kafka: SocketAddr::from(([127, 0, 0, 1], 0)),
            metrics: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            scratch,
        };
        broker.spawn()?;
        Ok(broker)
    }

    fn spawn(&mut self) -> Result<()> {
        let mut command = Command::new(broker_binary()?);
        command
            .arg("--listen")
            .arg(self.kafka.to_string())
            .arg("--metrics-listen")
            .arg(self.metrics.to_string())
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(["--wal-profile", "low"])
            .args(&self.extra);
        let mut proc = Proc::spawn(command, &self.scratch.path().join("broker.log"))?;
        let line = proc.wait_line("LISTENING ", STARTUP_TIMEOUT)?;
        self.kafka = addr_in(&line, "kafka")?;
        self.metrics = addr_in(&line, "metrics")?;
        self.proc = Some(proc);
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if http::get(self.metrics, "/ready").is_ok_and(|r| r.status == 200) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("broker /ready not 200 within {STARTUP_TIMEOUT:?}");
            }
            thread::sleep(Duration::from_millis(25));
        }
    }

    pub fn bootstrap(&self) -> String {
        self.kafka.to_string()
    }

    /// SIGTERM and wait for a clean exit.
    pub fn stop(&mut self) -> Result<()> {
        let mut proc = self.proc.take().context("broker not running")?;
        proc.sigterm()?;
        let status = proc.wait_exit(SHUTDOWN_TIMEOUT)?;
        if !status.success() {
            bail!("broker exited with {status}");
        }
        Ok(())
    }

    /// Starts again on the same data dir and the same ports (clients keep
    /// their bootstrap address).
    pub fn restart(&mut self) -> Result<()> {
        if self.proc.is_some() {
            self.stop()?;
        }
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            match self.spawn() {
                Ok(()) => return Ok(()),
                // The old socket may linger for a moment.
                Err(e) if Instant::now() < deadline => {
                    eprintln!("broker restart retry: {e:#}");
                    thread::sleep(Duration::from_millis(200));
                }
                Err(e) => return Err(e),
            }
        }
    }
}

pub struct Ingestor {
    proc: Proc,
    pub http: SocketAddr,
    _scratch: TempDir,
}

/// The final counts an ingestor prints on `STOPPED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped {
    pub accepted: u64,
    pub delivered: u64,
    pub failed: u64,
    pub in_flight: u64,
}

impl Ingestor {
    /// Starts `chronik-ingestor` on 127.0.0.1:0 against `bootstrap`, with `extra` flags.
    pub fn start(bootstrap: &str, extra: &[&str]) -> Result<Ingestor> {
        let scratch = scratch("chronik-ingestor-")?;
        let mut command = Command::new(env!("CARGO_BIN_EXE_chronik-ingestor"));
        command
            .args([
                "--listen",
                "127.0.0.1:0",
                "--bootstrap-servers",
                bootstrap,
                "--ingestor-id",
                "test-ingestor",
            ])
            .args(extra);
        let mut proc = Proc::spawn(command, &scratch.path().join("ingestor.log"))?;
        let line = proc.wait_line("LISTENING ", STARTUP_TIMEOUT)?;
        let http = addr_in(&line, "http")?;
        Ok(Ingestor {
            proc,
            http,
            _scratch: scratch,
        })
    }

    pub fn pid(&self) -> u32 {
        self.proc.pid()
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.proc.child.try_wait(), Ok(None))
    }

    pub fn log_tail(&self, lines: usize) -> String {
        self.proc.log_tail(lines)
    }

    /// SIGTERM; waits for the `STOPPED` line and a clean exit.
    pub fn stop(&mut self) -> Result<Stopped> {
        self.proc.sigterm()?;
        let line = self.proc.wait_line("STOPPED ", SHUTDOWN_TIMEOUT)?;
        let status = self.proc.wait_exit(SHUTDOWN_TIMEOUT)?;
        if !status.success() {
            bail!(
                "ingestor exited with {status}; log tail:\n{}",
                self.log_tail(30)
            );
        }
        let field = |key: &str| -> Result<u64> {
            line.split_whitespace()
                .find_map(|t| t.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
                .with_context(|| format!("no {key}= in {line:?}"))?
                .parse()
                .with_context(|| format!("{key}= in {line:?}"))
        };
        Ok(Stopped {
            accepted: field("accepted")?,
            delivered: field("delivered")?,
            failed: field("failed")?,
            in_flight: field("in_flight")?,
        })
    }
}
