//! Incremental fetch sessions (KIP-227): a fetcher that names a session
//! sends only the partitions whose fetch state changed, and is answered
//! only with the partitions that have something new.
//!
//! Owns: the bounded session cache (Kafka's
//! `max.incremental.fetch.session.cache.slots`, an idle session evictable
//! after `min.incremental.fetch.session.eviction.ms`, 120 s, or by a
//! follower's new session with more partitions; a full request naming an
//! unknown session is served, as Kafka serves it; at most `MAX_CACHED_PARTITIONS` partitions
//! over all sessions), the session id / epoch rules and their errors
//! (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH), turning an
//! incremental request into the full partition list to read, and trimming
//! the answer to what changed since the session last reported it. A session
//! belongs to the fetcher that created it (a consumer, or one follower).
//! Must not: read partitions (the Fetch handler does, from the request
//! `begin` returns).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::FetchableTopicResponse;
use kafka_protocol::messages::{FetchRequest, TopicName};
use prometheus_client::metrics::gauge::Gauge;
use uuid::Uuid;

/// A session's first request (session id 0): create one.
const INITIAL_EPOCH: i32 = 0;
/// No session, or close the named one.
const FINAL_EPOCH: i32 = -1;
/// Sessions exist from Fetch v7.
const FIRST_SESSION_VERSION: i16 = 7;
/// Kafka's `min.incremental.fetch.session.eviction.ms`.
const EVICTION_AFTER: Duration = Duration::from_secs(120);
/// Partitions cached over all sessions: with the slots, what bounds the
/// cache's memory (about 100 bytes a partition).
pub const MAX_CACHED_PARTITIONS: usize = 200_000;

/// Who fetches: a session answers only the fetcher that created it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    Consumer,
    Follower(i32),
}

/// A partition by topic name (Fetch < 13) or topic id (13+), and index.
type Key = (TopicName, Uuid, i32);

#[derive(Debug)]
struct Cached {
    fetch: FetchPartition,
    /// What the session last reported, to tell what changed.
    reported: Option<(i64, i64, i64)>,
}

#[derive(Debug)]
struct Session {
    owner: Owner,
    /// The epoch the next request must carry.
    epoch: i32,
    partitions: IndexMap<Key, Cached>,
    last_used: Instant,
}

/// How a Fetch relates to the session cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// No session: the request is served as it is, answered with id 0.
    Sessionless,
    /// A full request that created session `id` (answered whole).
    Created(i32),
    /// An incremental request of session `id`: answered with changes only.
    Incremental(i32),
}

#[derive(Debug)]
pub struct FetchSessionCache {
    slots: usize,
    sessions: Mutex<HashMap<i32, Session>>,
    /// `chronik_fetch_sessions`: sessions held.
    held: Gauge,
}

fn key(topic: &FetchTopic, version: i16, partition: i32) -> Key {
    if version >= 13 {
        (TopicName::default(), topic.topic_id, partition)
    } else {
        (topic.topic.clone(), Uuid::nil(), partition)
    }
}

fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

impl FetchSessionCache {
    /// A cache of `slots` sessions (0: sessions off, every fetch is full)
    /// whose size `held` shows.
    pub fn new(slots: usize, held: Gauge) -> FetchSessionCache {
        FetchSessionCache {
            slots,
            sessions: Mutex::new(HashMap::new()),
            held,
        }
    }

