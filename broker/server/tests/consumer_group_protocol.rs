//! KIP-848 consumer groups over the wire (ConsumerGroupHeartbeat,
//! ConsumerGroupDescribe) against the real binary: two members split a
//! topic without ever owning a partition twice, one leaves and the other
//! gets everything; a wrong epoch is fenced; an unknown assignor, a bad
//! regex, a classic JoinGroup into the group whose metadata is not a
//! ConsumerProtocolSubscription (and a KIP-848 join into a classic group
//! still rebalancing) and a stale-epoch commit are refused at once; the
//! --group-consumer-* flags bound the group (and what one member may
//! subscribe to) and expire a silent member. Online migration: a Stable
//! classic group is upgraded by a joining KIP-848 member, its classic member
//! rejoins inside the consumer group and shares the partitions, and the
//! group is downgraded when the KIP-848 member leaves; a classic consumer
//! joins a KIP-848 group as a classic member; with the policy `disabled`
//! the upgrade is refused. The real-client view is
//! tests/python/test_consumer_protocol.py.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use common::broker::Broker;
use common::kafka_client::Client;
use common::kip848::{group_id, Member};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedPartitions;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerProtocolAssignment, ConsumerProtocolSubscription,
    DescribeGroupsRequest, HeartbeatRequest, JoinGroupRequest, JoinGroupResponse,
    ListGroupsRequest, OffsetCommitRequest, SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use uuid::Uuid;

const TOPIC: &str = "kip848";
const PARTITIONS: i32 = 6;
const UNKNOWN_MEMBER_ID: i16 = 25;
const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
const GROUP_ID_NOT_FOUND: i16 = 69;
const FENCED_MEMBER_EPOCH: i16 = 110;
const UNSUPPORTED_ASSIGNOR: i16 = 112;
const STALE_MEMBER_EPOCH: i16 = 113;
const INVALID_REGULAR_EXPRESSION: i16 = 128;
const INVALID_REQUEST: i16 = 42;
const GROUP_MAX_SIZE_REACHED: i16 = 81;
const ILLEGAL_GENERATION: i16 = 22;
const REBALANCE_IN_PROGRESS: i16 = 27;
/// chronik_coordinator_state::MAX_SUBSCRIBED_TOPICS
const MAX_SUBSCRIBED_TOPICS: usize = 10_000;

/// OffsetCommit of offset 0 for partition 0 of the test topic.
fn commit_request(group: &str, member_id: &str, epoch: i32) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(group_id(group))
        .with_member_id(StrBytes::from_string(member_id.to_string()))
        .with_generation_id_or_member_epoch(epoch)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(0)])])
}

/// A classic JoinGroup of a new member.
fn classic_join(group: &str) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(group_id(group))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(StrBytes::from_static_str("range"))
            .with_metadata(Default::default())])
}

fn start() -> Result<(Broker, Client, Uuid)> {
    start_with(&[])
}

/// A broker with `flags` added, and the test topic.
fn start_with(flags: &[&str]) -> Result<(Broker, Client, Uuid)> {
    let mut args = vec![
        "--wal-profile",
        "none",
        "--group-initial-rebalance-delay-ms",
        "0",
    ];
    args.extend_from_slice(flags);
    let broker = Broker::start(&args)?;
    let mut client = Client::connect(&broker)?;
    client.create_topic_replicated(TOPIC, PARTITIONS, 1, &[])?;
    let topic_id = client.topic_id(TOPIC)?;
    Ok((broker, client, topic_id))
}

