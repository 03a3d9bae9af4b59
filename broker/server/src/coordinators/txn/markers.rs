//! Transaction markers (KIP-98): the control batch that ends a producer's
//! transaction in one partition, written by that partition's leader.
//!
//! Owns: writing one marker on this broker (`write_local`: a COMMIT/ABORT
//! control batch appended acks=all to a user partition; for
//! `__consumer_offsets`, the group coordinator's end of the producer's
//! pending offset commits), and sending a transaction's markers to every
//! partition's leader (`write_all`: local partitions directly, the others
//! in one WriteTxnMarkers request per leader broker). Must not: change
//! transaction state (the coordinator does, once every marker is written).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use chronik_coordinator_state::txn::TopicPartition;
use chronik_protocol::records::build_control_batch;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{ProducerId, TopicName, WriteTxnMarkersRequest};
use kafka_protocol::protocol::StrBytes;
use tracing::debug;

use crate::coordinators::groups::offset_store::now_ms;
use crate::coordinators::groups::OffsetStore;
use crate::coordinators::groups::OFFSETS_TOPIC;
use crate::replica::leader_client::LeaderClient;
use crate::replica::write::WritePath;
use crate::replica::ReplicaManager;
use chronik_metadata::Cluster;

/// How long one marker (or one WriteTxnMarkers round trip) may take.
pub const MARKER_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The end of one producer's transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    /// The leader epoch of `__transaction_state`-0 of the coordinator that
    /// decided it.
    pub coordinator_epoch: i32,
}

/// Writes `marker` to `topic`-`partition`, which this broker must lead.
pub async fn write_local(
    writes: &WritePath,
    offsets: &OffsetStore,
    marker: &Marker,
    topic: &str,
    partition: i32,
) -> Result<(), ResponseError> {
    if topic == OFFSETS_TOPIC {
        offsets.readable()?;
        return offsets
            .complete_transaction(
                (marker.producer_id, marker.producer_epoch),
                marker.commit,
                MARKER_TIMEOUT,
            )
            .await;
    }
    if writes.replicas().replica(topic, partition).is_none() {
        return Err(ResponseError::UnknownTopicOrPartition);
    }
    let batch = build_control_batch(
        marker.producer_id,
        marker.producer_epoch,
        marker.commit,
        marker.coordinator_epoch,
        now_ms(),
    );
    writes
        .write_internal(topic, partition, batch, MARKER_TIMEOUT)
        .await
        .map(drop)
        .map_err(|(error, message)| {
            debug!(topic, partition, ?error, message, "marker not written");
            error
        })
}

/// Writes `marker` to every partition in `partitions`; returns those that
/// still need it (their leader is unknown, unreachable or refused). A
/// partition whose topic no longer exists needs no marker.
pub async fn write_all(
    cluster: &Cluster,
    writes: &WritePath,
    offsets: &OffsetStore,
    marker: &Marker,
    partitions: &BTreeSet<TopicPartition>,
) -> BTreeSet<TopicPartition> {
    let mut by_leader: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
    let mut failed = BTreeSet::new();
    {
        let image = cluster.image();
        for tp in partitions {
            match image.partition(&tp.0, tp.1) {
                Some(p) if p.leader >= 0 => by_leader.entry(p.leader).or_default().push(tp.clone()),
                Some(_) => {
                    failed.insert(tp.clone());
                }
                None if image.topics.contains_key(&tp.0) => {
                    failed.insert(tp.clone());
                }
                // Deleted with its topic: nothing left to end.
                None => {}
            }
        }
    }
    let own = writes.replicas().node_id();
    let sends = by_leader.into_iter().map(|(leader, tps)| async move {
        if leader == own {
            let writes = tps
                .iter()
                .map(|(t, p)| write_local(writes, offsets, marker, t, *p));
            let results = futures::future::join_all(writes).await;
            tps.into_iter()
                .zip(results)
                .filter(|(_, r)| needs_retry(r))
                .map(|(tp, _)| tp)
                .collect::<Vec<_>>()
        } else {
            send_remote(writes.replicas(), leader, marker, tps).await
        }
    });
    for retry in futures::future::join_all(sends).await {
        failed.extend(retry);
    }
    failed
}

fn needs_retry(result: &Result<(), ResponseError>) -> bool {
    !matches!(result, Ok(()) | Err(ResponseError::UnknownTopicOrPartition))
}

/// One WriteTxnMarkers request to broker `leader`; returns the partitions
/// that need another attempt.
async fn send_remote(
    replicas: &Arc<ReplicaManager>,
    leader: i32,
    marker: &Marker,
    tps: Vec<TopicPartition>,
) -> Vec<TopicPartition> {
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (t, p) in &tps {
        topics.entry(t.as_str()).or_default().push(*p);
    }
    let request =
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(ProducerId(marker.producer_id))
            .with_producer_epoch(marker.producer_epoch)
            .with_transaction_result(marker.commit)
            .with_coordinator_epoch(marker.coordinator_epoch)
            .with_topics(
                topics
                    .into_iter()
                    .map(|(t, ps)| {
                        WritableTxnMarkerTopic::default()
                            .with_name(TopicName(StrBytes::from_string(t.to_string())))
                            .with_partition_indexes(ps)
                    })
                    .collect(),
            )]);
    let client_id = format!("chronik-txn-coordinator-{}", replicas.node_id());
    let response = async {
        let mut client =
            LeaderClient::connect_to_broker(replicas, leader, client_id, CONNECT_TIMEOUT).await?;
        client.send(&request, 1, MARKER_TIMEOUT).await
    }
    .await;
    let response = match response {
        Ok(r) => r,
        Err(e) => {
            debug!(leader, error = %e, "WriteTxnMarkers failed");
            return tps;
        }
    };
    let mut done = BTreeSet::new();
    for m in response.markers {
        for t in m.topics {
            for p in t.partitions {
                let result = match p.error_code {
                    0 => Ok(()),
                    code => Err(ResponseError::try_from_code(code)
                        .unwrap_or(ResponseError::UnknownServerError)),
                };
                if !needs_retry(&result) {
                    done.insert((t.name.0.to_string(), p.partition_index));
                }
            }
        }
    }
    tps.into_iter().filter(|tp| !done.contains(tp)).collect()
}
