//! Kafka ACLs end to end over the wire: CreateAcls / DescribeAcls /
//! DeleteAcls (SECURITY_DISABLED without an authorizer, INVALID_REQUEST per
//! bad binding), and their enforcement with Kafka's errors — a topic covered
//! by an ACL for someone else is refused (TOPIC_AUTHORIZATION_FAILED) for
//! Produce, Fetch, ListOffsets and Metadata while an open topic in the same
//! request is served; a denied group (GROUP_AUTHORIZATION_FAILED), a denied
//! transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), a denied
//! cluster ALTER or DESCRIBE (CLUSTER_AUTHORIZATION_FAILED: CreateAcls,
//! UnregisterBroker, DescribeQuorum, AlterPartitionReassignments,
//! ListPartitionReassignments, ElectLeaders, a broker throttle); super users pass every
//! check. DescribeTransactions shows only describable topics; a KIP-848
//! heartbeat naming an undescribable topic is refused, and so is the
//! ConsumerGroupDescribe of a group assigned one
//! (TOPIC_AUTHORIZATION_FAILED). In the 3-node cluster an ACL created through one node is
//! enforced by the others (ACLs live in the metadata quorum).
//!
//! The clients here connect over PLAINTEXT, so they are `User:ANONYMOUS`.

mod common;

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use bytes::Bytes;
use common::broker::Broker;
use common::cluster::Cluster;
use common::error_codes::{
    CLUSTER_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, INVALID_REQUEST,
    OPERATION_NOT_ATTEMPTED, SECURITY_DISABLED, TOPIC_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
};
use common::kafka_client::{added_partition_codes, election_codes, new_producer_request, Client};
use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, ElectLeadersRequest, IncrementalAlterConfigsRequest,
    ListPartitionReassignmentsRequest,
};
use kafka_protocol::messages::{
    BrokerId, CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest, DescribeClusterRequest,
    DescribeQuorumRequest, GroupId, InitProducerIdResponse, JoinGroupRequest, ListOffsetsRequest,
    MetadataRequest, TopicName, TransactionalId, UnregisterBrokerRequest,
};
use kafka_protocol::protocol::StrBytes;

const TOPIC: i8 = 2;
const GROUP: i8 = 3;
const CLUSTER: i8 = 4;
const TRANSACTIONAL_ID: i8 = 5;
const ANY: i8 = 1;
const LITERAL: i8 = 3;
const PREFIXED: i8 = 4;
const ALL: i8 = 2;
const READ: i8 = 3;
const WRITE: i8 = 4;
const ALTER: i8 = 7;
const DENY: i8 = 2;
const ALLOW: i8 = 3;

const AUTHORIZER: &[&str] = &[
    "--authorizer-class-name",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "--allow-everyone-if-no-acl-found",
];

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn acl(
    resource_type: i8,
    name: &str,
    pattern: i8,
    principal: &str,
    op: i8,
    perm: i8,
) -> AclCreation {
    AclCreation::default()
        .with_resource_type(resource_type)
        .with_resource_name(s(name))
        .with_resource_pattern_type(pattern)
        .with_principal(s(principal))
        .with_host(s("*"))
        .with_operation(op)
        .with_permission_type(perm)
}

fn create_acls(client: &mut Client, creations: Vec<AclCreation>) -> Result<Vec<i16>> {
    let response = client.send(&CreateAclsRequest::default().with_creations(creations), 3)?;
    Ok(response.results.iter().map(|r| r.error_code).collect())
}

/// A DeleteAcls filter matching every ACL (kafka-protocol defaults the
/// nullable strings to Some(""), which would match only empty fields).
fn match_everything() -> DeleteAclsFilter {
    DeleteAclsFilter::default()
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_resource_type_filter(ANY)
        .with_pattern_type_filter(ANY)
        .with_operation(ANY)
        .with_permission_type(ANY)
}

fn describe_all(client: &mut Client) -> Result<(i16, usize)> {
    let response = client.send(
        &DescribeAclsRequest::default()
            .with_resource_name_filter(None)
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_resource_type_filter(ANY)
            .with_pattern_type_filter(ANY)
            .with_operation(ANY)
            .with_permission_type(ANY),
        3,
    )?;
    Ok((
        response.error_code,
        response.resources.iter().map(|r| r.acls.len()).sum(),
    ))
}

fn metadata_of(client: &mut Client, topics: Option<&[&str]>) -> Result<Vec<(String, i16)>> {
    let request = MetadataRequest::default().with_topics(topics.map(|names| {
        names
            .iter()
            .map(|n| MetadataRequestTopic::default().with_name(Some(TopicName(s(n)))))
            .collect()
    }));
    let response = client.send(&request, 12)?;
    Ok(response
        .topics
        .iter()
        .map(|t| {
            (
                t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default(),
                t.error_code,
            )
        })
        .collect())
}

