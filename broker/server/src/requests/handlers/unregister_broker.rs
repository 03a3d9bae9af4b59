//! UnregisterBroker (KIP-500 / KIP-631, v0; `kafka-cluster.sh unregister
//! --id N`, Admin.unregisterBroker): removes a broker's registration through
//! the controller, for good — it leaves Metadata and DescribeCluster, and new
//! topics and partitions get no replica on it; the partitions it led or
//! followed get new leaders and ISRs as on fencing. An unknown id is
//! BROKER_ID_NOT_REGISTERED (102). As in Kafka, a live broker is not
//! refused; unlike Kafka's (whose heartbeats then fail), a live Chronik
//! broker registers again at its next heartbeat. Unregistering removes the
//! broker, not its vote: a voter leaves the metadata quorum only through
//! KIP-853's RemoveRaftVoter (`remove_raft_voter`).
//!
//! Owns: the answer. Must not: change the image other than through the
//! controller (`Command::UnregisterBroker`).

use chronik_metadata::Cluster;
use std::sync::Arc;

use chronik_protocol::Response;
use kafka_protocol::messages::{UnregisterBrokerRequest, UnregisterBrokerResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handled;
use crate::replica::ReplicaManager;
use crate::requests::errors::cluster::cluster_error_code;

pub async fn handle(
    (replicas, cluster): (&Arc<ReplicaManager>, &Cluster),
    _version: i16,
    request: UnregisterBrokerRequest,
) -> Option<Handled> {
    let node_id = request.broker_id.0;
    match cluster.unregister_broker(node_id).await {
        Ok(()) => {
            replicas.apply_latest().await;
            Handled::new(
                Response::UnregisterBroker(UnregisterBrokerResponse::default()),
                false,
            )
        }
        Err(e) => {
            tracing::debug!(broker = node_id, error = %e, "UnregisterBroker refused");
            let response = UnregisterBrokerResponse::default()
                .with_error_code(cluster_error_code(&e).code())
                .with_error_message(Some(StrBytes::from_string(e.to_string())));
            Handled::new(Response::UnregisterBroker(response), true)
        }
    }
}