#[test]
fn two_members_split_the_partitions_and_one_inherits_all_when_the_other_leaves() -> Result<()> {
    let (_broker, mut client, topic_id) = start()?;
    let all: BTreeSet<i32> = (0..PARTITIONS).collect();
    let mut a = Member::new("split", TOPIC);
    let mut b = Member::new("split", TOPIC);
    a.beat(&mut client, topic_id)?;
    ensure!(
        a.owned == all,
        "the first member gets everything: {:?}",
        a.owned
    );
    // After every heartbeat (b's join first), no partition is owned by both.
    for step in 0..20 {
        let (member, other) = if step % 2 == 0 {
            (&mut b, &a)
        } else {
            (&mut a, &b)
        };
        member.beat(&mut client, topic_id)?;
        ensure!(
            member.owned.is_disjoint(&other.owned),
            "step {step}: a partition owned twice: {:?} and {:?}",
            member.owned,
            other.owned
        );
    }
    ensure!(
        a.owned.len() == 3 && b.owned.len() == 3,
        "a {:?} b {:?}",
        a.owned,
        b.owned
    );
    ensure!(
        a.epoch == b.epoch,
        "both at the assignment epoch: {} {}",
        a.epoch,
        b.epoch
    );

    let described = client.send(
        &ConsumerGroupDescribeRequest::default().with_group_ids(vec![group_id("split")]),
        1,
    )?;
    let g = &described.groups[0];
    ensure!(
        g.error_code == 0 && g.group_state.as_str() == "Stable",
        "{g:?}"
    );
    ensure!(
        g.members.len() == 2 && g.assignor_name.as_str() == "uniform",
        "{g:?}"
    );
    let listed = client.send(&ListGroupsRequest::default(), 5)?;
    ensure!(
        listed.groups.iter().any(|l| l.group_id.as_str() == "split"
            && l.group_type.as_str() == "consumer"
            && l.protocol_type.as_str() == "consumer"),
        "{listed:?}"
    );

    let left = client.send(&b.request(topic_id).with_member_epoch(-1), 1)?;
    ensure!(left.error_code == 0 && left.member_epoch == -1, "{left:?}");
    let before = a.epoch;
    a.beat(&mut client, topic_id)?;
    ensure!(
        a.owned == all,
        "the remaining member gets everything: {:?}",
        a.owned
    );
    ensure!(a.epoch > before, "a new epoch: {} → {}", before, a.epoch);
    Ok(())
}

#[test]
fn wrong_epochs_and_unknown_members_are_fenced() -> Result<()> {
    let (_broker, mut client, topic_id) = start()?;
    let mut a = Member::new("fence", TOPIC);
    a.beat(&mut client, topic_id)?;
    let r = client.send(&a.request(topic_id).with_member_epoch(a.epoch + 5), 1)?;
    ensure!(r.error_code == FENCED_MEMBER_EPOCH, "{r:?}");
    let stranger = Member {
        epoch: 1,
        ..Member::new("fence", TOPIC)
    };
    let r = client.send(&stranger.request(topic_id), 1)?;
    ensure!(r.error_code == UNKNOWN_MEMBER_ID, "{r:?}");
    // The right epoch still works.
    a.beat(&mut client, topic_id)?;
    Ok(())
}

#[test]
fn bad_joins_classic_takeovers_and_stale_commits_are_refused() -> Result<()> {
    let (_broker, mut client, topic_id) = start()?;
    let member = Member::new("refused", TOPIC);
    let r = client.send(
        &member
            .request(topic_id)
            .with_server_assignor(Some(StrBytes::from_static_str("sticky"))),
        1,
    )?;
    ensure!(r.error_code == UNSUPPORTED_ASSIGNOR, "{r:?}");
    let r = client.send(
        &member
            .request(topic_id)
            .with_subscribed_topic_names(None)
            .with_subscribed_topic_regex(Some(StrBytes::from_static_str("kip(848"))),
        1,
    )?;
    ensure!(r.error_code == INVALID_REGULAR_EXPRESSION, "{r:?}");
    let described = client.send(
        &ConsumerGroupDescribeRequest::default().with_group_ids(vec![group_id("refused")]),
        0,
    )?;
    ensure!(
        described.groups[0].error_code == GROUP_ID_NOT_FOUND,
        "{described:?}"
    );

    let mut a = Member::new("refused", TOPIC);
    a.beat(&mut client, topic_id)?;
    // Empty metadata: not a consumer subscription the group could serve.
    let join = client.send(&classic_join("refused"), 5)?;
    ensure!(join.error_code == INCONSISTENT_GROUP_PROTOCOL, "{join:?}");
    let classic_view = client.send(
        &DescribeGroupsRequest::default().with_groups(vec![group_id("refused")]),
        6,
    )?;
    ensure!(
        classic_view.groups[0].error_code == GROUP_ID_NOT_FOUND,
        "DescribeGroups on a consumer group: {classic_view:?}"
    );

    // The other way round: a classic group whose rebalance has not
    // completed (no SyncGroup yet) cannot be upgraded.
    let classic = client.send(&classic_join("classic"), 3)?;
    ensure!(classic.error_code == 0, "{classic:?}");
    let r = client.send(&Member::new("classic", TOPIC).request(topic_id), 1)?;
    ensure!(r.error_code == GROUP_ID_NOT_FOUND, "{r:?}");

    let commit = |member_id: &str, epoch: i32| commit_request("refused", member_id, epoch);
    let codes = |r: kafka_protocol::messages::OffsetCommitResponse| -> BTreeMap<i32, i16> {
        r.topics[0]
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.error_code))
            .collect()
    };
    let stale = codes(client.send(&commit(&a.id, a.epoch - 1), 9)?);
    ensure!(stale[&0] == STALE_MEMBER_EPOCH, "{stale:?}");
    let unknown = codes(client.send(&commit("nobody", a.epoch), 9)?);
    ensure!(unknown[&0] == UNKNOWN_MEMBER_ID, "{unknown:?}");
    let current = codes(client.send(&commit(&a.id, a.epoch), 9)?);
    ensure!(current[&0] == 0, "{current:?}");
    Ok(())
}

