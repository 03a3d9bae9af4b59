//! Fetch: reads whole batches up to the high watermark (the durable offset),
//! honouring per-partition and per-response byte limits (each capped at the
//! broker's `fetch.max.bytes`; a partition named twice is refused), and
//! long-polls up to `max_wait_ms` until `min_bytes` are available, holding
//! no data while parked. Incremental fetch sessions (KIP-227,
//! `fetch_sessions`): a session's request names only what changed and is
//! answered only with partitions that have news.
//!
//! A Fetch carrying a replica id is honoured only from that
//! registered broker's host (`replica::identity`; else
//! TOPIC_AUTHORIZATION_FAILED). It is a follower's — its position is
//! recorded once, on arrival (`ReplicaManager::record_follower_fetch`, which
//! may grow the ISR, advance the high watermark and so wake an acks=all
//! Produce), then it reads up to the log end and reports the high
//! watermark; the wait for data only reads. A
//! consumer's Fetch is served by the leader up to the replication high
//! watermark capped at what is durable here, and from v11 (KIP-392) also
//! by a follower, up to the high watermark it learned from its leader.
//! With `--replica-selector-class`, the leader answers a consumer that
//! names its rack with no records and the in-sync follower in that rack as
//! `preferred_read_replica` (`replica::read_replica`). A read_committed consumer
//! (isolation_level 1) reads only below the last stable offset and is given
//! the aborted transactions of what it read, so it drops their records;
//! every consumer's answer reports the last stable offset.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chronik_log::{Error as LogError, LogManager};
use chronik_metadata::Cluster;
use chronik_protocol::record_batch::{count_records, last_offset_in};
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::FetchTopic;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, ProducerId};
use tokio::time::Instant;
use tracing::warn;

use super::Handled;
use crate::config::limits::Limits;
use crate::config::slices::ReadReplicas;
use crate::infra::metrics::{Metrics, ServedByLabels};
use crate::replica::high_watermark::last_stable_offset;
use crate::replica::identity::verify_replica;
use crate::replica::isr::FollowerPosition;
use crate::replica::purgatory::{Purgatory, MAX_WAIT};
use crate::replica::read_replica::{preferred_read_replica, Candidate};
use crate::replica::throttle::{ReplicationThrottle, Side};
use crate::replica::{Replica, ReplicaManager};
use crate::requests::fetch_sessions::{FetchSessionCache, Owner};
use crate::requests::refusals::refused_topic;
use crate::requests::topics::lookup::resolve;

/// Who is fetching: a consumer, or the follower replica with this id and
/// the partitions whose recorded position was refused (with the error).
#[derive(Clone, Copy)]
enum Fetcher<'r> {
    Consumer,
    Follower(i32, &'r Refused),
}

/// Partitions a follower's position was refused for, by (topic, partition).
type Refused = HashMap<(String, i32), ResponseError>;

/// What every partition of one request is read with.
#[derive(Clone, Copy)]
struct Asked<'r> {
    version: i16,
    isolation_level: i8,
    /// The consumer's client.rack (Fetch v11+; empty: none given).
    rack: &'r str,
}

/// What a Fetch reads through, lent by the dispatcher.
pub struct FetchDeps<'a> {
    pub replicas: &'a Arc<ReplicaManager>,
    pub cluster: &'a Cluster,
    pub throttle: &'a ReplicationThrottle,
    pub log: &'a LogManager,
    pub fetch_sessions: &'a FetchSessionCache,
    pub purgatory: &'a Purgatory,
    pub limits: &'a Limits,
    pub read_replicas: ReadReplicas<'a>,
    pub metrics: &'a Metrics,
}

