//! The replica fetcher for one leader: a task that, for every partition this
//! broker follows under that leader, first asks where its latest leader epoch
//! ends (OffsetForLeaderEpoch, and truncates), then fetches from the local
//! log end offset with Fetch carrying this broker's replica id and its log
//! start offset (what the leader's DeleteRecords waits for), appends what
//! comes back, learns the leader's high watermark and follows its log start
//! offset — Kafka's
//! ReplicaFetcherThread. The task ends when no partition follows the leader
//! any more; the manager starts a new one when needed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{BrokerId, FetchRequest, OffsetForLeaderEpochRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use tracing::{debug, warn};

use super::leader_client::LeaderClient;
use super::throttle::Side;
use super::{FollowerStep, Replica, ReplicaManager};
use chronik_replication::EpochEndOffset;

const FETCH_VERSION: i16 = 12;
const EPOCH_VERSION: i16 = 4;
const FETCH_MAX_WAIT_MS: i32 = 500;
const PARTITION_MAX_BYTES: i32 = 8 * 1024 * 1024;
const RESPONSE_MAX_BYTES: i32 = 64 * 1024 * 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const BACKOFF: Duration = Duration::from_millis(100);
/// How long a fetcher whose every partition is held back by the follower
/// throttle waits before it looks again.
const THROTTLED_WAIT: Duration = Duration::from_millis(100);

type Work = Vec<(Arc<Replica>, FollowerStep)>;

/// A follower's log start offset follows the leader's (moved there by
/// DeleteRecords or retention), up to what the follower holds.
fn follow_log_start(replica: &Replica, leader_log_start: i64) {
    let log = &replica.log;
    let target = leader_log_start.min(log.log_end_offset());
    if target > log.log_start_offset() {
        if let Err(e) = log.delete_records_before(target) {
            warn!(topic = replica.topic, partition = replica.partition, error = %e, "cannot follow the leader's log start offset");
        }
    }
}

pub async fn run(manager: Arc<ReplicaManager>, leader: i32) {
    let mut client: Option<LeaderClient> = None;
    let mut connect_failures = 0u32;
    loop {
        if manager.log_dir_offline() {
            // Nothing can be appended; `log_dir` restarts the fetchers
            // once the directory is back.
            tokio::time::sleep(BACKOFF).await;
            continue;
        }
        let work: Work = manager
            .all_replicas()
            .into_iter()
            .filter_map(|r| match r.follower_step() {
                Some((l, step)) if l == leader => Some((r, step)),
                _ => None,
            })
            .collect();
        if work.is_empty() {
            debug!(leader, "no partitions follow this leader; fetcher stops");
            return;
        }
        let Some(conn) = connected(&manager, leader, &mut client, &mut connect_failures).await
        else {
            tokio::time::sleep(BACKOFF * 2).await;
            continue;
        };
        let (ask, fetch): (Work, Work) = work
            .into_iter()
            .partition(|(_, s)| matches!(s, FollowerStep::AskEpoch { .. }));
        let result = if !ask.is_empty() {
            ask_epochs(&manager, conn, &ask).await
        } else {
            fetch_once(&manager, conn, &fetch).await
        };
        match result {
            Ok(true) => {}
            Ok(false) => tokio::time::sleep(BACKOFF).await,
            Err(e) => {
                debug!(leader, error = %e, "fetch from leader failed; reconnecting");
                client = None;
                tokio::time::sleep(BACKOFF).await;
            }
        }
    }
}

/// Connects (TCP, then the inter-broker listener's TLS / SASL) if not
/// connected. The first failure of a run of them is a warning (a refused
/// TLS handshake or SASL login needs the operator), the rest debug.
async fn connected<'a>(
    manager: &ReplicaManager,
    leader: i32,
    client: &'a mut Option<LeaderClient>,
    failures: &mut u32,
) -> Option<&'a mut LeaderClient> {
    if client.is_none() {
        let client_id = format!("chronik-replica-{}", manager.node_id);
        match LeaderClient::connect_to_broker(manager, leader, client_id, CONNECT_TIMEOUT).await {
            Ok(c) => {
                *client = Some(c);
                *failures = 0;
            }
            Err(e) => {
                *failures = failures.saturating_add(1);
                if *failures == 1 {
                    warn!(
                        leader,
                        error = format!("{e:#}"),
                        "cannot connect to the leader; retrying"
                    );
                } else {
                    debug!(
                        leader,
                        error = format!("{e:#}"),
                        "cannot connect to the leader"
                    );
                }
                return None;
            }
        }
    }
    client.as_mut()
}

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

