//! ShareFetch (KIP-932, v1–v2): a share-group member's fetch from the
//! partitions this broker leads. The request first applies its
//! piggybacked acknowledgements, then acquires records from every
//! partition of the member's share session, waiting up to max_wait_ms
//! when none could be acquired. Each partition's answer carries the
//! batches read and the offsets acquired (with their delivery counts); the
//! client delivers only those.
//!
//! Errors as Kafka: UNSUPPORTED_VERSION while `share.version` is 0;
//! INVALID_REQUEST without a group or member id, or when closing a session
//! (epoch -1) asks for records; SHARE_SESSION_NOT_FOUND,
//! INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_LIMIT_REACHED at the top
//! level; per partition UNKNOWN_TOPIC_ID, NOT_LEADER_OR_FOLLOWER (with the
//! current leader), and acknowledge_error_code INVALID_RECORD_STATE /
//! INVALID_REQUEST for acknowledgements Kafka refuses.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use chronik_coordinator_state::share_partition::AcquireMode;
use chronik_metadata::{Cluster, MetadataImage};
use chronik_protocol::share_wire::{ShareFetchRequestWire, ShareFetchResponseWire};
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, LeaderIdAndEpoch, PartitionData, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::ShareFetchResponse;
use kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;

use super::Handled;
use crate::config::limits::Limits;
use crate::coordinators::share::config::settings_of;
use crate::coordinators::share::sessions::{Opened, SessionPartition};
use crate::coordinators::share::{self, ShareCoordinator};
use crate::requests::share_requests::{
    ack_batches, acknowledge, current_leader, member_of, release, topic_name,
};
use crate::requests::topics::lookup::to_uuid;

/// The longest a ShareFetch waits for records.
const MAX_WAIT: Duration = Duration::from_secs(30);
/// How often a waiting ShareFetch looks again.
const POLL: Duration = Duration::from_millis(25);

pub async fn handle(
    (cluster, limits): (&Cluster, &Limits),
    share: &ShareCoordinator,
    (version, connection): (i16, u64),
    request: ShareFetchRequestWire,
) -> Option<Handled> {
    let response = match fetch((cluster, limits), share, (version, connection), request).await {
        Ok(r) => r,
        Err((error, message)) => ShareFetchResponse::default()
            .with_error_code(error.code())
            .with_error_message(message.map(StrBytes::from_string)),
    };
    let has_error = response.error_code != 0
        || response
            .responses
            .iter()
            .flat_map(|t| &t.partitions)
            .any(|p| p.error_code != 0 || p.acknowledge_error_code != 0);
    Handled::new(
        Response::ShareFetch(ShareFetchResponseWire(response)),
        has_error,
    )
}

type Failure = (ResponseError, Option<String>);

/// One partition's answer, built as the request goes.
#[derive(Default)]
struct Answer {
    error: Option<ResponseError>,
    ack_error: Option<ResponseError>,
    records: Option<Bytes>,
    acquired: Vec<chronik_coordinator_state::share_partition::Acquired>,
}

