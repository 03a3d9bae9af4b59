//! Share sessions (KIP-932's ShareSessionCache): per (group, member), the
//! share-partitions a member fetches from this leader and the epoch its
//! next ShareFetch / ShareAcknowledge must carry.
//!
//! Owns: Kafka's epoch rules — 0 opens (or replaces) a session, -1 closes
//! it, any other must equal the session's next epoch
//! (INVALID_SHARE_SESSION_EPOCH) of an existing session
//! (SHARE_SESSION_NOT_FOUND) — the session limit
//! (`group.share.max.share.sessions`, SHARE_SESSION_LIMIT_REACHED), and
//! evicting idle sessions. Must not: touch share-partition state (the
//! caller releases what a closed or evicted session's member held).

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use prometheus_client::metrics::gauge::Gauge;

/// Kafka's `group.share.max.share.sessions` default.
pub const MAX_SHARE_SESSIONS: usize = 2000;
/// A session unused this long is evicted (longer than the longest share
/// session timeout, 60 s).
pub const IDLE_EVICTION: Duration = Duration::from_secs(90);
/// Most partitions one session may hold.
pub const MAX_SESSION_PARTITIONS: usize = 10_000;

/// (group id, member id).
pub type SessionKey = (String, String);
/// (topic name, partition).
pub type SessionPartition = (String, i32);

#[derive(Debug)]
struct Session {
    next_epoch: i32,
    /// The connection of its last request.
    connection: u64,
    partitions: BTreeSet<SessionPartition>,
    last_used: Instant,
}

/// What a request's epoch did to its session.
#[derive(Debug, PartialEq, Eq)]
pub enum Opened {
    /// A new session (epoch 0); the partitions of a replaced one, whose
    /// records the member held, are returned to be released.
    New { replaced: Vec<SessionPartition> },
    /// The session went on (epoch n).
    Continued,
    /// Closed (epoch -1): its partitions, to release.
    Closed { partitions: Vec<SessionPartition> },
}

#[derive(Debug, Default)]
pub struct ShareSessions {
    sessions: Mutex<HashMap<SessionKey, Session>>,
    /// `chronik_share_sessions`, set on every change.
    gauge: Gauge,
}

/// The session table, which sets the gauge when the guard goes.
struct Held<'a> {
    sessions: std::sync::MutexGuard<'a, HashMap<SessionKey, Session>>,
    gauge: &'a Gauge,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.gauge
            .set(i64::try_from(self.sessions.len()).unwrap_or(i64::MAX));
    }
}

impl std::ops::Deref for Held<'_> {
    type Target = HashMap<SessionKey, Session>;
    fn deref(&self) -> &Self::Target {
        &self.sessions
    }
}

impl std::ops::DerefMut for Held<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.sessions
    }
}

impl ShareSessions {
    /// An empty table whose size `gauge` shows.
    pub fn new(gauge: Gauge) -> ShareSessions {
        ShareSessions {
            sessions: Mutex::new(HashMap::new()),
            gauge,
        }
    }

