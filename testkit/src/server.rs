//! The real `chronik-server` binary as a child process of one test.
//!
//! Owns: finding the binary, the broker process, its scratch directory (data
//! dir + stderr log) and the two addresses it printed. Waits only by polling
//! (the `LISTENING` stdout line, then `/ready`), never by fixed sleeps.
//! Dropping a `Broker` SIGKILLs it so a failing test never leaks one. Must
//! not interpret broker behaviour: that is the tests' job.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use chronik_harness::procfs::{self, Task};
use tempfile::TempDir;

use crate::http;
use crate::process::{log_tail, scratch_dir, send_signal, Proc};

/// How long a start may take: LISTENING line, then /ready answering 200.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a SIGTERM'd broker may take to exit.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(40);

/// The broker binary: `$CHRONIK_TEST_SERVER_BIN` (scripts/repeat-cluster-tests.sh
/// pins a copy so a long soak keeps testing one build), else
/// `$CHRONIK_SERVER_BIN` (`make test` exports the release build it made
/// first), else `chronik-server` in the test executable's own profile directory (cargo
/// builds it there for the broker's own tests), else target/debug or
/// target/release, else `cargo build -p chronik-server` once.
pub fn server_binary() -> Result<PathBuf> {
    static BIN: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| locate_or_build().map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(|e| anyhow!(e))
}

fn locate_or_build() -> Result<PathBuf> {
    for var in ["CHRONIK_TEST_SERVER_BIN", "CHRONIK_SERVER_BIN"] {
        if let Some(p) = std::env::var_os(var).map(PathBuf::from) {
            if p.is_file() {
                return Ok(p);
            }
            bail!("{var}={} is not a file", p.display());
        }
    }
    // <target>/<profile>/deps/<test executable>
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

/// The binary's path as a string (for `ip netns exec` and messages).
pub fn binary() -> String {
    server_binary()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|e| panic!("{e:#}"))
}

/// One broker process (or, between `stop`/`kill_hard` and a restart, its data).
pub struct Broker {
    proc: Option<Proc>,
    pid: u32,
    kafka_addr: SocketAddr,
    metrics_addr: SocketAddr,
    data_dir: PathBuf,
    log_path: PathBuf,
    /// Extra flags given at start, reused by restarts.
    args: Vec<String>,
    /// `--listen` / `--metrics-listen` (port 0 = a new free port per start).
    listen: String,
    metrics_listen: String,
    starts: u32,
    /// The network namespace the broker runs in (`ip netns exec`), if any.
    netns: Option<String>,
    /// Declared last so the directory outlives the child killed in `Drop`.
    _scratch: TempDir,
}

impl Broker {
    /// Starts a broker on 127.0.0.1 port 0 with a fresh temp data dir.
    /// `args` are extra flags, e.g. `["--wal-profile", "medium"]`.
    pub fn start(args: &[&str]) -> Result<Broker> {
        let scratch = scratch_dir("chronik-test-")?;
        let data_dir = scratch.path().join("data");
        Self::launch(scratch, data_dir, args, "127.0.0.1:0", "127.0.0.1:0")
    }

    /// Spawns a broker on fixed addresses (cluster nodes keep their ports
    /// across restarts, as pods do) and returns as soon as the process runs;
    /// call `finish_start` later (cluster nodes wait for their peers before
    /// they listen).
    pub fn spawn_at(listen: &str, metrics_listen: &str, args: &[&str]) -> Result<Broker> {
        let scratch = scratch_dir("chronik-test-")?;
        let data_dir = scratch.path().join("data");
        let mut broker = Self::unstarted(scratch, data_dir, args, listen, metrics_listen);
        broker.spawn_child()?;
        Ok(broker)
    }

    /// `spawn_at` inside network namespace `netns` (`ip netns exec`; the
    /// process keeps the pid `ip` had, so signals reach the broker).
    pub fn spawn_in_netns(
        netns: &str,
        listen: &str,
        metrics_listen: &str,
        args: &[&str],
    ) -> Result<Broker> {
        let scratch = scratch_dir("chronik-test-")?;
        let data_dir = scratch.path().join("data");
        let mut broker = Self::unstarted(scratch, data_dir, args, listen, metrics_listen);
        broker.netns = Some(netns.to_string());
        broker.spawn_child()?;
        Ok(broker)
    }

