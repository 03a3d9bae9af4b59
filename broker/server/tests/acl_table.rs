//! The ACL table of docs/security.md, checked for every API and version the broker
//! advertises: a principal with no ACLs (User:ANONYMOUS on the PLAINTEXT
//! listener, no `--allow-everyone-if-no-acl-found`) sends one request of
//! each (API, version) in ApiVersions and must be refused with the error
//! of each resource the API needs (Kafka's: TOPIC_ 29, GROUP_ 30,
//! CLUSTER_ 31, TRANSACTIONAL_ID_AUTHORIZATION_FAILED 53), or see its
//! listings filtered to nothing, or — for the few APIs no ACL governs — be
//! served. `TABLE` holds one row per API, mirroring docs/security.md; an
//! advertised API without a row fails the test, so a new handler cannot
//! fall through the gate unnoticed.
//!
//! A super user (`User:admin`, SASL PLAIN on a second listener) first
//! makes something to list — a topic, a group with an offset, an open
//! transaction — and the listings are checked non-empty for it, so an
//! empty listing for ANONYMOUS means filtered, not absent.

mod common;
mod security_support;

use std::net::SocketAddr;

use anyhow::{bail, ensure, Context, Result};
use bytes::Bytes;
use common::kafka_client::{new_producer_request, Client};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use security_support::SecureBroker;

/// A resource an API is refused on, and Kafka's error for it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Topic,
    Group,
    Cluster,
    TxnId,
}

impl Kind {
    fn refused_with(self) -> i16 {
        match self {
            Kind::Topic => 29,
            Kind::Group => 30,
            Kind::Cluster => 31,
            Kind::TxnId => 53,
        }
    }
}

const AUTHORIZATION_ERRORS: [i16; 4] = [29, 30, 31, 53];

/// One thing an answer said.
#[derive(Debug)]
enum Seen {
    /// A resource of this kind named in the request answered this code.
    Refused(Kind, i16),
    /// A listing (or the cluster operations reported) had this many entries.
    Listed(usize),
    /// An API no ACL governs answered this code.
    Served(i16),
}

/// docs/security.md's row for an API: the resources it is refused on (each with
/// its kind's error), and whether its listings are filtered instead.
struct Row {
    refuses: &'static [Kind],
    lists: bool,
}

const fn refuses(kinds: &'static [Kind]) -> Row {
    Row {
        refuses: kinds,
        lists: false,
    }
}

const LISTS: Row = Row {
    refuses: &[],
    lists: true,
};
const OPEN: Row = Row {
    refuses: &[],
    lists: false,
};

use Kind::{Cluster, Group, Topic, TxnId};

/// One row per API, as docs/security.md's ACL table says.
const TABLE: &[(ApiKey, Row)] = &[
    (ApiKey::Produce, refuses(&[Topic])),
    (ApiKey::Fetch, refuses(&[Topic])),
    (ApiKey::ListOffsets, refuses(&[Topic])),
    (
        ApiKey::Metadata,
        Row {
            refuses: &[Topic],
            lists: true,
        },
    ),
    (ApiKey::ApiVersions, OPEN),
    (ApiKey::CreateTopics, refuses(&[Topic])),
    (ApiKey::DeleteTopics, refuses(&[Topic])),
    (ApiKey::DescribeConfigs, refuses(&[Topic, Cluster])),
    (ApiKey::FindCoordinator, refuses(&[Group, TxnId])),
    (ApiKey::JoinGroup, refuses(&[Group])),
    (ApiKey::SyncGroup, refuses(&[Group])),
    (ApiKey::Heartbeat, refuses(&[Group])),
    (ApiKey::LeaveGroup, refuses(&[Group])),
    (ApiKey::OffsetCommit, refuses(&[Group])),
    (ApiKey::OffsetFetch, refuses(&[Group])),
    (ApiKey::ListGroups, LISTS),
    (ApiKey::DescribeGroups, refuses(&[Group])),
    (ApiKey::DeleteGroups, refuses(&[Group])),
    (ApiKey::InitProducerId, refuses(&[TxnId, Cluster])),
    (ApiKey::OffsetForLeaderEpoch, refuses(&[Topic])),
    (ApiKey::AddPartitionsToTxn, refuses(&[TxnId, Cluster])),
    (ApiKey::AddOffsetsToTxn, refuses(&[TxnId])),
    (ApiKey::EndTxn, refuses(&[TxnId])),
    (ApiKey::WriteTxnMarkers, refuses(&[Cluster])),
    (ApiKey::TxnOffsetCommit, refuses(&[TxnId])),
    (ApiKey::DescribeTransactions, refuses(&[TxnId])),
    (ApiKey::ListTransactions, LISTS),
    (ApiKey::CreatePartitions, refuses(&[Topic])),
    (ApiKey::AlterConfigs, refuses(&[Topic, Cluster])),
    (ApiKey::IncrementalAlterConfigs, refuses(&[Topic, Cluster])),
    // served to everyone; the cluster operations it reports are filtered
    (ApiKey::DescribeCluster, LISTS),
    // v1-2 have no error field: the refusal is an empty result list
    (
        ApiKey::DescribeLogDirs,
        Row {
            refuses: &[Cluster],
            lists: true,
        },
    ),
    (ApiKey::OffsetDelete, refuses(&[Group])),
    (ApiKey::DeleteRecords, refuses(&[Topic])),
    (ApiKey::ConsumerGroupHeartbeat, refuses(&[Group])),
    (ApiKey::ConsumerGroupDescribe, refuses(&[Group])),
    (ApiKey::DescribeAcls, refuses(&[Cluster])),
    (ApiKey::CreateAcls, refuses(&[Cluster])),
    (ApiKey::DeleteAcls, refuses(&[Cluster])),
    (ApiKey::SaslHandshake, OPEN),
    (ApiKey::SaslAuthenticate, OPEN),
    (ApiKey::DescribeUserScramCredentials, refuses(&[Cluster])),
    (ApiKey::AlterUserScramCredentials, refuses(&[Cluster])),
    (ApiKey::ElectLeaders, refuses(&[Cluster])),
    (ApiKey::AlterPartitionReassignments, refuses(&[Cluster])),
    (ApiKey::ListPartitionReassignments, refuses(&[Cluster])),
    (ApiKey::DescribeQuorum, refuses(&[Cluster])),
    (ApiKey::UnregisterBroker, refuses(&[Cluster])),
    (ApiKey::UpdateFeatures, refuses(&[Cluster])),
    (ApiKey::AddRaftVoter, refuses(&[Cluster])),
    (ApiKey::RemoveRaftVoter, refuses(&[Cluster])),
    (ApiKey::UpdateRaftVoter, refuses(&[Cluster])),
    (ApiKey::DescribeClientQuotas, refuses(&[Cluster])),
    (ApiKey::AlterClientQuotas, refuses(&[Cluster])),
    (
        ApiKey::DescribeTopicPartitions,
        Row {
            refuses: &[Topic],
            lists: true,
        },
    ),
    (ApiKey::ShareGroupHeartbeat, refuses(&[Group])),
    (ApiKey::ShareGroupDescribe, refuses(&[Group])),
    (ApiKey::ShareFetch, refuses(&[Group])),
    (ApiKey::ShareAcknowledge, refuses(&[Group])),
    (ApiKey::InitializeShareGroupState, refuses(&[Cluster])),
    (ApiKey::ReadShareGroupState, refuses(&[Cluster])),
    (ApiKey::WriteShareGroupState, refuses(&[Cluster])),
    (ApiKey::DeleteShareGroupState, refuses(&[Cluster])),
    (ApiKey::ReadShareGroupStateSummary, refuses(&[Cluster])),
    (ApiKey::DescribeShareGroupOffsets, refuses(&[Group])),
    (ApiKey::AlterShareGroupOffsets, refuses(&[Group])),
    (ApiKey::DeleteShareGroupOffsets, refuses(&[Group])),
];

