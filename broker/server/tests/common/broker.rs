//! The real `chronik-server` binary as a child process of one test.
//!
//! Owns the child, its scratch directory (data dir + stderr log) and the two
//! addresses it printed. Waits only by polling (the `LISTENING` stdout line,
//! then `/ready`), never by fixed sleeps. `Drop` SIGKILLs a child that is still
//! running so a failing test never leaks a broker. Must not interpret broker
//! behaviour: that is the tests' job.

use std::fs::{self, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use tempfile::TempDir;

use super::http;

const BINARY: &str = env!("CARGO_BIN_EXE_chronik-server");

/// The broker binary: the one cargo built with these tests, unless
/// `CHRONIK_TEST_SERVER_BIN` names a copy (scripts/repeat-cluster-tests.sh
/// pins one so a long soak keeps testing the same build).
pub fn binary() -> String {
    std::env::var("CHRONIK_TEST_SERVER_BIN").unwrap_or_else(|_| BINARY.to_string())
}

/// How long a start may take: LISTENING line, then /ready answering 200.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a SIGTERM'd broker may take to exit.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

/// One broker process (or, between `stop`/`kill_hard` and `restart`, its data).
pub struct Broker {
    child: Option<Child>,
    pid: u32,
    kafka_addr: SocketAddr,
    metrics_addr: SocketAddr,
    data_dir: PathBuf,
    log_path: PathBuf,
    /// Extra flags given at start, reused by `restart`.
    args: Vec<String>,
    /// `--listen` / `--metrics-listen` (port 0 = a new free port per start).
    listen: String,
    metrics_listen: String,
    starts: u32,
    /// The LISTENING line's channel between `spawn_child` and `finish_start`.
    listening: Option<mpsc::Receiver<String>>,
    /// The network namespace the broker runs in (`ip netns exec`), if any.
    netns: Option<String>,
    /// Declared last so the directory outlives the child killed in `Drop`.
    _scratch: TempDir,
}

impl Broker {
    /// Starts a broker on 127.0.0.1 port 0 with a fresh temp data dir.
    /// `args` are extra flags, e.g. `["--wal-profile", "medium"]`.
    pub fn start(args: &[&str]) -> Result<Broker> {
        let scratch = scratch_dir()?;
        let data_dir = scratch.path().join("data");
        Self::launch(scratch, data_dir, args, "127.0.0.1:0", "127.0.0.1:0")
    }

    /// Spawns a broker on fixed addresses (cluster nodes keep their ports
    /// across restarts, as pods do) and returns as soon as the process runs;
    /// call `finish_start` later (cluster nodes wait for their peers before
    /// they listen).
    pub fn spawn_at(listen: &str, metrics_listen: &str, args: &[&str]) -> Result<Broker> {
        let scratch = scratch_dir()?;
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
        let scratch = scratch_dir()?;
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
            scratch_dir()?,
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
        broker.spawn()?;
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
            child: None,
            pid: 0,
            kafka_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            metrics_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir,
            log_path,
            args: args.iter().map(|s| s.to_string()).collect(),
            listen: listen.to_string(),
            metrics_listen: metrics_listen.to_string(),
            starts: 0,
            listening: None,
            netns: None,
            _scratch: scratch,
        }
    }

    fn spawn(&mut self) -> Result<()> {
        self.spawn_child()?;
        self.finish_start()
    }

    fn spawn_child(&mut self) -> Result<()> {
        self.starts += 1;
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .with_context(|| format!("opening {}", self.log_path.display()))?;
        writeln!(log, "===== test harness: start #{} =====", self.starts)?;

        let mut command = match &self.netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns.as_str(), binary().as_str()]);
                c
            }
            None => Command::new(binary()),
        };
        // A CHRONIK_* variable in the developer's shell must not change the test.
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("CHRONIK_") {
                command.env_remove(key);
            }
        }
        let mut child = command
            .arg("--listen")
            .arg(&self.listen)
            .arg("--metrics-listen")
            .arg(&self.metrics_listen)
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .with_context(|| format!("spawning {}", binary()))?;
        self.pid = child.id();

        let stdout = child.stdout.take().context("child stdout was not piped")?;
        let (tx, rx) = mpsc::channel::<String>();
        // Keeps draining stdout after the LISTENING line so the child never
        // blocks on (or dies from) a full or closed pipe.
        thread::spawn(move || {
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
        self.child = Some(child);
        self.listening = Some(rx);
        Ok(())
    }

    /// Waits for the LISTENING line and `/ready`.
    pub fn finish_start(&mut self) -> Result<()> {
        let rx = self
            .listening
            .take()
            .context("finish_start without a spawned child")?;
        let line = match rx.recv_timeout(STARTUP_TIMEOUT) {
            Ok(line) => line,
            Err(e) => {
                let status = self.kill_now();
                bail!(
                    "broker printed no LISTENING line within {STARTUP_TIMEOUT:?} ({e}); \
                     exit status {status:?}; stderr tail:\n{}",
                    self.log_tail(40)
                );
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
        match self.child.as_mut() {
            None => Err(anyhow!("broker was never started or already reaped")),
            Some(child) => Ok(child.try_wait()?),
        }
    }

    /// True while the child process runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.exit_status(), Ok(None))
    }

    /// SIGKILL, then reap. Simulates a crash: nothing is flushed by the broker.
    pub fn kill_hard(&mut self) -> Result<ExitStatus> {
        let child = self.child.as_mut().context("no broker child to kill")?;
        // An already-exited child makes kill() fail; wait() still reaps it.
        let _ = child.kill();
        Ok(child.wait()?)
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
        let pid = self.pid;
        let child = self.child.as_mut().context("no broker child to stop")?;
        if child.try_wait()?.is_none() {
            send_signal(pid, libc::SIGTERM)?;
        }
        let deadline = Instant::now() + SHUTDOWN_TIMEOUT;
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!("broker did not exit within {SHUTDOWN_TIMEOUT:?} of SIGTERM (killed)");
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts the broker again on the same data dir with the same flags.
    /// Stops it gracefully first if it is still running. Ports change.
    pub fn restart(&mut self) -> Result<()> {
        if self.is_running() {
            self.stop()?;
        }
        self.spawn()
    }

    fn kill_now(&mut self) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        let _ = child.kill();
        child.wait().ok()
    }

    /// CPU time the broker has used so far, in clock ticks (utime + stime from
    /// /proc/PID/stat). Divide by `clock_ticks_per_second()`.
    pub fn cpu_ticks(&self) -> Result<u64> {
        let stat = fs::read_to_string(format!("/proc/{}/stat", self.pid))
            .with_context(|| format!("reading /proc/{}/stat", self.pid))?;
        // The command name (field 2) may contain spaces; fields after it are
        // space separated, starting with field 3 (state).
        let after_comm = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest)
            .context("malformed /proc/PID/stat")?;
        let fields: Vec<&str> = after_comm.split_whitespace().collect();
        // utime is field 14, stime field 15; fields[0] is field 3.
        let utime: u64 = fields.get(11).context("no utime")?.parse()?;
        let stime: u64 = fields.get(12).context("no stime")?.parse()?;
        Ok(utime + stime)
    }

    /// Resident set size in bytes (VmRSS from /proc/PID/status).
    pub fn rss_bytes(&self) -> Result<u64> {
        let status = fs::read_to_string(format!("/proc/{}/status", self.pid))
            .with_context(|| format!("reading /proc/{}/status", self.pid))?;
        let line = status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .context("no VmRSS line")?;
        let kib: u64 = line
            .split_whitespace()
            .nth(1)
            .context("malformed VmRSS line")?
            .parse()?;
        Ok(kib * 1024)
    }

    /// Body of `GET /metrics`; fails unless the status is 200.
    pub fn metrics_text(&self) -> Result<String> {
        let resp = http::get(self.metrics_addr, "/metrics")?;
        if resp.status != 200 {
            bail!("GET /metrics answered {}", resp.status);
        }
        Ok(resp.body_text())
    }

    /// Last `lines` lines the broker wrote to stderr, for failure messages.
    /// The process's own error line (`Error: …`, printed before a long
    /// backtrace) always comes first, so it is never cut off.
    pub fn log_tail(&self, lines: usize) -> String {
        match fs::read_to_string(&self.log_path) {
            Ok(text) => {
                let all: Vec<&str> = text.lines().collect();
                let errors: Vec<&str> = all
                    .iter()
                    .copied()
                    .filter(|l| l.starts_with("Error:"))
                    .collect();
                let tail = all[all.len().saturating_sub(lines)..].join("\n");
                if errors.is_empty() {
                    tail
                } else {
                    format!("{}\n...\n{tail}", errors.join("\n"))
                }
            }
            Err(e) => format!("<no log: {e}>"),
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill_now();
    }
}

/// Clock ticks per second, the unit of `Broker::cpu_ticks`.
#[allow(unsafe_code)]
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf only reads a configuration value; no pointers involved.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as u64
    } else {
        100
    }
}

#[allow(unsafe_code)]
fn send_signal(pid: u32, signal: libc::c_int) -> Result<()> {
    let pid = libc::pid_t::try_from(pid).context("pid out of range")?;
    // SAFETY: kill(2) takes plain integers; `pid` is our own unreaped child,
    // so the id cannot have been reused by another process.
    let rc = unsafe { libc::kill(pid, signal) };
    if rc != 0 {
        bail!(
            "kill({pid}, {signal}) failed: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

fn scratch_dir() -> Result<TempDir> {
    tempfile::Builder::new()
        .prefix("chronik-test-")
        .tempdir()
        .context("creating scratch dir")
}

/// Parses `LISTENING kafka=127.0.0.1:PORT metrics=127.0.0.1:PORT`.
fn parse_listening_line(line: &str) -> Result<(SocketAddr, SocketAddr)> {
    let mut kafka = None;
    let mut metrics = None;
    for token in line.split_whitespace().skip(1) {
        if let Some(v) = token.strip_prefix("kafka=") {
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