async fn fetch(
    (cluster, limits): (&Cluster, &Limits),
    share: &ShareCoordinator,
    (version, connection): (i16, u64),
    wire: ShareFetchRequestWire,
) -> Result<ShareFetchResponse, Failure> {
    if !share::enabled(cluster) {
        return Err((
            ResponseError::UnsupportedVersion,
            Some("Share groups are not enabled: share.version is 0.".to_string()),
        ));
    }
    let request = wire.body;
    let (group, member) = member_of(
        request.group_id.as_ref().map(|g| g.0.as_str()),
        request.member_id.as_ref().map(|m| m.as_str()),
    )
    .map_err(|e| (e, Some("GroupId and MemberId are required.".to_string())))?;
    let image = cluster.image();
    let mode = match wire.share_acquire_mode {
        0 => AcquireMode::BatchOptimized,
        1 => AcquireMode::RecordLimit,
        other => {
            return Err((
                ResponseError::InvalidRequest,
                Some(format!("Unknown ShareAcquireMode {other}.")),
            ))
        }
    };
    // The partitions the request names, with their acknowledgements.
    let mut answers: BTreeMap<SessionPartition, Answer> = BTreeMap::new();
    let mut unknown: Vec<(uuid::Uuid, i32)> = Vec::new();
    let mut named: Vec<SessionPartition> = Vec::new();
    let mut acks = Vec::new();
    for t in &request.topics {
        let name = match topic_name(&image, t.topic_id) {
            Ok(n) => n,
            Err(_) => {
                unknown.extend(t.partitions.iter().map(|p| (t.topic_id, p.partition_index)));
                continue;
            }
        };
        for p in &t.partitions {
            let sp = (name.clone(), p.partition_index);
            named.push(sp.clone());
            if !p.acknowledgement_batches.is_empty() {
                let wire_batches = p
                    .acknowledgement_batches
                    .iter()
                    .map(|b| (b.first_offset, b.last_offset, b.acknowledge_types.clone()));
                acks.push((sp.clone(), ack_batches(wire_batches, version >= 2)));
            }
            answers.entry(sp).or_default();
        }
    }
    let forgotten: Vec<SessionPartition> = request
        .forgotten_topics_data
        .iter()
        .filter_map(|t| topic_name(&image, t.topic_id).ok().map(|n| (n, t)))
        .flat_map(|(n, t)| t.partitions.iter().map(move |p| (n.clone(), *p)))
        .collect();
    let closing = request.share_session_epoch == -1;
    if closing && !named.iter().all(|sp| acks.iter().any(|(a, _)| a == sp)) {
        return Err((
            ResponseError::InvalidRequest,
            Some("A ShareFetch closing its session (epoch -1) may only acknowledge.".to_string()),
        ));
    }
    let key = (group.clone(), member.clone());
    // Acknowledgements ride on the session as it was: apply them first.
    if request.share_session_epoch != 0 {
        share
            .sessions
            .check(&key, request.share_session_epoch)
            .map_err(|e| (e, None))?;
    }
    for (sp, batches) in acks {
        let result = match batches {
            Ok(b) => acknowledge(share, (&group, &member), (&sp.0, sp.1), b).await,
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            answers.entry(sp).or_default().ack_error = Some(e);
        }
    }
    let opened = share
        .sessions
        .open(
            &key,
            request.share_session_epoch,
            &named,
            &forgotten,
            connection,
        )
        .map_err(|e| (e, None))?;
    match opened {
        Opened::New { replaced } => release(share, (&group, &member), &replaced).await,
        Opened::Closed { partitions } => {
            release(share, (&group, &member), &partitions).await;
            return Ok(respond(&image, answers, unknown, 0));
        }
        // Partitions taken out of the session: what the member held there
        // is released, as Kafka does.
        Opened::Continued => release(share, (&group, &member), &forgotten).await,
    }
    let settings = settings_of(&image, &group);
    let session = share.sessions.partitions(&key);
    let max_records = usize::try_from(request.max_records)
        .ok()
        .filter(|n| *n > 0)
        .unwrap_or(500);
    let mut budget = usize::try_from(request.max_bytes.max(0))
        .unwrap_or(0)
        .min(limits.fetch_max_bytes);
    let deadline = Instant::now()
        + Duration::from_millis(u64::try_from(request.max_wait_ms.max(0)).unwrap_or(0))
            .min(MAX_WAIT);
    loop {
        let mut got = 0usize;
        for sp in &session {
            let k = (group.clone(), sp.0.clone(), sp.1);
            match share
                .partitions
                .fetch(
                    &k,
                    &member,
                    budget.max(usize::from(got == 0)),
                    (max_records.saturating_sub(got).max(1), mode),
                )
                .await
            {
                Ok(f) if !f.acquired.is_empty() => {
                    got += f
                        .acquired
                        .iter()
                        .map(|a| usize::try_from(a.last_offset - a.first_offset + 1).unwrap_or(0))
                        .sum::<usize>();
                    budget = budget.saturating_sub(f.records.len());
                    let a = answers.entry(sp.clone()).or_default();
                    a.records = Some(f.records);
                    a.acquired = f.acquired;
                }
                Ok(_) => {}
                Err(e) => answers.entry(sp.clone()).or_default().error = Some(e),
            }
            if got >= max_records || budget == 0 {
                break;
            }
        }
        let errored = answers.values().any(|a| a.error.is_some());
        if got > 0 || errored || Instant::now() >= deadline {
            break;
        }
        let keys: Vec<_> = session
            .iter()
            .map(|sp| (group.clone(), sp.0.clone(), sp.1))
            .collect();
        while Instant::now() < deadline && !keys.iter().any(|k| share.partitions.has_acquirable(k))
        {
            tokio::time::sleep(POLL.min(deadline.saturating_duration_since(Instant::now()))).await;
        }
        if Instant::now() >= deadline && !keys.iter().any(|k| share.partitions.has_acquirable(k)) {
            break;
        }
    }
    let lock_ms = i32::try_from(settings.partition.lock_duration_ms).unwrap_or(i32::MAX);
    Ok(respond(&image, answers, unknown, lock_ms))
}