fn list_offsets(client: &mut Client, topics: &[&str]) -> Result<Vec<(String, i16)>> {
    let request = ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .with_topics(
            topics
                .iter()
                .map(|t| {
                    ListOffsetsTopic::default()
                        .with_name(TopicName(s(t)))
                        .with_partitions(vec![ListOffsetsPartition::default().with_timestamp(-1)])
                })
                .collect(),
        );
    let response = client.send(&request, 7)?;
    Ok(response
        .topics
        .iter()
        .map(|t| (t.name.0.to_string(), t.partitions[0].error_code))
        .collect())
}

/// CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE.
const ALL_CLUSTER_OPERATIONS: i32 =
    (1 << 5) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12);

/// DescribeCluster asking for the authorized operations: (error, operations).
fn describe_cluster(client: &mut Client) -> Result<(i16, i32)> {
    let response = client.send(
        &DescribeClusterRequest::default().with_include_cluster_authorized_operations(true),
        1,
    )?;
    Ok((response.error_code, response.cluster_authorized_operations))
}

fn join_error(client: &mut Client, group: &str) -> Result<i16> {
    let request = JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(s("consumer"));
    Ok(client.send(&request, 5)?.error_code)
}

fn init_txn(client: &mut Client, id: &str) -> Result<InitProducerIdResponse> {
    client.send(&new_producer_request(Some(TransactionalId(s(id)))), 4)
}

fn init_txn_error(client: &mut Client, id: &str) -> Result<i16> {
    Ok(init_txn(client, id)?.error_code)
}

/// AddPartitionsToTxn v3 of partition 0 of each of `topics` to
/// transaction `id` (of the producer `init` made): every partition's code.
fn add_to_txn(
    client: &mut Client,
    id: &str,
    init: &InitProducerIdResponse,
    topics: &[&str],
) -> Result<Vec<i16>> {
    use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
    use kafka_protocol::messages::AddPartitionsToTxnRequest;
    let topics = topics
        .iter()
        .map(|t| {
            AddPartitionsToTxnTopic::default()
                .with_name(TopicName(s(t)))
                .with_partitions(vec![0])
        })
        .collect();
    let response = client.send(
        &AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(s(id)))
            .with_v3_and_below_producer_id(init.producer_id)
            .with_v3_and_below_producer_epoch(init.producer_epoch)
            .with_v3_and_below_topics(topics),
        3,
    )?;
    Ok(added_partition_codes(&response))
}

/// A broker with the authorizer on (everyone allowed where no ACL is
/// found), `topics` created, and a client of it.
fn authorizing_broker_with(topics: &[&str]) -> Result<(Broker, Client)> {
    broker_with(AUTHORIZER, topics)
}

/// A broker started with `args`, `topics` created, and a client of it.
fn broker_with(args: &[&str], topics: &[&str]) -> Result<(Broker, Client)> {
    let broker = Broker::start(args)?;
    let mut client = Client::connect(&broker)?;
    for topic in topics {
        client.create_topic(topic)?;
    }
    Ok((broker, client))
}

/// `authorizing_broker_with`, its KIP-848 groups assigning at once (no
/// initial rebalance delay).
fn kip848_broker_with(topics: &[&str]) -> Result<(Broker, Client)> {
    broker_with(
        &[AUTHORIZER, &["--group-initial-rebalance-delay-ms", "0"]].concat(),
        topics,
    )
}

/// Covers `topic` by an ACL for alice only, so User:ANONYMOUS may do
/// nothing with it.
fn cover_for_alice(client: &mut Client, topic: &str) -> Result<()> {
    let codes = create_acls(
        client,
        vec![acl(TOPIC, topic, LITERAL, "User:alice", READ, ALLOW)],
    )?;
    ensure!(codes == [0], "CreateAcls alice READ on {topic}: {codes:?}");
    Ok(())
}

#[test]
fn without_an_authorizer_the_acl_apis_answer_security_disabled() -> Result<()> {
    let broker = Broker::start(&[])?;
    let mut client = Client::connect(&broker)?;
    let codes = create_acls(
        &mut client,
        vec![acl(TOPIC, "t", LITERAL, "User:alice", READ, ALLOW)],
    )?;
    ensure!(codes == [SECURITY_DISABLED], "CreateAcls: {codes:?}");
    let (code, _) = describe_all(&mut client)?;
    ensure!(code == SECURITY_DISABLED, "DescribeAcls: {code}");
    let response = client.send(
        &DeleteAclsRequest::default().with_filters(vec![match_everything()]),
        3,
    )?;
    ensure!(response.filter_results[0].error_code == SECURITY_DISABLED);
    // and nothing is refused: every request is allowed
    client.create_topic("plain")?;
    let (code, _) = client.produce_values("plain", &[Bytes::from_static(b"x")])?;
    ensure!(code == 0, "produce without an authorizer: {code}");
    Ok(())
}

