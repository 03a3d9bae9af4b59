//! Scenario tests: members join, sync, heartbeat, leave and go silent, with
//! the clock driven by hand.

use bytes::Bytes;

use crate::*;

const SESSION: u64 = 10_000;

fn config() -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay_ms: 0,
        ..GroupConfig::default()
    }
}

/// A SyncGroup request from `member_id` in `generation_id` (the leader's
/// carries the assignments), naming no protocol.
fn sync_request(
    member_id: &str,
    generation_id: i32,
    assignments: Vec<(String, Bytes)>,
) -> SyncRequest {
    SyncRequest {
        member_id: member_id.into(),
        generation_id,
        protocol_type: None,
        protocol_name: None,
        assignments,
    }
}

/// The same, naming the group's protocol type and name (`consumer`,
/// `range`), as SyncGroup v5+ clients do.
fn sync_request_naming(
    member_id: &str,
    generation_id: i32,
    assignments: Vec<(String, Bytes)>,
) -> SyncRequest {
    SyncRequest {
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        ..sync_request(member_id, generation_id, assignments)
    }
}

fn join_request(member_id: &str, protocols: &[&str]) -> JoinRequest {
    JoinRequest {
        member_id: member_id.to_string(),
        group_instance_id: None,
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: SESSION,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".into(),
        protocols: protocols
            .iter()
            .map(|p| (p.to_string(), Bytes::from(format!("meta-{p}"))))
            .collect(),
        require_known_member_id: true,
    }
}

