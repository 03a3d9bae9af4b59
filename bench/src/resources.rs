//! CPU and memory of processes, from /proc.
//!
//! Owns: reading utime+stime (`/proc/PID/stat`) and VmRSS
//! (`/proc/PID/status`) of this process and of `--broker-pid` processes, and
//! a sampler thread keeping the peak RSS of the brokers. Must not: signal or
//! otherwise touch the processes it watches.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

const SAMPLE_INTERVAL: Duration = Duration::from_millis(100);

/// Clock ticks per second of /proc/PID/stat (`getconf CLK_TCK`, 100 on Linux).
pub fn clock_ticks_per_sec() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .filter(|&t: &u64| t > 0)
        .unwrap_or(100)
}

/// utime + stime in clock ticks, from the text of /proc/PID/stat.
pub fn parse_stat_cpu_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) may contain spaces and parentheses: fields
    // are counted after its last ')'. utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// VmRSS in bytes, from the text of /proc/PID/status.
pub fn parse_status_rss_bytes(status: &str) -> Option<u64> {
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

fn proc_path(pid: Option<u32>, file: &str) -> String {
    match pid {
        Some(p) => format!("/proc/{p}/{file}"),
        None => format!("/proc/self/{file}"),
    }
}

/// CPU ticks of `pid` (`None` = this process); 0 if it cannot be read.
pub fn cpu_ticks(pid: Option<u32>) -> u64 {
    std::fs::read_to_string(proc_path(pid, "stat"))
        .ok()
        .and_then(|s| parse_stat_cpu_ticks(&s))
        .unwrap_or(0)
}

pub fn rss_bytes(pid: u32) -> u64 {
    std::fs::read_to_string(proc_path(Some(pid), "status"))
        .ok()
        .and_then(|s| parse_status_rss_bytes(&s))
        .unwrap_or(0)
}

/// CPU seconds of a set of processes.
#[derive(Debug, Clone)]
pub struct CpuMeter {
    pids: Vec<Option<u32>>,
    ticks_per_sec: u64,
}

impl CpuMeter {
    pub fn new(pids: Vec<Option<u32>>, ticks_per_sec: u64) -> CpuMeter {
        CpuMeter {
            pids,
            ticks_per_sec,
        }
    }

    pub fn seconds(&self) -> f64 {
        let ticks: u64 = self.pids.iter().map(|p| cpu_ticks(*p)).sum();
        ticks as f64 / self.ticks_per_sec as f64
    }
}

/// Samples the summed RSS of the broker pids and keeps the peak.
pub struct RssSampler {
    pids: Vec<u32>,
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl RssSampler {
    pub fn start(pids: Vec<u32>) -> RssSampler {
        let peak = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let handle = if pids.is_empty() {
            None
        } else {
            let (peak, stop, pids) = (peak.clone(), stop.clone(), pids.clone());
            std::thread::Builder::new()
                .name("rss-sampler".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let rss: u64 = pids.iter().map(|&p| rss_bytes(p)).sum();
                        peak.fetch_max(rss, Ordering::Relaxed);
                        std::thread::sleep(SAMPLE_INTERVAL);
                    }
                })
                .ok()
        };
        RssSampler {
            pids,
            peak,
            stop,
            handle,
        }
    }

    /// Forgets the peak so far (called when the warmup ends).
    pub fn reset(&self) {
        self.peak.store(0, Ordering::Relaxed);
    }

    /// Stops sampling and returns the peak since the last reset. One last
    /// sample is taken here, so a run shorter than the sampling interval
    /// still reports the RSS it ended with.
    pub fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        let last: u64 = self.pids.iter().map(|&p| rss_bytes(p)).sum();
        self.peak.fetch_max(last, Ordering::Relaxed).max(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let stat =
            "1234 (my (odd) cmd) S 1 1234 1234 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 8 0 100 0 0";
        assert_eq!(parse_stat_cpu_ticks(stat), Some(325));
        assert_eq!(parse_stat_cpu_ticks("garbage"), None);
    }

    #[test]
    fn rss_is_read_in_bytes() {
        assert_eq!(
            parse_status_rss_bytes("Name:\tx\nVmRSS:\t   2048 kB\n"),
            Some(2048 * 1024)
        );
        assert_eq!(parse_status_rss_bytes("Name:\tx\n"), None);
    }

    #[test]
    fn this_process_is_measurable() {
        assert!(
            parse_stat_cpu_ticks(&std::fs::read_to_string("/proc/self/stat").expect("stat"))
                .is_some()
        );
        assert!(rss_bytes(std::process::id()) > 0);
        assert!(clock_ticks_per_sec() >= 1);
    }
}