pub async fn handle(
    deps: &FetchDeps<'_>,
    version: i16,
    request: FetchRequest,
    peer: SocketAddr,
) -> Option<Handled> {
    let replica_id = if version >= 15 {
        request.replica_state.replica_id.0
    } else {
        request.replica_id.0
    };
    let follower = match deps.replicas {
        manager if replica_id >= 0 => match verify_replica(manager, replica_id, peer).await {
            Ok(()) => Some(replica_id),
            Err(reason) => {
                warn!(%peer, replica_id, %reason, "replica fetch refused");
                return refuse_all(&request, ResponseError::TopicAuthorizationFailed);
            }
        },
        _ => None,
    };
    let owner = match follower {
        None => Owner::Consumer,
        Some(id) => Owner::Follower(id),
    };
    let limit = deps.limits.max_partitions_per_request;
    let (request, context) = match deps.fetch_sessions.begin(version, &request, owner, limit) {
        Ok((whole, context)) => (whole.unwrap_or(request), context),
        Err(error) => {
            let response = FetchResponse::default()
                .with_error_code(error.code())
                .with_session_id(0);
            return Handled::new(Response::Fetch(response), true);
        }
    };
    let wait =
        Duration::from_millis(u64::try_from(request.max_wait_ms.max(0)).unwrap_or(0)).min(MAX_WAIT);
    let deadline = Instant::now() + wait;
    let min_bytes = usize::try_from(request.min_bytes.max(0)).unwrap_or(0);
    let duplicates = duplicate_partitions(&request);
    // A follower's position moves the leader's state once, now; the wait
    // below only reads.
    let refused = match follower {
        Some(id) => record_follower_positions(deps, version, &request, id),
        None => Refused::new(),
    };
    let fetcher = match follower {
        Some(id) => Fetcher::Follower(id, &refused),
        None => Fetcher::Consumer,
    };
    // A parked fetch holds no data while it waits: it reads again when
    // woken, and keeps only the read that completes it.
    let mut answer = None;
    deps.purgatory
        .park_until(
            deadline,
            || requested_logs(deps, &request),
            || {
                let read = read_all(deps, version, &request, fetcher, &duplicates);
                let done = read.1 >= min_bytes || read.2;
                if done {
                    answer = Some(read);
                }
                done
            },
        )
        .await;
    // At the deadline: whatever there is now.
    let (topics, _, has_error) =
        answer.unwrap_or_else(|| read_all(deps, version, &request, fetcher, &duplicates));
    let records: u64 = topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .filter_map(|p| p.records.as_ref())
        .map(|r| count_records(r))
        .sum();
    deps.metrics.records_out_total.inc_by(records);
    let (topics, session_id) = deps.fetch_sessions.finish(context, version, topics);
    let response = FetchResponse::default()
        .with_session_id(session_id)
        .with_responses(topics);
    Handled::new(Response::Fetch(response), has_error)
}

/// Records a follower's position in every partition it names that this
/// broker holds (the explicit wake-up of what it completes); returns the
/// partitions it was refused for, with Kafka's error.
fn record_follower_positions(
    deps: &FetchDeps<'_>,
    version: i16,
    request: &FetchRequest,
    follower: i32,
) -> Refused {
    let mut refused = Refused::new();
    for topic in &request.topics {
        let id = if version >= 13 {
            topic.topic_id
        } else {
            uuid::Uuid::nil()
        };
        let Ok(found) = resolve(deps.log, &topic.topic.0, id) else {
            continue;
        };
        for p in &topic.partitions {
            let Some(replica) = deps.replicas.replica(&found.name, p.partition) else {
                continue;
            };
            let position = FollowerPosition {
                fetch_offset: p.fetch_offset,
                log_start_offset: p.log_start_offset,
                current_leader_epoch: p.current_leader_epoch,
            };
            if let Err(e) = deps
                .replicas
                .record_follower_fetch(&replica, follower, position)
            {
                refused.insert((found.name.clone(), p.partition), e);
            }
        }
    }
    refused
}