#[test]
fn acls_are_enforced_with_kafkas_errors() -> Result<()> {
    let broker = Broker::start(AUTHORIZER)?;
    let mut client = Client::connect(&broker)?;
    client.create_topic("open")?;
    client.create_topic("secret")?;

    // one bad binding is refused on its own; the good one is created
    let codes = create_acls(
        &mut client,
        vec![
            acl(TOPIC, "secret", LITERAL, "User:alice", READ, ALLOW),
            acl(TOPIC, "*", PREFIXED, "User:alice", READ, ALLOW),
            acl(TOPIC, "x", LITERAL, "alice", READ, ALLOW),
            acl(GROUP, "denied-group", LITERAL, "User:ANONYMOUS", READ, DENY),
            acl(TRANSACTIONAL_ID, "denied-", PREFIXED, "User:*", WRITE, DENY),
        ],
    )?;
    ensure!(
        codes == [0, INVALID_REQUEST, INVALID_REQUEST, 0, 0],
        "CreateAcls results: {codes:?}"
    );
    let (code, count) = describe_all(&mut client)?;
    ensure!(
        code == 0 && count == 3,
        "DescribeAcls: error {code}, {count} ACLs"
    );

    // "secret" is covered by alice's ACL: ANONYMOUS is refused, "open" is served
    let (code, _) = client.produce_values("secret", &[Bytes::from_static(b"x")])?;
    ensure!(
        code == TOPIC_AUTHORIZATION_FAILED,
        "produce to secret: {code}"
    );
    let (code, _) = client.produce_values("open", &[Bytes::from_static(b"x")])?;
    ensure!(code == 0, "produce to open: {code}");
    let (code, _, _) = client.fetch_from("secret", 0)?;
    ensure!(code == TOPIC_AUTHORIZATION_FAILED, "fetch secret: {code}");
    let (code, _, records) = client.fetch_from("open", 0)?;
    ensure!(code == 0 && !records.is_empty(), "fetch open: {code}");
    let answers = list_offsets(&mut client, &["secret", "open"])?;
    ensure!(
        answers.contains(&("secret".into(), TOPIC_AUTHORIZATION_FAILED))
            && answers.contains(&("open".into(), 0)),
        "ListOffsets: {answers:?}"
    );
    let all = metadata_of(&mut client, None)?;
    ensure!(
        all.iter().any(|(n, _)| n == "open") && !all.iter().any(|(n, _)| n == "secret"),
        "Metadata for all topics must hide secret: {all:?}"
    );
    let named = metadata_of(&mut client, Some(&["secret", "open"]))?;
    ensure!(
        named.contains(&("secret".into(), TOPIC_AUTHORIZATION_FAILED))
            && named.contains(&("open".into(), 0)),
        "Metadata for named topics: {named:?}"
    );

    // groups and transactional ids
    let code = join_error(&mut client, "denied-group")?;
    ensure!(
        code == GROUP_AUTHORIZATION_FAILED,
        "JoinGroup denied-group: {code}"
    );
    let code = client.commit_offset("denied-group", "open", 1)?;
    ensure!(
        code == GROUP_AUTHORIZATION_FAILED,
        "OffsetCommit denied-group: {code}"
    );
    let code = client.commit_offset("open-group", "open", 1)?;
    ensure!(code == 0, "OffsetCommit open-group: {code}");
    let code = init_txn_error(&mut client, "denied-txn")?;
    ensure!(
        code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        "InitProducerId denied-txn: {code}"
    );

    // no ACL covers the cluster yet: every cluster operation is reported allowed
    let ops = describe_cluster(&mut client)?;
    ensure!(
        ops == (0, ALL_CLUSTER_OPERATIONS),
        "DescribeCluster before the DENY: {ops:?}"
    );

    // once the cluster resource has a DENY, ANONYMOUS may no longer change ACLs
    let codes = create_acls(
        &mut client,
        vec![acl(
            CLUSTER,
            "kafka-cluster",
            LITERAL,
            "User:ANONYMOUS",
            ALTER,
            DENY,
        )],
    )?;
    ensure!(codes == [0], "{codes:?}");
    let codes = create_acls(
        &mut client,
        vec![acl(TOPIC, "open", LITERAL, "User:*", ALL, DENY)],
    )?;
    ensure!(
        codes == [CLUSTER_AUTHORIZATION_FAILED],
        "CreateAcls after the DENY: {codes:?}"
    );
    let (code, _) = client.produce_values("open", &[Bytes::from_static(b"y")])?;
    ensure!(code == 0, "the refused ACL must not exist: {code}");
    // the cluster is now covered by an ACL that allows ANONYMOUS nothing:
    // DescribeCluster is still answered (Kafka's rule), with no operations
    let ops = describe_cluster(&mut client)?;
    ensure!(ops == (0, 0), "DescribeCluster after the DENY: {ops:?}");
    // nor DESCRIBE it (DescribeQuorum) or ALTER it (UnregisterBroker)
    let quorum = client.send(
        &DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
            .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
            .with_partitions(vec![PartitionData::default().with_partition_index(0)])]),
        2,
    )?;
    ensure!(
        quorum.error_code == CLUSTER_AUTHORIZATION_FAILED && quorum.topics.is_empty(),
        "DescribeQuorum after the DENY: {quorum:?}"
    );
    let unregister = client.send(
        &UnregisterBrokerRequest::default().with_broker_id(BrokerId(1)),
        0,
    )?;
    ensure!(
        unregister.error_code == CLUSTER_AUTHORIZATION_FAILED,
        "UnregisterBroker after the DENY: {unregister:?}"
    );
    // nor move replicas, list moves, elect leaders or set a broker throttle
    let moved = client.send(
        &AlterPartitionReassignmentsRequest::default().with_topics(vec![
            ReassignableTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(vec![ReassignablePartition::default()
                    .with_partition_index(0)
                    .with_replicas(Some(vec![BrokerId(1)]))]),
        ]),
        1,
    )?;
    ensure!(
        moved.error_code == CLUSTER_AUTHORIZATION_FAILED && moved.responses.is_empty(),
        "AlterPartitionReassignments after the DENY: {moved:?}"
    );
    let listed = client.send(&ListPartitionReassignmentsRequest::default(), 0)?;
    ensure!(
        listed.error_code == CLUSTER_AUTHORIZATION_FAILED,
        "ListPartitionReassignments after the DENY: {listed:?}"
    );
    let elected = client.send(
        &ElectLeadersRequest::default().with_topic_partitions(Some(vec![
            TopicPartitions::default()
                .with_topic(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(vec![0]),
        ])),
        2,
    )?;
    let codes = election_codes(&elected);
    ensure!(
        elected.error_code == CLUSTER_AUTHORIZATION_FAILED
            && codes == [CLUSTER_AUTHORIZATION_FAILED],
        "ElectLeaders after the DENY: {elected:?}"
    );
    let throttle = client.send(
        &IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(4)
                .with_resource_name(StrBytes::from_static_str(""))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(StrBytes::from_static_str(
                        "leader.replication.throttled.rate",
                    ))
                    .with_value(Some(StrBytes::from_static_str("1")))]),
        ]),
        1,
    )?;
    ensure!(
        throttle.responses[0].error_code == CLUSTER_AUTHORIZATION_FAILED,
        "a broker throttle after the DENY: {throttle:?}"
    );
    Ok(())
}

