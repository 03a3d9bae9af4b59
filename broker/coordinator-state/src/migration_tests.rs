//! Online migration scenarios: a Stable classic group upgraded by a joining
//! ConsumerGroupHeartbeat, its classic members rejoining inside the consumer
//! group, the downgrade when the last consumer-protocol member leaves, and
//! the policies and groups that refuse. After every step no partition may
//! be held (assigned or still being revoked) by two members at once.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use crate::*;

const SESSION: u64 = 10_000;
const REBALANCE: u64 = 30_000;

fn tid(name: &str) -> TopicId {
    let mut id = [0u8; 16];
    for (i, b) in name.bytes().take(16).enumerate() {
        id[i] = b;
    }
    id
}

fn metadata() -> TopicMetadata {
    TopicMetadata {
        version: 1,
        topics: [("t".to_string(), (tid("t"), 4))].into_iter().collect(),
    }
}

fn named(partitions: &[i32]) -> NamedPartitions {
    [("t".to_string(), partitions.iter().copied().collect())]
        .into_iter()
        .collect()
}

fn ids(partitions: &[i32]) -> Assignment {
    match partitions.is_empty() {
        true => Assignment::new(),
        false => [(tid("t"), partitions.iter().copied().collect())]
            .into_iter()
            .collect(),
    }
}

fn consumer_config(policy: MigrationPolicy) -> ConsumerGroupConfig {
    ConsumerGroupConfig {
        session_timeout_ms: 45_000,
        heartbeat_interval_ms: 5_000,
        max_size: 10,
        migration_policy: policy,
    }
}

fn classic_config() -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay_ms: 0,
        ..GroupConfig::default()
    }
}

fn join_request(member_id: &str, protocol_type: &str) -> JoinRequest {
    JoinRequest {
        member_id: member_id.to_string(),
        group_instance_id: None,
        client_id: format!("client-{member_id}"),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: SESSION,
        rebalance_timeout_ms: REBALANCE,
        protocol_type: protocol_type.into(),
        protocols: vec![("range".into(), Bytes::from_static(b"subscription"))],
        require_known_member_id: false,
    }
}

fn sync_request(member_id: &str, generation_id: i32) -> SyncRequest {
    SyncRequest {
        member_id: member_id.into(),
        generation_id,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        assignments: Vec::new(),
    }
}

/// A Stable classic group at generation 1: "a" owns t-0,1 and "b" t-2,3.
fn stable_classic(protocol_type: &str) -> Group {
    let config = GroupConfig {
        initial_rebalance_delay_ms: 100,
        ..GroupConfig::default()
    };
    let mut g = Group::new("g", config);
    g.join(1, join_request("", protocol_type), "a".into(), 0);
    let replies = g.join(2, join_request("", protocol_type), "b".into(), 0);
    let replies: Vec<Reply> = replies.into_iter().chain(g.tick(100)).collect();
    assert!(
        replies
            .iter()
            .any(|r| matches!(r, Reply::Join(_, j) if j.generation_id == 1)),
        "the first rebalance completes: {replies:?}"
    );
    let mut leader_sync = sync_request("a", 1);
    leader_sync.protocol_type = None;
    leader_sync.assignments = vec![
        ("a".into(), Bytes::from_static(b"t-0,1")),
        ("b".into(), Bytes::from_static(b"t-2,3")),
    ];
    g.sync(3, leader_sync, 101);
    let mut follower_sync = sync_request("b", 1);
    follower_sync.protocol_type = None;
    g.sync(4, follower_sync, 101);
    assert_eq!(g.state(), GroupState::Stable);
    g
}

/// What the owner would decode of `stable_classic`'s members.
fn decoded_ok() -> BTreeMap<String, Option<DecodedClassicMember>> {
    let member = |partitions: &[i32]| {
        Some(DecodedClassicMember {
            subscription: ClassicSubscription {
                topics: vec!["t".into()],
                owned_partitions: NamedPartitions::new(),
            },
            assignment: named(partitions),
        })
    };
    [
        ("a".to_string(), member(&[0, 1])),
        ("b".to_string(), member(&[2, 3])),
    ]
    .into_iter()
    .collect()
}