    /// Restarts a stopped broker without waiting for it to listen.
    pub fn respawn(&mut self) -> Result<()> {
        if self.is_running() {
            bail!("broker is still running");
        }
        self.spawn_child()
    }

    /// Starts a broker on an existing (or to-be-created) data dir that the
    /// caller owns.
    pub fn start_with_data_dir(data_dir: &Path, args: &[&str]) -> Result<Broker> {
        Self::launch(
            scratch_dir("chronik-test-")?,
            data_dir.to_path_buf(),
            args,
            "127.0.0.1:0",
            "127.0.0.1:0",
        )
    }

    fn launch(
        scratch: TempDir,
        data_dir: PathBuf,
        args: &[&str],
        listen: &str,
        metrics_listen: &str,
    ) -> Result<Broker> {
        let mut broker = Self::unstarted(scratch, data_dir, args, listen, metrics_listen);
        broker.spawn_child()?;
        broker.finish_start()?;
        Ok(broker)
    }

    fn unstarted(
        scratch: TempDir,
        data_dir: PathBuf,
        args: &[&str],
        listen: &str,
        metrics_listen: &str,
    ) -> Broker {
        let log_path = scratch.path().join("broker-stderr.log");
        Broker {
            proc: None,
            pid: 0,
            kafka_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            metrics_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir,
            log_path,
            args: args.iter().map(|s| s.to_string()).collect(),
            listen: listen.to_string(),
            metrics_listen: metrics_listen.to_string(),
            starts: 0,
            netns: None,
            _scratch: scratch,
        }
    }