#[test]
fn super_users_pass_and_delete_acls_removes_what_matches() -> Result<()> {
    let mut args = AUTHORIZER.to_vec();
    args.extend(["--super-users", "User:ANONYMOUS"]);
    let broker = Broker::start(&args)?;
    let mut client = Client::connect(&broker)?;
    client.create_topic("t")?;
    let codes = create_acls(
        &mut client,
        vec![
            acl(TOPIC, "t", LITERAL, "User:*", ALL, DENY),
            acl(TOPIC, "t", LITERAL, "User:bob", READ, ALLOW),
        ],
    )?;
    ensure!(codes == [0, 0], "{codes:?}");
    let (code, _) = client.produce_values("t", &[Bytes::from_static(b"x")])?;
    ensure!(code == 0, "a super user ignores DENY: {code}");
    let response = client.send(
        &DeleteAclsRequest::default().with_filters(vec![
            DeleteAclsFilter::default()
                .with_principal_filter(None)
                .with_host_filter(None)
                .with_resource_type_filter(TOPIC)
                .with_resource_name_filter(Some(s("t")))
                .with_pattern_type_filter(LITERAL)
                .with_operation(ANY)
                .with_permission_type(DENY),
            match_everything(),
        ]),
        3,
    )?;
    let removed: Vec<(i16, usize)> = response
        .filter_results
        .iter()
        .map(|r| (r.error_code, r.matching_acls.len()))
        .collect();
    ensure!(removed == [(0, 1), (0, 1)], "DeleteAcls: {removed:?}");
    let (code, count) = describe_all(&mut client)?;
    ensure!(code == 0 && count == 0, "left: {count}");
    Ok(())
}

#[test]
fn an_acl_created_through_one_node_is_enforced_by_every_node() -> Result<()> {
    let mut cluster = Cluster::start(3, AUTHORIZER)?;
    {
        let mut client = Client::connect(cluster.node(1))?;
        client.create_topic_replicated("guarded", 1, 3, &[])?;
        let codes = create_acls(
            &mut client,
            vec![acl(TOPIC, "guarded", LITERAL, "User:alice", WRITE, ALLOW)],
        )?;
        ensure!(codes == [0], "{codes:?}");
    }
    for id in [2, 3] {
        cluster.poll_until(
            Duration::from_secs(15),
            Duration::from_millis(100),
            |cluster| {
                metadata_of(&mut Client::connect(cluster.node(id))?, Some(&["guarded"]))
                    .with_context(|| format!("metadata from node {id}"))
            },
            |named| named == &[("guarded".to_string(), TOPIC_AUTHORIZATION_FAILED)],
            |named| format!("node {id} still answers {named:?} for a topic only alice may use"),
        )?;
    }
    Ok(())
}

