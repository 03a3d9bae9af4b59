//! ShareAcknowledge (KIP-932, v1–v2): a share-group member accepts,
//! releases, rejects (or, v2, renews the lock of) records it acquired,
//! without fetching. Each partition's acknowledgement is durable at the
//! share coordinator before it is answered. Epoch -1 also closes the
//! member's share session, releasing what it still holds; epoch 0 is
//! INVALID_SHARE_SESSION_EPOCH (acknowledging needs an open session).

use std::collections::BTreeMap;

use chronik_metadata::Cluster;
use chronik_protocol::share_wire::{ShareAcknowledgeRequestWire, ShareAcknowledgeResponseWire};
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::share_acknowledge_response::{
    LeaderIdAndEpoch, PartitionData, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::messages::ShareAcknowledgeResponse;
use kafka_protocol::protocol::StrBytes;

use super::Handled;
use crate::coordinators::share::config::settings_of;
use crate::coordinators::share::sessions::Opened;
use crate::coordinators::share::{self, ShareCoordinator};
use crate::requests::share_requests::{
    ack_batches, acknowledge, current_leader, member_of, release, topic_name,
};

pub async fn handle(
    cluster: &Cluster,
    share: &ShareCoordinator,
    (version, connection): (i16, u64),
    request: ShareAcknowledgeRequestWire,
) -> Option<Handled> {
    let (body, lock_ms) = match ack(cluster, share, (version, connection), request).await {
        Ok(r) => r,
        Err((error, message)) => (
            ShareAcknowledgeResponse::default()
                .with_error_code(error.code())
                .with_error_message(message.map(StrBytes::from_string)),
            0,
        ),
    };
    let has_error = body.error_code != 0
        || body
            .responses
            .iter()
            .flat_map(|t| &t.partitions)
            .any(|p| p.error_code != 0);
    Handled::new(
        Response::ShareAcknowledge(ShareAcknowledgeResponseWire {
            body,
            acquisition_lock_timeout_ms: lock_ms,
        }),
        has_error,
    )
}

type Failure = (ResponseError, Option<String>);

async fn ack(
    cluster: &Cluster,
    share: &ShareCoordinator,
    (version, connection): (i16, u64),
    wire: ShareAcknowledgeRequestWire,
) -> Result<(ShareAcknowledgeResponse, i32), Failure> {
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
    if request.share_session_epoch == 0 {
        return Err((
            ResponseError::InvalidShareSessionEpoch,
            Some("ShareAcknowledge needs an open share session.".to_string()),
        ));
    }
    let key = (group.clone(), member.clone());
    share
        .sessions
        .check(&key, request.share_session_epoch)
        .map_err(|e| (e, None))?;
    let image = cluster.image();
    let mut by_topic: BTreeMap<uuid::Uuid, Vec<PartitionData>> = BTreeMap::new();
    for t in &request.topics {
        let name = topic_name(&image, t.topic_id);
        for p in &t.partitions {
            let result = match &name {
                Err(e) => Err(*e),
                Ok(name) => {
                    let wire_batches = p
                        .acknowledgement_batches
                        .iter()
                        .map(|b| (b.first_offset, b.last_offset, b.acknowledge_types.clone()));
                    match ack_batches(wire_batches, version >= 2) {
                        Ok(b) => {
                            acknowledge(share, (&group, &member), (name, p.partition_index), b)
                                .await
                        }
                        Err(e) => Err(e),
                    }
                }
            };
            let (leader, epoch) = name
                .as_ref()
                .map_or((-1, -1), |n| current_leader(&image, n, p.partition_index));
            let mut data = PartitionData::default()
                .with_partition_index(p.partition_index)
                .with_current_leader(
                    LeaderIdAndEpoch::default()
                        .with_leader_id(leader)
                        .with_leader_epoch(epoch),
                );
            if let Err(e) = result {
                data.error_code = e.code();
            }
            by_topic.entry(t.topic_id).or_default().push(data);
        }
    }
    match share
        .sessions
        .open(&key, request.share_session_epoch, &[], &[], connection)
        .map_err(|e| (e, None))?
    {
        Opened::Closed { partitions } => release(share, (&group, &member), &partitions).await,
        Opened::New { .. } | Opened::Continued => {}
    }
    let lock_ms =
        i32::try_from(settings_of(&image, &group).partition.lock_duration_ms).unwrap_or(i32::MAX);
    let responses = by_topic
        .into_iter()
        .map(|(id, partitions)| {
            ShareAcknowledgeTopicResponse::default()
                .with_topic_id(id)
                .with_partitions(partitions)
        })
        .collect();
    Ok((
        ShareAcknowledgeResponse::default().with_responses(responses),
        lock_ms,
    ))
}