fn consumer_join(member_id: &str) -> HeartbeatRequest {
    HeartbeatRequest {
        member_id: member_id.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(vec!["t".into()]),
        owned: Some(Assignment::new()),
        client_member_id: true,
        ..HeartbeatRequest::default()
    }
}

fn consumer_beat(group: &ConsumerGroup, member_id: &str) -> HeartbeatRequest {
    let member = member(group, member_id);
    HeartbeatRequest {
        member_id: member_id.into(),
        member_epoch: member.member_epoch,
        owned: Some(member.assigned.clone()),
        client_member_id: true,
        ..HeartbeatRequest::default()
    }
}

fn member<'a>(group: &'a ConsumerGroup, member_id: &str) -> &'a ConsumerMember {
    group
        .members()
        .find(|m| m.member_id == member_id)
        .unwrap_or_else(|| panic!("{member_id} is not a member"))
}

fn eager_subscription() -> Option<ClassicSubscription> {
    Some(ClassicSubscription {
        topics: vec!["t".into()],
        owned_partitions: NamedPartitions::new(),
    })
}

/// JoinGroup of classic member `id` still owning `owned` (nothing: an
/// eager client, which revoked everything before rejoining).
fn join_classic(group: &mut ConsumerGroup, id: &str, owned: &[i32], now: Millis) -> JoinReply {
    let subscription = ClassicSubscription {
        topics: vec!["t".into()],
        owned_partitions: match owned.is_empty() {
            true => NamedPartitions::new(),
            false => named(owned),
        },
    };
    group.classic_join(
        join_request(id, "consumer"),
        Some(subscription),
        String::new(),
        &classic_config(),
        &metadata(),
        now,
    )
}

/// No partition is held by two members, counting those being revoked.
fn assert_exclusive(group: &ConsumerGroup) {
    let mut seen = BTreeSet::new();
    for m in group.members() {
        for (topic, partitions) in m.assigned.iter().chain(m.revoking.iter()) {
            for p in partitions {
                assert!(
                    seen.insert((*topic, *p)),
                    "partition {p} held twice: {:?}",
                    group.members().collect::<Vec<_>>()
                );
            }
        }
    }
}

fn all_assigned(group: &ConsumerGroup) -> BTreeSet<i32> {
    group
        .members()
        .flat_map(|m| m.assigned.values().flatten().copied())
        .collect()
}

/// `stable_classic` upgraded by consumer member "c" joining at time 10.
fn upgraded(policy: MigrationPolicy) -> ConsumerGroup {
    let classic = stable_classic("consumer");
    let mut group = ConsumerGroup::from_classic(
        &classic,
        &decoded_ok(),
        consumer_config(policy),
        &metadata(),
        10,
    )
    .expect("a Stable consumer group upgrades");
    assert_eq!(
        group.group_epoch(),
        1,
        "the generation becomes the group epoch"
    );
    let reply = group
        .heartbeat(consumer_join("c"), String::new(), &metadata(), 10)
        .expect("c joins");
    assert_eq!(reply.member_epoch, 2);
    assert_eq!(
        reply.assignment,
        Some(Assignment::new()),
        "everything c is to get is still held by the classic members"
    );
    assert_exclusive(&group);
    group
}

#[test]
fn upgrade_keeps_classic_members_and_their_partitions() {
    let group = upgraded(MigrationPolicy::Bidirectional);
    let a = member(&group, "a");
    assert!(a.classic.is_some());
    assert_eq!(a.member_epoch, 1, "generation 1 is a's member epoch");
    assert_eq!(a.assigned, ids(&[0, 1]));
    assert_eq!(member(&group, "b").assigned, ids(&[2, 3]));
    assert!(member(&group, "c").classic.is_none());
    assert_eq!(group.group_epoch(), 2);
    assert_eq!(all_assigned(&group), [0, 1, 2, 3].into());
}

