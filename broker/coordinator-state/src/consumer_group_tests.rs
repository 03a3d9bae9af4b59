//! Table tests of a KIP-848 consumer group: each scenario is a list of steps
//! (a member's heartbeat, a leave, a clock tick, a topic created) and what
//! the group must answer. Members behave like well-behaved clients unless a
//! step says otherwise: they heartbeat with the epoch and the partitions they
//! were last given.

use std::collections::BTreeMap;

use crate::*;

const SESSION: u64 = 45_000;

fn tid(name: &str) -> TopicId {
    let mut id = [0u8; 16];
    for (i, b) in name.bytes().take(16).enumerate() {
        id[i] = b;
    }
    id
}

fn assignment(list: &[(&str, &[i32])]) -> Assignment {
    list.iter()
        .filter(|(_, ps)| !ps.is_empty())
        .map(|(t, ps)| (tid(t), ps.iter().copied().collect()))
        .collect()
}

#[derive(Debug, Clone, Copy)]
enum Act<'a> {
    /// Epoch 0 with topic names (and an optional assignor).
    Join(&'a [&'a str], Option<&'a str>),
    /// Epoch 0 subscribing by regular expression.
    JoinRegex(&'a str),
    /// Epoch 0 as a static member with this instance id.
    JoinStatic(&'a str),
    /// A heartbeat at the member's epoch, owning what it was last given.
    Beat,
    /// A heartbeat at this epoch, owning what it was last given.
    BeatAt(i32),
    /// A heartbeat at its epoch that still owns these partitions.
    BeatOwning(&'a [(&'a str, &'a [i32])]),
    /// Epoch -1, or -2 for a static member.
    Leave(i32),
    Tick,
    CreateTopic(&'a str, i32),
    /// The coordinator fails over: the group is rebuilt from what it
    /// stored (`ConsumerGroup::stored`, `ConsumerGroup::restore`).
    Restore,
}

#[derive(Debug, Clone, Copy)]
enum Expect<'a> {
    /// The member's epoch and its assignment (None: not sent).
    Ok(i32, Option<&'a [(&'a str, &'a [i32])]>),
    Err(GroupError),
    Nothing,
}

type Step<'a> = (Millis, &'a str, Act<'a>, Expect<'a>);

struct Harness {
    group: ConsumerGroup,
    metadata: TopicMetadata,
    /// member → (epoch, last assignment received)
    clients: BTreeMap<String, (i32, Assignment)>,
}

impl Harness {
    fn new(topics: &[(&str, i32)], max_size: usize) -> Harness {
        Harness {
            group: ConsumerGroup::new(
                "g",
                ConsumerGroupConfig {
                    session_timeout_ms: SESSION,
                    heartbeat_interval_ms: 5_000,
                    max_size,
                    migration_policy: MigrationPolicy::Bidirectional,
                },
            ),
            metadata: TopicMetadata {
                version: 1,
                topics: topics
                    .iter()
                    .map(|(t, n)| (t.to_string(), (tid(t), *n)))
                    .collect(),
            },
            clients: BTreeMap::new(),
        }
    }

    fn request(&self, member: &str, act: Act) -> Option<HeartbeatRequest> {
        let (epoch, owned) = self.clients.get(member).cloned().unwrap_or_default();
        let base = HeartbeatRequest {
            member_id: member.to_string(),
            member_epoch: epoch,
            rebalance_timeout_ms: -1,
            owned: Some(owned),
            client_member_id: true,
            ..HeartbeatRequest::default()
        };
        let join = HeartbeatRequest {
            member_epoch: 0,
            rebalance_timeout_ms: 30_000,
            owned: Some(Assignment::new()),
            ..base.clone()
        };
        Some(match act {
            Act::Join(topics, assignor) => HeartbeatRequest {
                subscribed_topic_names: Some(topics.iter().map(|t| t.to_string()).collect()),
                server_assignor: assignor.map(str::to_string),
                ..join
            },
            Act::JoinRegex(regex) => HeartbeatRequest {
                subscribed_topic_regex: Some(regex.to_string()),
                ..join
            },
            Act::JoinStatic(instance) => HeartbeatRequest {
                subscribed_topic_names: Some(vec!["t".to_string()]),
                instance_id: Some(instance.to_string()),
                ..join
            },
            Act::Beat => base,
            Act::BeatAt(epoch) => HeartbeatRequest {
                member_epoch: epoch,
                ..base
            },
            Act::BeatOwning(owned) => HeartbeatRequest {
                owned: Some(assignment(owned)),
                ..base
            },
            Act::Leave(epoch) => HeartbeatRequest {
                member_epoch: epoch,
                instance_id: (epoch == -2).then(|| format!("i-{member}")),
                ..base
            },
            Act::Tick | Act::CreateTopic(..) | Act::Restore => return None,
        })
    }

    fn run(&mut self, scenario: &str, steps: &[Step]) {
        for (i, (now, member, act, expect)) in steps.iter().enumerate() {
            let at = format!("{scenario}, step {i} ({member} {act:?})");
            if let Act::CreateTopic(name, n) = act {
                self.metadata.version += 1;
                self.metadata
                    .topics
                    .insert(name.to_string(), (tid(name), *n));
            }
            if let Act::Tick = act {
                self.group.tick(*now);
            }
            if let Act::Restore = act {
                let stored = self.group.stored();
                let config = self.group.config;
                self.group = ConsumerGroup::restore("g", &stored, config, *now);
                assert_eq!(self.group.stored(), stored, "{at}: restored as stored");
            }
            let Some(request) = self.request(member, *act) else {
                assert!(matches!(expect, Expect::Nothing), "{at}");
                continue;
            };
            let result =
                self.group
                    .heartbeat(request, format!("fresh-{member}"), &self.metadata, *now);
            match (expect, result) {
                (Expect::Ok(epoch, assigned), Ok(reply)) => {
                    assert_eq!(reply.member_epoch, *epoch, "{at}: epoch");
                    assert_eq!(
                        reply.assignment,
                        assigned.map(assignment),
                        "{at}: assignment"
                    );
                    let client = self.clients.entry(member.to_string()).or_default();
                    client.0 = reply.member_epoch;
                    if let Some(a) = reply.assignment {
                        client.1 = a;
                    }
                    if reply.member_epoch < 0 {
                        self.clients.remove(*member);
                    }
                }
                (Expect::Err(want), Err(got)) => assert_eq!(got, *want, "{at}"),
                (want, got) => panic!("{at}: expected {want:?}, got {got:?}"),
            }
        }
    }
}

const ALL: &[(&str, &[i32])] = &[("t", &[0, 1, 2, 3])];
const LOW: &[(&str, &[i32])] = &[("t", &[0, 1])];
const HIGH: &[(&str, &[i32])] = &[("t", &[2, 3])];
const NONE: &[(&str, &[i32])] = &[];

#[test]
fn join_second_member_revocation_then_assignment_and_leave() {
    let mut h = Harness::new(&[("t", 4)], 10);
    h.run(
        "two members",
        &[
            (0, "a", Act::Join(&["t"], None), Expect::Ok(1, Some(ALL))),
            (10, "a", Act::Beat, Expect::Ok(1, None)),
            // b joins (group epoch 2): its partitions are still a's.
            (20, "b", Act::Join(&["t"], None), Expect::Ok(2, Some(NONE))),
            (30, "b", Act::Beat, Expect::Ok(2, None)),
            // a is told to revoke 2 and 3, and stays at epoch 1 meanwhile.
            (40, "a", Act::BeatOwning(ALL), Expect::Ok(1, Some(LOW))),
            (50, "a", Act::BeatOwning(ALL), Expect::Ok(1, None)),
            (60, "b", Act::Beat, Expect::Ok(2, None)),
            // a no longer owns them: epoch 2; b gets them.
            (70, "a", Act::Beat, Expect::Ok(2, None)),
            (80, "b", Act::Beat, Expect::Ok(2, Some(HIGH))),
            (90, "a", Act::Beat, Expect::Ok(2, None)),
            // b leaves: a gets everything at epoch 3.
            (100, "b", Act::Leave(-1), Expect::Ok(-1, None)),
            (110, "a", Act::Beat, Expect::Ok(3, Some(ALL))),
            (
                120,
                "b",
                Act::BeatAt(2),
                Expect::Err(GroupError::UnknownMemberId),
            ),
        ],
    );
    assert_eq!(h.group.state(), ConsumerGroupState::Stable);
}

#[test]
fn silent_members_expire_after_the_session_timeout() {
    let mut h = Harness::new(&[("t", 4)], 10);
    h.run(
        "session timeout",
        &[
            (
                0,
                "a",
                Act::Join(&["t"], Some("range")),
                Expect::Ok(1, Some(ALL)),
            ),
            (
                10,
                "b",
                Act::Join(&["t"], Some("range")),
                Expect::Ok(2, Some(NONE)),
            ),
            (20, "a", Act::Beat, Expect::Ok(1, Some(LOW))),
            (30, "a", Act::Beat, Expect::Ok(2, None)),
            (40, "b", Act::Beat, Expect::Ok(2, Some(HIGH))),
            (SESSION, "b", Act::Beat, Expect::Ok(2, None)),
            (SESSION + 1, "-", Act::Tick, Expect::Nothing),
            (SESSION + 2, "b", Act::Beat, Expect::Ok(2, None)),
            // a was last heard at 30.
            (SESSION + 31, "-", Act::Tick, Expect::Nothing),
            (SESSION + 40, "b", Act::Beat, Expect::Ok(3, Some(ALL))),
            (
                SESSION + 50,
                "a",
                Act::Beat,
                Expect::Err(GroupError::UnknownMemberId),
            ),
        ],
    );
}

#[test]
fn wrong_epochs_are_fenced() {
    let mut h = Harness::new(&[("t", 4)], 10);
    h.run(
        "fencing",
        &[
            (0, "a", Act::Join(&["t"], None), Expect::Ok(1, Some(ALL))),
            (
                10,
                "a",
                Act::BeatAt(7),
                Expect::Err(GroupError::FencedMemberEpoch),
            ),
            (20, "a", Act::BeatAt(1), Expect::Ok(1, None)),
            (
                30,
                "zz",
                Act::BeatAt(1),
                Expect::Err(GroupError::UnknownMemberId),
            ),
            (40, "b", Act::Join(&["t"], None), Expect::Ok(2, Some(NONE))),
            (50, "a", Act::Beat, Expect::Ok(1, Some(LOW))),
            (60, "a", Act::Beat, Expect::Ok(2, None)),
            // The previous epoch is accepted when the member owns no more
            // than it is assigned (the reply that moved it on was lost).
            (70, "a", Act::BeatAt(1), Expect::Ok(2, Some(LOW))),
            (
                80,
                "a",
                Act::BeatAt(-5),
                Expect::Err(GroupError::InvalidRequest),
            ),
        ],
    );
}

#[test]
fn a_regex_subscription_picks_up_a_new_topic() {
    let mut h = Harness::new(&[("orders-1", 2), ("other", 2)], 10);
    let first: &[(&str, &[i32])] = &[("orders-1", &[0, 1])];
    let both: &[(&str, &[i32])] = &[("orders-1", &[0, 1]), ("orders-2", &[0])];
    h.run(
        "regex",
        &[
            (
                0,
                "a",
                Act::JoinRegex("orders-.*"),
                Expect::Ok(1, Some(first)),
            ),
            (10, "a", Act::Beat, Expect::Ok(1, None)),
            (20, "-", Act::CreateTopic("orders-2", 1), Expect::Nothing),
            (30, "a", Act::Beat, Expect::Ok(2, Some(both))),
            (
                40,
                "b",
                Act::JoinRegex("orders-("),
                Expect::Err(GroupError::InvalidRegularExpression),
            ),
            (
                50,
                "b",
                Act::JoinRegex("other"),
                Expect::Ok(3, Some(&[("other", &[0, 1])])),
            ),
        ],
    );
}

#[test]
fn requests_that_break_the_rules_are_refused() {
    let mut h = Harness::new(&[("t", 4)], 2);
    h.run(
        "refusals",
        &[
            (
                0,
                "a",
                Act::Join(&["t"], Some("sticky")),
                Expect::Err(GroupError::UnsupportedAssignor),
            ),
            (
                0,
                "",
                Act::Join(&["t"], None),
                Expect::Err(GroupError::InvalidRequest),
            ),
            (0, "a", Act::Join(&["t"], None), Expect::Ok(1, Some(ALL))),
            (0, "b", Act::Join(&["t"], None), Expect::Ok(2, Some(NONE))),
            (
                0,
                "c",
                Act::Join(&["t"], None),
                Expect::Err(GroupError::GroupMaxSizeReached),
            ),
            (
                0,
                "c",
                Act::Leave(-1),
                Expect::Err(GroupError::UnknownMemberId),
            ),
        ],
    );
    let mut request = HeartbeatRequest {
        member_id: "d".into(),
        rebalance_timeout_ms: 1_000,
        owned: Some(Assignment::new()),
        ..HeartbeatRequest::default()
    };
    let metadata = h.metadata.clone();
    assert_eq!(
        h.group
            .heartbeat(request.clone(), "x".into(), &metadata, 0)
            .err(),
        Some(GroupError::InvalidRequest),
        "joining without a subscription"
    );
    request.subscribed_topic_names = Some(vec!["t".repeat(MAX_STRING_BYTES + 1)]);
    assert_eq!(
        h.group
            .heartbeat(request.clone(), "x".into(), &metadata, 0)
            .err(),
        Some(GroupError::InvalidRequest),
        "an over-long topic name"
    );
    request.subscribed_topic_names = None;
    request.subscribed_topic_regex = Some("a".repeat(MAX_REGEX_BYTES + 1));
    assert_eq!(
        h.group.heartbeat(request, "x".into(), &metadata, 0).err(),
        Some(GroupError::InvalidRegularExpression),
        "an over-long regex"
    );
}

#[test]
fn a_static_member_that_left_is_replaced_with_its_assignment() {
    let mut h = Harness::new(&[("t", 4)], 10);
    h.run(
        "static",
        &[
            (0, "a", Act::JoinStatic("i-a"), Expect::Ok(1, Some(ALL))),
            (
                10,
                "a2",
                Act::JoinStatic("i-a"),
                Expect::Err(GroupError::UnreleasedInstanceId),
            ),
            (20, "a", Act::Leave(-2), Expect::Ok(-2, None)),
            (30, "a2", Act::JoinStatic("i-a"), Expect::Ok(1, Some(ALL))),
            (
                40,
                "a",
                Act::BeatAt(1),
                Expect::Err(GroupError::UnknownMemberId),
            ),
        ],
    );
}

#[test]
fn commits_need_the_current_member_epoch() {
    let mut h = Harness::new(&[("t", 4)], 10);
    assert_eq!(h.group.check_commit("", -1), Ok(()), "empty group");
    h.run(
        "commits",
        &[(0, "a", Act::Join(&["t"], None), Expect::Ok(1, Some(ALL)))],
    );
    assert_eq!(h.group.check_commit("a", 1), Ok(()));
    assert_eq!(
        h.group.check_commit("a", 0),
        Err(GroupError::StaleMemberEpoch)
    );
    assert_eq!(
        h.group.check_commit("b", 1),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(
        h.group.check_commit("", -1),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(h.group.check_fetch(None, -1), Ok(()));
    assert_eq!(
        h.group.check_fetch(Some("a"), 2),
        Err(GroupError::StaleMemberEpoch)
    );
}

#[test]
fn a_restored_group_keeps_epochs_assignments_and_a_revocation_in_progress() {
    let mut h = Harness::new(&[("t", 4)], 10);
    h.run(
        "failover mid-revocation",
        &[
            (0, "a", Act::Join(&["t"], None), Expect::Ok(1, Some(ALL))),
            (20, "b", Act::Join(&["t"], None), Expect::Ok(2, Some(NONE))),
            (40, "a", Act::BeatOwning(ALL), Expect::Ok(1, Some(LOW))),
            (50, "-", Act::Restore, Expect::Nothing),
            // Still revoking after the failover: same epoch, nothing new.
            (60, "a", Act::BeatOwning(ALL), Expect::Ok(1, None)),
            (70, "b", Act::Beat, Expect::Ok(2, None)),
            (80, "a", Act::Beat, Expect::Ok(2, None)),
            (90, "b", Act::Beat, Expect::Ok(2, Some(HIGH))),
            (100, "-", Act::Restore, Expect::Nothing),
            // Stable before and after: no epoch moves, nothing is resent.
            (110, "a", Act::Beat, Expect::Ok(2, None)),
            (120, "b", Act::Beat, Expect::Ok(2, None)),
            // Sessions start again at the load: not expired 45 s after the
            // last heartbeat before it, but 45 s after the last one since.
            (100 + SESSION, "-", Act::Tick, Expect::Nothing),
            (125 + SESSION, "-", Act::Tick, Expect::Nothing),
            (
                126 + SESSION,
                "a",
                Act::Beat,
                Expect::Err(GroupError::UnknownMemberId),
            ),
        ],
    );
}

#[test]
fn a_restored_regex_member_resolves_to_the_same_topics() {
    let mut h = Harness::new(&[("orders", 2), ("other", 2)], 10);
    const ORDERS: &[(&str, &[i32])] = &[("orders", &[0, 1])];
    h.run(
        "regex across a failover",
        &[
            (0, "a", Act::JoinRegex("ord.*"), Expect::Ok(1, Some(ORDERS))),
            (10, "-", Act::Restore, Expect::Nothing),
            (20, "a", Act::Beat, Expect::Ok(1, None)),
            (30, "-", Act::CreateTopic("ordinals", 1), Expect::Nothing),
            (
                40,
                "a",
                Act::Beat,
                Expect::Ok(2, Some(&[("orders", &[0, 1]), ("ordinals", &[0])])),
            ),
        ],
    );
}