/// Grants User:ANONYMOUS DESCRIBE on `topic`.
fn allow_anonymous_describe(client: &mut Client, topic: &str) -> Result<()> {
    let codes = create_acls(
        client,
        vec![acl(
            TOPIC,
            topic,
            LITERAL,
            "User:ANONYMOUS",
            DESCRIBE,
            ALLOW,
        )],
    )?;
    ensure!(codes == [0], "CreateAcls DESCRIBE on {topic}: {codes:?}");
    Ok(())
}
const CLUSTER_ACTION: i8 = 9;
const DESCRIBE: i8 = 8;

/// The holes of the second security pass, each through the version that had
/// it: Metadata v0's empty list (every topic), Metadata v12 naming a topic
/// by id only, FindCoordinator v2 (top-level answer) and v4 (coordinators),
/// OffsetForLeaderEpoch v3 (had no check at all), AddPartitionsToTxn v3
/// (checked the transactional id only, not the topics; an internal topic is
/// never added), TxnOffsetCommit v3
/// (a refused topic refused the whole commit; Kafka commits the others). "secret" carries an
/// ACL for alice only, so User:ANONYMOUS may do nothing with it.
#[test]
fn second_pass_authorization_holes_are_closed() -> Result<()> {
    use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
    use kafka_protocol::messages::offset_for_leader_epoch_request::{
        OffsetForLeaderPartition, OffsetForLeaderTopic,
    };
    use kafka_protocol::messages::txn_offset_commit_request::{
        TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{
        AddPartitionsToTxnRequest, FindCoordinatorRequest, OffsetForLeaderEpochRequest,
        TxnOffsetCommitRequest,
    };

    let broker = Broker::start(AUTHORIZER)?;
    let mut client = Client::connect(&broker)?;
    client.create_topic("open")?;
    client.create_topic("secret")?;
    let secret_id = client.topic_id("secret")?;
    let codes = create_acls(
        &mut client,
        vec![
            acl(TOPIC, "secret", LITERAL, "User:alice", READ, ALLOW),
            acl(GROUP, "denied-group", LITERAL, "User:ANONYMOUS", ALL, DENY),
            // the cluster covered by an ACL: ANONYMOUS has no CLUSTER_ACTION
            // (allow-everyone-if-no-acl-found would grant it otherwise)
            acl(
                CLUSTER,
                "kafka-cluster",
                LITERAL,
                "User:broker",
                CLUSTER_ACTION,
                ALLOW,
            ),
            // ... but may still change ACLs (below)
            acl(
                CLUSTER,
                "kafka-cluster",
                LITERAL,
                "User:ANONYMOUS",
                ALTER,
                ALLOW,
            ),
        ],
    )?;
    ensure!(codes == [0, 0, 0, 0], "CreateAcls: {codes:?}");

    // Metadata v0: an empty list means every topic, and must hide secret
    let v0 = client.send(&MetadataRequest::default().with_topics(Some(vec![])), 0)?;
    let names: Vec<String> = v0
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
        .collect();
    ensure!(
        names.contains(&"open".to_string()) && !names.contains(&"secret".to_string()),
        "Metadata v0 (all topics) must hide secret: {names:?}"
    );

    // Metadata v12 by id: refused, and the answer does not name the topic
    let by_id = client.send(
        &MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_topic_id(secret_id)
        ])),
        12,
    )?;
    ensure!(
        by_id.topics.len() == 1
            && by_id.topics[0].error_code == TOPIC_AUTHORIZATION_FAILED
            && by_id.topics[0].name.is_none()
            && by_id.topics[0].topic_id == secret_id
            && by_id.topics[0].partitions.is_empty(),
        "Metadata v12 by id: {:?}",
        by_id.topics
    );

    // FindCoordinator v2 (librdkafka's) and v4 for a group ANONYMOUS may not describe
    let v2 = client.send(
        &FindCoordinatorRequest::default().with_key(s("denied-group")),
        2,
    )?;
    ensure!(
        v2.error_code == GROUP_AUTHORIZATION_FAILED && v2.node_id.0 == -1 && v2.port == -1,
        "FindCoordinator v2: error {} node {} port {}",
        v2.error_code,
        v2.node_id.0,
        v2.port
    );
    let v2_open = client.send(
        &FindCoordinatorRequest::default().with_key(s("open-group")),
        2,
    )?;
    ensure!(
        v2_open.error_code == 0 && v2_open.node_id.0 >= 0,
        "FindCoordinator v2 open-group: {}",
        v2_open.error_code
    );
    let v4 = client.send(
        &FindCoordinatorRequest::default()
            .with_coordinator_keys(vec![s("denied-group"), s("open-group")]),
        4,
    )?;
    let answers: Vec<(String, i16)> = v4
        .coordinators
        .iter()
        .map(|c| (c.key.to_string(), c.error_code))
        .collect();
    ensure!(
        answers.contains(&("denied-group".into(), GROUP_AUTHORIZATION_FAILED))
            && answers.contains(&("open-group".into(), 0)),
        "FindCoordinator v4: {answers:?}"
    );

    // OffsetForLeaderEpoch v3 from a consumer: DESCRIBE on each topic
    let epoch_request = |topic: &str| {
        OffsetForLeaderTopic::default()
            .with_topic(TopicName(s(topic)))
            .with_partitions(vec![OffsetForLeaderPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(-1)
                .with_leader_epoch(0)])
    };
    let epochs = client.send(
        &OffsetForLeaderEpochRequest::default()
            .with_replica_id((-1).into())
            .with_topics(vec![epoch_request("secret"), epoch_request("open")]),
        3,
    )?;
    let answers: Vec<(String, i16, i64)> = epochs
        .topics
        .iter()
        .map(|t| {
            (
                t.topic.0.to_string(),
                t.partitions[0].error_code,
                t.partitions[0].end_offset,
            )
        })
        .collect();
    ensure!(
        answers.contains(&("secret".into(), TOPIC_AUTHORIZATION_FAILED, -1))
            && answers.iter().any(|(t, code, _)| t == "open" && *code == 0),
        "OffsetForLeaderEpoch v3: {answers:?}"
    );

    // AddPartitionsToTxn v3: a transactional id ANONYMOUS may write, a topic it may not
    let init = client.send(&new_producer_request(Some(TransactionalId(s("txn-ok")))), 4)?;
    ensure!(
        init.error_code == 0,
        "InitProducerId txn-ok: {}",
        init.error_code
    );
    let add = client.send(
        &AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(s("txn-ok")))
            .with_v3_and_below_producer_id(init.producer_id)
            .with_v3_and_below_producer_epoch(init.producer_epoch)
            .with_v3_and_below_topics(vec![
                AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(s("secret")))
                    .with_partitions(vec![0]),
                AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(s("open")))
                    .with_partitions(vec![0]),
            ]),
        3,
    )?;
    let answers: Vec<(String, i16)> = add
        .results_by_topic_v3_and_below
        .iter()
        .map(|t| {
            (
                t.name.0.to_string(),
                t.results_by_partition[0].partition_error_code,
            )
        })
        .collect();
    ensure!(
        answers.contains(&("secret".into(), TOPIC_AUTHORIZATION_FAILED))
            && answers.contains(&("open".into(), OPERATION_NOT_ATTEMPTED)),
        "AddPartitionsToTxn v3: {answers:?}"
    );
    // an internal topic is never added, even with no ACL keeping it closed
    let codes = add_to_txn(&mut client, "txn-ok", &init, &["__consumer_offsets"])?;
    ensure!(
        codes == [TOPIC_AUTHORIZATION_FAILED],
        "AddPartitionsToTxn v3 __consumer_offsets: {codes:?}"
    );
    // TxnOffsetCommit: secret (no READ) refused, open committed next to it
    let commit_to = |topic: &str| {
        TxnOffsetCommitRequestTopic::default()
            .with_name(TopicName(s(topic)))
            .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                .with_committed_offset(0)
                .with_committed_leader_epoch(-1)])
    };
    let commit = client.send(
        &TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(s("txn-ok")))
            .with_group_id(GroupId(s("open-group")))
            .with_producer_id(init.producer_id)
            .with_producer_epoch(init.producer_epoch)
            .with_generation_id(-1)
            .with_topics(vec![commit_to("secret"), commit_to("open")]),
        3,
    )?;
    let answers: Vec<(String, i16)> = commit
        .topics
        .iter()
        .map(|t| (t.name.0.to_string(), t.partitions[0].error_code))
        .collect();
    ensure!(
        answers.contains(&("secret".into(), TOPIC_AUTHORIZATION_FAILED))
            && answers.contains(&("open".into(), 0)),
        "TxnOffsetCommit v3: {answers:?}"
    );
    // nothing was added: ending the transaction writes no marker into secret
    // (DESCRIBE now granted, to read its end offset; WRITE still is not)
    allow_anonymous_describe(&mut client, "secret")?;
    let before = client.log_end_offset("secret")?;
    let end = client.send(
        &kafka_protocol::messages::EndTxnRequest::default()
            .with_transactional_id(TransactionalId(s("txn-ok")))
            .with_producer_id(init.producer_id)
            .with_producer_epoch(init.producer_epoch)
            .with_committed(false),
        3,
    )?;
    let after = client.log_end_offset("secret")?;
    ensure!(
        after == before,
        "EndTxn (error {}) wrote into secret: end offset {before} -> {after}",
        end.error_code
    );
    Ok(())
}