/// The logs of every requested partition that exists here (a parked fetch
/// is woken when one of them progresses).
fn requested_logs(
    deps: &FetchDeps<'_>,
    request: &FetchRequest,
) -> Vec<Arc<chronik_log::PartitionLog>> {
    let mut logs = Vec::new();
    for topic in &request.topics {
        if let Ok(t) = resolve(deps.log, &topic.topic.0, topic.topic_id) {
            logs.extend(
                topic
                    .partitions
                    .iter()
                    .filter_map(|p| t.partition(p.partition).cloned()),
            );
        }
    }
    logs
}

/// One pass over every requested partition. Returns the topics, the record
/// bytes gathered and whether any partition has an error.
fn read_all(
    deps: &FetchDeps<'_>,
    version: i16,
    request: &FetchRequest,
    fetcher: Fetcher<'_>,
    duplicates: &HashSet<(usize, usize)>,
) -> (Vec<FetchableTopicResponse>, usize, bool) {
    // Kafka: min(request max_bytes, broker fetch.max.bytes); a request
    // asking for nothing (<= 0) still gets the first batch.
    let mut remaining = usize::try_from(request.max_bytes.max(0))
        .unwrap_or(0)
        .min(deps.limits.fetch_max_bytes);
    let mut total = 0usize;
    let mut has_error = false;
    let topics = request
        .topics
        .iter()
        .enumerate()
        .map(|(topic_index, topic)| {
            let asked = Asked {
                version,
                isolation_level: request.isolation_level,
                rack: if version >= 11 {
                    request.rack_id.as_str()
                } else {
                    ""
                },
            };
            let partitions = read_topic(
                deps,
                asked,
                topic,
                fetcher,
                &mut remaining,
                &mut total,
                &mut has_error,
                |p| duplicates.contains(&(topic_index, p)),
            );
            FetchableTopicResponse::default()
                .with_topic(topic.topic.clone())
                .with_topic_id(topic.topic_id)
                .with_partitions(partitions)
        })
        .collect();
    (topics, total, has_error)
}