const TOPIC: &str = "t";
const GROUP: &str = "g";
const TXN: &str = "tx";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn topic_name() -> TopicName {
    TopicName(s(TOPIC))
}

fn group_id() -> GroupId {
    GroupId(s(GROUP))
}

fn txn_id() -> TransactionalId {
    TransactionalId(s(TXN))
}

/// What the super user set up.
struct Fixture {
    topic_id: uuid::Uuid,
    producer_id: ProducerId,
    producer_epoch: i16,
}

/// Each code in `codes` as a refusal of a `kind` resource.
fn each(kind: Kind, codes: impl IntoIterator<Item = i16>) -> Vec<Seen> {
    codes.into_iter().map(|c| Seen::Refused(kind, c)).collect()
}

/// The error codes of every partition of every topic in `topics`, whose
/// partitions are in field `partitions`.
macro_rules! partition_codes {
    ($topics:expr, $partitions:ident) => {
        $topics
            .iter()
            .flat_map(|t| t.$partitions.iter().map(|p| p.error_code))
    };
}

/// A config API's probe: topic TOPIC and broker 1, each refused as its kind.
macro_rules! config_probe {
    ($c:expr, $v:expr, $request:ty, $resource:ty, $results:ident) => {{
        let resource = |kind, name: &str| {
            <$resource>::default()
                .with_resource_type(kind)
                .with_resource_name(s(name))
        };
        let request =
            <$request>::default().with_resources(vec![resource(2, TOPIC), resource(4, "1")]);
        let r = $c.send(&request, $v)?;
        config_refusals(r.$results.iter().map(|r| (r.resource_type, r.error_code)))
    }};
}

/// Config resources (type, error): a topic's (2) refusal is a topic's,
/// a broker's a cluster's.
fn config_refusals(results: impl Iterator<Item = (i8, i16)>) -> Vec<Seen> {
    results
        .map(|(resource_type, code)| {
            let kind = if resource_type == 2 {
                Kind::Topic
            } else {
                Kind::Cluster
            };
            Seen::Refused(kind, code)
        })
        .collect()
}