#[test]
fn the_group_size_bound_and_the_session_timeout_come_from_the_flags() -> Result<()> {
    let (_broker, mut client, topic_id) = start_with(&[
        "--group-consumer-max-size",
        "2",
        "--group-consumer-session-timeout-ms",
        "1000",
        "--group-consumer-heartbeat-interval-ms",
        "250",
    ])?;
    let mut a = Member::new("bounded", TOPIC);
    let mut b = Member::new("bounded", TOPIC);
    let r = a.beat(&mut client, topic_id)?;
    ensure!(r.heartbeat_interval_ms == 250, "{r:?}");
    b.beat(&mut client, topic_id)?;
    let c = Member::new("bounded", TOPIC);
    let r = client.send(&c.request(topic_id), 1)?;
    ensure!(r.error_code == GROUP_MAX_SIZE_REACHED, "{r:?}");
    let too_many: Vec<TopicName> = (0..=MAX_SUBSCRIBED_TOPICS)
        .map(|i| TopicName(StrBytes::from_string(format!("t{i}"))))
        .collect();
    let r = client.send(
        &Member::new("other", TOPIC)
            .request(topic_id)
            .with_subscribed_topic_names(Some(too_many)),
        1,
    )?;
    ensure!(r.error_code == INVALID_REQUEST, "{r:?}");
    let r = client.send(
        &Member::new("other", TOPIC)
            .request(topic_id)
            .with_subscribed_topic_regex(Some(StrBytes::from_string("a".repeat(2048)))),
        1,
    )?;
    ensure!(r.error_code == INVALID_REGULAR_EXPRESSION, "{r:?}");

    // a falls silent: after the session timeout b gets everything.
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.owned.len() < PARTITIONS as usize {
        ensure!(
            Instant::now() < deadline,
            "b never got a's partitions: {:?}",
            b.owned
        );
        std::thread::sleep(Duration::from_millis(200));
        b.beat(&mut client, topic_id)?;
    }
    let r = client.send(&a.request(topic_id), 1)?;
    ensure!(r.error_code == UNKNOWN_MEMBER_ID, "a was removed: {r:?}");
    Ok(())
}

/// A ConsumerProtocolSubscription (v1) to the test topic, owning nothing
/// (an eager client).
fn subscription() -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(1);
    ConsumerProtocolSubscription::default()
        .with_topics(vec![StrBytes::from_static_str(TOPIC)])
        .encode(&mut buf, 1)
        .expect("a subscription encodes");
    buf.freeze()
}

fn assignment(partitions: &BTreeSet<i32>) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    ConsumerProtocolAssignment::default()
        .with_assigned_partitions(vec![AssignedPartitions::default()
            .with_topic(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_partitions(partitions.iter().copied().collect())])
        .encode(&mut buf, 0)
        .expect("an assignment encodes");
    buf.freeze()
}

fn assigned(mut bytes: Bytes) -> Result<BTreeSet<i32>> {
    ensure!(bytes.remaining() >= 2, "no assignment: {bytes:?}");
    let version = bytes.get_i16();
    let decoded = ConsumerProtocolAssignment::decode(&mut bytes, version)?;
    Ok(decoded
        .assigned_partitions
        .iter()
        .filter(|tp| tp.topic.as_str() == TOPIC)
        .flat_map(|tp| tp.partitions.iter().copied())
        .collect())
}