#[allow(clippy::too_many_arguments)]
fn read_topic(
    deps: &FetchDeps<'_>,
    asked: Asked<'_>,
    topic: &FetchTopic,
    fetcher: Fetcher<'_>,
    remaining: &mut usize,
    total: &mut usize,
    has_error: &mut bool,
    is_duplicate: impl Fn(usize) -> bool,
) -> Vec<PartitionData> {
    let id = if asked.version >= 13 {
        topic.topic_id
    } else {
        uuid::Uuid::nil()
    };
    let read_committed = asked.isolation_level == 1 && matches!(fetcher, Fetcher::Consumer);
    let found = resolve(deps.log, &topic.topic.0, id);
    topic
        .partitions
        .iter()
        .enumerate()
        .map(|(index, p)| {
            let data = PartitionData::default()
                .with_partition_index(p.partition)
                .with_preferred_read_replica(BrokerId(-1));
            // No data and offsets unknown: the answer of a partition that failed.
            let mut failed = |error: ResponseError| {
                *has_error = true;
                data.clone()
                    .with_error_code(error.code())
                    .with_high_watermark(-1)
                    .with_last_stable_offset(-1)
                    .with_log_start_offset(-1)
            };
            if is_duplicate(index) {
                // A partition named twice could double the response.
                return failed(ResponseError::InvalidRequest);
            }
            let log = match &found {
                Ok(t) => t.partition(p.partition).ok_or(ResponseError::UnknownTopicOrPartition),
                Err(e) => Err(*e),
            };
            let log = match log {
                Ok(log) => log,
                Err(error) => return failed(error),
            };
            let (replica, high_watermark, upper_bound, served_by) =
                match bounds(deps, log, p, fetcher, asked.version) {
                    Ok(b) => b,
                    Err(error) => return failed(error),
                };
            let (last_stable, upper_bound) = match fetcher {
                Fetcher::Consumer => {
                    let lso = last_stable_offset(log, high_watermark);
                    (lso, if read_committed { lso.min(upper_bound) } else { upper_bound })
                }
                Fetcher::Follower(..) => (high_watermark, upper_bound),
            };
            let data = data
                .with_high_watermark(high_watermark)
                .with_last_stable_offset(last_stable)
                .with_log_start_offset(log.log_start_offset())
                .with_aborted_transactions(read_committed.then(Vec::new));
            if matches!(fetcher, Fetcher::Consumer) && !asked.rack.is_empty() {
                if let Some(preferred) = preferred_replica(deps, &replica, p.fetch_offset, asked.rack) {
                    // Kafka's leader sends no records with the preference.
                    return data
                        .with_preferred_read_replica(BrokerId(preferred))
                        .with_records(Some(Bytes::new()));
                }
            }
            // Kafka returns the first batch of the first non-empty partition
            // even when it exceeds the limits; the log does that when asked
            // for at least one byte, so a spent budget means "skip".
            if *remaining == 0 && *total > 0 {
                return data.with_records(Some(Bytes::new()));
            }
            let budget = usize::try_from(p.partition_max_bytes.max(0))
                .unwrap_or(0)
                .min(deps.limits.fetch_max_bytes)
                .min(*remaining);
            let budget = if *total == 0 { budget.max(1) } else { budget };
            let throttled = match fetcher {
                Fetcher::Follower(follower, _) => leader_throttle(deps, log, follower),
                Fetcher::Consumer => None,
            };
            let budget = budget.min(throttled.unwrap_or(usize::MAX));
            if budget == 0 {
                return data.with_records(Some(Bytes::new()));
            }
            match log.read(p.fetch_offset, budget, upper_bound) {
                Ok(bytes) => {
                    if throttled.is_some() {
                        let sent = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
                        deps.throttle.record(Side::Leader, sent);
                    }
                    *total += bytes.len();
                    *remaining = remaining.saturating_sub(bytes.len());
                    if let Some(replica) = served_by {
                        let sent = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
                        deps.metrics
                            .consumer_fetch_bytes_total
                            .get_or_create(&ServedByLabels { replica })
                            .inc_by(sent);
                    }
                    let aborted = match last_offset_in(&bytes) {
                        Some(last) if read_committed => Some(
                            log.aborted_transactions(p.fetch_offset, last + 1)
                                .into_iter()
                                .map(|a| {
                                    AbortedTransaction::default()
                                        .with_producer_id(ProducerId(a.producer_id))
                                        .with_first_offset(a.first_offset)
                                })
                                .collect(),
                        ),
                        _ => data.aborted_transactions.clone(),
                    };
                    data.with_records(Some(bytes)).with_aborted_transactions(aborted)
                }
                Err(LogError::OffsetOutOfRange { .. }) => {
                    *has_error = true;
                    data.with_error_code(ResponseError::OffsetOutOfRange.code())
                        .with_records(Some(Bytes::new()))
                }
                Err(e) => {
                    tracing::warn!(topic = log.topic(), partition = log.partition(), error = %e, "fetch read failed");
                    *has_error = true;
                    data.with_error_code(ResponseError::KafkaStorageError.code())
                        .with_records(Some(Bytes::new()))
                }
            }
        })
        .collect()
}

fn refuse_all(request: &FetchRequest, error: ResponseError) -> Option<Handled> {
    let topics = request
        .topics
        .iter()
        .map(|t| refused_topic(t, error.code()))
        .collect();
    Handled::new(
        Response::Fetch(
            FetchResponse::default()
                .with_session_id(0)
                .with_responses(topics),
        ),
        true,
    )
}

