//! DescribeCluster (Admin.describeCluster, kafka-cluster.sh, v0–2): the
//! cluster id, the controller and the brokers as Metadata lists them (at
//! their endpoints of the client's listener) —
//! fenced brokers too when v2 asks. Only the broker endpoints exist here:
//! asking for controller endpoints (v1+ endpoint type 2) is Kafka's
//! UNSUPPORTED_ENDPOINT_TYPE.

use chronik_metadata::Cluster;
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handled;

/// Kafka's "authorized operations not requested".
const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;
/// Endpoint types (KIP-919).
const ENDPOINT_BROKERS: i8 = 1;
/// Without an authorizer every cluster operation is allowed: CREATE (5),
/// ALTER (7), DESCRIBE (8), CLUSTER_ACTION (9), DESCRIBE_CONFIGS (10),
/// ALTER_CONFIGS (11), IDEMPOTENT_WRITE (12), as bits of a bitfield (with
/// one, `handlers::authorize` replaces it with the session's own).
const CLUSTER_OPERATIONS: i32 =
    (1 << 5) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12);

pub fn handle(
    cluster: &Cluster,
    cluster_id: &str,
    version: i16,
    request: DescribeClusterRequest,
    listener: &str,
) -> Option<Handled> {
    let response = DescribeClusterResponse::default()
        .with_endpoint_type(request.endpoint_type)
        .with_cluster_id(StrBytes::from_string(cluster_id.to_string()))
        .with_cluster_authorized_operations(OPERATIONS_NOT_REQUESTED);
    if version >= 1 && request.endpoint_type != ENDPOINT_BROKERS {
        let error = ResponseError::UnsupportedEndpointType;
        return Handled::new(
            Response::DescribeCluster(
                response
                    .with_error_code(error.code())
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "endpoint type {} is not served (only brokers, type {ENDPOINT_BROKERS})",
                        request.endpoint_type
                    ))))
                    .with_controller_id(BrokerId(-1)),
            ),
            true,
        );
    }
    let image = cluster.image();
    let brokers = image
        .brokers
        .values()
        .filter(|b| !b.fenced || (version >= 2 && request.include_fenced_brokers))
        .filter_map(|b| {
            let (host, port) = b.endpoint(listener)?;
            Some(
                DescribeClusterBroker::default()
                    .with_broker_id(BrokerId(b.node_id))
                    .with_host(StrBytes::from_string(host.to_string()))
                    .with_port(i32::from(port))
                    .with_rack(b.rack.clone().map(StrBytes::from_string))
                    .with_is_fenced(b.fenced),
            )
        })
        .collect();
    let controller = super::metadata::controller_for_clients(cluster);
    let operations = if request.include_cluster_authorized_operations {
        CLUSTER_OPERATIONS
    } else {
        OPERATIONS_NOT_REQUESTED
    };
    Handled::new(
        Response::DescribeCluster(
            response
                .with_controller_id(BrokerId(controller))
                .with_brokers(brokers)
                .with_cluster_authorized_operations(operations),
        ),
        false,
    )
}
