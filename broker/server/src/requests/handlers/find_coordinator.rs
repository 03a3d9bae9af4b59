//! FindCoordinator (answered with the endpoint of the client's listener):
//! the leader of `__consumer_offsets` partition 0
//! coordinates every consumer group (it holds the committed offsets), the
//! leader of `__transaction_state` partition 0 every transactional id, the
//! leader of `__share_group_state` partition 0 every share-partition (key
//! type SHARE, keys "group:topicId:partition", KIP-932; asked by brokers,
//! from FindCoordinator v6 and while `share.version` is 1). An unknown key
//! type, or SHARE before v6, is INVALID_REQUEST, as Kafka answers it.

use chronik_metadata::Cluster;
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handled;

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;
const KEY_TYPE_SHARE: i8 = 2;

/// The first FindCoordinator version with the SHARE key type.
const SHARE_KEY_VERSION: i16 = 6;

/// The internal topic whose leader coordinates `key_type`.
fn coordinator_topic(cluster: &Cluster, version: i16, key_type: i8) -> Option<&'static str> {
    match key_type {
        KEY_TYPE_GROUP => Some(crate::coordinators::groups::OFFSETS_TOPIC),
        KEY_TYPE_TRANSACTION => Some(crate::coordinators::txn::TXN_TOPIC),
        KEY_TYPE_SHARE
            if version >= SHARE_KEY_VERSION && crate::coordinators::share::enabled(cluster) =>
        {
            Some(crate::coordinators::share::SHARE_STATE_TOPIC)
        }
        _ => None,
    }
}

pub fn handle(
    cluster: &Cluster,
    version: i16,
    request: FindCoordinatorRequest,
    listener: &str,
) -> Option<Handled> {
    let (node, host, port, error) = match coordinator_topic(cluster, version, request.key_type) {
        Some(topic) => coordinator(cluster, topic, listener),
        None => {
            tracing::debug!(
                key_type = request.key_type,
                "FindCoordinator for a coordinator this broker does not run"
            );
            (-1, String::new(), 0, ResponseError::InvalidRequest.code())
        }
    };
    let (host, port, node) = (&host, &port, BrokerId(node));
    let mut response = FindCoordinatorResponse::default();
    if version >= 4 {
        let coordinators = request
            .coordinator_keys
            .into_iter()
            .map(|key| {
                let c = Coordinator::default().with_key(key).with_error_code(error);
                if error == 0 {
                    c.with_node_id(node)
                        .with_host(StrBytes::from_string(host.clone()))
                        .with_port(i32::from(*port))
                } else {
                    c.with_node_id(BrokerId(-1)).with_port(-1)
                }
            })
            .collect();
        response = response.with_coordinators(coordinators);
    } else if error == 0 {
        response = response
            .with_node_id(node)
            .with_host(StrBytes::from_string(host.clone()))
            .with_port(i32::from(*port));
    } else {
        response = response
            .with_error_code(error)
            .with_node_id(BrokerId(-1))
            .with_port(-1);
    }
    Handled::new(Response::FindCoordinator(response), error != 0)
}

/// (node id, host, port, error code) of the leader of `topic`-0, at its
/// endpoint of `listener` (the client's).
fn coordinator(cluster: &Cluster, topic: &str, listener: &str) -> (i32, String, u16, i16) {
    let image = cluster.image();
    let leader = image.partition(topic, 0).map_or(-1, |p| p.leader);
    let endpoint = image
        .brokers
        .get(&leader)
        .filter(|b| !b.fenced)
        .and_then(|b| Some((b.node_id, b.endpoint(listener)?)));
    match endpoint {
        Some((node_id, (host, port))) => (node_id, host.to_string(), port, 0),
        None => (
            -1,
            String::new(),
            0,
            ResponseError::CoordinatorNotAvailable.code(),
        ),
    }
}