/// What a KIP-848 member subscribes to when it joins.
enum Subscribe<'a> {
    Regex(&'a str),
    Names(&'a [&'a str]),
}

/// The topic ids a KIP-848 member is assigned after heartbeating (epoch
/// `epoch`, subscribing on a join) until an assignment comes or 10 s pass.
fn member_assignment(
    client: &mut Client,
    group: &str,
    member: &str,
    subscribe: Subscribe<'_>,
) -> Result<std::collections::BTreeSet<uuid::Uuid>> {
    use kafka_protocol::messages::ConsumerGroupHeartbeatRequest;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut epoch = 0;
    let mut assigned = std::collections::BTreeSet::new();
    loop {
        let response = client.send(
            &ConsumerGroupHeartbeatRequest::default()
                .with_group_id(GroupId(s(group)))
                .with_member_id(s(member))
                .with_member_epoch(epoch)
                .with_rebalance_timeout_ms(if epoch == 0 { 30_000 } else { -1 })
                .with_subscribed_topic_regex(match subscribe {
                    Subscribe::Regex(regex) if epoch == 0 => Some(s(regex)),
                    _ => None,
                })
                .with_subscribed_topic_names(match subscribe {
                    Subscribe::Names(names) if epoch == 0 => {
                        Some(names.iter().map(|t| TopicName(s(t))).collect())
                    }
                    _ => None,
                })
                .with_topic_partitions((epoch == 0).then(Vec::new)),
            1, // the regex is a v1 field
        )?;
        ensure!(
            response.error_code == 0,
            "heartbeat: {}",
            response.error_code
        );
        epoch = response.member_epoch;
        if let Some(a) = response.assignment {
            assigned = a.topic_partitions.iter().map(|t| t.topic_id).collect();
            if !assigned.is_empty() {
                return Ok(assigned);
            }
        }
        if Instant::now() > deadline {
            return Ok(assigned);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A KIP-848 regex subscription resolves only to topics the member may
/// DESCRIBE (Kafka's rule), and follows the ACLs as they change: a member
/// with READ on its group is not handed a topic it may not describe.
#[test]
fn a_regex_subscription_gets_only_describable_topics() -> Result<()> {
    let (_broker, mut client) = kip848_broker_with(&["rx-open", "rx-secret"])?;
    let open = client.topic_id("rx-open")?;
    let secret = client.topic_id("rx-secret")?;
    let codes = create_acls(
        &mut client,
        vec![acl(TOPIC, "rx-secret", LITERAL, "User:alice", READ, ALLOW)],
    )?;
    ensure!(codes == [0], "CreateAcls: {codes:?}");
    let assigned = member_assignment(&mut client, "rx-group", "m1", Subscribe::Regex("rx-.*"))?;
    ensure!(
        assigned == [open].into(),
        "regex rx-.* assigned {assigned:?}; rx-open is {open}, rx-secret (not describable) {secret}"
    );
    // once ANONYMOUS may describe rx-secret, a new member's regex takes it too
    allow_anonymous_describe(&mut client, "rx-secret")?;
    let assigned = member_assignment(&mut client, "rx-group-2", "m2", Subscribe::Regex("rx-.*"))?;
    ensure!(
        assigned == [open, secret].into(),
        "after the DESCRIBE ACL, regex rx-.* assigned {assigned:?}"
    );
    Ok(())
}

/// The topics of transaction `id` as DescribeTransactions shows them.
fn described_txn_topics(client: &mut Client, id: &str) -> Result<Vec<String>> {
    use kafka_protocol::messages::DescribeTransactionsRequest;
    let response = client.send(
        &DescribeTransactionsRequest::default()
            .with_transactional_ids(vec![TransactionalId(s(id))]),
        0,
    )?;
    let state = &response.transaction_states[0];
    ensure!(
        state.error_code == 0,
        "DescribeTransactions {id}: {}",
        state.error_code
    );
    let mut topics: Vec<String> = state.topics.iter().map(|t| t.topic.0.to_string()).collect();
    topics.sort();
    Ok(topics)
}

/// DescribeTransactions shows a transaction's topics only to a caller that
/// may DESCRIBE them (Kafka's handleDescribeTransactionsRequest): the same
/// open transaction lists dt-secret until an ACL for alice covers it.
#[test]
fn a_described_transaction_shows_only_describable_topics() -> Result<()> {
    let (_broker, mut client) = authorizing_broker_with(&["dt-open", "dt-secret"])?;
    let init = init_txn(&mut client, "dt-txn")?;
    ensure!(init.error_code == 0, "InitProducerId: {}", init.error_code);
    let codes = add_to_txn(&mut client, "dt-txn", &init, &["dt-open", "dt-secret"])?;
    ensure!(codes == [0, 0], "AddPartitionsToTxn: {codes:?}");
    let topics = described_txn_topics(&mut client, "dt-txn")?;
    ensure!(
        topics == ["dt-open", "dt-secret"],
        "before any ACL on dt-secret: {topics:?}"
    );
    cover_for_alice(&mut client, "dt-secret")?;
    let topics = described_txn_topics(&mut client, "dt-txn")?;
    ensure!(
        topics == ["dt-open"],
        "dt-secret is not describable by ANONYMOUS any more: {topics:?}"
    );
    Ok(())
}

/// A KIP-848 heartbeat subscribing by name to a topic the member may not
/// DESCRIBE is refused whole with TOPIC_AUTHORIZATION_FAILED (Kafka 4.0,
/// KAFKA-18813), although the member may READ its group; the same member
/// subscribing to describable topics only joins.
#[test]
fn a_heartbeat_naming_an_undescribable_topic_is_refused() -> Result<()> {
    use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};

    let (_broker, mut client) = authorizing_broker_with(&["hb-open", "hb-secret"])?;
    cover_for_alice(&mut client, "hb-secret")?;
    let mut join = |topics: &[&str]| -> Result<ConsumerGroupHeartbeatResponse> {
        client.send(
            &ConsumerGroupHeartbeatRequest::default()
                .with_group_id(GroupId(s("hb-group")))
                .with_member_id(s("hb-member"))
                .with_member_epoch(0)
                .with_rebalance_timeout_ms(30_000)
                .with_subscribed_topic_names(Some(topics.iter().map(|t| TopicName(s(t))).collect()))
                .with_topic_partitions(Some(Vec::new())),
            1,
        )
    };
    let refused = join(&["hb-open", "hb-secret"])?;
    ensure!(
        refused.error_code == TOPIC_AUTHORIZATION_FAILED && refused.assignment.is_none(),
        "subscribing to hb-secret: error {}, assignment {:?}",
        refused.error_code,
        refused.assignment
    );
    let joined = join(&["hb-open"])?;
    ensure!(
        joined.error_code == 0 && joined.member_epoch >= 1,
        "subscribing to hb-open only: error {}, epoch {}",
        joined.error_code,
        joined.member_epoch
    );
    Ok(())
}

/// ConsumerGroupDescribe of cgd-secret-group and cgd-open-group: each
/// group's id, error and the topics its members are assigned.
fn described_groups(client: &mut Client) -> Result<Vec<(String, i16, Vec<String>)>> {
    use kafka_protocol::messages::ConsumerGroupDescribeRequest;
    let response = client.send(
        &ConsumerGroupDescribeRequest::default().with_group_ids(vec![
            GroupId(s("cgd-secret-group")),
            GroupId(s("cgd-open-group")),
        ]),
        0,
    )?;
    Ok(response
        .groups
        .iter()
        .map(|g| {
            let topics = g
                .members
                .iter()
                .flat_map(|m| &m.assignment.topic_partitions)
                .map(|t| t.topic_name.0.to_string())
                .collect();
            (g.group_id.0.to_string(), g.error_code, topics)
        })
        .collect())
}

/// ConsumerGroupDescribe answers TOPIC_AUTHORIZATION_FAILED, and nothing
/// else of the group, for a group whose member is assigned a topic the
/// caller may not DESCRIBE, although the caller may DESCRIBE the group
/// (Kafka 4.0, KAFKA-18813); another group in the same request is
/// described, and so is the first once an ACL lets the caller DESCRIBE the
/// topic.
#[test]
fn a_group_assigned_an_undescribable_topic_is_not_described() -> Result<()> {
    let (_broker, mut client) = kip848_broker_with(&["cgd-open", "cgd-secret"])?;
    for (group, topic) in [
        ("cgd-secret-group", "cgd-secret"),
        ("cgd-open-group", "cgd-open"),
    ] {
        let assigned = member_assignment(&mut client, group, "m1", Subscribe::Names(&[topic]))?;
        ensure!(
            !assigned.is_empty(),
            "{group} was assigned nothing of {topic}"
        );
    }
    cover_for_alice(&mut client, "cgd-secret")?;
    let groups = described_groups(&mut client)?;
    ensure!(
        groups
            == [
                (
                    "cgd-secret-group".into(),
                    TOPIC_AUTHORIZATION_FAILED,
                    vec![]
                ),
                ("cgd-open-group".into(), 0, vec!["cgd-open".into()]),
            ],
        "cgd-secret is not describable by ANONYMOUS: {groups:?}"
    );
    allow_anonymous_describe(&mut client, "cgd-secret")?;
    let groups = described_groups(&mut client)?;
    ensure!(
        groups
            == [
                ("cgd-secret-group".into(), 0, vec!["cgd-secret".into()]),
                ("cgd-open-group".into(), 0, vec!["cgd-open".into()]),
            ],
        "after the DESCRIBE ACL on cgd-secret: {groups:?}"
    );
    Ok(())
}