    fn lock(&self) -> Guard<'_> {
        Guard {
            sessions: self.sessions.lock().unwrap_or_else(|e| e.into_inner()),
            held: &self.held,
        }
    }

    /// Sessions held now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// The request to serve for `request` and how to answer it, or the
    /// top-level error. An incremental request becomes the session's whole
    /// partition list, its changes applied; `max_partitions` bounds one
    /// session.
    pub fn begin(
        &self,
        version: i16,
        request: &FetchRequest,
        owner: Owner,
        max_partitions: usize,
    ) -> Result<(Option<FetchRequest>, Context), ResponseError> {
        if version < FIRST_SESSION_VERSION {
            return Ok((None, Context::Sessionless));
        }
        let (id, epoch) = (request.session_id, request.session_epoch);
        let mut sessions = self.lock();
        if epoch == FINAL_EPOCH || epoch == INITIAL_EPOCH {
            // A full request: the session it names (if this fetcher's) is
            // closed, and a missing one is no error — Kafka serves it, so a
            // fetcher whose session was evicted starts over at once
            // instead of being refused on every fetch.
            if sessions.get(&id).is_some_and(|s| s.owner == owner) {
                sessions.remove(&id);
            }
            return Ok(match epoch {
                FINAL_EPOCH => (None, Context::Sessionless),
                _ => (None, self.create(&mut sessions, version, request, owner)),
            });
        }
        if id == 0 {
            return Err(ResponseError::InvalidFetchSessionEpoch);
        }
        let Some(session) = sessions.get_mut(&id).filter(|s| s.owner == owner) else {
            return Err(ResponseError::FetchSessionIdNotFound);
        };
        if epoch != session.epoch {
            return Err(ResponseError::InvalidFetchSessionEpoch);
        }
        for topic in &request.topics {
            for p in &topic.partitions {
                let k = key(topic, version, p.partition);
                match session.partitions.get_mut(&k) {
                    Some(cached) => cached.fetch = p.clone(),
                    None => {
                        session.partitions.insert(
                            k,
                            Cached {
                                fetch: p.clone(),
                                reported: None,
                            },
                        );
                    }
                }
            }
        }
        for forgotten in &request.forgotten_topics_data {
            for p in &forgotten.partitions {
                let k = if version >= 13 {
                    (TopicName::default(), forgotten.topic_id, *p)
                } else {
                    (forgotten.topic.clone(), Uuid::nil(), *p)
                };
                session.partitions.shift_remove(&k);
            }
        }
        if session.partitions.len() > max_partitions {
            sessions.remove(&id);
            return Err(ResponseError::InvalidRequest);
        }
        session.epoch = next_epoch(session.epoch);
        session.last_used = Instant::now();
        let whole = full_request(request, version, &session.partitions);
        let total: usize = sessions.values().map(|s| s.partitions.len()).sum();
        if total > MAX_CACHED_PARTITIONS {
            // Grown past what the cache may hold: the fetcher starts over.
            sessions.remove(&id);
            return Err(ResponseError::FetchSessionIdNotFound);
        }
        Ok((Some(whole), Context::Incremental(id)))
    }

    /// A new session for the full `request`, when a slot can be had.
    fn create(
        &self,
        sessions: &mut HashMap<i32, Session>,
        version: i16,
        request: &FetchRequest,
        owner: Owner,
    ) -> Context {
        let size: usize = request.topics.iter().map(|t| t.partitions.len()).sum();
        let cached: usize = sessions.values().map(|s| s.partitions.len()).sum();
        if self.slots == 0 || size == 0 || cached + size > MAX_CACHED_PARTITIONS {
            return Context::Sessionless;
        }
        if sessions.len() >= self.slots {
            let now = Instant::now();
            // An idle session first; else, for a follower only (Kafka's
            // privileged fetcher), a smaller one: consumers never evict
            // each other's live sessions, which would have them take turns
            // starting over on every fetch.
            let privileged = matches!(owner, Owner::Follower(_));
            let victim = sessions
                .iter()
                .filter(|(_, s)| now.duration_since(s.last_used) >= EVICTION_AFTER)
                .min_by_key(|(_, s)| s.last_used)
                .or_else(|| {
                    sessions
                        .iter()
                        .filter(|(_, s)| privileged && s.partitions.len() < size)
                        .min_by_key(|(_, s)| (s.partitions.len(), s.last_used))
                })
                .map(|(id, _)| *id);
            match victim {
                Some(id) => {
                    sessions.remove(&id);
                }
                None => return Context::Sessionless,
            }
        }
        let id = loop {
            let candidate = i32::from_be_bytes(
                Uuid::new_v4().as_bytes()[..4]
                    .try_into()
                    .unwrap_or([0, 0, 0, 1]),
            ) & i32::MAX;
            if candidate != 0 && !sessions.contains_key(&candidate) {
                break candidate;
            }
        };
        let mut partitions = IndexMap::new();
        for topic in &request.topics {
            for p in &topic.partitions {
                partitions.insert(
                    key(topic, version, p.partition),
                    Cached {
                        fetch: p.clone(),
                        reported: None,
                    },
                );
            }
        }
        sessions.insert(
            id,
            Session {
                owner,
                epoch: next_epoch(INITIAL_EPOCH),
                partitions,
                last_used: Instant::now(),
            },
        );
        Context::Created(id)
    }

    /// The answer's topics for `context`: the whole answer for a full
    /// request, only what changed for an incremental one (records, an
    /// error, or a new high watermark, last stable or log start offset);
    /// and the session id to answer with.
    pub fn finish(
        &self,
        context: Context,
        version: i16,
        topics: Vec<FetchableTopicResponse>,
    ) -> (Vec<FetchableTopicResponse>, i32) {
        let id = match context {
            Context::Sessionless => return (topics, 0),
            Context::Created(id) | Context::Incremental(id) => id,
        };
        let incremental = matches!(context, Context::Incremental(_));
        let mut sessions = self.lock();
        let Some(session) = sessions.get_mut(&id) else {
            return (topics, 0);
        };
        let mut out = Vec::with_capacity(topics.len());
        for mut topic in topics {
            topic.partitions.retain(|p| {
                let k = if version >= 13 {
                    (TopicName::default(), topic.topic_id, p.partition_index)
                } else {
                    (topic.topic.clone(), Uuid::nil(), p.partition_index)
                };
                let now = (p.high_watermark, p.last_stable_offset, p.log_start_offset);
                let Some(cached) = session.partitions.get_mut(&k) else {
                    return true;
                };
                let changed = !incremental
                    || p.error_code != 0
                    || p.records.as_ref().is_some_and(|r| !r.is_empty())
                    || cached.reported != Some(now);
                cached.reported = Some(now);
                changed
            });
            if !topic.partitions.is_empty() {
                out.push(topic);
            }
        }
        (out, id)
    }
}

