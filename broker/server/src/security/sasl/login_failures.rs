//! Per-principal login failure back-off: failed PLAIN and SCRAM logins are
//! counted per attempted user name (from any address), and the next attempt
//! for that name is answered only once an exponentially growing, capped
//! back-off after its last failure has passed. A successful login forgets
//! the name. Kafka has only the per-connection
//! `connection.failed.authentication.delay.ms`, which a guesser sidesteps
//! by opening more connections; this bounds guesses per account instead.
//!
//! The wait is not a queue: attempts for one name arriving together all
//! wait for the same instant, so a user whose name is under attack logs in
//! at most the capped back-off late (never locked out), and a guesser's
//! rate per name is bounded by its parallel unauthenticated connections
//! (themselves capped per address and in total) over the cap.
//!
//! Hostile clients invent names, so the table has a fixed capacity: it
//! keeps a 64-bit keyed hash per name (never the name), and the entry whose
//! last failure is oldest is evicted first. An entry quiet for twice the cap
//! is forgotten.
//!
//! Owns: the table and the back-off arithmetic. Must not: sleep, do I/O or
//! log (the SASL session logs, the connection waits).

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The back-off settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffSettings {
    /// The wait after one failure (doubling with each further failure);
    /// zero turns the back-off off.
    pub initial: Duration,
    /// The longest wait.
    pub max: Duration,
    /// User names tracked at once.
    pub capacity: usize,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    failures: u32,
    last_failure: Instant,
    /// Position in `Table::by_age` (order of the last failure).
    age: u64,
}

#[derive(Debug, Default)]
struct Table {
    by_name: HashMap<u64, Entry>,
    /// age -> name key, oldest first: the eviction order.
    by_age: BTreeMap<u64, u64>,
    next_age: u64,
}

impl Table {
    fn remove(&mut self, key: u64) {
        if let Some(entry) = self.by_name.remove(&key) {
            self.by_age.remove(&entry.age);
        }
    }
}

/// Failed logins per attempted user name; shared by every SASL listener.
#[derive(Debug)]
pub struct LoginFailures {
    settings: BackoffSettings,
    hasher: std::collections::hash_map::RandomState,
    table: Mutex<Table>,
}

impl LoginFailures {
    pub fn new(settings: BackoffSettings) -> LoginFailures {
        LoginFailures {
            settings,
            hasher: std::collections::hash_map::RandomState::new(),
            table: Mutex::new(Table::default()),
        }
    }

    /// The back-off after `failures` consecutive failures.
    pub fn backoff(&self, failures: u32) -> Duration {
        if failures == 0 {
            return Duration::ZERO;
        }
        let doublings = (failures - 1).min(30);
        self.settings
            .initial
            .saturating_mul(1 << doublings)
            .min(self.settings.max)
    }

    fn key(&self, user: &str) -> u64 {
        self.hasher.hash_one(user)
    }

    /// How long an attempt for `user` made at `now` must wait before it is
    /// answered (zero when the name has no recent failure).
    pub fn wait(&self, user: &str, now: Instant) -> Duration {
        if self.settings.initial.is_zero() {
            return Duration::ZERO;
        }
        let key = self.key(user);
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        let Some(entry) = table.by_name.get(&key).copied() else {
            return Duration::ZERO;
        };
        if self.forgotten(&entry, now) {
            table.remove(key);
            return Duration::ZERO;
        }
        (entry.last_failure + self.backoff(entry.failures)).saturating_duration_since(now)
    }

    /// Records a failed login for `user`; returns the failures in a row
    /// and the back-off the next attempt meets.
    pub fn failed(&self, user: &str, now: Instant) -> (u32, Duration) {
        if self.settings.initial.is_zero() || self.settings.capacity == 0 {
            return (0, Duration::ZERO);
        }
        let key = self.key(user);
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        let previous = table.by_name.get(&key).copied();
        let failures = match previous {
            Some(entry) if !self.forgotten(&entry, now) => entry.failures.saturating_add(1),
            _ => 1,
        };
        table.remove(key);
        while table.by_name.len() >= self.settings.capacity {
            let Some((_, oldest)) = table.by_age.pop_first() else {
                break;
            };
            table.by_name.remove(&oldest);
        }
        let age = table.next_age;
        table.next_age += 1;
        table.by_age.insert(age, key);
        table.by_name.insert(
            key,
            Entry {
                failures,
                last_failure: now,
                age,
            },
        );
        (failures, self.backoff(failures))
    }

    /// A successful login for `user`: its failures are forgotten.
    pub fn succeeded(&self, user: &str) {
        let key = self.key(user);
        self.table
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }

    /// User names tracked now.
    pub fn len(&self) -> usize {
        self.table
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .by_name
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn forgotten(&self, entry: &Entry, now: Instant) -> bool {
        now.saturating_duration_since(entry.last_failure) >= self.settings.max.saturating_mul(2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(capacity: usize) -> LoginFailures {
        LoginFailures::new(BackoffSettings {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(1),
            capacity,
        })
    }

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn back_off_doubles_per_failure_up_to_the_cap() {
        let t = table(10);
        let now = Instant::now();
        let waits: Vec<Duration> = (0..6).map(|_| t.failed("alice", now).1).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1000, 1000].map(|ms| ms * MS));
        assert_eq!(t.wait("alice", now), 1000 * MS);
        assert_eq!(t.wait("alice", now + 300 * MS), 700 * MS);
        assert_eq!(t.wait("alice", now + 1000 * MS), Duration::ZERO);
        assert_eq!(
            t.wait("bob", now),
            Duration::ZERO,
            "other names are not slowed"
        );
    }

    #[test]
    fn success_resets_and_quiet_names_are_forgotten() {
        let t = table(10);
        let now = Instant::now();
        t.failed("alice", now);
        t.failed("alice", now);
        t.succeeded("alice");
        assert_eq!(t.wait("alice", now), Duration::ZERO);
        assert_eq!(t.failed("alice", now).0, 1, "counting starts again");
        t.failed("bob", now);
        t.failed("bob", now);
        let later = now + 2000 * MS;
        assert_eq!(t.wait("bob", later), Duration::ZERO);
        assert_eq!(t.failed("bob", later).0, 1, "a quiet name starts again");
    }

    #[test]
    fn capacity_is_fixed_and_the_oldest_failure_is_evicted() {
        let now = Instant::now();
        let flooded = table(3);
        for i in 0..1000 {
            flooded.failed(&format!("invented-{i}"), now);
            assert!(flooded.len() <= 3);
        }
        let t = table(3);
        t.failed("a", now);
        t.failed("b", now + MS);
        t.failed("c", now + 2 * MS);
        t.failed("a", now + 3 * MS);
        t.failed("d", now + 4 * MS); // evicts "b", the oldest failure
        assert_eq!(t.wait("b", now + 4 * MS), Duration::ZERO);
        assert!(t.wait("a", now + 4 * MS) > Duration::ZERO);
        assert!(t.wait("c", now + 4 * MS) > Duration::ZERO);
    }

    #[test]
    fn zero_initial_turns_the_back_off_off() {
        let t = LoginFailures::new(BackoffSettings {
            initial: Duration::ZERO,
            max: Duration::from_secs(1),
            capacity: 10,
        });
        let now = Instant::now();
        assert_eq!(t.failed("alice", now), (0, Duration::ZERO));
        assert_eq!(t.wait("alice", now), Duration::ZERO);
        assert!(t.is_empty());
    }
}
