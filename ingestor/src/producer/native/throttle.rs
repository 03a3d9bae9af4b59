//! Client-side throttling (KIP-219): a broker that answers a Produce with
//! `throttle_time_ms > 0` has put this client over a quota and muted its
//! channel for that long, so nothing more is sent to that broker until the
//! time has passed, as Kafka's Java clients do (NetworkClient holds the
//! node until its throttle time ends). The batches wait in the queue and
//! leave together afterwards.
//!
//! Owns: when the next request to one broker may leave.
//! Must not: sleep, do I/O or count metrics (the sender does).

use std::time::{Duration, Instant};

/// One broker's throttle state; the sender of that broker keeps it across
/// reconnections (the broker's quota is per client, not per connection).
#[derive(Debug, Default)]
pub struct Throttle {
    until: Option<Instant>,
}

impl Throttle {
    /// Records an answer's `throttle_time_ms`, received at `now`, and
    /// returns how long the broker asked to be left alone (None for 0 or a
    /// negative value). A later end never moves earlier: the longest
    /// throttle in force wins.
    pub fn record(&mut self, throttle_time_ms: i32, now: Instant) -> Option<Duration> {
        let ms = u64::try_from(throttle_time_ms).ok().filter(|&ms| ms > 0)?;
        let held = Duration::from_millis(ms);
        let end = now + held;
        self.until = Some(self.until.map_or(end, |u| u.max(end)));
        Some(held)
    }

    /// When the next request may leave, if that is after `now`.
    pub fn hold_until(&self, now: Instant) -> Option<Instant> {
        self.until.filter(|&u| u > now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_throttle_time_holds_nothing() {
        let now = Instant::now();
        let mut t = Throttle::default();
        for ms in [0, -1, i32::MIN] {
            assert_eq!(t.record(ms, now), None, "throttle_time_ms {ms}");
            assert_eq!(t.hold_until(now), None, "throttle_time_ms {ms}");
        }
    }

    #[test]
    fn holds_until_the_throttle_time_has_passed() {
        let now = Instant::now();
        let mut t = Throttle::default();
        assert_eq!(t.record(250, now), Some(Duration::from_millis(250)));
        let end = now + Duration::from_millis(250);
        assert_eq!(t.hold_until(now), Some(end));
        assert_eq!(t.hold_until(now + Duration::from_millis(249)), Some(end));
        assert_eq!(t.hold_until(end), None);
        assert_eq!(t.hold_until(end + Duration::from_millis(1)), None);
    }

    #[test]
    fn the_latest_end_wins() {
        let now = Instant::now();
        let mut t = Throttle::default();
        // A long throttle, then a shorter one answered later that ends sooner.
        t.record(1000, now);
        t.record(100, now + Duration::from_millis(200));
        assert_eq!(t.hold_until(now), Some(now + Duration::from_millis(1000)));
        // A zero answer does not lift a throttle in force.
        t.record(0, now + Duration::from_millis(300));
        assert_eq!(t.hold_until(now), Some(now + Duration::from_millis(1000)));
        // One that ends later extends it.
        t.record(1000, now + Duration::from_millis(500));
        assert_eq!(t.hold_until(now), Some(now + Duration::from_millis(1500)));
    }
}