fn respond(
    image: &MetadataImage,
    answers: BTreeMap<SessionPartition, Answer>,
    unknown: Vec<(uuid::Uuid, i32)>,
    lock_ms: i32,
) -> ShareFetchResponse {
    let mut by_topic: BTreeMap<[u8; 16], Vec<PartitionData>> = BTreeMap::new();
    for ((topic, partition), a) in answers {
        let Some(id) = image.topics.get(&topic).map(|t| t.topic_id) else {
            continue;
        };
        let mut data = PartitionData::default()
            .with_partition_index(partition)
            .with_records(Some(a.records.unwrap_or_default()))
            .with_acquired_records(
                a.acquired
                    .iter()
                    .map(|r| {
                        AcquiredRecords::default()
                            .with_first_offset(r.first_offset)
                            .with_last_offset(r.last_offset)
                            .with_delivery_count(
                                i16::try_from(r.delivery_count).unwrap_or(i16::MAX),
                            )
                    })
                    .collect(),
            );
        let (leader, epoch) = current_leader(image, &topic, partition);
        data.current_leader = LeaderIdAndEpoch::default()
            .with_leader_id(leader)
            .with_leader_epoch(epoch);
        if let Some(e) = a.error {
            data.error_code = e.code();
        }
        if let Some(e) = a.ack_error {
            data.acknowledge_error_code = e.code();
        }
        by_topic.entry(id).or_default().push(data);
    }
    let mut responses: Vec<ShareFetchableTopicResponse> = by_topic
        .into_iter()
        .map(|(id, partitions)| {
            ShareFetchableTopicResponse::default()
                .with_topic_id(to_uuid(id))
                .with_partitions(partitions)
        })
        .collect();
    let mut unknown_by_topic: BTreeMap<uuid::Uuid, Vec<PartitionData>> = BTreeMap::new();
    for (id, p) in unknown {
        unknown_by_topic.entry(id).or_default().push(
            PartitionData::default()
                .with_partition_index(p)
                .with_error_code(ResponseError::UnknownTopicId.code())
                .with_records(Some(Bytes::new())),
        );
    }
    responses.extend(unknown_by_topic.into_iter().map(|(id, partitions)| {
        ShareFetchableTopicResponse::default()
            .with_topic_id(id)
            .with_partitions(partitions)
    }));
    ShareFetchResponse::default()
        .with_acquisition_lock_timeout_ms(lock_ms)
        .with_responses(responses)
}