/// Sends the (API, version) probe and reports what the answer said.
fn probe(c: &mut Client, api: ApiKey, v: i16, fx: &Fixture) -> Result<Vec<Seen>> {
    Ok(match api {
        ApiKey::Produce => {
            let (code, _) = c.produce_at(TOPIC, -1, -1, -1, 1, v)?;
            vec![Seen::Refused(Topic, code)]
        }
        ApiKey::Fetch => {
            let topic = fetch_request::FetchTopic::default()
                .with_topic(if v < 13 {
                    topic_name()
                } else {
                    TopicName::default()
                })
                .with_topic_id(if v >= 13 {
                    fx.topic_id
                } else {
                    uuid::Uuid::nil()
                })
                .with_partitions(vec![fetch_request::FetchPartition::default()
                    .with_partition(0)
                    .with_partition_max_bytes(1 << 20)]);
            let r = c.send(
                &FetchRequest::default()
                    .with_replica_id(BrokerId(-1))
                    .with_max_wait_ms(10)
                    .with_topics(vec![topic]),
                v,
            )?;
            each(Topic, partition_codes!(r.responses, partitions))
        }
        ApiKey::ListOffsets => {
            let topic = list_offsets_request::ListOffsetsTopic::default()
                .with_name(topic_name())
                .with_partitions(vec![
                    list_offsets_request::ListOffsetsPartition::default().with_timestamp(-1)
                ]);
            let r = c.send(
                &ListOffsetsRequest::default()
                    .with_replica_id(BrokerId(-1))
                    .with_topics(vec![topic]),
                v,
            )?;
            each(Topic, partition_codes!(r.topics, partitions))
        }
        ApiKey::Metadata => {
            let named =
                metadata_request::MetadataRequestTopic::default().with_name(Some(topic_name()));
            let r = c.send(
                &MetadataRequest::default().with_topics(Some(vec![named])),
                v,
            )?;
            let mut seen = each(Topic, r.topics.iter().map(|t| t.error_code));
            // every topic: v0's empty list, v1+'s null one
            let all = c.send(
                &MetadataRequest::default().with_topics((v == 0).then(Vec::new)),
                v,
            )?;
            seen.push(Seen::Listed(all.topics.len()));
            if v >= 12 {
                let by_id =
                    metadata_request::MetadataRequestTopic::default().with_topic_id(fx.topic_id);
                let r = c.send(
                    &MetadataRequest::default().with_topics(Some(vec![by_id])),
                    v,
                )?;
                // Kafka does not name a topic asked for by id to whoever may not describe it
                ensure!(
                    r.topics
                        .iter()
                        .all(|t| t.error_code == 0 || t.name.is_none()),
                    "Metadata v{v} by id named the topic: {:?}",
                    r.topics
                );
                seen.extend(each(Topic, r.topics.iter().map(|t| t.error_code)));
            }
            seen
        }
        ApiKey::ApiVersions => vec![Seen::Served(
            c.send(&ApiVersionsRequest::default(), v)?.error_code,
        )],
        ApiKey::CreateTopics => {
            let t = create_topics_request::CreatableTopic::default()
                .with_name(TopicName(s("new-topic")))
                .with_num_partitions(1)
                .with_replication_factor(1);
            let r = c.send(
                &CreateTopicsRequest::default()
                    .with_topics(vec![t])
                    .with_timeout_ms(5000),
                v,
            )?;
            each(Topic, r.topics.iter().map(|t| t.error_code))
        }
        ApiKey::DeleteTopics => {
            let request = if v >= 6 {
                DeleteTopicsRequest::default()
                    .with_topics(vec![delete_topics_request::DeleteTopicState::default()
                        .with_name(Some(topic_name()))])
            } else {
                DeleteTopicsRequest::default().with_topic_names(vec![topic_name()])
            };
            let r = c.send(&request.with_timeout_ms(5000), v)?;
            each(Topic, r.responses.iter().map(|t| t.error_code))
        }
        ApiKey::DescribeConfigs => {
            config_probe!(
                c,
                v,
                DescribeConfigsRequest,
                describe_configs_request::DescribeConfigsResource,
                results
            )
        }
        ApiKey::FindCoordinator => {
            // a group key, then (v1+) a transactional id key
            let mut seen = Vec::new();
            for (key_type, key, kind) in [(0, GROUP, Group), (1, TXN, TxnId)] {
                if key_type == 1 && v < 1 {
                    continue;
                }
                let request = if v >= 4 {
                    FindCoordinatorRequest::default().with_coordinator_keys(vec![s(key)])
                } else {
                    FindCoordinatorRequest::default().with_key(s(key))
                };
                let r = c.send(&request.with_key_type(key_type), v)?;
                if v >= 4 {
                    seen.extend(each(kind, r.coordinators.iter().map(|c| c.error_code)));
                } else {
                    ensure!(
                        r.error_code == 0 || r.node_id.0 == -1,
                        "FindCoordinator v{v} refused but named node {}",
                        r.node_id.0
                    );
                    seen.push(Seen::Refused(kind, r.error_code));
                }
            }
            seen
        }
        ApiKey::JoinGroup => {
            let protocol = join_group_request::JoinGroupRequestProtocol::default()
                .with_name(s("range"))
                .with_metadata(Bytes::from_static(b"m"));
            let r = c.send(
                &JoinGroupRequest::default()
                    .with_group_id(group_id())
                    .with_session_timeout_ms(10_000)
                    .with_rebalance_timeout_ms(10_000)
                    .with_protocol_type(s("consumer"))
                    .with_protocols(vec![protocol]),
                v,
            )?;
            vec![Seen::Refused(Group, r.error_code)]
        }
        ApiKey::SyncGroup => {
            let r = c.send(
                &SyncGroupRequest::default()
                    .with_group_id(group_id())
                    .with_member_id(s("m")),
                v,
            )?;
            vec![Seen::Refused(Group, r.error_code)]
        }
        ApiKey::Heartbeat => {
            let r = c.send(
                &HeartbeatRequest::default()
                    .with_group_id(group_id())
                    .with_member_id(s("m")),
                v,
            )?;
            vec![Seen::Refused(Group, r.error_code)]
        }
        ApiKey::LeaveGroup => {
            let request = if v >= 3 {
                LeaveGroupRequest::default().with_members(vec![
                    leave_group_request::MemberIdentity::default().with_member_id(s("m")),
                ])
            } else {
                LeaveGroupRequest::default().with_member_id(s("m"))
            };
            let r = c.send(&request.with_group_id(group_id()), v)?;
            vec![Seen::Refused(Group, r.error_code)]
        }
        ApiKey::OffsetCommit => {
            let t = offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(topic_name())
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_committed_offset(1),
                ]);
            let r = c.send(
                &OffsetCommitRequest::default()
                    .with_group_id(group_id())
                    .with_generation_id_or_member_epoch(-1)
                    .with_topics(vec![t]),
                v,
            )?;
            each(Group, partition_codes!(r.topics, partitions))
        }
        ApiKey::OffsetFetch => {
            if v >= 8 {
                let g = offset_fetch_request::OffsetFetchRequestGroup::default()
                    .with_group_id(group_id())
                    .with_topics(None);
                let r = c.send(&OffsetFetchRequest::default().with_groups(vec![g]), v)?;
                ensure!(
                    r.groups.iter().all(|g| g.topics.is_empty()),
                    "OffsetFetch v{v} showed offsets: {r:?}"
                );
                each(Group, r.groups.iter().map(|g| g.error_code))
            } else {
                let t = offset_fetch_request::OffsetFetchRequestTopic::default()
                    .with_name(topic_name())
                    .with_partition_indexes(vec![0]);
                let r = c.send(
                    &OffsetFetchRequest::default()
                        .with_group_id(group_id())
                        .with_topics(Some(vec![t])),
                    v,
                )?;
                let partitions = r.topics.iter().flat_map(|t| &t.partitions);
                ensure!(
                    partitions.clone().all(|p| p.committed_offset == -1),
                    "OffsetFetch v{v} showed an offset: {r:?}"
                );
                if v >= 2 {
                    vec![Seen::Refused(Group, r.error_code)]
                } else {
                    each(Group, partitions.map(|p| p.error_code))
                }
            }
        }
        ApiKey::ListGroups => {
            let r = c.send(&ListGroupsRequest::default(), v)?;
            vec![Seen::Served(r.error_code), Seen::Listed(r.groups.len())]
        }
        ApiKey::DescribeGroups => {
            let r = c.send(
                &DescribeGroupsRequest::default().with_groups(vec![group_id()]),
                v,
            )?;
            each(Group, r.groups.iter().map(|g| g.error_code))
        }
        ApiKey::DeleteGroups => {
            let r = c.send(
                &DeleteGroupsRequest::default().with_groups_names(vec![group_id()]),
                v,
            )?;
            each(Group, r.results.iter().map(|g| g.error_code))
        }
        ApiKey::InitProducerId => {
            // transactional, then idempotent (IDEMPOTENT_WRITE on the cluster)
            let mut seen = Vec::new();
            for (id, kind) in [(Some(txn_id()), TxnId), (None, Cluster)] {
                let r = c.send(&new_producer_request(id), v)?;
                seen.push(Seen::Refused(kind, r.error_code));
            }
            seen
        }
        ApiKey::OffsetForLeaderEpoch => {
            let t = offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
                .with_topic(topic_name())
                .with_partitions(vec![
                    offset_for_leader_epoch_request::OffsetForLeaderPartition::default()
                        .with_current_leader_epoch(-1),
                ]);
            let r = c.send(
                &OffsetForLeaderEpochRequest::default()
                    .with_replica_id(BrokerId(-1))
                    .with_topics(vec![t]),
                v,
            )?;
            each(Topic, partition_codes!(r.topics, partitions))
        }
        ApiKey::AddPartitionsToTxn => {
            let topics = vec![
                add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                    .with_name(topic_name())
                    .with_partitions(vec![0]),
            ];
            if v <= 3 {
                let r = c.send(
                    &AddPartitionsToTxnRequest::default()
                        .with_v3_and_below_transactional_id(txn_id())
                        .with_v3_and_below_producer_id(fx.producer_id)
                        .with_v3_and_below_producer_epoch(fx.producer_epoch)
                        .with_v3_and_below_topics(topics),
                    v,
                )?;
                each(
                    TxnId,
                    r.results_by_topic_v3_and_below
                        .iter()
                        .flat_map(|t| t.results_by_partition.iter())
                        .map(|p| p.partition_error_code),
                )
            } else {
                // v4+ is the brokers' verification: CLUSTER_ACTION
                let r = c.send(
                    &AddPartitionsToTxnRequest::default().with_transactions(vec![
                        add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default()
                            .with_transactional_id(txn_id())
                            .with_producer_id(fx.producer_id)
                            .with_producer_epoch(fx.producer_epoch)
                            .with_verify_only(true)
                            .with_topics(topics),
                    ]),
                    v,
                )?;
                vec![Seen::Refused(Cluster, r.error_code)]
            }
        }
        ApiKey::AddOffsetsToTxn => {
            let r = c.send(
                &AddOffsetsToTxnRequest::default()
                    .with_transactional_id(txn_id())
                    .with_producer_id(fx.producer_id)
                    .with_producer_epoch(fx.producer_epoch)
                    .with_group_id(group_id()),
                v,
            )?;
            vec![Seen::Refused(TxnId, r.error_code)]
        }
        ApiKey::EndTxn => {
            let r = c.send(
                &EndTxnRequest::default()
                    .with_transactional_id(txn_id())
                    .with_producer_id(fx.producer_id)
                    .with_producer_epoch(fx.producer_epoch)
                    .with_committed(false),
                v,
            )?;
            vec![Seen::Refused(TxnId, r.error_code)]
        }
        ApiKey::WriteTxnMarkers => {
            let marker = write_txn_markers_request::WritableTxnMarker::default()
                .with_producer_id(fx.producer_id)
                .with_producer_epoch(fx.producer_epoch)
                .with_transaction_result(false)
                .with_topics(vec![
                    write_txn_markers_request::WritableTxnMarkerTopic::default()
                        .with_name(topic_name())
                        .with_partition_indexes(vec![0]),
                ]);
            let r = c.send(
                &WriteTxnMarkersRequest::default().with_markers(vec![marker]),
                v,
            )?;
            each(
                Cluster,
                r.markers
                    .iter()
                    .flat_map(|m| &m.topics)
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            )
        }
        ApiKey::TxnOffsetCommit => {
            let t = txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                .with_name(topic_name())
                .with_partitions(vec![
                    txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                        .with_committed_offset(1)
                        .with_committed_leader_epoch(-1),
                ]);
            let r = c.send(
                &TxnOffsetCommitRequest::default()
                    .with_transactional_id(txn_id())
                    .with_group_id(group_id())
                    .with_producer_id(fx.producer_id)
                    .with_producer_epoch(fx.producer_epoch)
                    .with_generation_id(-1)
                    .with_topics(vec![t]),
                v,
            )?;
            each(TxnId, partition_codes!(r.topics, partitions))
        }
        ApiKey::DescribeTransactions => {
            let r = c.send(
                &DescribeTransactionsRequest::default().with_transactional_ids(vec![txn_id()]),
                v,
            )?;
            each(TxnId, r.transaction_states.iter().map(|t| t.error_code))
        }
        ApiKey::ListTransactions => {
            let r = c.send(&ListTransactionsRequest::default(), v)?;
            vec![
                Seen::Served(r.error_code),
                Seen::Listed(r.transaction_states.len()),
            ]
        }
        ApiKey::CreatePartitions => {
            let t = create_partitions_request::CreatePartitionsTopic::default()
                .with_name(topic_name())
                .with_count(2);
            let r = c.send(
                &CreatePartitionsRequest::default()
                    .with_topics(vec![t])
                    .with_timeout_ms(5000),
                v,
            )?;
            each(Topic, r.results.iter().map(|r| r.error_code))
        }
        ApiKey::AlterConfigs => {
            config_probe!(
                c,
                v,
                AlterConfigsRequest,
                alter_configs_request::AlterConfigsResource,
                responses
            )
        }
        ApiKey::IncrementalAlterConfigs => {
            config_probe!(
                c,
                v,
                IncrementalAlterConfigsRequest,
                incremental_alter_configs_request::AlterConfigsResource,
                responses
            )
        }
        ApiKey::DescribeCluster => {
            let r = c.send(
                &DescribeClusterRequest::default()
                    .with_endpoint_type(1)
                    .with_include_cluster_authorized_operations(true),
                v,
            )?;
            ensure!(r.brokers.len() == 1, "DescribeCluster v{v}: {r:?}");
            vec![
                Seen::Served(r.error_code),
                Seen::Listed(r.cluster_authorized_operations.max(0).count_ones() as usize),
            ]
        }
        ApiKey::DescribeLogDirs => {
            let r = c.send(&DescribeLogDirsRequest::default().with_topics(None), v)?;
            let mut seen = vec![Seen::Listed(r.results.len())];
            if v >= 3 {
                seen.push(Seen::Refused(Cluster, r.error_code));
            }
            seen
        }
        ApiKey::OffsetDelete => {
            let t = offset_delete_request::OffsetDeleteRequestTopic::default()
                .with_name(topic_name())
                .with_partitions(vec![
                    offset_delete_request::OffsetDeleteRequestPartition::default(),
                ]);
            let r = c.send(
                &OffsetDeleteRequest::default()
                    .with_group_id(group_id())
                    .with_topics(vec![t]),
                v,
            )?;
            vec![Seen::Refused(Group, r.error_code)]
        }
        ApiKey::DeleteRecords => {
            let t = delete_records_request::DeleteRecordsTopic::default()
                .with_name(topic_name())
                .with_partitions(vec![
                    delete_records_request::DeleteRecordsPartition::default(),
                ]);
            let r = c.send(
                &DeleteRecordsRequest::default()
                    .with_topics(vec![t])
                    .with_timeout_ms(5000),
                v,
            )?;
            each(Topic, partition_codes!(r.topics, partitions))
        }
        ApiKey::ConsumerGroupHeartbeat => {
            let member = if v >= 1 { "member-1" } else { "" };
            let r = c.send(
                &ConsumerGroupHeartbeatRequest::default()
                    .with_group_id(GroupId(s("kip848")))
                    .with_member_id(s(member))
                    .with_member_epoch(0)
                    .with_rebalance_timeout_ms(30_000)
                    .with_subscribed_topic_names(Some(vec![topic_name()]))
                    .with_topic_partitions(Some(Vec::new())),
                v,
            )?;
            vec![Seen::Refused(Group, r.error_code)]
        }
        ApiKey::ConsumerGroupDescribe => {
            let r = c.send(
                &ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("kip848"))]),
                v,
            )?;
            each(Group, r.groups.iter().map(|g| g.error_code))
        }
        ApiKey::DescribeAcls => {
            let r = c.send(
                &DescribeAclsRequest::default()
                    .with_resource_type_filter(1)
                    .with_resource_name_filter(None)
                    .with_pattern_type_filter(1)
                    .with_principal_filter(None)
                    .with_host_filter(None)
                    .with_operation(1)
                    .with_permission_type(1),
                v,
            )?;
            ensure!(r.resources.is_empty(), "DescribeAcls v{v} listed ACLs");
            vec![Seen::Refused(Cluster, r.error_code)]
        }
        ApiKey::CreateAcls => {
            let creation = create_acls_request::AclCreation::default()
                .with_resource_type(2)
                .with_resource_name(s(TOPIC))
                .with_resource_pattern_type(3)
                .with_principal(s("User:ANONYMOUS"))
                .with_host(s("*"))
                .with_operation(2)
                .with_permission_type(3);
            let r = c.send(
                &CreateAclsRequest::default().with_creations(vec![creation]),
                v,
            )?;
            each(Cluster, r.results.iter().map(|r| r.error_code))
        }
        ApiKey::DeleteAcls => {
            let filter = delete_acls_request::DeleteAclsFilter::default()
                .with_resource_type_filter(1)
                .with_resource_name_filter(None)
                .with_pattern_type_filter(1)
                .with_principal_filter(None)
                .with_host_filter(None)
                .with_operation(1)
                .with_permission_type(1);
            let r = c.send(&DeleteAclsRequest::default().with_filters(vec![filter]), v)?;
            each(Cluster, r.filter_results.iter().map(|r| r.error_code))
        }
        // SASL on a PLAINTEXT listener: ILLEGAL_SASL_STATE, no ACL involved
        ApiKey::SaslHandshake => vec![Seen::Served(
            c.send(
                &SaslHandshakeRequest::default().with_mechanism(s("PLAIN")),
                v,
            )?
            .error_code,
        )],
        ApiKey::SaslAuthenticate => vec![Seen::Served(
            c.send(
                &SaslAuthenticateRequest::default()
                    .with_auth_bytes(Bytes::from_static(b"\0admin\0admin-secret")),
                v,
            )?
            .error_code,
        )],
        ApiKey::DescribeUserScramCredentials => {
            let r = c.send(
                &DescribeUserScramCredentialsRequest::default().with_users(None),
                v,
            )?;
            ensure!(
                r.results.is_empty(),
                "DescribeUserScramCredentials v{v} listed users"
            );
            vec![Seen::Refused(Cluster, r.error_code)]
        }
        ApiKey::AlterUserScramCredentials => {
            let upsertion =
                alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
                    .with_name(s("mallory"))
                    .with_mechanism(2)
                    .with_iterations(4096)
                    .with_salt(Bytes::from_static(b"0123456789abcdef"))
                    .with_salted_password(Bytes::from(vec![7u8; 64]));
            let r = c.send(
                &AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsertion]),
                v,
            )?;
            each(Cluster, r.results.iter().map(|r| r.error_code))
        }
        ApiKey::ElectLeaders => {
            let r = c.send(
                &ElectLeadersRequest::default()
                    .with_timeout_ms(10_000)
                    .with_topic_partitions(Some(vec![
                        elect_leaders_request::TopicPartitions::default()
                            .with_topic(topic_name())
                            .with_partitions(vec![0]),
                    ])),
                v,
            )?;
            let mut codes: Vec<i16> =
                partition_codes!(r.replica_election_results, partition_result).collect();
            if v >= 1 {
                codes.push(r.error_code);
            }
            each(Cluster, codes)
        }
        ApiKey::AlterPartitionReassignments => {
            let partition = alter_partition_reassignments_request::ReassignablePartition::default()
                .with_replicas(Some(vec![BrokerId(1)]));
            let r = c.send(
                &AlterPartitionReassignmentsRequest::default()
                    .with_timeout_ms(10_000)
                    .with_topics(vec![
                        alter_partition_reassignments_request::ReassignableTopic::default()
                            .with_name(topic_name())
                            .with_partitions(vec![partition]),
                    ]),
                v,
            )?;
            vec![Seen::Refused(Cluster, r.error_code)]
        }
        ApiKey::ListPartitionReassignments => {
            let r = c.send(&ListPartitionReassignmentsRequest::default(), v)?;
            vec![Seen::Refused(Cluster, r.error_code)]
        }
        ApiKey::DescribeQuorum => {
            let topic = describe_quorum_request::TopicData::default()
                .with_topic_name(TopicName(s("__cluster_metadata")))
                .with_partitions(vec![describe_quorum_request::PartitionData::default()]);
            let r = c.send(
                &DescribeQuorumRequest::default().with_topics(vec![topic]),
                v,
            )?;
            vec![Seen::Refused(Cluster, r.error_code)]
        }
        ApiKey::UnregisterBroker => {
            let r = c.send(
                &UnregisterBrokerRequest::default().with_broker_id(BrokerId(4242)),
                v,
            )?;
            vec![Seen::Refused(Cluster, r.error_code)]
        }
        ApiKey::UpdateFeatures => {
            let update = update_features_request::FeatureUpdateKey::default()
                .with_feature(s("eligible.leader.replicas.version"))
                .with_max_version_level(1)
                .with_upgrade_type(1);
            let r = c.send(
                &UpdateFeaturesRequest::default()
                    .with_validate_only(v >= 1)
                    .with_feature_updates(vec![update]),
                v,
            )?;
            vec![Seen::Refused(Cluster, r.error_code)]
        }
        // Voters that do not exist: refused before anything is looked up.
        ApiKey::AddRaftVoter => {
            let r = c.send(
                &AddRaftVoterRequest::default()
                    .with_voter_id(4242)
                    .with_voter_directory_id(uuid::Uuid::from_u128(7)),
                v,
            )?;
            vec![Seen::Refused(Cluster, r.error_code)]
        }
        ApiKey::RemoveRaftVoter => {
            let r = c.send(
                &RemoveRaftVoterRequest::default()
                    .with_voter_id(4242)
                    .with_voter_directory_id(uuid::Uuid::from_u128(7)),
                v,
            )?;
            vec![Seen::Refused(Cluster, r.error_code)]
        }
        ApiKey::UpdateRaftVoter => {
            let r = c.send(
                &UpdateRaftVoterRequest::default()
                    .with_voter_id(4242)
                    .with_voter_directory_id(uuid::Uuid::from_u128(7)),
                v,
            )?;
            vec![Seen::Refused(Cluster, r.error_code)]
        }
        ApiKey::DescribeTopicPartitions => {
            let named =
                describe_topic_partitions_request::TopicRequest::default().with_name(topic_name());
            let r = c.send(
                &DescribeTopicPartitionsRequest::default().with_topics(vec![named]),
                v,
            )?;
            let mut seen = each(Topic, r.topics.iter().map(|t| t.error_code));
            let all = c.send(&DescribeTopicPartitionsRequest::default(), v)?;
            seen.push(Seen::Listed(all.topics.len()));
            seen
        }
        ApiKey::DescribeClientQuotas => {
            let r = c.send(&DescribeClientQuotasRequest::default(), v)?;
            vec![Seen::Refused(Cluster, r.error_code)]
        }
        ApiKey::AlterClientQuotas => {
            let entry = alter_client_quotas_request::EntryData::default()
                .with_entity(vec![alter_client_quotas_request::EntityData::default()
                    .with_entity_type(s("client-id"))
                    .with_entity_name(Some(s("acl-table")))])
                .with_ops(vec![alter_client_quotas_request::OpData::default()
                    .with_key(s("producer_byte_rate"))
                    .with_value(1024.0)]);
            let r = c.send(
                &AlterClientQuotasRequest::default()
                    .with_entries(vec![entry])
                    .with_validate_only(true),
                v,
            )?;
            each(Cluster, r.entries.iter().map(|e| e.error_code))
        }
        ApiKey::ShareGroupHeartbeat => {
            let r = c.send(
                &ShareGroupHeartbeatRequest::default()
                    .with_group_id(GroupId(s("share")))
                    .with_member_id(s("member-1"))
                    .with_subscribed_topic_names(Some(vec![topic_name()])),
                v,
            )?;
            vec![Seen::Refused(Group, r.error_code)]
        }
        ApiKey::ShareGroupDescribe => {
            let r = c.send(
                &ShareGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("share"))]),
                v,
            )?;
            each(Group, r.groups.iter().map(|g| g.error_code))
        }
        ApiKey::ShareFetch => {
            let body = ShareFetchRequest::default()
                .with_group_id(Some(GroupId(s("share"))))
                .with_member_id(Some(s("member-1")));
            let r = c.send(
                &chronik_protocol::share_wire::ShareFetchRequestWire::from(body),
                v,
            )?;
            vec![Seen::Refused(Group, r.0.error_code)]
        }
        ApiKey::ShareAcknowledge => {
            let body = ShareAcknowledgeRequest::default()
                .with_group_id(Some(GroupId(s("share"))))
                .with_member_id(Some(s("member-1")))
                .with_share_session_epoch(1);
            let r = c.send(
                &chronik_protocol::share_wire::ShareAcknowledgeRequestWire::from(body),
                v,
            )?;
            vec![Seen::Refused(Group, r.body.error_code)]
        }
        ApiKey::InitializeShareGroupState => {
            use initialize_share_group_state_request::{InitializeStateData, PartitionData};
            let r = c.send(
                &InitializeShareGroupStateRequest::default()
                    .with_group_id(s("share"))
                    .with_topics(vec![InitializeStateData::default()
                        .with_partitions(vec![PartitionData::default()])]),
                v,
            )?;
            each(
                Cluster,
                r.results
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            )
        }
        ApiKey::ReadShareGroupState => {
            use read_share_group_state_request::{PartitionData, ReadStateData};
            let r = c.send(
                &ReadShareGroupStateRequest::default()
                    .with_group_id(s("share"))
                    .with_topics(vec![
                        ReadStateData::default().with_partitions(vec![PartitionData::default()])
                    ]),
                v,
            )?;
            each(
                Cluster,
                r.results
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            )
        }
        ApiKey::WriteShareGroupState => {
            use write_share_group_state_request::{PartitionData, WriteStateData};
            let r = c.send(
                &WriteShareGroupStateRequest::default()
                    .with_group_id(s("share"))
                    .with_topics(vec![
                        WriteStateData::default().with_partitions(vec![PartitionData::default()])
                    ]),
                v,
            )?;
            each(
                Cluster,
                r.results
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            )
        }
        ApiKey::DeleteShareGroupState => {
            use delete_share_group_state_request::{DeleteStateData, PartitionData};
            let r = c.send(
                &DeleteShareGroupStateRequest::default()
                    .with_group_id(s("share"))
                    .with_topics(vec![
                        DeleteStateData::default().with_partitions(vec![PartitionData::default()])
                    ]),
                v,
            )?;
            each(
                Cluster,
                r.results
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            )
        }
        ApiKey::ReadShareGroupStateSummary => {
            use read_share_group_state_summary_request::{PartitionData, ReadStateSummaryData};
            let r = c.send(
                &ReadShareGroupStateSummaryRequest::default()
                    .with_group_id(s("share"))
                    .with_topics(vec![ReadStateSummaryData::default()
                        .with_partitions(vec![PartitionData::default()])]),
                v,
            )?;
            each(
                Cluster,
                r.results
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            )
        }
        ApiKey::DescribeShareGroupOffsets => {
            use describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;
            let body = DescribeShareGroupOffsetsRequest::default()
                .with_groups(vec![DescribeShareGroupOffsetsRequestGroup::default()
                    .with_group_id(GroupId(s("share")))]);
            let r = c.send(
                &chronik_protocol::share_wire::DescribeShareGroupOffsetsRequestWire::from(body),
                v,
            )?;
            each(Group, r.body.groups.iter().map(|g| g.error_code))
        }
        ApiKey::AlterShareGroupOffsets => {
            let r = c.send(
                &AlterShareGroupOffsetsRequest::default().with_group_id(GroupId(s("share"))),
                v,
            )?;
            vec![Seen::Refused(Group, r.error_code)]
        }
        ApiKey::DeleteShareGroupOffsets => {
            let r = c.send(
                &DeleteShareGroupOffsetsRequest::default().with_group_id(GroupId(s("share"))),
                v,
            )?;
            vec![Seen::Refused(Group, r.error_code)]
        }
        other => bail!("no probe for advertised API {other:?}: add one, and its row in TABLE"),
    })
}