    fn lock(&self) -> Held<'_> {
        Held {
            sessions: self.sessions.lock().unwrap_or_else(|e| e.into_inner()),
            gauge: &self.gauge,
        }
    }

    /// Applies a request's `epoch` and its partition changes (`added`,
    /// `forgotten`) to the member's session.
    pub fn open(
        &self,
        key: &SessionKey,
        epoch: i32,
        added: &[SessionPartition],
        forgotten: &[SessionPartition],
        connection: u64,
    ) -> Result<Opened, ResponseError> {
        let mut sessions = self.lock();
        let now = Instant::now();
        match epoch {
            0 => {
                if !sessions.contains_key(key) && sessions.len() >= MAX_SHARE_SESSIONS {
                    return Err(ResponseError::ShareSessionLimitReached);
                }
                let mut partitions: BTreeSet<SessionPartition> = added.iter().cloned().collect();
                for f in forgotten {
                    partitions.remove(f);
                }
                if partitions.len() > MAX_SESSION_PARTITIONS {
                    return Err(ResponseError::InvalidRequest);
                }
                let replaced = sessions
                    .insert(
                        key.clone(),
                        Session {
                            next_epoch: 1,
                            connection,
                            partitions,
                            last_used: now,
                        },
                    )
                    .map(|s| s.partitions.into_iter().collect())
                    .unwrap_or_default();
                Ok(Opened::New { replaced })
            }
            -1 => {
                let session = sessions
                    .remove(key)
                    .ok_or(ResponseError::ShareSessionNotFound)?;
                Ok(Opened::Closed {
                    partitions: session.partitions.into_iter().collect(),
                })
            }
            n if n > 0 => {
                let session = sessions
                    .get_mut(key)
                    .ok_or(ResponseError::ShareSessionNotFound)?;
                if session.next_epoch != n {
                    return Err(ResponseError::InvalidShareSessionEpoch);
                }
                for f in forgotten {
                    session.partitions.remove(f);
                }
                for a in added {
                    if session.partitions.len() >= MAX_SESSION_PARTITIONS {
                        return Err(ResponseError::InvalidRequest);
                    }
                    session.partitions.insert(a.clone());
                }
                session.next_epoch = if n == i32::MAX { 1 } else { n + 1 };
                session.last_used = now;
                session.connection = connection;
                Ok(Opened::Continued)
            }
            _ => Err(ResponseError::InvalidShareSessionEpoch),
        }
    }

    /// Whether a request at `epoch` (not 0) may use the member's session,
    /// without moving it on: SHARE_SESSION_NOT_FOUND,
    /// INVALID_SHARE_SESSION_EPOCH as `open` would answer.
    pub fn check(&self, key: &SessionKey, epoch: i32) -> Result<(), ResponseError> {
        let sessions = self.lock();
        let session = sessions
            .get(key)
            .ok_or(ResponseError::ShareSessionNotFound)?;
        if epoch == -1 || epoch == session.next_epoch {
            Ok(())
        } else {
            Err(ResponseError::InvalidShareSessionEpoch)
        }
    }

    /// The partitions of the member's session.
    pub fn partitions(&self, key: &SessionKey) -> Vec<SessionPartition> {
        self.lock()
            .get(key)
            .map(|s| s.partitions.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Whether any session was last used on `connection`.
    pub fn on_connection(&self, connection: u64) -> bool {
        self.lock().values().any(|s| s.connection == connection)
    }

    /// Removes the sessions last used on `connection` (it closed); returns
    /// them with their partitions, to release.
    pub fn close_connection(&self, connection: u64) -> Vec<(SessionKey, Vec<SessionPartition>)> {
        let mut sessions = self.lock();
        let closed: Vec<SessionKey> = sessions
            .iter()
            .filter(|(_, s)| s.connection == connection)
            .map(|(k, _)| k.clone())
            .collect();
        closed
            .into_iter()
            .filter_map(|k| {
                let s = sessions.remove(&k)?;
                Some((k, s.partitions.into_iter().collect()))
            })
            .collect()
    }

    /// Removes sessions idle past the eviction time; returns them with
    /// their partitions, to release.
    pub fn evict_idle(&self) -> Vec<(SessionKey, Vec<SessionPartition>)> {
        let mut sessions = self.lock();
        let idle: Vec<SessionKey> = sessions
            .iter()
            .filter(|(_, s)| s.last_used.elapsed() >= IDLE_EVICTION)
            .map(|(k, _)| k.clone())
            .collect();
        idle.into_iter()
            .filter_map(|k| {
                let s = sessions.remove(&k)?;
                Some((k, s.partitions.into_iter().collect()))
            })
            .collect()
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SessionKey {
        ("g".to_string(), "m".to_string())
    }

    #[test]
    fn kafka_epoch_rules() {
        let s = ShareSessions::default();
        let p = vec![("t".to_string(), 0)];
        assert_eq!(
            s.open(&key(), 1, &p, &[], 1),
            Err(ResponseError::ShareSessionNotFound)
        );
        assert_eq!(
            s.open(&key(), 0, &p, &[], 1),
            Ok(Opened::New { replaced: vec![] })
        );
        assert_eq!(
            s.open(&key(), 2, &[], &[], 1),
            Err(ResponseError::InvalidShareSessionEpoch)
        );
        assert_eq!(s.open(&key(), 1, &[], &[], 1), Ok(Opened::Continued));
        assert_eq!(s.open(&key(), 2, &[], &p, 1), Ok(Opened::Continued));
        assert!(s.partitions(&key()).is_empty());
        assert_eq!(
            s.open(&key(), -1, &[], &[], 1),
            Ok(Opened::Closed { partitions: vec![] })
        );
        assert_eq!(
            s.open(&key(), -1, &[], &[], 1),
            Err(ResponseError::ShareSessionNotFound)
        );
        assert_eq!(
            s.open(&key(), -5, &[], &[], 1),
            Err(ResponseError::InvalidShareSessionEpoch)
        );
    }
}
