//! CPU time and resident memory of processes and threads, from Linux /proc.
//!
//! Owns: parsing `/proc/<task>/stat` (utime + stime, fields 14 and 15,
//! counted after the parenthesised command name, which may hold spaces and
//! parentheses) and `/proc/<task>/status` (VmRSS), and the clock-tick unit.
//! Every tool and test fixture that measures a process reads it through here.
//! Must not: signal or otherwise touch the processes it reads.

use std::sync::OnceLock;

/// Whose figures to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    /// This process (`/proc/self`).
    ThisProcess,
    /// The calling thread (`/proc/thread-self`).
    ThisThread,
    /// Another process by pid.
    Pid(u32),
}

impl Task {
    /// `Some(pid)` is that process, `None` this one.
    pub fn process(pid: Option<u32>) -> Task {
        pid.map_or(Task::ThisProcess, Task::Pid)
    }

    fn path(self, file: &str) -> String {
        match self {
            Task::ThisProcess => format!("/proc/self/{file}"),
            Task::ThisThread => format!("/proc/thread-self/{file}"),
            Task::Pid(pid) => format!("/proc/{pid}/{file}"),
        }
    }
}

/// Clock ticks per second, the unit of `stat`'s CPU fields (`getconf
/// CLK_TCK`; 100 on Linux when it cannot be asked).
pub fn clock_ticks_per_sec() -> u64 {
    static TICKS: OnceLock<u64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .filter(|&t: &u64| t > 0)
            .unwrap_or(100)
    })
}

/// utime + stime in clock ticks, from the text of a `stat` file.
pub fn parse_stat_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (state): utime is field 14, stime field 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// VmRSS in bytes, from the text of a `status` file.
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

/// CPU time used so far, in clock ticks; `None` if it cannot be read (the
/// process is gone, or this is not Linux).
pub fn cpu_ticks(task: Task) -> Option<u64> {
    parse_stat_cpu_ticks(&std::fs::read_to_string(task.path("stat")).ok()?)
}

/// CPU time used so far, in seconds.
pub fn cpu_secs(task: Task) -> Option<f64> {
    cpu_ticks(task).map(|t| t as f64 / clock_ticks_per_sec() as f64)
}

/// Resident set size in bytes.
pub fn rss_bytes(task: Task) -> Option<u64> {
    parse_status_rss_bytes(&std::fs::read_to_string(task.path("status")).ok()?)
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
        assert_eq!(parse_stat_cpu_ticks("1 (x) S 1 2"), None);
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
    fn this_process_and_thread_are_measurable() {
        assert!(cpu_ticks(Task::ThisProcess).is_some());
        assert!(cpu_ticks(Task::ThisThread).is_some());
        assert!(rss_bytes(Task::Pid(std::process::id())).is_some_and(|b| b > 0));
        assert!(cpu_ticks(Task::Pid(u32::MAX)).is_none());
        assert!(clock_ticks_per_sec() >= 1);
    }
}