fn join_reply(replies: &[Reply], ticket: Ticket) -> JoinReply {
    replies
        .iter()
        .find_map(|r| match r {
            Reply::Join(t, j) if *t == ticket => Some(j.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no join reply for ticket {ticket} in {replies:?}"))
}

fn sync_reply(replies: &[Reply], ticket: Ticket) -> SyncReply {
    replies
        .iter()
        .find_map(|r| match r {
            Reply::Sync(t, s) if *t == ticket => Some(s.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no sync reply for ticket {ticket} in {replies:?}"))
}

/// Joins a new member through the MEMBER_ID_REQUIRED round trip; returns its id.
fn admit(group: &mut Group, ticket: Ticket, id: &str, now: Millis) -> Vec<Reply> {
    let first = group.join(ticket, join_request("", &["range"]), id.to_string(), now);
    let reply = join_reply(&first, ticket);
    assert_eq!(reply.error, Some(GroupError::MemberIdRequired));
    assert_eq!(reply.member_id, id);
    group.join(
        ticket + 1000,
        join_request(id, &["range"]),
        "unused".into(),
        now,
    )
}

fn stable_group_of_three() -> Group {
    let mut g = Group::new("g", config());
    let r = admit(&mut g, 1, "a", 0);
    let a = join_reply(&r, 1001);
    assert_eq!(a.generation_id, 1);
    assert_eq!(a.leader, "a");
    let r = g.sync(
        2,
        sync_request("a", 1, vec![("a".into(), Bytes::from("p0-5"))]),
        0,
    );
    assert_eq!(sync_reply(&r, 2).assignment, Bytes::from("p0-5"));
    assert_eq!(g.state(), GroupState::Stable);
    // b joins: a rebalance starts and waits for a to rejoin.
    let r = admit(&mut g, 3, "b", 10);
    assert!(r.is_empty(), "b must wait for a to rejoin: {r:?}");
    assert_eq!(g.state(), GroupState::PreparingRebalance);
    assert_eq!(
        g.heartbeat("a", 1, 20),
        Err(GroupError::RebalanceInProgress)
    );
    let r = admit(&mut g, 5, "c", 30);
    assert!(r.is_empty());
    let r = g.join(7, join_request("a", &["range"]), "unused".into(), 40);
    assert_eq!(r.len(), 3, "all three joins complete together: {r:?}");
    let leader = join_reply(&r, 7);
    assert_eq!(leader.generation_id, 2);
    assert_eq!(leader.leader, "a", "the old leader stays leader");
    assert_eq!(leader.members.len(), 3);
    assert!(
        join_reply(&r, 1003).members.is_empty(),
        "followers get no member list"
    );
    assert_eq!(leader.protocol_name.as_deref(), Some("range"));
    let r = g.sync(8, sync_request_naming("b", 2, vec![]), 50);
    assert!(r.is_empty(), "a follower's sync waits for the leader");
    let assignments = vec![
        ("a".into(), Bytes::from("p0,p1")),
        ("b".into(), Bytes::from("p2,p3")),
        ("c".into(), Bytes::from("p4,p5")),
    ];
    let r = g.sync(9, sync_request("a", 2, assignments), 60);
    assert_eq!(sync_reply(&r, 8).assignment, Bytes::from("p2,p3"));
    assert_eq!(sync_reply(&r, 9).assignment, Bytes::from("p0,p1"));
    let r = g.sync(10, sync_request("c", 2, vec![]), 70);
    assert_eq!(
        sync_reply(&r, 10).assignment,
        Bytes::from("p4,p5"),
        "a late follower gets its assignment at once"
    );
    assert_eq!(g.state(), GroupState::Stable);
    g
}

#[test]
fn three_members_join_and_sync() {
    let g = stable_group_of_three();
    assert_eq!(g.generation_id(), 2);
    assert_eq!(g.members().count(), 3);
}

#[test]
fn a_leaving_member_triggers_a_rebalance_among_the_rest() {
    let mut g = stable_group_of_three();
    let (result, replies) = g.leave("b", 100);
    assert_eq!(result, Ok(()));
    assert!(replies.is_empty());
    assert_eq!(g.state(), GroupState::PreparingRebalance);
    assert_eq!(g.heartbeat("b", 2, 110), Err(GroupError::UnknownMemberId));
    let r = g.join(20, join_request("a", &["range"]), "unused".into(), 120);
    assert!(r.is_empty());
    let r = g.join(21, join_request("c", &["range"]), "unused".into(), 130);
    let reply = join_reply(&r, 20);
    assert_eq!(reply.generation_id, 3);
    assert_eq!(reply.members.len(), 2);
}

#[test]
fn silent_members_are_expired_after_the_session_timeout() {
    let mut g = stable_group_of_three();
    assert_eq!(g.heartbeat("a", 2, 5_000), Ok(()));
    assert_eq!(g.heartbeat("b", 2, 5_000), Ok(()));
    let replies = g.tick(10_071);
    assert!(replies.is_empty());
    assert_eq!(g.members().count(), 2, "c was last heard at 70 ms");
    assert_eq!(g.state(), GroupState::PreparingRebalance);
    // Members that never rejoin are dropped when the rebalance timeout passes.
    let r = g.join(30, join_request("a", &["range"]), "unused".into(), 10_100);
    assert!(r.is_empty());
    let r = g.tick(10_071 + 30_001);
    let reply = join_reply(&r, 30);
    assert_eq!(reply.members.len(), 1);
    assert_eq!(g.members().count(), 1);
}

#[test]
fn stale_generations_and_unknown_members_are_rejected() {
    let mut g = stable_group_of_three();
    assert_eq!(g.heartbeat("a", 1, 80), Err(GroupError::IllegalGeneration));
    assert_eq!(g.heartbeat("zz", 2, 80), Err(GroupError::UnknownMemberId));
    let r = g.join(40, join_request("zz", &["range"]), "unused".into(), 80);
    assert_eq!(join_reply(&r, 40).error, Some(GroupError::UnknownMemberId));
    let r = g.sync(41, sync_request("b", 1, vec![]), 80);
    let reply = sync_reply(&r, 41);
    assert_eq!(reply.error, Some(GroupError::IllegalGeneration));
    assert_eq!(
        reply.protocol_type.as_deref(),
        Some("consumer"),
        "SyncGroup errors still carry the protocol type"
    );
    assert_eq!(reply.protocol_name.as_deref(), Some("range"));
    assert_eq!(
        g.check_commit("a", 1),
        CommitCheck::Rejected(GroupError::IllegalGeneration)
    );
    assert_eq!(g.check_commit("a", 2), CommitCheck::Ok);
    assert_eq!(
        g.check_commit("", -1),
        CommitCheck::Rejected(GroupError::UnknownMemberId)
    );
}

#[test]
fn incompatible_protocols_are_refused() {
    let mut g = stable_group_of_three();
    let first = g.join(50, join_request("", &["roundrobin"]), "d".into(), 90);
    assert_eq!(
        join_reply(&first, 50).error,
        Some(GroupError::InconsistentGroupProtocol)
    );
    assert_eq!(g.members().count(), 3);
    assert_eq!(
        g.state(),
        GroupState::Stable,
        "a refused join does not disturb the group"
    );
}

#[test]
fn protocol_selection_follows_the_members_votes() {
    let mut g = Group::new("g", config());
    let _ = g.join(
        1,
        join_request("", &["cooperative-sticky", "range"]),
        "a".into(),
        0,
    );
    let r = g.join(
        2,
        join_request("a", &["cooperative-sticky", "range"]),
        "x".into(),
        0,
    );
    assert_eq!(
        join_reply(&r, 2).protocol_name.as_deref(),
        Some("cooperative-sticky")
    );
    let _ = g.join(3, join_request("", &["range"]), "b".into(), 1);
    let _ = g.join(4, join_request("b", &["range"]), "x".into(), 1);
    let r = g.join(
        5,
        join_request("a", &["cooperative-sticky", "range"]),
        "x".into(),
        2,
    );
    assert_eq!(
        join_reply(&r, 5).protocol_name.as_deref(),
        Some("range"),
        "only range is common"
    );
}

#[test]
fn the_first_rebalance_waits_for_the_initial_delay() {
    let mut g = Group::new(
        "g",
        GroupConfig {
            initial_rebalance_delay_ms: 3_000,
            ..GroupConfig::default()
        },
    );
    let _ = g.join(1, join_request("", &["range"]), "a".into(), 0);
    assert!(g
        .join(2, join_request("a", &["range"]), "x".into(), 0)
        .is_empty());
    assert!(g.tick(2_999).is_empty());
    let r = g.tick(3_000);
    assert_eq!(join_reply(&r, 2).generation_id, 1);
}

#[test]
fn simple_commits_need_an_empty_group_and_deletion_needs_no_members() {
    let mut g = Group::new("g", config());
    assert_eq!(g.check_commit("", -1), CommitCheck::Ok);
    assert_eq!(g.delete(), Ok(()));
    assert_eq!(g.state(), GroupState::Dead);
    let mut g = stable_group_of_three();
    assert_eq!(g.delete(), Err(GroupError::NonEmptyGroup));
}

#[test]
fn member_ids_handed_out_but_never_used_lapse() {
    let mut g = Group::new("g", config());
    let _ = g.join(1, join_request("", &["range"]), "a".into(), 0);
    let _ = g.tick(SESSION + 1);
    let r = g.join(2, join_request("a", &["range"]), "x".into(), SESSION + 2);
    assert_eq!(join_reply(&r, 2).error, Some(GroupError::UnknownMemberId));
}

/// A stable group stored and restored (a coordinator failover): the
/// members carry on at their generation — Heartbeat, SyncGroup, a
/// follower's JoinGroup with the same metadata and OffsetCommit are
/// answered normally — and their sessions restart at the load.
#[test]
fn a_restored_group_answers_its_members_at_their_generation() {
    let g = stable_group_of_three();
    let stored = g.stored().expect("a Stable group is stored");
    assert_eq!(stored.generation_id, 2);
    assert_eq!(stored.members.len(), 3);
    let mut r = Group::restore("g", &stored, config(), 1_000_000);
    assert_eq!(r.state(), GroupState::Stable);
    assert_eq!(r.generation_id(), 2);
    assert_eq!(r.leader(), Some("a"));
    assert_eq!(r.protocol_name(), Some("range"));
    assert_eq!(r.stored(), Some(stored.clone()), "stored again unchanged");
    for m in ["a", "b", "c"] {
        assert_eq!(r.heartbeat(m, 2, 1_000_100), Ok(()));
        assert_eq!(r.check_commit(m, 2), CommitCheck::Ok);
    }
    assert_eq!(
        r.heartbeat("b", 1, 1_000_100),
        Err(GroupError::IllegalGeneration)
    );
    let replies = r.sync(1, sync_request_naming("b", 2, vec![]), 1_000_200);
    assert_eq!(sync_reply(&replies, 1).assignment, Bytes::from("p2,p3"));
    let replies = r.join(2, join_request("c", &["range"]), "unused".into(), 1_000_300);
    let c = join_reply(&replies, 2);
    assert_eq!((c.error, c.generation_id), (None, 2), "no rebalance");
    assert_eq!(r.state(), GroupState::Stable);
    // Sessions run from the load: nobody expires before a session passed.
    assert!(r.tick(1_000_000 + SESSION).is_empty());
    assert_eq!(r.state(), GroupState::Stable);
    // A rebalance in progress is not stored; a group gone Empty is.
    let (left, _) = r.leave("c", 1_000_400);
    assert_eq!(left, Ok(()));
    assert_eq!(r.state(), GroupState::PreparingRebalance);
    assert_eq!(r.stored(), None);
    let mut empty = Group::new("e", config());
    let _ = admit(&mut empty, 1, "x", 0);
    let _ = empty.leave("x", 10);
    assert_eq!(empty.state(), GroupState::Empty);
    let stored = empty.stored().expect("an Empty group is stored");
    assert!(stored.members.is_empty());
    assert_eq!(
        Group::restore("e", &stored, config(), 0).state(),
        GroupState::Empty
    );
}