/// Whether `seen` is what `row` says a principal without ACLs gets.
fn conforms(row: &Row, seen: &Seen) -> bool {
    match *seen {
        Seen::Refused(kind, code) => row.refuses.contains(&kind) && code == kind.refused_with(),
        Seen::Listed(n) => row.lists && n == 0,
        Seen::Served(code) => {
            (row.refuses.is_empty() || row.lists) && !AUTHORIZATION_ERRORS.contains(&code)
        }
    }
}

/// SaslHandshake PLAIN and SaslAuthenticate as `user` on `client`.
fn login(client: &mut Client, user: &str, password: &str) -> Result<()> {
    let handshake = client.send(
        &SaslHandshakeRequest::default().with_mechanism(s("PLAIN")),
        1,
    )?;
    ensure!(handshake.error_code == 0, "handshake: {handshake:?}");
    let auth = client.send(
        &SaslAuthenticateRequest::default()
            .with_auth_bytes(Bytes::from(format!("\0{user}\0{password}"))),
        2,
    )?;
    ensure!(auth.error_code == 0, "login {user}: {auth:?}");
    Ok(())
}

/// The super user makes a topic, a group with an offset and an open
/// transaction on it (so every listing has something to hide).
fn set_up(admin: &mut Client) -> Result<Fixture> {
    admin.create_topic(TOPIC)?;
    let topic_id = admin.topic_id(TOPIC)?;
    ensure!(admin.commit_offset(GROUP, TOPIC, 0)? == 0, "admin commit");
    let init = admin.send(
        &new_producer_request(Some(txn_id())).with_transaction_timeout_ms(600_000),
        4,
    )?;
    ensure!(init.error_code == 0, "admin InitProducerId: {init:?}");
    let add = admin.send(
        &AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(txn_id())
            .with_v3_and_below_producer_id(init.producer_id)
            .with_v3_and_below_producer_epoch(init.producer_epoch)
            .with_v3_and_below_topics(vec![
                add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                    .with_name(topic_name())
                    .with_partitions(vec![0]),
            ]),
        3,
    )?;
    ensure!(
        add.results_by_topic_v3_and_below
            .iter()
            .flat_map(|t| &t.results_by_partition)
            .all(|p| p.partition_error_code == 0),
        "admin AddPartitionsToTxn: {add:?}"
    );
    Ok(Fixture {
        topic_id,
        producer_id: init.producer_id,
        producer_epoch: init.producer_epoch,
    })
}

