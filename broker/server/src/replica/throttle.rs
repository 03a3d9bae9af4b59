//! Replication throttles, with Kafka's names and rules: the dynamic broker
//! configs `leader.replication.throttled.rate` and
//! `follower.replication.throttled.rate` (bytes per second, per broker or as
//! the cluster default) limit the replication traffic of the replicas a
//! topic lists in `leader.replication.throttled.replicas` /
//! `follower.replication.throttled.replicas` (`partition:broker,…` or `*`).
//! Only replicas outside the ISR are held back, so a throttle slows a
//! reassignment's catch-up but never an in-sync follower (nor acks=all).
//!
//! Owns: this broker's two byte-rate quotas (what it sent as a leader and
//! what it fetched as a follower for throttled replicas, over Kafka's
//! window of 11 one-second samples) and reading the limits and lists from
//! the metadata image. Must not: fetch or answer anything — the fetch
//! handler (leader side) and the replica fetcher (follower side) ask it
//! whether to hold a partition back and report what they moved.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use chronik_metadata::MetadataImage;
use tokio::time::Instant;

pub const LEADER_RATE: &str = "leader.replication.throttled.rate";
pub const FOLLOWER_RATE: &str = "follower.replication.throttled.rate";
pub const LEADER_REPLICAS: &str = "leader.replication.throttled.replicas";
pub const FOLLOWER_REPLICAS: &str = "follower.replication.throttled.replicas";
/// Kafka's throttle of moves between one broker's log directories; a
/// Chronik broker has one, so it can only be cleared (as the reassignment
/// tool does), never set.
pub const ALTER_LOG_DIRS_RATE: &str = "replica.alter.log.dirs.io.max.bytes.per.second";

/// Kafka's `replication.quota.window.size.seconds` (1 s) and
/// `replication.quota.window.num` (11 samples).
const SAMPLE: Duration = Duration::from_secs(1);
const WINDOW: Duration = Duration::from_secs(11);
/// A throttled partition is fetched in pieces of about a tenth of the rate
/// (within these bounds), so the measured rate stays close to its limit.
const MIN_PIECE: u64 = 16 * 1024;
const MAX_PIECE: u64 = 8 * 1024 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Bytes this broker sends, as leader, to followers of throttled replicas.
    Leader,
    /// Bytes this broker fetches, as follower, for throttled replicas.
    Follower,
}

impl Side {
    fn rate_config(self) -> &'static str {
        match self {
            Side::Leader => LEADER_RATE,
            Side::Follower => FOLLOWER_RATE,
        }
    }

    fn replicas_config(self) -> &'static str {
        match self {
            Side::Leader => LEADER_REPLICAS,
            Side::Follower => FOLLOWER_REPLICAS,
        }
    }
}

/// Bytes per sample of one second (each starting at its first record, as
/// Kafka's samples do) over the last `WINDOW`.
struct Quota {
    /// (sample start, bytes), oldest first; times since the throttle began.
    samples: Mutex<VecDeque<(Duration, u64)>>,
}

impl Quota {
    fn new() -> Quota {
        Quota {
            samples: Mutex::new(VecDeque::new()),
        }
    }

    fn record(&self, at: Duration, bytes: u64) {
        let mut samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        match samples.back_mut() {
            Some((start, b)) if at.saturating_sub(*start) < SAMPLE => *b += bytes,
            _ => samples.push_back((at, bytes)),
        }
        while samples
            .front()
            .is_some_and(|(start, _)| at.saturating_sub(*start) >= WINDOW)
        {
            samples.pop_front();
        }
    }

    /// Bytes per second over the window: the bytes of the samples still in
    /// it over the time since the oldest began (at least one second, so a
    /// move starts with at most a second's worth).
    fn rate(&self, at: Duration) -> f64 {
        let samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        let live = samples
            .iter()
            .filter(|(start, _)| at.saturating_sub(*start) < WINDOW);
        let (mut bytes, mut oldest) = (0u64, at);
        for (start, b) in live {
            bytes += b;
            oldest = oldest.min(*start);
        }
        bytes as f64 / at.saturating_sub(oldest).max(SAMPLE).as_secs_f64()
    }
}

pub struct ReplicationThrottle {
    node_id: i32,
    start: Instant,
    leader: Quota,
    follower: Quota,
}

