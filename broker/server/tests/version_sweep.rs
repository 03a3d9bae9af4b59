//! Every advertised version of every API gets a well-formed answer: for each
//! (API, version) the broker lists in ApiVersions, a request built at that
//! version is answered with a response that decodes at that version and
//! carries no unexpected error. Catches fields set outside the versions
//! that carry them, which would otherwise close the client's connection.

mod common;

use anyhow::{Context, Result};
use chronik_protocol::share_wire::{
    DescribeShareGroupOffsetsRequestWire, ShareAcknowledgeRequestWire, ShareFetchRequestWire,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use common::broker::Broker;
use common::kafka_client::{election_codes, new_producer_request, Client};

const TOPIC: &str = "sweep";

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn advertised(client: &mut Client) -> Result<Vec<(i16, i16, i16)>> {
    let response = client.send(&ApiVersionsRequest::default(), 0)?;
    anyhow::ensure!(
        response.error_code == 0,
        "ApiVersions error {}",
        response.error_code
    );
    Ok(response
        .api_keys
        .iter()
        .map(|k| (k.api_key, k.min_version, k.max_version))
        .collect())
}

fn txn_id(id: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(id.to_string()))
}

/// InitProducerId for transactional id `id`: (producer id, epoch).
fn init_txn(client: &mut Client, id: &str) -> Result<(i64, i16)> {
    let r = client.send(&new_producer_request(Some(txn_id(id))), 4)?;
    anyhow::ensure!(
        r.error_code == 0,
        "InitProducerId {id}: error {}",
        r.error_code
    );
    Ok((r.producer_id.0, r.producer_epoch))
}

/// A KIP-848 member joining `group` (epoch 0) subscribed to the sweep
/// topic; v1+ members name themselves.
fn consumer_join(
    client: &mut Client,
    group: &str,
    version: i16,
) -> Result<ConsumerGroupHeartbeatResponse> {
    let member_id = if version >= 1 {
        uuid::Uuid::new_v4().to_string()
    } else {
        String::new()
    };
    client.send(
        &ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
            .with_member_id(StrBytes::from_string(member_id))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![name(TOPIC)]))
            .with_topic_partitions(Some(Vec::new())),
        version,
    )
}

/// Sends one request of `api_key` at `version`; returns the error codes seen.
/// A share-group member joining `group` (ShareGroupHeartbeat at `version`).
fn share_join(client: &mut Client, group: &str, version: i16) -> Result<i16> {
    let r = client.send(
        &ShareGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
            .with_member_id(StrBytes::from_static_str("sweep-member"))
            .with_member_epoch(0)
            .with_subscribed_topic_names(Some(vec![name(TOPIC)])),
        version,
    )?;
    Ok(r.error_code)
}

/// A ShareFetch opening `member`'s share session on partition 0 of the topic.
fn share_fetch(topic_id: uuid::Uuid, member: &str, epoch: i32) -> ShareFetchRequestWire {
    use kafka_protocol::messages::share_fetch_request::{FetchPartition, FetchTopic};
    ShareFetchRequestWire::from(
        ShareFetchRequest::default()
            .with_group_id(Some(GroupId(StrBytes::from_static_str("sweep-share"))))
            .with_member_id(Some(StrBytes::from_string(member.to_string())))
            .with_share_session_epoch(epoch)
            .with_max_bytes(1 << 20)
            .with_max_records(10)
            .with_topics(vec![FetchTopic::default()
                .with_topic_id(topic_id)
                .with_partitions(vec![
                    FetchPartition::default().with_partition_index(0)
                ])]),
    )
}

