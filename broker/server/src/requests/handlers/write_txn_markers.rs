//! WriteTxnMarkers (broker to broker): the transaction coordinator asks
//! this partition leader to end producers' transactions. Honoured only from
//! a broker's registered host (else CLUSTER_AUTHORIZATION_FAILED, as Kafka
//! answers a client without CLUSTER_ACTION); each marker is written as for
//! the coordinator's own partitions (`txn::markers::write_local`).

use std::net::SocketAddr;

use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use tracing::warn;

use super::Handled;
use crate::coordinators::groups::OffsetStore;
use crate::coordinators::txn::markers::{write_local, Marker};
use crate::replica::identity::verify_broker_peer;
use crate::replica::write::WritePath;

pub async fn handle(
    writes: &WritePath,
    offsets: &OffsetStore,
    _version: i16,
    request: WriteTxnMarkersRequest,
    peer: SocketAddr,
) -> Option<Handled> {
    let refused = match verify_broker_peer(writes.replicas(), peer).await {
        Ok(()) => None,
        Err(reason) => {
            warn!(%peer, %reason, "WriteTxnMarkers refused");
            Some(ResponseError::ClusterAuthorizationFailed)
        }
    };
    let mut has_error = false;
    let mut results = Vec::new();
    for m in &request.markers {
        let marker = Marker {
            producer_id: m.producer_id.0,
            producer_epoch: m.producer_epoch,
            commit: m.transaction_result,
            coordinator_epoch: m.coordinator_epoch,
        };
        let mut topics = Vec::new();
        for t in &m.topics {
            let writes = t.partition_indexes.iter().map(|p| async {
                match refused {
                    Some(e) => Err(e),
                    None => write_local(writes, offsets, &marker, &t.name.0, *p).await,
                }
            });
            let outcomes = futures::future::join_all(writes).await;
            let partitions = t
                .partition_indexes
                .iter()
                .zip(outcomes)
                .map(|(p, outcome)| {
                    let code = outcome.err().map_or(0, |e| e.code());
                    has_error |= code != 0;
                    WritableTxnMarkerPartitionResult::default()
                        .with_partition_index(*p)
                        .with_error_code(code)
                })
                .collect();
            topics.push(
                WritableTxnMarkerTopicResult::default()
                    .with_name(t.name.clone())
                    .with_partitions(partitions),
            );
        }
        results.push(
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(topics),
        );
    }
    Handled::new(
        Response::WriteTxnMarkers(WriteTxnMarkersResponse::default().with_markers(results)),
        has_error,
    )
}
