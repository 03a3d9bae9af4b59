//! Time for one run: the run clock and the open-loop send schedule.
//!
//! Owns: [`RunClock`] (a monotonic origin `t0` paired with the wall clock, so
//! intended send times can travel in envelopes as µs since the Unix epoch)
//! and [`Schedule`] (the intended send time of every message of every task).
//! Must not: sleep, send, or record anything.
//!
//! The schedule spreads one global sequence over the tasks: global message
//! `g = seq * tasks + task` is intended at `g / rate` seconds after `t0`, so
//! the tasks together send at exactly `rate`, evenly spaced, whatever the
//! number of tasks (the seed's rate limit was per task).

use std::time::{Duration, Instant};

use chronik_harness::now_us;

/// The run's time origin.
#[derive(Debug, Clone, Copy)]
pub struct RunClock {
    t0: Instant,
    wall_t0_us: i64,
}

impl RunClock {
    pub fn start() -> RunClock {
        RunClock {
            t0: Instant::now(),
            wall_t0_us: now_us(),
        }
    }

    /// Nanoseconds since `t0` (monotonic).
    #[inline]
    pub fn now_ns(&self) -> u64 {
        duration_ns(self.t0.elapsed())
    }

    /// The wall-clock time (µs since the Unix epoch) of `ns` after `t0`.
    #[inline]
    pub fn wall_us(&self, ns: u64) -> i64 {
        self.wall_t0_us + (ns / 1_000) as i64
    }

    pub fn instant(&self, ns: u64) -> Instant {
        self.t0 + Duration::from_nanos(ns)
    }

    pub fn wall_t0_us(&self) -> i64 {
        self.wall_t0_us
    }
}

/// `d` in nanoseconds, saturating (584 years).
#[inline]
pub fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Intended send times of an open-loop run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Schedule {
    /// Total messages per second over all tasks.
    rate: f64,
    tasks: u32,
}

impl Schedule {
    /// `rate` must be positive and finite, `tasks` at least 1 (the config
    /// validates both).
    pub fn new(rate: f64, tasks: u32) -> Schedule {
        Schedule {
            rate,
            tasks: tasks.max(1),
        }
    }

    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// When message `seq` of `task` should be sent, in ns after `t0`.
    #[inline]
    pub fn intended_ns(&self, task: u32, seq: u64) -> u64 {
        let global = seq as f64 * f64::from(self.tasks) + f64::from(task);
        (global * 1e9 / self.rate) as u64
    }

    /// How many messages `task` should have sent by `ns` after `t0`
    /// (messages whose intended time is before `ns`).
    pub fn due_by(&self, task: u32, ns: u64) -> u64 {
        let global = (ns as f64 * self.rate / 1e9).ceil();
        let tasks = f64::from(self.tasks);
        let task = f64::from(task);
        if global <= task {
            0
        } else {
            ((global - task) / tasks).ceil() as u64
        }
    }
}

/// What a sending loop does next under an optional open-loop schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// Send now; the message's intended send time (ns after t0) when open loop.
    Send(Option<u64>),
    /// Too early: the caller slept (at most 10 ms) and should look again.
    Waited,
}

/// Decides whether message `seq` of `task` is due. Sleeps in slices of at
/// most 10 ms, so a stop is noticed quickly; the caller re-checks its stop
/// flag on `Pace::Waited`. Closed loop (no schedule) always sends.
pub fn pace(schedule: Option<&Schedule>, task: u32, seq: u64, clock: &RunClock) -> Pace {
    let Some(schedule) = schedule else {
        return Pace::Send(None);
    };
    let intended = schedule.intended_ns(task, seq);
    let now = clock.now_ns();
    if intended > now {
        std::thread::sleep(Duration::from_nanos((intended - now).min(10_000_000)));
        Pace::Waited
    } else {
        Pace::Send(Some(intended))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_share_the_total_rate_evenly() {
        let s = Schedule::new(1000.0, 4);
        // 1000 msg/s total: one message every 1 ms, round-robin over tasks.
        assert_eq!(s.intended_ns(0, 0), 0);
        assert_eq!(s.intended_ns(1, 0), 1_000_000);
        assert_eq!(s.intended_ns(3, 0), 3_000_000);
        assert_eq!(s.intended_ns(0, 1), 4_000_000);
        let mut all: Vec<u64> = (0..4)
            .flat_map(|t| (0..250).map(move |q| s.intended_ns(t, q)))
            .collect();
        all.sort_unstable();
        // 1000 messages spread over exactly one second, 1 ms apart.
        assert_eq!(all.len(), 1000);
        assert!(all.windows(2).all(|w| w[1] - w[0] == 1_000_000));
        assert_eq!(*all.last().expect("non-empty"), 999_000_000);
    }

    #[test]
    fn fractional_rates_hold_over_long_runs() {
        let s = Schedule::new(333.3, 1);
        // After one hour the schedule is off by less than a microsecond.
        let seq = 333.3 * 3600.0;
        let ns = s.intended_ns(0, seq as u64);
        assert!((ns as f64 - 3600e9).abs() < 1e6, "{ns}");
    }

    #[test]
    fn due_by_counts_messages_intended_before_a_time() {
        let s = Schedule::new(1000.0, 4);
        assert_eq!(s.due_by(0, 0), 0);
        assert_eq!(s.due_by(0, 1), 1);
        assert_eq!(s.due_by(1, 1_000_000), 0);
        assert_eq!(s.due_by(1, 1_000_001), 1);
        for task in 0..4 {
            for ns in [0, 999_999, 1_000_000, 4_000_000, 7_500_000, 1_000_000_000] {
                let n = s.due_by(task, ns);
                let by_definition = (0..10_000)
                    .take_while(|&q| s.intended_ns(task, q) < ns)
                    .count() as u64;
                assert_eq!(n, by_definition, "task {task} at {ns}");
            }
        }
    }

    #[test]
    fn the_clock_maps_monotonic_time_to_wall_time() {
        let c = RunClock::start();
        assert_eq!(c.wall_us(2_000_000), c.wall_t0_us() + 2_000);
        let a = c.now_ns();
        let b = c.now_ns();
        assert!(b >= a);
    }
}
