//! One child process of a test: spawned with its stderr in a log file and its
//! stdout lines collected, waited on by polling, killed when dropped.
//!
//! Owns: the child, its stdout lines (a thread drains the pipe so the child
//! never blocks on it), signals, bounded waits for exit and for a stdout line,
//! and the log tail for failure messages. Must not: know which program runs.

use std::fs::{self, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

/// A running (or exited, not yet dropped) child process.
pub struct Proc {
    child: Child,
    name: String,
    lines: Arc<Mutex<Vec<String>>>,
    log_path: PathBuf,
}

impl Proc {
    /// Spawns `command` with stdin closed, stdout collected and stderr
    /// appended to `log_path`. Variables named `CHRONIK_*` or `KAFKA_*` in
    /// the test's own environment are not passed on (a developer's shell must
    /// not change a test) unless the command sets them itself.
    pub fn spawn(name: &str, mut command: Command, log_path: &Path) -> Result<Proc> {
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_path)
            .with_context(|| format!("opening {}", log_path.display()))?;
        writeln!(log, "===== test harness: start of {name} =====")?;
        let set_by_test: Vec<_> = command.get_envs().map(|(k, _)| k.to_owned()).collect();
        for (key, _) in std::env::vars_os() {
            let k = key.to_string_lossy();
            if (k.starts_with("CHRONIK_") || k.starts_with("KAFKA_")) && !set_by_test.contains(&key)
            {
                command.env_remove(&key);
            }
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .with_context(|| format!("spawning {name}: {command:?}"))?;
        let stdout = child.stdout.take().context("stdout not piped")?;
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                sink.lock().unwrap_or_else(|p| p.into_inner()).push(line);
            }
        });
        Ok(Proc {
            child,
            name: name.to_string(),
            lines,
            log_path: log_path.to_path_buf(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Every stdout line printed so far.
    pub fn stdout_lines(&self) -> Vec<String> {
        self.lines.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The first stdout line starting with `prefix`, waiting up to `timeout`;
    /// fails at once if the process exits without printing it.
    pub fn wait_line(&mut self, prefix: &str, timeout: Duration) -> Result<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let found = self
                .lines
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .find(|l| l.starts_with(prefix))
                .cloned();
            if let Some(line) = found {
                return Ok(line);
            }
            if let Some(status) = self.child.try_wait()? {
                // The drain thread may still hold the last lines for a moment.
                thread::sleep(Duration::from_millis(50));
                if let Some(line) = self
                    .stdout_lines()
                    .into_iter()
                    .find(|l| l.starts_with(prefix))
                {
                    return Ok(line);
                }
                bail!(
                    "{} exited ({status}) before printing {prefix:?}; log tail:\n{}",
                    self.name,
                    self.log_tail(40)
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "{} printed no {prefix:?} line within {timeout:?}; log tail:\n{}",
                    self.name,
                    self.log_tail(40)
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// `None` while running, the exit status once exited.
    pub fn exit_status(&mut self) -> Result<Option<ExitStatus>> {
        Ok(self.child.try_wait()?)
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends `signal` unless the process has already exited.
    pub fn signal(&mut self, signal: libc::c_int) -> Result<()> {
        if self.child.try_wait()?.is_some() {
            return Ok(());
        }
        send_signal(self.pid(), signal)
    }

    /// SIGKILL, then reap.
    pub fn kill(&mut self) -> Result<ExitStatus> {
        // An already-exited child makes kill() fail; wait() still reaps it.
        let _ = self.child.kill();
        Ok(self.child.wait()?)
    }

    /// Waits up to `timeout` for the process to exit; past it, SIGKILLs it
    /// and fails.
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() > deadline {
                let _ = self.kill();
                bail!(
                    "{} did not exit within {timeout:?} (killed); log tail:\n{}",
                    self.name,
                    self.log_tail(40)
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM (no wait).
    pub fn sigterm(&mut self) -> Result<()> {
        self.signal(libc::SIGTERM)
    }

    /// `wait_exit`, as the exit code; fails if a signal ended the process.
    pub fn wait_exit_code(&mut self, timeout: Duration) -> Result<i32> {
        let status = self.wait_exit(timeout)?;
        status
            .code()
            .with_context(|| format!("{} ended by a signal ({status})", self.name))
    }

    /// SIGTERM, then `wait_exit(timeout)`.
    pub fn terminate(&mut self, timeout: Duration) -> Result<ExitStatus> {
        self.signal(libc::SIGTERM)?;
        self.wait_exit(timeout)
    }

    /// The last `lines` lines of the log; the process's own `Error: …` lines
    /// (printed before a long backtrace) come first so they are never cut off.
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log_path, lines)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The last `lines` lines of a log file, its `Error:` lines first.
pub fn log_tail(path: &Path, lines: usize) -> String {
    match fs::read_to_string(path) {
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
        Err(e) => format!("<no log {}: {e}>", path.display()),
    }
}

/// kill(2) on one of this test's own children.
#[allow(unsafe_code)]
pub fn send_signal(pid: u32, signal: libc::c_int) -> Result<()> {
    let pid = libc::pid_t::try_from(pid).context("pid out of range")?;
    // SAFETY: kill(2) takes plain integers; callers pass their own unreaped
    // child, so the id cannot have been reused by another process.
    let rc = unsafe { libc::kill(pid, signal) };
    if rc != 0 {
        return Err(anyhow!(
            "kill({pid}, {signal}) failed: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// A fresh scratch directory named `<prefix>XXXX` under the temp dir.
pub fn scratch_dir(prefix: &str) -> Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .context("creating scratch dir")
}