fn exercise(client: &mut Client, api_key: ApiKey, version: i16) -> Result<Vec<i16>> {
    let topic_id = client.topic_id(TOPIC)?;
    Ok(match api_key {
        ApiKey::Metadata => {
            let topic =
                metadata_request::MetadataRequestTopic::default().with_name(Some(name(TOPIC)));
            let r = client.send(
                &MetadataRequest::default().with_topics(Some(vec![topic])),
                version,
            )?;
            r.topics.iter().map(|t| t.error_code).collect()
        }
        ApiKey::Produce => {
            let (code, _) = client.produce_at(TOPIC, -1, -1, -1, 2, version)?;
            vec![code]
        }
        ApiKey::Fetch => {
            let partition = fetch_request::FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20);
            let topic = fetch_request::FetchTopic::default()
                .with_topic(if version < 13 {
                    name(TOPIC)
                } else {
                    TopicName::default()
                })
                .with_topic_id(if version >= 13 {
                    topic_id
                } else {
                    Default::default()
                })
                .with_partitions(vec![partition]);
            let r = client.send(
                &FetchRequest::default()
                    .with_replica_id(BrokerId(-1))
                    .with_max_wait_ms(10)
                    .with_topics(vec![topic]),
                version,
            )?;
            r.responses
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect()
        }
        ApiKey::ListOffsets => {
            let mut codes = Vec::new();
            for ts in [-2i64, -1, 0] {
                let partition = list_offsets_request::ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(ts);
                let topic = list_offsets_request::ListOffsetsTopic::default()
                    .with_name(name(TOPIC))
                    .with_partitions(vec![partition]);
                let r = client.send(
                    &ListOffsetsRequest::default()
                        .with_replica_id(BrokerId(-1))
                        .with_topics(vec![topic]),
                    version,
                )?;
                codes.extend(
                    r.topics
                        .iter()
                        .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
                );
            }
            codes
        }
        ApiKey::ApiVersions => vec![
            client
                .send(&ApiVersionsRequest::default(), version)?
                .error_code,
        ],
        ApiKey::CreateTopics => {
            let t = create_topics_request::CreatableTopic::default()
                .with_name(name(&format!("created-v{version}")))
                .with_num_partitions(1)
                .with_replication_factor(1);
            let r = client.send(
                &CreateTopicsRequest::default()
                    .with_topics(vec![t])
                    .with_timeout_ms(5000),
                version,
            )?;
            r.topics.iter().map(|t| t.error_code).collect()
        }
        ApiKey::DeleteTopics => {
            let topic = format!("created-v{}", version + 1);
            let r = if version >= 6 {
                let state = delete_topics_request::DeleteTopicState::default()
                    .with_name(Some(name(&topic)));
                client.send(
                    &DeleteTopicsRequest::default()
                        .with_topics(vec![state])
                        .with_timeout_ms(5000),
                    version,
                )?
            } else {
                client.send(
                    &DeleteTopicsRequest::default()
                        .with_topic_names(vec![name(&topic)])
                        .with_timeout_ms(5000),
                    version,
                )?
            };
            r.responses.iter().map(|t| t.error_code).collect()
        }
        ApiKey::DescribeConfigs => {
            let topic = describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str(TOPIC));
            let broker = describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(4)
                .with_resource_name(StrBytes::from_static_str("1"));
            let r = client.send(
                &DescribeConfigsRequest::default().with_resources(vec![topic, broker]),
                version,
            )?;
            r.results.iter().map(|r| r.error_code).collect()
        }
        ApiKey::FindCoordinator => {
            let request = if version >= 4 {
                FindCoordinatorRequest::default()
                    .with_coordinator_keys(vec![StrBytes::from_static_str("g")])
            } else {
                FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("g"))
            };
            let r = client.send(&request, version)?;
            if version >= 4 {
                r.coordinators.iter().map(|c| c.error_code).collect()
            } else {
                vec![r.error_code]
            }
        }
        ApiKey::JoinGroup => {
            let protocol = join_group_request::JoinGroupRequestProtocol::default()
                .with_name(StrBytes::from_static_str("range"))
                .with_metadata(bytes::Bytes::from_static(b"m"));
            let request = JoinGroupRequest::default()
                .with_group_id(GroupId(StrBytes::from_string(format!("join-v{version}"))))
                .with_session_timeout_ms(10_000)
                .with_rebalance_timeout_ms(10_000)
                .with_protocol_type(StrBytes::from_static_str("consumer"))
                .with_protocols(vec![protocol]);
            let r = client.send(&request, version)?;
            // v4+ first hands out a member id with MEMBER_ID_REQUIRED (79).
            vec![if r.error_code == 79 { 0 } else { r.error_code }]
        }
        ApiKey::SyncGroup => {
            let r = client.send(
                &SyncGroupRequest::default()
                    .with_group_id(GroupId(StrBytes::from_static_str("nobody")))
                    .with_member_id(StrBytes::from_static_str("m")),
                version,
            )?;
            vec![if r.error_code == 25 { 0 } else { r.error_code }] // UNKNOWN_MEMBER_ID expected
        }
        ApiKey::Heartbeat => {
            let r = client.send(
                &HeartbeatRequest::default()
                    .with_group_id(GroupId(StrBytes::from_static_str("nobody")))
                    .with_member_id(StrBytes::from_static_str("m")),
                version,
            )?;
            vec![if r.error_code == 25 { 0 } else { r.error_code }]
        }
        ApiKey::LeaveGroup => {
            let request = if version >= 3 {
                LeaveGroupRequest::default()
                    .with_group_id(GroupId(StrBytes::from_static_str("nobody")))
                    .with_members(vec![leave_group_request::MemberIdentity::default()
                        .with_member_id(StrBytes::from_static_str("m"))])
            } else {
                LeaveGroupRequest::default()
                    .with_group_id(GroupId(StrBytes::from_static_str("nobody")))
                    .with_member_id(StrBytes::from_static_str("m"))
            };
            let r = client.send(&request, version)?;
            let codes: Vec<i16> = if version >= 3 {
                r.members.iter().map(|m| m.error_code).collect()
            } else {
                vec![r.error_code]
            };
            codes
                .into_iter()
                .map(|c| if c == 25 { 0 } else { c })
                .collect()
        }
        ApiKey::OffsetCommit => {
            let p = offset_commit_request::OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(1);
            let t = offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(name(TOPIC))
                .with_partitions(vec![p]);
            let r = client.send(
                &OffsetCommitRequest::default()
                    .with_group_id(GroupId(StrBytes::from_string(format!("commit-v{version}"))))
                    .with_generation_id_or_member_epoch(-1)
                    .with_topics(vec![t]),
                version,
            )?;
            r.topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect()
        }
        ApiKey::OffsetFetch => {
            let group = GroupId(StrBytes::from_string(format!(
                "commit-v{}",
                version.clamp(2, 9)
            )));
            if version >= 8 {
                let t = offset_fetch_request::OffsetFetchRequestTopics::default()
                    .with_name(name(TOPIC))
                    .with_partition_indexes(vec![0]);
                let g = offset_fetch_request::OffsetFetchRequestGroup::default()
                    .with_group_id(group)
                    .with_topics(Some(vec![t]));
                let r =
                    client.send(&OffsetFetchRequest::default().with_groups(vec![g]), version)?;
                r.groups.iter().map(|g| g.error_code).collect()
            } else {
                let t = offset_fetch_request::OffsetFetchRequestTopic::default()
                    .with_name(name(TOPIC))
                    .with_partition_indexes(vec![0]);
                let r = client.send(
                    &OffsetFetchRequest::default()
                        .with_group_id(group)
                        .with_topics(Some(vec![t])),
                    version,
                )?;
                r.topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                    .collect()
            }
        }
        ApiKey::ListGroups => vec![
            client
                .send(&ListGroupsRequest::default(), version)?
                .error_code,
        ],
        ApiKey::DescribeGroups => {
            let r = client.send(
                &DescribeGroupsRequest::default()
                    .with_groups(vec![GroupId(StrBytes::from_static_str("commit-v2"))]),
                version,
            )?;
            r.groups.iter().map(|g| g.error_code).collect()
        }
        ApiKey::DeleteGroups => {
            let r = client.send(
                &DeleteGroupsRequest::default().with_groups_names(vec![GroupId(
                    StrBytes::from_string(format!("commit-v{}", version + 2)),
                )]),
                version,
            )?;
            r.results.iter().map(|g| g.error_code).collect()
        }
        ApiKey::InitProducerId => {
            let r = client.send(&new_producer_request(None), version)?;
            vec![r.error_code]
        }
        ApiKey::OffsetForLeaderEpoch => {
            let p = offset_for_leader_epoch_request::OffsetForLeaderPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(-1)
                .with_leader_epoch(0);
            let t = offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
                .with_topic(name(TOPIC))
                .with_partitions(vec![p]);
            let r = client.send(
                &OffsetForLeaderEpochRequest::default()
                    .with_replica_id(BrokerId(-1))
                    .with_topics(vec![t]),
                version,
            )?;
            r.topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect()
        }
        ApiKey::AddPartitionsToTxn => {
            let id = format!("sweep-apt-v{version}");
            let (pid, epoch) = init_txn(client, &id)?;
            let topics = vec![
                add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                    .with_name(name(TOPIC))
                    .with_partitions(vec![0]),
            ];
            let request = if version <= 3 {
                AddPartitionsToTxnRequest::default()
                    .with_v3_and_below_transactional_id(txn_id(&id))
                    .with_v3_and_below_producer_id(ProducerId(pid))
                    .with_v3_and_below_producer_epoch(epoch)
                    .with_v3_and_below_topics(topics)
            } else {
                AddPartitionsToTxnRequest::default().with_transactions(vec![
                    add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default()
                        .with_transactional_id(txn_id(&id))
                        .with_producer_id(ProducerId(pid))
                        .with_producer_epoch(epoch)
                        .with_topics(topics),
                ])
            };
            let r = client.send(&request, version)?;
            let mut codes = vec![r.error_code];
            codes.extend(
                r.results_by_topic_v3_and_below
                    .iter()
                    .chain(
                        r.results_by_transaction
                            .iter()
                            .flat_map(|t| &t.topic_results),
                    )
                    .flat_map(|t| {
                        t.results_by_partition
                            .iter()
                            .map(|p| p.partition_error_code)
                    }),
            );
            codes
        }
        ApiKey::AddOffsetsToTxn => {
            let id = format!("sweep-aot-v{version}");
            let (pid, epoch) = init_txn(client, &id)?;
            let r = client.send(
                &AddOffsetsToTxnRequest::default()
                    .with_transactional_id(txn_id(&id))
                    .with_producer_id(ProducerId(pid))
                    .with_producer_epoch(epoch)
                    .with_group_id(GroupId(StrBytes::from_static_str("sweep-txn-group"))),
                version,
            )?;
            vec![r.error_code]
        }
        ApiKey::EndTxn => {
            let id = format!("sweep-end-v{version}");
            let (pid, epoch) = init_txn(client, &id)?;
            client.send(
                &AddOffsetsToTxnRequest::default()
                    .with_transactional_id(txn_id(&id))
                    .with_producer_id(ProducerId(pid))
                    .with_producer_epoch(epoch)
                    .with_group_id(GroupId(StrBytes::from_static_str("sweep-txn-group"))),
                0,
            )?;
            let r = client.send(
                &EndTxnRequest::default()
                    .with_transactional_id(txn_id(&id))
                    .with_producer_id(ProducerId(pid))
                    .with_producer_epoch(epoch)
                    .with_committed(false),
                version,
            )?;
            vec![r.error_code]
        }
        ApiKey::TxnOffsetCommit => {
            let id = format!("sweep-toc-v{version}");
            let (pid, epoch) = init_txn(client, &id)?;
            let p = txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(1)
                .with_committed_leader_epoch(-1);
            let r = client.send(
                &TxnOffsetCommitRequest::default()
                    .with_transactional_id(txn_id(&id))
                    .with_group_id(GroupId(StrBytes::from_static_str("sweep-txn-group")))
                    .with_producer_id(ProducerId(pid))
                    .with_producer_epoch(epoch)
                    .with_generation_id(-1)
                    .with_topics(vec![
                        txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                            .with_name(name(TOPIC))
                            .with_partitions(vec![p]),
                    ]),
                version,
            )?;
            r.topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect()
        }
        ApiKey::WriteTxnMarkers => {
            // From 127.0.0.1, this broker's own registered host: allowed. An
            // ABORT for a producer with nothing open changes nothing.
            let r = client.send(
                &WriteTxnMarkersRequest::default().with_markers(vec![
                    write_txn_markers_request::WritableTxnMarker::default()
                        .with_producer_id(ProducerId(424_242))
                        .with_producer_epoch(0)
                        .with_transaction_result(false)
                        .with_coordinator_epoch(0)
                        .with_topics(vec![
                            write_txn_markers_request::WritableTxnMarkerTopic::default()
                                .with_name(name(TOPIC))
                                .with_partition_indexes(vec![0]),
                        ]),
                ]),
                version,
            )?;
            r.markers
                .iter()
                .flat_map(|m| &m.topics)
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect()
        }
        ApiKey::DescribeTransactions => {
            init_txn(client, "sweep-describe")?;
            let r = client.send(
                &DescribeTransactionsRequest::default()
                    .with_transactional_ids(vec![txn_id("sweep-describe")]),
                version,
            )?;
            r.transaction_states.iter().map(|t| t.error_code).collect()
        }
        ApiKey::ListTransactions => {
            let r = client.send(&ListTransactionsRequest::default(), version)?;
            vec![r.error_code]
        }
        ApiKey::CreatePartitions => {
            let t = create_partitions_request::CreatePartitionsTopic::default()
                .with_name(name(TOPIC))
                .with_count(2);
            let r = client.send(
                &CreatePartitionsRequest::default()
                    .with_topics(vec![t])
                    .with_timeout_ms(5000)
                    .with_validate_only(true),
                version,
            )?;
            r.results.iter().map(|r| r.error_code).collect()
        }
        ApiKey::AlterConfigs => {
            use alter_configs_request::{AlterConfigsResource, AlterableConfig};
            let resource = AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str(TOPIC))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(StrBytes::from_static_str("retention.ms"))
                    .with_value(Some(StrBytes::from_string(format!(
                        "{}",
                        60_000 + i32::from(version)
                    ))))]);
            let r = client.send(
                &AlterConfigsRequest::default().with_resources(vec![resource]),
                version,
            )?;
            r.responses.iter().map(|r| r.error_code).collect()
        }
        ApiKey::IncrementalAlterConfigs => {
            use incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
            let resource = AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str(TOPIC))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(StrBytes::from_static_str("retention.ms"))
                    .with_config_operation(0)
                    .with_value(Some(StrBytes::from_string(format!(
                        "{}",
                        70_000 + i32::from(version)
                    ))))]);
            let r = client.send(
                &IncrementalAlterConfigsRequest::default().with_resources(vec![resource]),
                version,
            )?;
            r.responses.iter().map(|r| r.error_code).collect()
        }
        ApiKey::DescribeCluster => {
            let r = client.send(
                &DescribeClusterRequest::default().with_endpoint_type(1),
                version,
            )?;
            anyhow::ensure!(
                r.brokers.len() == 1,
                "DescribeCluster brokers: {:?}",
                r.brokers
            );
            vec![r.error_code]
        }
        ApiKey::DescribeLogDirs => {
            let r = client.send(
                &DescribeLogDirsRequest::default().with_topics(None),
                version,
            )?;
            r.results.iter().map(|r| r.error_code).collect()
        }
        ApiKey::OffsetDelete => {
            anyhow::ensure!(
                client.commit_offset("sweep-offsets", TOPIC, 1)? == 0,
                "commit"
            );
            let topic = offset_delete_request::OffsetDeleteRequestTopic::default()
                .with_name(name(TOPIC))
                .with_partitions(vec![
                    offset_delete_request::OffsetDeleteRequestPartition::default(),
                ]);
            let r = client.send(
                &OffsetDeleteRequest::default()
                    .with_group_id(GroupId(StrBytes::from_static_str("sweep-offsets")))
                    .with_topics(vec![topic]),
                version,
            )?;
            std::iter::once(r.error_code)
                .chain(
                    r.topics
                        .iter()
                        .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
                )
                .collect()
        }
        ApiKey::DeleteRecords => {
            let topic = delete_records_request::DeleteRecordsTopic::default()
                .with_name(name(TOPIC))
                .with_partitions(vec![
                    delete_records_request::DeleteRecordsPartition::default().with_offset(0),
                ]);
            let r = client.send(
                &DeleteRecordsRequest::default()
                    .with_topics(vec![topic])
                    .with_timeout_ms(5000),
                version,
            )?;
            r.topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect()
        }
        ApiKey::ConsumerGroupHeartbeat => {
            let group = format!("sweep-cg-v{version}");
            let joined = consumer_join(client, &group, version)?;
            let member_id = joined.member_id.clone().unwrap_or_default();
            let left = client.send(
                &ConsumerGroupHeartbeatRequest::default()
                    .with_group_id(GroupId(StrBytes::from_string(group)))
                    .with_member_id(member_id)
                    .with_member_epoch(-1),
                version,
            )?;
            vec![joined.error_code, left.error_code]
        }
        ApiKey::ConsumerGroupDescribe => {
            let group = format!("sweep-cg-describe-v{version}");
            let joined = consumer_join(client, &group, 0)?;
            let r = client.send(
                &ConsumerGroupDescribeRequest::default()
                    .with_group_ids(vec![GroupId(StrBytes::from_string(group))]),
                version,
            )?;
            anyhow::ensure!(
                r.groups.iter().all(|g| g.members.len() == 1),
                "ConsumerGroupDescribe v{version}: {r:?}"
            );
            let mut codes = vec![joined.error_code];
            codes.extend(r.groups.iter().map(|g| g.error_code));
            codes
        }
        ApiKey::CreateAcls => {
            let creation = create_acls_request::AclCreation::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_string(format!("sweep-acl-v{version}")))
                .with_resource_pattern_type(3)
                .with_principal(StrBytes::from_static_str("User:alice"))
                .with_host(StrBytes::from_static_str("*"))
                .with_operation(3)
                .with_permission_type(3);
            let r = client.send(
                &CreateAclsRequest::default().with_creations(vec![creation]),
                version,
            )?;
            r.results.iter().map(|r| r.error_code).collect()
        }
        // On a PLAINTEXT listener Kafka answers SASL requests with
        // ILLEGAL_SASL_STATE (34) and keeps serving; the SASL listeners'
        // exchange is covered by security_sasl.rs.
        ApiKey::AlterUserScramCredentials => {
            let upsertion =
                alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
                    .with_name(StrBytes::from_string(format!("sweep-user-v{version}")))
                    .with_mechanism(2)
                    .with_iterations(4096)
                    .with_salt(bytes::Bytes::from_static(b"0123456789abcdef"))
                    .with_salted_password(bytes::Bytes::from(vec![7u8; 64]));
            let r = client.send(
                &AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsertion]),
                version,
            )?;
            r.results.iter().map(|r| r.error_code).collect()
        }
        ApiKey::DescribeAcls => {
            let r = client.send(
                &DescribeAclsRequest::default()
                    .with_resource_type_filter(1)
                    .with_resource_name_filter(None)
                    .with_pattern_type_filter(1)
                    .with_principal_filter(None)
                    .with_host_filter(None)
                    .with_operation(1)
                    .with_permission_type(1),
                version,
            )?;
            vec![r.error_code]
        }
        ApiKey::DeleteAcls => {
            let filter = delete_acls_request::DeleteAclsFilter::default()
                .with_resource_type_filter(2)
                .with_resource_name_filter(Some(StrBytes::from_string(format!(
                    "sweep-acl-v{version}"
                ))))
                .with_pattern_type_filter(3)
                .with_principal_filter(None)
                .with_host_filter(None)
                .with_operation(1)
                .with_permission_type(1);
            let r = client.send(
                &DeleteAclsRequest::default().with_filters(vec![filter]),
                version,
            )?;
            r.filter_results.iter().map(|r| r.error_code).collect()
        }
        ApiKey::DescribeUserScramCredentials => {
            let r = client.send(
                &DescribeUserScramCredentialsRequest::default().with_users(None),
                version,
            )?;
            let mut codes = vec![r.error_code];
            codes.extend(r.results.iter().map(|r| r.error_code));
            codes
        }
        ApiKey::SaslHandshake => {
            let r = client.send(
                &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
                version,
            )?;
            anyhow::ensure!(r.error_code == 34, "SaslHandshake v{version}: {r:?}");
            vec![0]
        }
        ApiKey::SaslAuthenticate => {
            let r = client.send(
                &SaslAuthenticateRequest::default()
                    .with_auth_bytes(bytes::Bytes::from_static(b"\0u\0p")),
                version,
            )?;
            anyhow::ensure!(r.error_code == 34, "SaslAuthenticate v{version}: {r:?}");
            vec![0]
        }
        ApiKey::AlterPartitionReassignments => {
            // Onto the replica it has: completes at once.
            let partition = alter_partition_reassignments_request::ReassignablePartition::default()
                .with_partition_index(0)
                .with_replicas(Some(vec![BrokerId(1)]));
            let r = client.send(
                &AlterPartitionReassignmentsRequest::default()
                    .with_timeout_ms(10_000)
                    .with_topics(vec![
                        alter_partition_reassignments_request::ReassignableTopic::default()
                            .with_name(name(TOPIC))
                            .with_partitions(vec![partition]),
                    ]),
                version,
            )?;
            let mut codes = vec![r.error_code];
            codes.extend(
                r.responses
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            );
            codes
        }
        ApiKey::ListPartitionReassignments => {
            let r = client.send(&ListPartitionReassignmentsRequest::default(), version)?;
            anyhow::ensure!(
                r.topics.is_empty(),
                "ListPartitionReassignments v{version}: {r:?}"
            );
            vec![r.error_code]
        }
        // The only replica leads already: ELECTION_NOT_NEEDED (84).
        ApiKey::ElectLeaders => {
            let r = client.send(
                &ElectLeadersRequest::default()
                    .with_election_type(0)
                    .with_timeout_ms(10_000)
                    .with_topic_partitions(Some(vec![
                        elect_leaders_request::TopicPartitions::default()
                            .with_topic(name(TOPIC))
                            .with_partitions(vec![0]),
                    ])),
                version,
            )?;
            let codes = election_codes(&r);
            anyhow::ensure!(codes == [84], "ElectLeaders v{version}: {r:?}");
            vec![r.error_code]
        }
        // A quorum of one: this broker leads and is the only voter.
        ApiKey::DescribeQuorum => {
            let topic = describe_quorum_request::TopicData::default()
                .with_topic_name(name("__cluster_metadata"))
                .with_partitions(vec![
                    describe_quorum_request::PartitionData::default().with_partition_index(0)
                ]);
            let r = client.send(
                &DescribeQuorumRequest::default().with_topics(vec![topic]),
                version,
            )?;
            let partitions: Vec<_> = r.topics.iter().flat_map(|t| &t.partitions).collect();
            anyhow::ensure!(
                partitions.len() == 1
                    && partitions[0].leader_id.0 == 1
                    && partitions[0].current_voters.len() == 1
                    && (version < 2 || r.nodes.len() == 1),
                "DescribeQuorum v{version}: {r:?}"
            );
            let mut codes = vec![r.error_code];
            codes.extend(partitions.iter().map(|p| p.error_code));
            codes
        }
        // An id never registered: BROKER_ID_NOT_REGISTERED (102).
        ApiKey::UnregisterBroker => {
            let r = client.send(
                &UnregisterBrokerRequest::default().with_broker_id(BrokerId(4242)),
                version,
            )?;
            anyhow::ensure!(r.error_code == 102, "UnregisterBroker v{version}: {r:?}");
            vec![0]
        }
        // Already at level 1: a no-op upgrade, checked only.
        ApiKey::UpdateFeatures => {
            let update = update_features_request::FeatureUpdateKey::default()
                .with_feature(StrBytes::from_static_str(
                    "eligible.leader.replicas.version",
                ))
                .with_max_version_level(1)
                .with_upgrade_type(1);
            let r = client.send(
                &UpdateFeaturesRequest::default()
                    .with_timeout_ms(10_000)
                    .with_validate_only(version >= 1)
                    .with_feature_updates(vec![update]),
                version,
            )?;
            anyhow::ensure!(
                r.results.len() == usize::from(version <= 1),
                "UpdateFeatures v{version}: {r:?}"
            );
            let mut codes = vec![r.error_code];
            codes.extend(r.results.iter().map(|f| f.error_code));
            codes
        }
        // Another cluster's id: refused before anything changes.
        ApiKey::AddRaftVoter => {
            let r = client.send(
                &AddRaftVoterRequest::default()
                    .with_cluster_id(Some(StrBytes::from_static_str("not-this-cluster")))
                    .with_voter_id(4242)
                    .with_voter_directory_id(uuid::Uuid::from_u128(7)),
                version,
            )?;
            anyhow::ensure!(r.error_code == 104, "AddRaftVoter v{version}: {r:?}");
            vec![0]
        }
        ApiKey::RemoveRaftVoter => {
            let r = client.send(
                &RemoveRaftVoterRequest::default()
                    .with_cluster_id(Some(StrBytes::from_static_str("not-this-cluster")))
                    .with_voter_id(4242)
                    .with_voter_directory_id(uuid::Uuid::from_u128(7)),
                version,
            )?;
            anyhow::ensure!(r.error_code == 104, "RemoveRaftVoter v{version}: {r:?}");
            vec![0]
        }
        ApiKey::UpdateRaftVoter => {
            let r = client.send(
                &UpdateRaftVoterRequest::default()
                    .with_cluster_id(Some(StrBytes::from_static_str("not-this-cluster")))
                    .with_voter_id(4242)
                    .with_voter_directory_id(uuid::Uuid::from_u128(7)),
                version,
            )?;
            anyhow::ensure!(r.error_code == 104, "UpdateRaftVoter v{version}: {r:?}");
            vec![0]
        }
        ApiKey::DescribeTopicPartitions => {
            let r = client.send(
                &DescribeTopicPartitionsRequest::default().with_topics(vec![
                    describe_topic_partitions_request::TopicRequest::default()
                        .with_name(name(TOPIC)),
                ]),
                version,
            )?;
            let partitions: Vec<_> = r.topics.iter().flat_map(|t| &t.partitions).collect();
            anyhow::ensure!(
                partitions.len() == 1 && partitions[0].eligible_leader_replicas.is_some(),
                "DescribeTopicPartitions v{version}: {r:?}"
            );
            let mut codes: Vec<i16> = r.topics.iter().map(|t| t.error_code).collect();
            codes.extend(partitions.iter().map(|p| p.error_code));
            codes
        }
        ApiKey::DescribeClientQuotas => {
            let r = client.send(&DescribeClientQuotasRequest::default(), version)?;
            anyhow::ensure!(
                r.error_code == 0 && r.entries.is_some(),
                "DescribeClientQuotas v{version}: {r:?}"
            );
            vec![r.error_code]
        }
        // validate_only: the sweep changes nothing.
        ApiKey::AlterClientQuotas => {
            let entry = alter_client_quotas_request::EntryData::default()
                .with_entity(vec![alter_client_quotas_request::EntityData::default()
                    .with_entity_type(StrBytes::from_static_str("client-id"))
                    .with_entity_name(Some(StrBytes::from_static_str("sweep")))])
                .with_ops(vec![alter_client_quotas_request::OpData::default()
                    .with_key(StrBytes::from_static_str("producer_byte_rate"))
                    .with_value(1024.0)]);
            let r = client.send(
                &AlterClientQuotasRequest::default()
                    .with_entries(vec![entry])
                    .with_validate_only(true),
                version,
            )?;
            let codes: Vec<i16> = r.entries.iter().map(|e| e.error_code).collect();
            anyhow::ensure!(codes == vec![0], "AlterClientQuotas v{version}: {r:?}");
            codes
        }
        ApiKey::ShareGroupHeartbeat => vec![share_join(client, "sweep-share", version)?],
        ApiKey::ShareGroupDescribe => {
            share_join(client, "sweep-share", 1)?;
            let r = client.send(
                &ShareGroupDescribeRequest::default()
                    .with_group_ids(vec![GroupId(StrBytes::from_static_str("sweep-share"))]),
                version,
            )?;
            r.groups.iter().map(|g| g.error_code).collect()
        }
        ApiKey::ShareFetch => {
            let r = client.send(&share_fetch(topic_id, "sweep-fetch", 0), version)?;
            let mut codes = vec![r.0.error_code];
            codes.extend(
                r.0.responses
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            );
            codes
        }
        ApiKey::ShareAcknowledge => {
            // A session first (epoch 0), then an acknowledgement of nothing at epoch 1.
            client.send(&share_fetch(topic_id, "sweep-ack", 0), 1)?;
            let body = ShareAcknowledgeRequest::default()
                .with_group_id(Some(GroupId(StrBytes::from_static_str("sweep-share"))))
                .with_member_id(Some(StrBytes::from_static_str("sweep-ack")))
                .with_share_session_epoch(1);
            let r = client.send(&ShareAcknowledgeRequestWire::from(body), version)?;
            vec![r.body.error_code]
        }
        ApiKey::InitializeShareGroupState => {
            use kafka_protocol::messages::initialize_share_group_state_request::{
                InitializeStateData, PartitionData,
            };
            let r = client.send(
                &InitializeShareGroupStateRequest::default()
                    .with_group_id(StrBytes::from_static_str("sweep-state"))
                    .with_topics(vec![InitializeStateData::default()
                        .with_topic_id(topic_id)
                        .with_partitions(vec![PartitionData::default().with_partition(0)])]),
                version,
            )?;
            r.results
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect()
        }
        ApiKey::ReadShareGroupState => {
            use kafka_protocol::messages::read_share_group_state_request::{
                PartitionData, ReadStateData,
            };
            let r = client.send(
                &ReadShareGroupStateRequest::default()
                    .with_group_id(StrBytes::from_static_str("sweep-state"))
                    .with_topics(vec![ReadStateData::default()
                        .with_topic_id(topic_id)
                        .with_partitions(vec![PartitionData::default().with_partition(0)])]),
                version,
            )?;
            r.results
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect()
        }
        ApiKey::WriteShareGroupState => {
            use kafka_protocol::messages::write_share_group_state_request::{
                PartitionData, WriteStateData,
            };
            let r = client.send(
                &WriteShareGroupStateRequest::default()
                    .with_group_id(StrBytes::from_static_str("sweep-write"))
                    .with_topics(vec![WriteStateData::default()
                        .with_topic_id(topic_id)
                        .with_partitions(vec![PartitionData::default().with_partition(0)])]),
                version,
            )?;
            r.results
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect()
        }
        ApiKey::DeleteShareGroupState => {
            use kafka_protocol::messages::delete_share_group_state_request::{
                DeleteStateData, PartitionData,
            };
            let r = client.send(
                &DeleteShareGroupStateRequest::default()
                    .with_group_id(StrBytes::from_static_str("sweep-write"))
                    .with_topics(vec![DeleteStateData::default()
                        .with_topic_id(topic_id)
                        .with_partitions(vec![PartitionData::default().with_partition(0)])]),
                version,
            )?;
            r.results
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect()
        }
        ApiKey::ReadShareGroupStateSummary => {
            use kafka_protocol::messages::read_share_group_state_summary_request::{
                PartitionData, ReadStateSummaryData,
            };
            let r = client.send(
                &ReadShareGroupStateSummaryRequest::default()
                    .with_group_id(StrBytes::from_static_str("sweep-state"))
                    .with_topics(vec![ReadStateSummaryData::default()
                        .with_topic_id(topic_id)
                        .with_partitions(vec![PartitionData::default().with_partition(0)])]),
                version,
            )?;
            r.results
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect()
        }
        ApiKey::DescribeShareGroupOffsets => {
            use kafka_protocol::messages::describe_share_group_offsets_request::{
                DescribeShareGroupOffsetsRequestGroup, DescribeShareGroupOffsetsRequestTopic,
            };
            let body = DescribeShareGroupOffsetsRequest::default().with_groups(vec![
                DescribeShareGroupOffsetsRequestGroup::default()
                    .with_group_id(GroupId(StrBytes::from_static_str("sweep-share")))
                    .with_topics(Some(vec![DescribeShareGroupOffsetsRequestTopic::default()
                        .with_topic_name(name(TOPIC))
                        .with_partitions(vec![0])])),
            ]);
            let r = client.send(&DescribeShareGroupOffsetsRequestWire::from(body), version)?;
            let mut codes: Vec<i16> = r.body.groups.iter().map(|g| g.error_code).collect();
            codes.extend(
                r.body
                    .groups
                    .iter()
                    .flat_map(|g| &g.topics)
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            );
            codes
        }
        ApiKey::AlterShareGroupOffsets => {
            use kafka_protocol::messages::alter_share_group_offsets_request::{
                AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
            };
            let r = client.send(
                &AlterShareGroupOffsetsRequest::default()
                    .with_group_id(GroupId(StrBytes::from_static_str("sweep-alter")))
                    .with_topics(vec![AlterShareGroupOffsetsRequestTopic::default()
                        .with_topic_name(name(TOPIC))
                        .with_partitions(vec![
                            AlterShareGroupOffsetsRequestPartition::default()
                                .with_partition_index(0)
                                .with_start_offset(0),
                        ])]),
                version,
            )?;
            let mut codes = vec![r.error_code];
            codes.extend(
                r.responses
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            );
            codes
        }
        ApiKey::DeleteShareGroupOffsets => {
            use kafka_protocol::messages::delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic;
            let r = client.send(
                &DeleteShareGroupOffsetsRequest::default()
                    .with_group_id(GroupId(StrBytes::from_static_str("sweep-alter")))
                    .with_topics(vec![
                        DeleteShareGroupOffsetsRequestTopic::default().with_topic_name(name(TOPIC))
                    ]),
                version,
            )?;
            let mut codes = vec![r.error_code];
            codes.extend(r.responses.iter().map(|t| t.error_code));
            codes
        }
        other => anyhow::bail!("the sweep has no request for advertised API {other:?}: add one"),
    })
}

