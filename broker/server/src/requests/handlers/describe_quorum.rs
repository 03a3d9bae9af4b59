//! DescribeQuorum (KIP-595 / KIP-836 / KIP-853, v0–2;
//! `kafka-metadata-quorum.sh describe --status / --replication`,
//! Admin.describeMetadataQuorum): the metadata quorum as its leader, the
//! controller, sees it — topic `__cluster_metadata` partition 0, the raft
//! leader as leader id, the raft term as leader epoch, one past the
//! committed raft index as high watermark, every voter's log end offset
//! and (v1+) its last fetch and last caught-up times; the same for every
//! observer (a broker that is not a controller). v2 adds each voter's raft listener, named
//! `CONTROLLER` (as the membership records it: the `--peers` host and the
//! raft port, or the listener AddRaftVoter gave; it speaks Chronik's raft
//! RPC, not the Kafka protocol), and every replica's directory id (KIP-853:
//! the `directory.id` of its meta.properties; zero until a voter has
//! recorded it, as Kafka's static voters have).
//!
//! Owns: the request's check (only `__cluster_metadata`-0, else
//! INVALID_REQUEST, as Kafka's raft client answers) and the answer's
//! shape. Must not: read raft state itself (`Cluster::describe_quorum`
//! asks the controller, wherever it is).

use chronik_metadata::QuorumInfo;
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{BrokerId, DescribeQuorumRequest, DescribeQuorumResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handled;
use crate::requests::errors::cluster::cluster_error_code;
use chronik_metadata::Cluster;

/// KRaft's metadata log, the only partition a quorum describes.
const METADATA_TOPIC: &str = "__cluster_metadata";
/// The listener name the voters' raft endpoints carry.
const RAFT_LISTENER: &str = "CONTROLLER";

pub async fn handle(
    cluster: &Cluster,
    version: i16,
    request: DescribeQuorumRequest,
) -> Option<Handled> {
    let names_the_metadata_log = matches!(
        request.topics.as_slice(),
        [topic] if topic.topic_name.0.as_str() == METADATA_TOPIC
            && matches!(topic.partitions.as_slice(), [p] if p.partition_index == 0)
    );
    if !names_the_metadata_log {
        return refuse(
            version,
            ResponseError::InvalidRequest,
            format!("only {METADATA_TOPIC} partition 0 can be described"),
        );
    }
    match cluster.describe_quorum().await {
        Ok(info) => Handled::new(Response::DescribeQuorum(answer(version, &info)), false),
        Err(e) => refuse(version, cluster_error_code(&e), e.to_string()),
    }
}

fn refuse(version: i16, error: ResponseError, message: String) -> Option<Handled> {
    let mut response = DescribeQuorumResponse::default().with_error_code(error.code());
    if version >= 2 {
        response = response.with_error_message(Some(StrBytes::from_string(message)));
    }
    Handled::new(Response::DescribeQuorum(response), true)
}

fn answer(version: i16, info: &QuorumInfo) -> DescribeQuorumResponse {
    let replica = |v: &chronik_metadata::VoterState| {
        let state = ReplicaState::default()
            .with_replica_id(BrokerId(v.node_id))
            .with_log_end_offset(v.log_end_offset);
        let state = if version >= 1 {
            state
                .with_last_fetch_timestamp(v.last_fetch_timestamp)
                .with_last_caught_up_timestamp(v.last_caught_up_timestamp)
        } else {
            state
        };
        if version >= 2 {
            state.with_replica_directory_id(uuid::Uuid::from_bytes(
                v.directory_id.unwrap_or_default(),
            ))
        } else {
            state
        }
    };
    let partition = PartitionData::default()
        .with_partition_index(0)
        .with_leader_id(BrokerId(info.leader_id))
        .with_leader_epoch(i32::try_from(info.leader_epoch).unwrap_or(i32::MAX))
        .with_high_watermark(info.high_watermark)
        .with_current_voters(info.voters.iter().map(replica).collect())
        .with_observers(info.observers.iter().map(replica).collect());
    let topic = TopicData::default()
        .with_topic_name(StrBytes::from_static_str(METADATA_TOPIC).into())
        .with_partitions(vec![partition]);
    let response = DescribeQuorumResponse::default().with_topics(vec![topic]);
    if version < 2 {
        return response;
    }
    let nodes = info
        .endpoints
        .iter()
        .filter(|e| info.voters.iter().any(|v| v.node_id == e.node_id))
        .map(|e| {
            Node::default()
                .with_node_id(BrokerId(e.node_id))
                .with_listeners(vec![Listener::default()
                    .with_name(StrBytes::from_static_str(RAFT_LISTENER))
                    .with_host(StrBytes::from_string(e.host.clone()))
                    .with_port(e.port)])
        })
        .collect();
    response.with_nodes(nodes)
}

#[cfg(test)]
mod tests {
    use chronik_metadata::{VoterEndpoint, VoterState};
    use kafka_protocol::protocol::Encodable;

    use super::*;

    fn info() -> QuorumInfo {
        QuorumInfo {
            leader_id: 2,
            leader_epoch: 7,
            high_watermark: 120,
            voters: vec![
                VoterState {
                    node_id: 1,
                    log_end_offset: 118,
                    last_fetch_timestamp: 1_000,
                    last_caught_up_timestamp: 900,
                    directory_id: Some([7; 16]),
                },
                VoterState {
                    node_id: 2,
                    log_end_offset: 120,
                    last_fetch_timestamp: 1_100,
                    last_caught_up_timestamp: 1_100,
                    directory_id: None,
                },
            ],
            observers: vec![VoterState {
                node_id: 4,
                log_end_offset: 119,
                last_fetch_timestamp: 1_050,
                last_caught_up_timestamp: 1_000,
                directory_id: None,
            }],
            endpoints: vec![
                VoterEndpoint {
                    node_id: 1,
                    host: "127.0.0.1".into(),
                    port: 9093,
                },
                VoterEndpoint {
                    node_id: 2,
                    host: "127.0.0.2".into(),
                    port: 9093,
                },
            ],
        }
    }

    #[test]
    fn every_version_encodes_and_carries_its_fields() {
        for version in 0..=2 {
            let response = answer(version, &info());
            let mut buf = bytes::BytesMut::new();
            response
                .encode(&mut buf, version)
                .unwrap_or_else(|e| panic!("v{version} does not encode: {e}"));
            let partition = &response.topics[0].partitions[0];
            assert_eq!((partition.leader_id.0, partition.leader_epoch), (2, 7));
            assert_eq!(partition.high_watermark, 120);
            assert_eq!(partition.current_voters.len(), 2);
            let observers: Vec<(i32, i64)> = partition
                .observers
                .iter()
                .map(|o| (o.replica_id.0, o.log_end_offset))
                .collect();
            assert_eq!(observers, [(4, 119)]);
            let timestamps = partition.current_voters[0].last_fetch_timestamp;
            assert_eq!(timestamps, if version >= 1 { 1_000 } else { -1 });
            assert_eq!(response.nodes.len(), if version >= 2 { 2 } else { 0 });
            let directory = partition.current_voters[0].replica_directory_id;
            assert_eq!(
                directory,
                if version >= 2 {
                    uuid::Uuid::from_bytes([7; 16])
                } else {
                    uuid::Uuid::nil()
                }
            );
        }
        let v2 = answer(2, &info());
        let listener = &v2.nodes[1].listeners[0];
        assert_eq!(
            (
                listener.name.as_str(),
                listener.host.as_str(),
                listener.port
            ),
            ("CONTROLLER", "127.0.0.2", 9093)
        );
    }
}