/// The locked sessions; publishes how many there are when released.
struct Guard<'a> {
    sessions: MutexGuard<'a, HashMap<i32, Session>>,
    held: &'a Gauge,
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        self.held
            .set(i64::try_from(self.sessions.len()).unwrap_or(i64::MAX));
    }
}

impl std::ops::Deref for Guard<'_> {
    type Target = HashMap<i32, Session>;
    fn deref(&self) -> &Self::Target {
        &self.sessions
    }
}

impl std::ops::DerefMut for Guard<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.sessions
    }
}

/// `request` with its partitions replaced by the session's, by topic.
fn full_request(
    request: &FetchRequest,
    version: i16,
    partitions: &IndexMap<Key, Cached>,
) -> FetchRequest {
    let mut topics: IndexMap<(TopicName, Uuid), Vec<FetchPartition>> = IndexMap::new();
    for ((name, id, _), cached) in partitions {
        let topic = if version >= 13 {
            (TopicName::default(), *id)
        } else {
            (name.clone(), Uuid::nil())
        };
        topics.entry(topic).or_default().push(cached.fetch.clone());
    }
    let topics = topics
        .into_iter()
        .map(|((name, id), partitions)| {
            FetchTopic::default()
                .with_topic(name)
                .with_topic_id(id)
                .with_partitions(partitions)
        })
        .collect();
    request
        .clone()
        .with_topics(topics)
        .with_forgotten_topics_data(Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::StrBytes;

    fn request(partitions: i32, (session_id, session_epoch): (i32, i32)) -> FetchRequest {
        let topic = FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(
                (0..partitions)
                    .map(|p| FetchPartition::default().with_partition(p))
                    .collect(),
            );
        FetchRequest::default()
            .with_session_id(session_id)
            .with_session_epoch(session_epoch)
            .with_topics(vec![topic])
    }

    fn created(cache: &FetchSessionCache, partitions: i32, owner: Owner) -> Option<i32> {
        match cache.begin(12, &request(partitions, (0, INITIAL_EPOCH)), owner, 1000) {
            Ok((_, Context::Created(id))) => Some(id),
            Ok((_, Context::Sessionless)) => None,
            other => panic!("a full request answered {other:?}"),
        }
    }

    #[test]
    fn a_consumer_never_evicts_a_live_session_and_a_follower_evicts_a_smaller_one() {
        let cache = FetchSessionCache::new(1, Gauge::default());
        let first = created(&cache, 1, Owner::Consumer).expect("a free slot");
        assert_eq!(
            created(&cache, 5, Owner::Consumer),
            None,
            "a consumer took a live session's slot"
        );
        assert!(
            cache
                .begin(12, &request(0, (first, 1)), Owner::Consumer, 1000)
                .is_ok(),
            "the live session was evicted"
        );
        let follower = created(&cache, 5, Owner::Follower(2));
        assert!(
            follower.is_some(),
            "a follower's larger session gets the slot"
        );
        assert_eq!(
            cache
                .begin(12, &request(0, (first, 2)), Owner::Consumer, 1000)
                .err(),
            Some(ResponseError::FetchSessionIdNotFound)
        );
    }

    #[test]
    fn a_full_request_naming_an_unknown_session_is_served() {
        let cache = FetchSessionCache::new(4, Gauge::default());
        for epoch in [INITIAL_EPOCH, FINAL_EPOCH] {
            let answer = cache.begin(12, &request(1, (12345, epoch)), Owner::Consumer, 1000);
            assert!(answer.is_ok(), "epoch {epoch}: {answer:?}");
        }
        assert_eq!(
            cache
                .begin(12, &request(1, (12345, 1)), Owner::Consumer, 1000)
                .err(),
            Some(ResponseError::FetchSessionIdNotFound)
        );
    }
}