#[test]
fn every_advertised_api_version_answers_with_a_decodable_response() -> Result<()> {
    // Behind the authorizer, as a super user: every request also passes the
    // ACL gate (and the ACL APIs are served rather than SECURITY_DISABLED).
    let broker = Broker::start(&[
        "--wal-profile",
        "none",
        "--group-initial-rebalance-delay-ms",
        "0",
        "--authorizer-class-name",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "--super-users",
        "User:ANONYMOUS",
    ])?;
    let mut client = Client::connect(&broker)?;
    client.create_topic(TOPIC)?;
    let mut swept = 0;
    for (key, min, max) in advertised(&mut client)? {
        let api_key =
            ApiKey::try_from(key).map_err(|_| anyhow::anyhow!("unknown key {key} advertised"))?;
        for version in min..=max {
            // A fresh connection per request: a rejected request closes only its own.
            let mut client = Client::connect(&broker)?;
            let codes = exercise(&mut client, api_key, version)
                .with_context(|| format!("{api_key:?} v{version}: {}", broker.log_tail(5)))?;
            anyhow::ensure!(
                codes.iter().all(|c| *c == 0),
                "{api_key:?} v{version} answered error codes {codes:?}"
            );
            swept += 1;
        }
    }
    anyhow::ensure!(swept > 100, "only {swept} (API, version) pairs swept");
    Ok(())
}