#[test]
fn classic_members_rejoin_and_hand_partitions_over() {
    let mut group = upgraded(MigrationPolicy::Bidirectional);
    for (i, id) in ["a", "b"].into_iter().enumerate() {
        let now = 20 + i as u64;
        assert_eq!(
            group.classic_heartbeat(id, 1, now),
            Err(GroupError::RebalanceInProgress),
            "{id} must rejoin: the group epoch moved on"
        );
        // An eager client revokes everything, then rejoins owning nothing.
        let reply = join_classic(&mut group, id, &[], now);
        assert_eq!(reply.error, None);
        assert_eq!(reply.generation_id, 2, "generation = member epoch");
        assert_eq!(reply.protocol_name.as_deref(), Some("range"));
        assert!(reply.members.is_empty() && reply.leader != id, "a follower");
        assert_exclusive(&group);
        let synced = group.classic_sync(&sync_request(id, 2), now).expect("sync");
        assert_eq!(synced.assignment, group.target_of(id));
        assert_eq!(synced.protocol_name, "range");
        assert_eq!(group.classic_heartbeat(id, 2, now), Ok(()));
    }
    let reply = group
        .heartbeat(consumer_beat(&group, "c"), String::new(), &metadata(), 30)
        .expect("c heartbeats");
    assert_eq!(reply.assignment, Some(group.target_of("c")));
    assert!(!group.target_of("c").is_empty());
    assert_exclusive(&group);
    assert_eq!(all_assigned(&group), [0, 1, 2, 3].into());
    assert_eq!(group.state(), ConsumerGroupState::Stable);
    assert_eq!(group.check_commit("a", 2), Ok(()));
    assert_eq!(
        group.check_commit("a", 1),
        Err(GroupError::IllegalGeneration),
        "a classic member's commit is checked against its epoch as generation"
    );
}

#[test]
fn a_cooperative_member_keeps_its_partitions_until_it_revokes_them() {
    let mut group = upgraded(MigrationPolicy::Bidirectional);
    // One of a (t-0,1) and b (t-2,3) gives a partition to c.
    let (id, held) = match group.target_of("a") == ids(&[0, 1]) {
        true => ("b", [2, 3]),
        false => ("a", [0, 1]),
    };
    let keep = group.target_of(id);
    assert_ne!(keep, ids(&held));
    // A cooperative client rejoins still owning what it held.
    let reply = join_classic(&mut group, id, &held, 20);
    assert_eq!(reply.generation_id, 1, "still revoking: epoch unchanged");
    assert_eq!(member(&group, id).state, MemberState::UnrevokedPartitions);
    assert_eq!(member(&group, id).assigned, keep);
    assert_exclusive(&group);
    let synced = group.classic_sync(&sync_request(id, 1), 20).expect("sync");
    assert_eq!(
        synced.assignment, keep,
        "SyncGroup drops what it must revoke"
    );
    assert_eq!(
        group.classic_heartbeat(id, 1, 21),
        Err(GroupError::RebalanceInProgress)
    );
    let kept: Vec<i32> = keep.values().flatten().copied().collect();
    let reply = join_classic(&mut group, id, &kept, 22);
    assert_eq!(reply.generation_id, 2);
    assert_eq!(member(&group, id).state, MemberState::Stable);
    assert_exclusive(&group);
}