/// OffsetForLeaderEpoch for every partition still truncating. Ok(false)
/// means some partitions got errors (back off).
async fn ask_epochs(
    manager: &ReplicaManager,
    client: &mut LeaderClient,
    ask: &Work,
) -> anyhow::Result<bool> {
    let mut topics: BTreeMap<&str, Vec<OffsetForLeaderPartition>> = BTreeMap::new();
    for (replica, step) in ask {
        if let FollowerStep::AskEpoch {
            current_leader_epoch,
            leader_epoch,
        } = *step
        {
            topics.entry(&replica.topic).or_default().push(
                OffsetForLeaderPartition::default()
                    .with_partition(replica.partition)
                    .with_current_leader_epoch(current_leader_epoch)
                    .with_leader_epoch(leader_epoch),
            );
        }
    }
    let request = OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(manager.node_id))
        .with_topics(
            topics
                .into_iter()
                .map(|(t, partitions)| {
                    OffsetForLeaderTopic::default()
                        .with_topic(name(t))
                        .with_partitions(partitions)
                })
                .collect(),
        );
    let response = client
        .send(&request, EPOCH_VERSION, REQUEST_TIMEOUT)
        .await?;
    let mut clean = true;
    for topic in &response.topics {
        for p in &topic.partitions {
            let Some((replica, step)) = ask
                .iter()
                .find(|(r, _)| r.topic == topic.topic.0.as_str() && r.partition == p.partition)
            else {
                continue;
            };
            let FollowerStep::AskEpoch {
                current_leader_epoch,
                ..
            } = *step
            else {
                continue;
            };
            if p.error_code != 0 {
                clean = false;
                debug!(
                    topic = replica.topic,
                    partition = replica.partition,
                    error = p.error_code,
                    "epoch query refused"
                );
                continue;
            }
            let answer = (p.leader_epoch >= 0 && p.end_offset >= 0).then_some(EpochEndOffset {
                leader_epoch: p.leader_epoch,
                end_offset: p.end_offset,
            });
            let replica = replica.clone();
            tokio::task::spawn_blocking(move || {
                replica.on_epoch_answer(current_leader_epoch, answer)
            })
            .await?;
        }
    }
    Ok(clean)
}

/// One Fetch round for every partition in the fetching phase.
async fn fetch_once(
    manager: &ReplicaManager,
    client: &mut LeaderClient,
    fetch: &Work,
) -> anyhow::Result<bool> {
    let mut topics: BTreeMap<&str, Vec<FetchPartition>> = BTreeMap::new();
    let image = manager.cluster.image();
    let mut throttled: BTreeSet<(&str, i32)> = BTreeSet::new();
    for (replica, step) in fetch {
        if let FollowerStep::Fetch {
            current_leader_epoch,
            fetch_offset,
        } = *step
        {
            let (topic, partition) = (replica.topic.as_str(), replica.partition);
            let in_sync = image
                .partition(topic, partition)
                .is_some_and(|p| p.isr.contains(&manager.node_id));
            let allowance =
                manager
                    .throttle
                    .allowance(&image, topic, partition, Side::Follower, in_sync);
            let max_bytes = match allowance {
                // The follower quota is spent: not fetched this round.
                Some(0) => continue,
                Some(piece) => {
                    throttled.insert((topic, partition));
                    i32::try_from(piece).unwrap_or(PARTITION_MAX_BYTES)
                }
                None => PARTITION_MAX_BYTES,
            };
            topics.entry(topic).or_default().push(
                FetchPartition::default()
                    .with_partition(partition)
                    .with_current_leader_epoch(current_leader_epoch)
                    .with_fetch_offset(fetch_offset)
                    .with_log_start_offset(replica.log.log_start_offset())
                    .with_partition_max_bytes(max_bytes.min(PARTITION_MAX_BYTES)),
            );
        }
    }
    if topics.is_empty() {
        // Every partition waits for the follower throttle's window.
        tokio::time::sleep(THROTTLED_WAIT).await;
        return Ok(true);
    }
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(manager.node_id))
        .with_max_wait_ms(FETCH_MAX_WAIT_MS)
        .with_min_bytes(1)
        .with_max_bytes(RESPONSE_MAX_BYTES)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(
            topics
                .into_iter()
                .map(|(t, partitions)| {
                    FetchTopic::default()
                        .with_topic(name(t))
                        .with_partitions(partitions)
                })
                .collect(),
        );
    let response = client
        .send(&request, FETCH_VERSION, REQUEST_TIMEOUT)
        .await?;
    let mut clean = true;
    for topic in response.responses {
        for p in topic.partitions {
            let Some((replica, step)) = fetch.iter().find(|(r, _)| {
                r.topic == topic.topic.0.as_str() && r.partition == p.partition_index
            }) else {
                continue;
            };
            let FollowerStep::Fetch {
                current_leader_epoch,
                fetch_offset,
            } = *step
            else {
                continue;
            };
            if p.error_code == ResponseError::OffsetOutOfRange.code() {
                clean = false;
                let replica = replica.clone();
                let (start, hw) = (p.log_start_offset, p.high_watermark);
                let restarted = tokio::task::spawn_blocking(move || {
                    replica.on_fetch_below_log_start(current_leader_epoch, fetch_offset, start, hw)
                })
                .await?;
                if !matches!(restarted, Ok(true)) {
                    warn!(topic = topic.topic.0.as_str(), partition = p.partition_index, fetch_offset,
                          leader_log_start = start, outcome = ?restarted, "leader says offset out of range");
                }
                continue;
            }
            if p.error_code != 0 {
                clean = false;
                continue;
            }
            let records = p.records.unwrap_or_default();
            if throttled.contains(&(replica.topic.as_str(), replica.partition)) {
                let fetched = u64::try_from(records.len()).unwrap_or(u64::MAX);
                manager.throttle.record(Side::Follower, fetched);
            }
            let (hw, leader_log_start) = (p.high_watermark, p.log_start_offset);
            let fetched = replica.clone();
            let appended = tokio::task::spawn_blocking(move || {
                let appended = fetched.on_fetched(current_leader_epoch, fetch_offset, &records, hw);
                follow_log_start(&fetched, leader_log_start);
                appended
            })
            .await?;
            // Consumers parked on this follower (KIP-392) read up to its
            // high watermark, which this answer may have moved.
            manager.purgatory.wake(&replica.log);
            match appended {
                Ok(n) => {
                    manager
                        .stats
                        .records_replicated
                        .fetch_add(n, Ordering::Relaxed);
                }
                Err(e) => {
                    clean = false;
                    warn!(topic = topic.topic.0.as_str(), partition = p.partition_index, error = %e, "follower append failed");
                }
            }
        }
    }
    Ok(clean)
}