/// The second and later mentions of the same partition, as (topic index,
/// partition index) in the request; they are answered INVALID_REQUEST.
/// Topics are compared once per topic entry, partitions by number.
fn duplicate_partitions(request: &FetchRequest) -> HashSet<(usize, usize)> {
    let mut seen: HashMap<(&str, uuid::Uuid), HashSet<i32>> = HashMap::new();
    let mut duplicates = HashSet::new();
    for (t, topic) in request.topics.iter().enumerate() {
        let partitions = seen
            .entry((topic.topic.0.as_str(), topic.topic_id))
            .or_default();
        for (i, p) in topic.partitions.iter().enumerate() {
            if !partitions.insert(p.partition) {
                duplicates.insert((t, i));
            }
        }
    }
    duplicates
}

/// The leader side of a replication throttle: how much of `log` a
/// follower outside the ISR may be sent now (`None`: not throttled).
fn leader_throttle(
    deps: &FetchDeps<'_>,
    log: &chronik_log::PartitionLog,
    follower: i32,
) -> Option<usize> {
    let image = deps.cluster.image();
    let in_sync = image
        .partition(log.topic(), log.partition())
        .is_some_and(|p| p.isr.contains(&follower));
    deps.throttle
        .allowance(&image, log.topic(), log.partition(), Side::Leader, in_sync)
}

/// KIP-392: the follower a consumer in `rack` should read `log` from, when
/// this broker leads it, a replica selector is configured and an in-sync
/// follower in that rack holds `fetch_offset` (`None`: read here).
fn preferred_replica(
    deps: &FetchDeps<'_>,
    replica: &Replica,
    fetch_offset: i64,
    rack: &str,
) -> Option<i32> {
    let selector = deps.read_replicas.selector?;
    let (leader_end, followers) = replica.read_replica_candidates(fetch_offset)?;
    let image = deps.cluster.image();
    let rack_of = |id: i32| {
        image
            .brokers
            .get(&id)
            .filter(|b| b.is_live())
            .and_then(|b| b.rack.as_deref())
    };
    let leader = Candidate {
        broker: deps.replicas.node_id(),
        rack: deps.read_replicas.rack,
        log_end_offset: leader_end,
    };
    let followers: Vec<Candidate<'_>> = followers
        .into_iter()
        .filter(|&(id, _)| image.is_live(id))
        .map(|(id, end)| Candidate {
            broker: id,
            rack: rack_of(id),
            log_end_offset: end,
        })
        .collect();
    preferred_read_replica(selector, rack, &leader, &followers)
}

/// What one partition is read within: its replica (looked up once per
/// read), the high watermark to report, the offset reads stop before, and
/// who serves a consumer (`leader` or `follower`).
type Bounds = (Arc<Replica>, i64, i64, Option<&'static str>);

/// (the partition's replica — looked up once per read —, high watermark
/// to report, offset reads stop before, who serves a consumer: `leader` or
/// `follower`) for one partition. Reads only: a follower's position was
/// recorded when its request arrived.
fn bounds(
    deps: &FetchDeps<'_>,
    log: &chronik_log::PartitionLog,
    p: &kafka_protocol::messages::fetch_request::FetchPartition,
    fetcher: Fetcher<'_>,
    version: i16,
) -> Result<Bounds, ResponseError> {
    let replica = deps
        .replicas
        .replica(log.topic(), log.partition())
        .ok_or(ResponseError::NotLeaderOrFollower)?;
    match fetcher {
        Fetcher::Follower(_, refused) => {
            if !refused.is_empty() {
                if let Some(error) = refused.get(&(log.topic().to_string(), log.partition())) {
                    return Err(*error);
                }
            }
            let hw = replica.high_watermark_for_follower(p.current_leader_epoch)?;
            Ok((replica, hw, log.log_end_offset(), None))
        }
        Fetcher::Consumer => {
            let followers_serve = version >= 11;
            let hw = replica
                .consumer_read_bound(p.current_leader_epoch, followers_serve)?
                .min(log.durable_offset());
            let served_by = match replica.leader_epoch() {
                Some(_) => "leader",
                None => "follower",
            };
            Ok((replica, hw, hw, Some(served_by)))
        }
    }
}