    fn spawn_child(&mut self) -> Result<()> {
        self.starts += 1;
        let mut command = match &self.netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns.as_str()]).arg(server_binary()?);
                c
            }
            None => Command::new(server_binary()?),
        };
        command
            .arg("--listen")
            .arg(&self.listen)
            .arg("--metrics-listen")
            .arg(&self.metrics_listen)
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(&self.args);
        let name = format!("chronik-server start #{}", self.starts);
        let proc = Proc::spawn(&name, command, &self.log_path)?;
        self.pid = proc.pid();
        self.proc = Some(proc);
        Ok(())
    }

    fn proc_mut(&mut self) -> Result<&mut Proc> {
        self.proc
            .as_mut()
            .context("broker was never started or already reaped")
    }

    /// Waits for the LISTENING line and `/ready`.
    pub fn finish_start(&mut self) -> Result<()> {
        let line = match self.proc_mut()?.wait_line("LISTENING ", STARTUP_TIMEOUT) {
            Ok(line) => line,
            Err(e) => {
                let _ = self.proc_mut()?.kill();
                return Err(e);
            }
        };
        let (kafka, metrics) = parse_listening_line(&line)?;
        self.kafka_addr = kafka;
        self.metrics_addr = metrics;
        self.wait_ready()
    }

    /// Polls `GET /ready` until it answers 200, failing fast if the child dies.
    fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if let Some(status) = self.exit_status()? {
                bail!(
                    "broker exited ({status}) before /ready; stderr tail:\n{}",
                    self.log_tail(40)
                );
            }
            let last = match http::get(self.metrics_addr, "/ready") {
                Ok(resp) if resp.status == 200 => return Ok(()),
                Ok(resp) => format!("status {}", resp.status),
                Err(e) => format!("{e:#}"),
            };
            if Instant::now() > deadline {
                bail!(
                    "/ready not 200 within {STARTUP_TIMEOUT:?} (last: {last}); stderr tail:\n{}",
                    self.log_tail(40)
                );
            }
            thread::sleep(Duration::from_millis(25));
        }
    }

    /// `host:port` of the Kafka listener, for `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        self.kafka_addr.to_string()
    }

    pub fn kafka_addr(&self) -> SocketAddr {
        self.kafka_addr
    }

    pub fn metrics_addr(&self) -> SocketAddr {
        self.metrics_addr
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// `None` while the child runs; its exit status once it has exited.
    pub fn exit_status(&mut self) -> Result<Option<ExitStatus>> {
        self.proc_mut()?.exit_status()
    }

    /// True while the child process runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.exit_status(), Ok(None))
    }

    /// SIGKILL, then reap. Simulates a crash: nothing is flushed by the broker.
    pub fn kill_hard(&mut self) -> Result<ExitStatus> {
        self.proc_mut()?.kill()
    }

    /// SIGSTOP: the process is frozen — to every peer and client it is cut
    /// off, and when resumed it acts on stale state for a moment, as a node
    /// behind a healed network partition (or after a long pause) does.
    pub fn pause(&self) -> Result<()> {
        send_signal(self.pid, libc::SIGSTOP)
    }

    /// SIGCONT after `pause`.
    pub fn resume(&self) -> Result<()> {
        send_signal(self.pid, libc::SIGCONT)
    }

    /// SIGTERM, then wait (bounded) for a graceful exit; returns its status.
    pub fn stop(&mut self) -> Result<ExitStatus> {
        self.proc_mut()?.terminate(SHUTDOWN_TIMEOUT)
    }

    /// Starts the broker again on the same data dir with the same flags.
    /// Stops it gracefully first if it is still running. Ports change.
    pub fn restart(&mut self) -> Result<()> {
        if self.is_running() {
            self.stop()?;
        }
        self.spawn_child()?;
        self.finish_start()
    }

    /// `restart` on the addresses it has now, so clients keep their
    /// bootstrap address (retried while the old sockets linger).
    pub fn restart_same_ports(&mut self) -> Result<()> {
        if self.is_running() {
            self.stop()?;
        }
        self.listen = self.kafka_addr.to_string();
        self.metrics_listen = self.metrics_addr.to_string();
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            self.spawn_child()?;
            match self.finish_start() {
                Ok(()) => return Ok(()),
                Err(e) if Instant::now() < deadline => {
                    eprintln!("broker restart retry: {e:#}");
                    let _ = self.proc_mut()?.kill();
                    thread::sleep(Duration::from_millis(200));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// CPU time the broker has used so far, in clock ticks. Divide by
    /// `clock_ticks_per_second()`.
    pub fn cpu_ticks(&self) -> Result<u64> {
        procfs::cpu_ticks(Task::Pid(self.pid))
            .with_context(|| format!("reading /proc/{}/stat", self.pid))
    }

    /// Resident set size in bytes.
    pub fn rss_bytes(&self) -> Result<u64> {
        procfs::rss_bytes(Task::Pid(self.pid))
            .with_context(|| format!("reading /proc/{}/status", self.pid))
    }

    /// Body of `GET /metrics`; fails unless the status is 200.
    pub fn metrics_text(&self) -> Result<String> {
        let resp = http::get(self.metrics_addr, "/metrics")?;
        if resp.status != 200 {
            bail!("GET /metrics answered {}", resp.status);
        }
        Ok(resp.text())
    }

    /// Last `lines` lines the broker wrote to stderr, its `Error:` lines first.
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log_path, lines)
    }
}

/// Clock ticks per second, the unit of `Broker::cpu_ticks`.
pub fn clock_ticks_per_second() -> u64 {
    procfs::clock_ticks_per_sec()
}

/// Parses `LISTENING kafka=127.0.0.1:PORT metrics=127.0.0.1:PORT` (a
/// controller-only node: `LISTENING controller raft=… metrics=…`, its raft
/// address standing for the Kafka one).
fn parse_listening_line(line: &str) -> Result<(SocketAddr, SocketAddr)> {
    let mut kafka = None;
    let mut metrics = None;
    for token in line.split_whitespace().skip(1) {
        if let Some(v) = token
            .strip_prefix("kafka=")
            .or_else(|| token.strip_prefix("raft="))
        {
            kafka = Some(
                v.parse::<SocketAddr>()
                    .with_context(|| format!("kafka= in {line:?}"))?,
            );
        } else if let Some(v) = token.strip_prefix("metrics=") {
            metrics = Some(
                v.parse::<SocketAddr>()
                    .with_context(|| format!("metrics= in {line:?}"))?,
            );
        }
    }
    match (kafka, metrics) {
        (Some(k), Some(m)) => Ok((k, m)),
        _ => bail!("LISTENING line lacks kafka= or metrics=: {line:?}"),
    }
}