/// A classic member speaking the embedded consumer protocol (JoinGroup
/// v3: no MEMBER_ID_REQUIRED round trip).
struct ClassicMember {
    group: String,
    id: String,
    generation: i32,
}

impl ClassicMember {
    fn join(&mut self, client: &mut Client) -> Result<JoinGroupResponse> {
        let request = classic_join(&self.group)
            .with_member_id(StrBytes::from_string(self.id.clone()))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(StrBytes::from_static_str("range"))
                .with_metadata(subscription())]);
        let r = client.send(&request, 3)?;
        ensure!(r.error_code == 0, "{} join: {r:?}", self.id);
        self.id = r.member_id.to_string();
        self.generation = r.generation_id;
        Ok(r)
    }

    /// SyncGroup; the leader hands `give` to itself.
    fn sync(&self, client: &mut Client, give: Option<&BTreeSet<i32>>) -> Result<BTreeSet<i32>> {
        let assignments = give
            .map(|p| {
                vec![SyncGroupRequestAssignment::default()
                    .with_member_id(StrBytes::from_string(self.id.clone()))
                    .with_assignment(assignment(p))]
            })
            .unwrap_or_default();
        let request = SyncGroupRequest::default()
            .with_group_id(group_id(&self.group))
            .with_generation_id(self.generation)
            .with_member_id(StrBytes::from_string(self.id.clone()))
            .with_assignments(assignments);
        let r = client.send(&request, 3)?;
        ensure!(r.error_code == 0, "{} sync: {r:?}", self.id);
        assigned(r.assignment)
    }

    fn heartbeat(&self, client: &mut Client) -> Result<i16> {
        let request = HeartbeatRequest::default()
            .with_group_id(group_id(&self.group))
            .with_generation_id(self.generation)
            .with_member_id(StrBytes::from_string(self.id.clone()));
        Ok(client.send(&request, 3)?.error_code)
    }
}

fn group_type(client: &mut Client, group: &str) -> Result<(String, String)> {
    let listed = client.send(&ListGroupsRequest::default(), 5)?;
    let g = listed
        .groups
        .iter()
        .find(|l| l.group_id.as_str() == group)
        .ok_or_else(|| anyhow::anyhow!("{group} not listed: {listed:?}"))?;
    Ok((g.group_type.to_string(), g.group_state.to_string()))
}

/// A Stable classic group of one member owning every partition.
fn stable_classic_group(client: &mut Client, group: &str) -> Result<ClassicMember> {
    let mut classic = ClassicMember {
        group: group.to_string(),
        id: String::new(),
        generation: -1,
    };
    let joined = classic.join(client)?;
    ensure!(joined.leader == joined.member_id, "{joined:?}");
    let all: BTreeSet<i32> = (0..PARTITIONS).collect();
    ensure!(classic.sync(client, Some(&all))? == all);
    Ok(classic)
}

