//! KIP-848 consumer groups over the wire (ConsumerGroupHeartbeat,
//! ConsumerGroupDescribe) against the real binary: two members split a
//! topic without ever owning a partition twice, one leaves and the other
//! gets everything; a wrong epoch is fenced; an unknown assignor, a bad
//! regex, a classic JoinGroup into the group (and a KIP-848 join into a
//! classic group) and a stale-epoch commit are refused at once; the
//! --group-consumer-* flags bound the group (and what one member may
//! subscribe to) and expire a silent member. The real-client view is
//! tests/python/test_consumer_protocol.py.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use common::broker::Broker;
use common::kafka_client::Client;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
    DescribeGroupsRequest, GroupId, JoinGroupRequest, ListGroupsRequest, OffsetCommitRequest,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
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
/// chronik_coordinator::MAX_SUBSCRIBED_TOPICS
const MAX_SUBSCRIBED_TOPICS: usize = 10_000;

fn group_id(group: &str) -> GroupId {
    GroupId(StrBytes::from_string(group.to_string()))
}

/// A model consumer: it owns exactly what it was last assigned.
struct Member {
    group: String,
    id: String,
    epoch: i32,
    owned: BTreeSet<i32>,
}

impl Member {
    fn new(group: &str) -> Member {
        Member {
            group: group.to_string(),
            id: Uuid::new_v4().to_string(),
            epoch: 0,
            owned: BTreeSet::new(),
        }
    }

    fn request(&self, topic_id: Uuid) -> ConsumerGroupHeartbeatRequest {
        let owned = TopicPartitions::default()
            .with_topic_id(topic_id)
            .with_partitions(self.owned.iter().copied().collect());
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(group_id(&self.group))
            .with_member_id(StrBytes::from_string(self.id.clone()))
            .with_member_epoch(self.epoch)
            .with_rebalance_timeout_ms(if self.epoch == 0 { 30_000 } else { -1 })
            .with_subscribed_topic_names(
                (self.epoch == 0).then(|| vec![TopicName(StrBytes::from_static_str(TOPIC))]),
            )
            .with_topic_partitions(Some(if self.owned.is_empty() {
                Vec::new()
            } else {
                vec![owned]
            }))
    }

    /// One heartbeat; applies the assignment it gets.
    fn beat(
        &mut self,
        client: &mut Client,
        topic_id: Uuid,
    ) -> Result<ConsumerGroupHeartbeatResponse> {
        let r = client.send(&self.request(topic_id), 1)?;
        ensure!(
            r.error_code == 0,
            "{} heartbeat: error {}",
            self.id,
            r.error_code
        );
        self.epoch = r.member_epoch;
        if let Some(a) = &r.assignment {
            self.owned = a
                .topic_partitions
                .iter()
                .filter(|tp| tp.topic_id == topic_id)
                .flat_map(|tp| tp.partitions.iter().copied())
                .collect();
        }
        Ok(r)
    }
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
    let mut a = Member::new("split");
    let mut b = Member::new("split");
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
    let mut a = Member::new("fence");
    a.beat(&mut client, topic_id)?;
    let r = client.send(&a.request(topic_id).with_member_epoch(a.epoch + 5), 1)?;
    ensure!(r.error_code == FENCED_MEMBER_EPOCH, "{r:?}");
    let stranger = Member {
        epoch: 1,
        ..Member::new("fence")
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
    let member = Member::new("refused");
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

    let mut a = Member::new("refused");
    a.beat(&mut client, topic_id)?;
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

    // The other way round: a classic group with a member keeps KIP-848
    // members out.
    let classic = client.send(&classic_join("classic"), 3)?;
    ensure!(classic.error_code == 0, "{classic:?}");
    let r = client.send(&Member::new("classic").request(topic_id), 1)?;
    ensure!(r.error_code == GROUP_ID_NOT_FOUND, "{r:?}");

    let commit = |member_id: &str, epoch: i32| {
        OffsetCommitRequest::default()
            .with_group_id(group_id("refused"))
            .with_member_id(StrBytes::from_string(member_id.to_string()))
            .with_generation_id_or_member_epoch(epoch)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(0)])])
    };
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
    let mut a = Member::new("bounded");
    let mut b = Member::new("bounded");
    let r = a.beat(&mut client, topic_id)?;
    ensure!(r.heartbeat_interval_ms == 250, "{r:?}");
    b.beat(&mut client, topic_id)?;
    let c = Member::new("bounded");
    let r = client.send(&c.request(topic_id), 1)?;
    ensure!(r.error_code == GROUP_MAX_SIZE_REACHED, "{r:?}");
    let too_many: Vec<TopicName> = (0..=MAX_SUBSCRIBED_TOPICS)
        .map(|i| TopicName(StrBytes::from_string(format!("t{i}"))))
        .collect();
    let r = client.send(
        &Member::new("other")
            .request(topic_id)
            .with_subscribed_topic_names(Some(too_many)),
        1,
    )?;
    ensure!(r.error_code == INVALID_REQUEST, "{r:?}");
    let r = client.send(
        &Member::new("other")
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
