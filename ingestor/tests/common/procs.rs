//! The real `chronik-server` (`chronik_testkit::Broker`) and
//! `chronik-ingestor` binaries as child processes of one test.
//!
//! Each guard owns its child, a scratch dir (logs) and the addresses the
//! child printed on its `LISTENING` line. Waiting is by polling (the stdout
//! line, then readiness), never fixed sleeps; dropping a guard SIGKILLs a
//! child still running so a failing test never leaks a process.

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use chronik_testkit::process::scratch_dir;
pub use chronik_testkit::Broker;
use chronik_testkit::Proc;
use tempfile::TempDir;

pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(40);

/// A broker for the ingestor's tests: `--wal-profile low` plus `extra` flags,
/// e.g. `["--auto-create-topics", "false"]`.
pub fn broker(extra: &[&str]) -> Result<Broker> {
    let mut args = vec!["--wal-profile", "low"];
    args.extend_from_slice(extra);
    Broker::start(&args)
}

/// Parses `key=ADDR` out of a `LISTENING ...` line.
fn addr_in(line: &str, key: &str) -> Result<SocketAddr> {
    line.split_whitespace()
        .find_map(|t| t.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .with_context(|| format!("no {key}= in {line:?}"))?
        .parse()
        .with_context(|| format!("{key}= in {line:?}"))
}

pub struct Ingestor {
    proc: Proc,
    pub http: SocketAddr,
    /// The `--metrics-listen` address, when given.
    pub metrics: Option<SocketAddr>,
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
        Self::start_with_env(bootstrap, extra, &[])
    }

    /// `start` with environment variables set for the child (the test's own
    /// `CHRONIK_*` variables are never passed on; these are).
    pub fn start_with_env(
        bootstrap: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Result<Ingestor> {
        let scratch = scratch_dir("chronik-ingestor-")?;
        let mut command = Command::new(env!("CARGO_BIN_EXE_chronik-ingestor"));
        command
            .envs(env.iter().copied())
            .args([
                "--listen",
                "127.0.0.1:0",
                "--bootstrap-servers",
                bootstrap,
                "--ingestor-id",
                "test-ingestor",
            ])
            .args(extra);
        let mut proc = Proc::spawn(
            "chronik-ingestor",
            command,
            &scratch.path().join("ingestor.log"),
        )?;
        let line = proc.wait_line("LISTENING ", STARTUP_TIMEOUT)?;
        // http=ADDR, or https=ADDR when it serves TLS
        let http = addr_in(&line, "http").or_else(|_| addr_in(&line, "https"))?;
        let metrics = addr_in(&line, "metrics").ok();
        Ok(Ingestor {
            proc,
            http,
            metrics,
            _scratch: scratch,
        })
    }

    pub fn pid(&self) -> u32 {
        self.proc.pid()
    }

    pub fn is_running(&mut self) -> bool {
        self.proc.is_running()
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