#[test]
fn a_classic_group_is_upgraded_online_and_downgraded_when_the_consumer_member_leaves() -> Result<()>
{
    let (_broker, mut client, topic_id) = start()?;
    let all: BTreeSet<i32> = (0..PARTITIONS).collect();
    let mut classic = stable_classic_group(&mut client, "migrating")?;
    ensure!(classic.generation == 1);

    let mut modern = Member::new("migrating", TOPIC);
    modern.beat(&mut client, topic_id)?;
    ensure!(
        modern.owned.is_empty(),
        "the classic member still owns everything: {:?}",
        modern.owned
    );
    ensure!(group_type(&mut client, "migrating")?.0 == "consumer");
    let described = client.send(
        &ConsumerGroupDescribeRequest::default().with_group_ids(vec![group_id("migrating")]),
        1,
    )?;
    let types: BTreeMap<String, i8> = described.groups[0]
        .members
        .iter()
        .map(|m| (m.member_id.to_string(), m.member_type))
        .collect();
    ensure!(
        types == BTreeMap::from([(classic.id.clone(), 0), (modern.id.clone(), 1)]),
        "member types: {types:?}"
    );

    // The classic member commits at its generation, is told to rejoin,
    // rejoins (having revoked everything) and gets its share.
    let commit =
        |member_id: &str, generation: i32| commit_request("migrating", member_id, generation);
    let r = client.send(&commit(&classic.id, 1), 8)?;
    ensure!(r.topics[0].partitions[0].error_code == 0, "{r:?}");
    let r = client.send(&commit(&classic.id, 7), 8)?;
    ensure!(
        r.topics[0].partitions[0].error_code == ILLEGAL_GENERATION,
        "{r:?}"
    );
    ensure!(classic.heartbeat(&mut client)? == REBALANCE_IN_PROGRESS);
    let rejoined = classic.join(&mut client)?;
    ensure!(
        rejoined.generation_id == modern.epoch && rejoined.leader != rejoined.member_id,
        "generation = member epoch, as a follower: {rejoined:?}"
    );
    let mine = classic.sync(&mut client, None)?;
    ensure!(classic.heartbeat(&mut client)? == 0);
    modern.beat(&mut client, topic_id)?;
    ensure!(
        mine.is_disjoint(&modern.owned) && !mine.is_empty() && !modern.owned.is_empty(),
        "classic {mine:?} consumer {:?}",
        modern.owned
    );
    ensure!(
        mine.union(&modern.owned)
            .copied()
            .collect::<BTreeSet<i32>>()
            == all,
        "classic {mine:?} consumer {:?}",
        modern.owned
    );

    // The last consumer-protocol member leaves: the group turns classic and
    // its member rejoins as the leader of a new generation.
    let left = client.send(&modern.request(topic_id).with_member_epoch(-1), 1)?;
    ensure!(left.error_code == 0, "{left:?}");
    ensure!(
        group_type(&mut client, "migrating")?
            == ("classic".to_string(), "PreparingRebalance".to_string())
    );
    ensure!(classic.heartbeat(&mut client)? == REBALANCE_IN_PROGRESS);
    let before = classic.generation;
    let rejoined = classic.join(&mut client)?;
    ensure!(
        rejoined.leader == rejoined.member_id && classic.generation == before + 1,
        "{rejoined:?}"
    );
    ensure!(classic.sync(&mut client, Some(&all))? == all);
    Ok(())
}

#[test]
fn the_disabled_policy_refuses_to_upgrade() -> Result<()> {
    let (_broker, mut client, topic_id) =
        start_with(&["--group-consumer-migration-policy", "disabled"])?;
    stable_classic_group(&mut client, "kept")?;
    let r = client.send(&Member::new("kept", TOPIC).request(topic_id), 1)?;
    ensure!(r.error_code == GROUP_ID_NOT_FOUND, "{r:?}");
    ensure!(group_type(&mut client, "kept")?.0 == "classic");
    Ok(())
}

#[test]
fn a_classic_consumer_joins_a_consumer_group_as_a_classic_member() -> Result<()> {
    let (_broker, mut client, topic_id) = start()?;
    let all: BTreeSet<i32> = (0..PARTITIONS).collect();
    let mut modern = Member::new("mixed", TOPIC);
    modern.beat(&mut client, topic_id)?;
    ensure!(modern.owned == all);
    let mut classic = ClassicMember {
        group: "mixed".to_string(),
        id: String::new(),
        generation: -1,
    };
    let joined = classic.join(&mut client)?;
    ensure!(
        joined.generation_id == modern.epoch + 1 && joined.members.is_empty(),
        "a follower at the new group epoch: {joined:?}"
    );
    ensure!(
        classic.sync(&mut client, None)?.is_empty(),
        "everything is still owned by the consumer member"
    );
    // The consumer member revokes; the classic one is told to rejoin for
    // the partitions that became free.
    for _ in 0..2 {
        modern.beat(&mut client, topic_id)?;
    }
    ensure!(modern.owned.len() == 3, "{:?}", modern.owned);
    ensure!(classic.heartbeat(&mut client)? == REBALANCE_IN_PROGRESS);
    classic.join(&mut client)?;
    let mine = classic.sync(&mut client, None)?;
    ensure!(
        mine.is_disjoint(&modern.owned) && mine.len() == 3,
        "classic {mine:?} consumer {:?}",
        modern.owned
    );
    ensure!(group_type(&mut client, "mixed")?.0 == "consumer");
    Ok(())
}
