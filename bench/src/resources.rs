//! CPU and memory of processes, from /proc.
//!
//! Owns: the CPU meter of this process and of `--broker-pid` processes, and
//! a sampler thread keeping the peak RSS of the brokers (figures read with
//! `chronik_harness::procfs`). Must not: signal or
//! otherwise touch the processes it watches.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

const SAMPLE_INTERVAL: Duration = Duration::from_millis(100);

pub use chronik_harness::procfs::clock_ticks_per_sec;
use chronik_harness::procfs::{self, Task};

/// CPU ticks of `pid` (`None` = this process); 0 if it cannot be read.
fn cpu_ticks(pid: Option<u32>) -> u64 {
    procfs::cpu_ticks(Task::process(pid)).unwrap_or(0)
}

fn rss_bytes(pid: u32) -> u64 {
    procfs::rss_bytes(Task::Pid(pid)).unwrap_or(0)
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