#[test]
fn classic_requests_are_validated_like_kafka() {
    let mut group = upgraded(MigrationPolicy::Bidirectional);
    let limits = classic_config();
    assert_eq!(
        group.classic_heartbeat("a", 7, 20),
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(
        group.classic_heartbeat("zz", 1, 20),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(
        group.classic_heartbeat("c", 2, 20),
        Err(GroupError::UnknownMemberId),
        "c speaks the consumer protocol"
    );
    assert_eq!(
        group.classic_sync(&sync_request("a", 2), 20),
        Err(GroupError::IllegalGeneration)
    );
    let mut wrong_name = sync_request("a", 1);
    wrong_name.protocol_name = Some("roundrobin".into());
    assert_eq!(
        group.classic_sync(&wrong_name, 20),
        Err(GroupError::InconsistentGroupProtocol)
    );
    let mut beat = consumer_beat(&group, "a");
    beat.member_epoch = 1;
    assert_eq!(
        group.heartbeat(beat, String::new(), &metadata(), 20),
        Err(GroupError::UnknownMemberId),
        "a classic member cannot ConsumerGroupHeartbeat"
    );
    let reply = join_classic(&mut group, "c", &[], 20);
    assert_eq!(reply.error, Some(GroupError::UnknownMemberId));
    let reply = group.classic_join(
        join_request("d", "consumer"),
        None,
        String::new(),
        &limits,
        &metadata(),
        20,
    );
    assert_eq!(
        reply.error,
        Some(GroupError::InconsistentGroupProtocol),
        "metadata that is not a ConsumerProtocolSubscription"
    );
    let mut new_member = join_request("", "consumer");
    new_member.require_known_member_id = true;
    let reply = group.classic_join(
        new_member,
        eager_subscription(),
        "fresh".into(),
        &limits,
        &metadata(),
        20,
    );
    assert_eq!(reply.error, Some(GroupError::MemberIdRequired));
    assert_eq!(reply.member_id, "fresh");
}

#[test]
fn classic_members_expire_by_their_session_and_rejoin_deadline() {
    let mut group = upgraded(MigrationPolicy::Upgrade);
    // a is told to rejoin at 20 and goes silent; b heartbeats but never
    // rejoins; c heartbeats.
    assert_eq!(
        group.classic_heartbeat("a", 1, 20),
        Err(GroupError::RebalanceInProgress)
    );
    let mut now = 20;
    while now < 20 + REBALANCE {
        now += 9_000;
        assert_eq!(
            group.classic_heartbeat("b", 1, now),
            Err(GroupError::RebalanceInProgress)
        );
        group
            .heartbeat(consumer_beat(&group, "c"), String::new(), &metadata(), now)
            .expect("c heartbeats");
        group.tick(now);
        if now > 20 + SESSION {
            assert!(
                group.members().all(|m| m.member_id != "a"),
                "a's session expired"
            );
        }
        assert_exclusive(&group);
    }
    assert!(group.members().any(|m| m.member_id == "b"));
    group.tick(9_020 + REBALANCE + 1);
    assert!(
        group.members().all(|m| m.member_id != "b"),
        "b did not rejoin within its rebalance timeout"
    );
    assert!(group.members().any(|m| m.member_id == "c"));
}

#[test]
fn the_last_consumer_member_leaving_downgrades() {
    let mut group = upgraded(MigrationPolicy::Bidirectional);
    assert!(!group.should_downgrade());
    let mut leave = consumer_beat(&group, "c");
    leave.member_epoch = -1;
    group
        .heartbeat(leave, String::new(), &metadata(), 20)
        .expect("c leaves");
    assert!(group.should_downgrade());
    // a and b never rejoined: they are at generation 1.
    let epoch = member(&group, "a").member_epoch;
    assert_eq!(epoch, 1);
    let mut classic = group.into_classic(classic_config(), 20);
    assert_eq!(classic.state(), GroupState::PreparingRebalance);
    assert_eq!(classic.generation_id(), epoch);
    assert_eq!(classic.protocol_type(), Some("consumer"));
    let ids: Vec<&str> = classic.members().map(|m| m.member_id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
    assert_eq!(
        classic.heartbeat("a", epoch, 21),
        Err(GroupError::RebalanceInProgress),
        "the members are told to rejoin"
    );
    classic.join(1, join_request("a", "consumer"), String::new(), 22);
    let replies = classic.join(2, join_request("b", "consumer"), String::new(), 22);
    assert_eq!(replies.len(), 2, "both rejoined: {replies:?}");
    assert_eq!(classic.generation_id(), epoch + 1);
    assert_eq!(classic.state(), GroupState::CompletingRebalance);
}

#[test]
fn a_classic_member_joins_a_consumer_group_and_shares_it() {
    let mut group = ConsumerGroup::new("g", consumer_config(MigrationPolicy::Bidirectional));
    let reply = group
        .heartbeat(consumer_join("c"), String::new(), &metadata(), 0)
        .expect("c joins");
    assert_eq!(reply.assignment, Some(ids(&[0, 1, 2, 3])));
    let reply = join_classic(&mut group, "d", &[], 1);
    assert_eq!(reply.error, None);
    assert_eq!(reply.generation_id, 2);
    assert!(
        member(&group, "d").assigned.is_empty(),
        "c still owns everything"
    );
    assert_exclusive(&group);
    let reply = group
        .heartbeat(consumer_beat(&group, "c"), String::new(), &metadata(), 2)
        .expect("c heartbeats");
    assert_eq!(reply.member_epoch, 1, "c must revoke first");
    let mut revoked = consumer_beat(&group, "c");
    revoked.owned = Some(group.target_of("c"));
    group
        .heartbeat(revoked, String::new(), &metadata(), 3)
        .expect("c revoked");
    assert_eq!(
        group.classic_heartbeat("d", 2, 4),
        Err(GroupError::RebalanceInProgress),
        "d's partitions are free: it rejoins to get them"
    );
    let reply = join_classic(&mut group, "d", &[], 5);
    assert_eq!(reply.generation_id, 2);
    assert_eq!(member(&group, "d").assigned, group.target_of("d"));
    assert_eq!(all_assigned(&group), [0, 1, 2, 3].into());
    assert_exclusive(&group);
    assert_eq!(group.classic_leave("c"), Err(GroupError::UnknownMemberId));
    assert_eq!(group.classic_leave("d"), Ok(()));
    assert!(!group.should_downgrade());
}

#[test]
fn policies_and_groups_that_refuse_an_upgrade() {
    let classic = stable_classic("consumer");
    let ok = decoded_ok();
    let upgrade = |group: &Group, decoded, config| {
        ConsumerGroup::from_classic(group, decoded, config, &metadata(), 10).map(|_| ())
    };
    let bidirectional = consumer_config(MigrationPolicy::Bidirectional);
    assert_eq!(upgrade(&classic, &ok, bidirectional), Ok(()));
    let upgrade_only = consumer_config(MigrationPolicy::Upgrade);
    assert_eq!(upgrade(&classic, &ok, upgrade_only), Ok(()));
    for policy in [MigrationPolicy::Downgrade, MigrationPolicy::Disabled] {
        assert_eq!(
            upgrade(&classic, &ok, consumer_config(policy)),
            Err(GroupError::GroupIdNotFound),
            "{policy:?}"
        );
    }
    let mut malformed = decoded_ok();
    malformed.insert("b".into(), None);
    let mut full = consumer_config(MigrationPolicy::Bidirectional);
    full.max_size = 2;
    let mut rebalancing = stable_classic("consumer");
    rebalancing.join(9, join_request("", "consumer"), "x".into(), 5);
    assert_eq!(rebalancing.state(), GroupState::PreparingRebalance);
    let refused = [
        ("unparsable metadata", &classic, &malformed, bidirectional),
        (
            "not a consumer protocol group",
            &stable_classic("connect"),
            &ok,
            bidirectional,
        ),
        ("no room for the joining member", &classic, &ok, full),
        (
            "a rebalance is in progress",
            &rebalancing,
            &ok,
            bidirectional,
        ),
    ];
    for (why, group, decoded, config) in refused {
        assert_eq!(
            upgrade(group, decoded, config),
            Err(GroupError::GroupIdNotFound),
            "{why}"
        );
    }
}

#[test]
fn policies_that_refuse_a_downgrade() {
    for (policy, downgrades) in [
        (MigrationPolicy::Bidirectional, true),
        (MigrationPolicy::Upgrade, false),
    ] {
        let mut group = upgraded(policy);
        let mut leave = consumer_beat(&group, "c");
        leave.member_epoch = -1;
        group
            .heartbeat(leave, String::new(), &metadata(), 20)
            .expect("c leaves");
        assert_eq!(group.should_downgrade(), downgrades, "{policy:?}");
    }
    for policy in [MigrationPolicy::Downgrade, MigrationPolicy::Disabled] {
        let mut group = ConsumerGroup::new("g", consumer_config(policy));
        group
            .heartbeat(consumer_join("c"), String::new(), &metadata(), 0)
            .expect("c joins");
        join_classic(&mut group, "d", &[], 1);
        let mut leave = consumer_beat(&group, "c");
        leave.member_epoch = -1;
        group
            .heartbeat(leave, String::new(), &metadata(), 2)
            .expect("c leaves");
        assert_eq!(
            group.should_downgrade(),
            policy == MigrationPolicy::Downgrade,
            "{policy:?}"
        );
    }
    assert_eq!(
        MigrationPolicy::from_name("UPGRADE"),
        Some(MigrationPolicy::Upgrade)
    );
    assert_eq!(MigrationPolicy::from_name("both"), None);
}