#[test]
fn every_advertised_api_version_refuses_a_principal_without_acls() -> Result<()> {
    let scratch = tempfile::tempdir()?;
    let jaas = scratch.path().join("jaas.conf");
    std::fs::write(
        &jaas,
        "KafkaServer {\n  org.apache.kafka.common.security.plain.PlainLoginModule required\n  \
         user_admin=\"admin-secret\";\n};\n",
    )?;
    let broker = SecureBroker::start(
        "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        &[
            "--sasl-enabled-mechanisms",
            "PLAIN",
            "--sasl-jaas-config-file",
            jaas.to_str().context("jaas path")?,
            "--authorizer-class-name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "--super-users",
            "User:admin",
            "--group-initial-rebalance-delay-ms",
            "0",
        ],
    )?;
    let admin_addr: SocketAddr = broker.addr("SASL_PLAINTEXT")?;
    let anonymous_addr: SocketAddr = broker.addr("PLAINTEXT")?;
    let mut admin = Client::connect_to(admin_addr)?;
    login(&mut admin, "admin", "admin-secret")?;
    let fixture = set_up(&mut admin)?;

    let mut anonymous = Client::connect_to(anonymous_addr)?;
    let versions = anonymous.send(&ApiVersionsRequest::default(), 3)?;
    ensure!(versions.error_code == 0, "ApiVersions: {versions:?}");
    let mut failures = Vec::new();
    let mut probed = 0;
    for key in &versions.api_keys {
        let api = ApiKey::try_from(key.api_key)
            .map_err(|_| anyhow::anyhow!("unknown API key {} advertised", key.api_key))?;
        let Some((_, row)) = TABLE.iter().find(|(a, _)| *a == api) else {
            bail!("{api:?} is advertised but has no row in TABLE (nor in docs/security.md's ACL table)");
        };
        let mut kinds_seen = Vec::new();
        let mut listed = false;
        for v in key.min_version..=key.max_version {
            if row.lists {
                // the super user sees something there
                let mut admin = Client::connect_to(admin_addr)?;
                login(&mut admin, "admin", "admin-secret")?;
                let seen = probe(&mut admin, api, v, &fixture)
                    .with_context(|| format!("admin {api:?} v{v}"))?;
                ensure!(
                    seen.iter().all(|s| !matches!(s, Seen::Listed(0))),
                    "{api:?} v{v} lists nothing even to the super user: {seen:?}"
                );
            }
            // a fresh connection per request: a refusal closes only its own
            let mut client = Client::connect_to(anonymous_addr)?;
            let seen = probe(&mut client, api, v, &fixture)
                .with_context(|| format!("{api:?} v{v}: {}", last_lines(&broker.log(), 5)))?;
            if seen.is_empty() || !seen.iter().all(|s| conforms(row, s)) {
                failures.push(format!("{api:?} v{v}: {seen:?}"));
            }
            for s in &seen {
                match s {
                    Seen::Refused(kind, _) => kinds_seen.push(*kind),
                    Seen::Listed(_) => listed = true,
                    Seen::Served(_) => {}
                }
            }
            probed += 1;
        }
        // the probes exercise every resource the row names
        for kind in row.refuses {
            ensure!(
                kinds_seen.contains(kind),
                "{api:?}: TABLE says it is refused on {kind:?}, but no probe asked for one"
            );
        }
        ensure!(
            listed == row.lists,
            "{api:?}: TABLE lists={} but probes listed={listed}",
            row.lists
        );
    }
    ensure!(
        failures.is_empty(),
        "answers to a principal without ACLs that differ from the table:\n{}",
        failures.join("\n")
    );
    ensure!(probed > 150, "only {probed} (API, version) pairs probed");
    Ok(())
}

/// The last `n` lines of `log`.
fn last_lines(log: &str, n: usize) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