impl ReplicationThrottle {
    pub fn new(node_id: i32) -> ReplicationThrottle {
        ReplicationThrottle {
            node_id,
            start: Instant::now(),
            leader: Quota::new(),
            follower: Quota::new(),
        }
    }

    fn quota(&self, side: Side) -> &Quota {
        match side {
            Side::Leader => &self.leader,
            Side::Follower => &self.follower,
        }
    }

    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// This broker's limit on `side`, if one is set.
    pub fn limit(&self, image: &MetadataImage, side: Side) -> Option<u64> {
        image
            .broker_config(self.node_id, side.rate_config())
            .and_then(|v| v.parse().ok())
    }

    /// Whether `topic` lists `partition` on this broker (or `*`) as
    /// throttled on `side`.
    pub fn is_throttled(
        &self,
        image: &MetadataImage,
        topic: &str,
        partition: i32,
        side: Side,
    ) -> bool {
        let Some(list) = image
            .topics
            .get(topic)
            .and_then(|t| t.configs.get(side.replicas_config()))
        else {
            return false;
        };
        let list = list.trim();
        list == "*"
            || list.split(',').any(|item| {
                let mut parts = item.trim().split(':');
                let (Some(p), Some(b), None) = (parts.next(), parts.next(), parts.next()) else {
                    return false;
                };
                p.trim().parse() == Ok(partition) && b.trim().parse() == Ok(self.node_id)
            })
    }

    /// How many bytes of a throttled partition to move now on `side`:
    /// `None` when it is not throttled here (or `replica_in_sync`); else
    /// `Some(0)` while the quota is spent, or a piece of about a tenth of
    /// the rate.
    pub fn allowance(
        &self,
        image: &MetadataImage,
        topic: &str,
        partition: i32,
        side: Side,
        replica_in_sync: bool,
    ) -> Option<usize> {
        if replica_in_sync || !self.is_throttled(image, topic, partition, side) {
            return None;
        }
        let limit = self.limit(image, side)?;
        if self.quota(side).rate(self.now()) > limit as f64 {
            return Some(0);
        }
        Some(usize::try_from((limit / 10).clamp(MIN_PIECE, MAX_PIECE)).unwrap_or(usize::MAX))
    }

    /// Counts `bytes` of throttled replication on `side`.
    pub fn record(&self, side: Side, bytes: u64) {
        if bytes > 0 {
            self.quota(side).record(self.now(), bytes);
        }
    }

    /// Throttled replication bytes per second on `side` over the window.
    pub fn rate(&self, side: Side) -> f64 {
        self.quota(side).rate(self.now())
    }
}

/// Kafka's validation of a throttled-replicas list: `*`, or
/// `partition:broker` pairs of non-negative integers separated by commas.
pub fn validate_replica_list(value: &str) -> Result<(), String> {
    let value = value.trim();
    if value == "*" || value.is_empty() {
        return Ok(());
    }
    for item in value.split(',') {
        let parts: Vec<&str> = item.trim().split(':').collect();
        let ok = parts.len() == 2 && parts.iter().all(|p| p.trim().parse::<u32>().is_ok());
        if !ok {
            return Err(format!(
                "{item:?} is not [partition]:[broker] (a list of them separated by commas, or *)"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_is_bytes_over_the_time_the_window_spans() {
        let ms = Duration::from_millis;
        let q = Quota::new();
        q.record(ms(500), 1000);
        // At least a second: a move starts with a second's worth at most.
        assert_eq!(q.rate(ms(500)), 1000.0);
        q.record(ms(1700), 1000);
        assert_eq!(q.rate(ms(2500)), 1000.0);
        assert_eq!(q.rate(ms(4500)), 500.0);
        // Samples older than the window no longer count.
        q.record(ms(20_000), 300);
        assert_eq!(q.rate(ms(20_000)), 300.0);
    }

    #[test]
    fn replica_lists_as_kafka_writes_them() {
        assert!(validate_replica_list("*").is_ok());
        assert!(validate_replica_list("0:1,0:2, 1:3").is_ok());
        assert!(validate_replica_list("0:1,x").is_err());
        assert!(validate_replica_list("0:1:2").is_err());
        assert!(validate_replica_list("-1:2").is_err());
    }
}
