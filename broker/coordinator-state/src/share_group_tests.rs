//! Share-group membership: joining, epochs, fencing, leaving, expiry and
//! the simple assignor.

use std::collections::{BTreeMap, BTreeSet};

use crate::share_group::*;
use crate::{GroupError, TopicMetadata};

const T: [u8; 16] = [7; 16];

fn topics(partitions: i32, version: u64) -> TopicMetadata {
    TopicMetadata {
        version,
        topics: BTreeMap::from([("t".to_string(), (T, partitions))]),
    }
}

fn join(id: &str) -> ShareHeartbeat {
    ShareHeartbeat {
        member_id: id.to_string(),
        member_epoch: 0,
        subscribed_topic_names: Some(vec!["t".to_string()]),
        ..ShareHeartbeat::default()
    }
}

fn beat(id: &str, epoch: i32) -> ShareHeartbeat {
    ShareHeartbeat {
        member_id: id.to_string(),
        member_epoch: epoch,
        ..ShareHeartbeat::default()
    }
}

#[test]
fn members_join_get_the_group_epoch_and_an_assignment_and_are_fenced_on_a_stale_epoch() {
    let mut g = ShareGroup::new("g", ShareGroupConfig::default());
    let md = topics(2, 1);
    let a = g.heartbeat(join("a"), &md, 0).expect("join a");
    assert_eq!(a.member_epoch, 1);
    assert_eq!(a.assignment.expect("assigned")[&T], BTreeSet::from([0, 1]));
    let b = g.heartbeat(join("b"), &md, 0).expect("join b");
    assert_eq!(b.member_epoch, 2);
    // a learns the new split at its next heartbeat.
    let a2 = g.heartbeat(beat("a", 1), &md, 10).expect("a again");
    assert_eq!(a2.member_epoch, 2);
    assert_eq!(a2.assignment.expect("new")[&T].len(), 1);
    assert_eq!(
        g.heartbeat(beat("a", 1), &md, 20).err(),
        Some(GroupError::FencedMemberEpoch)
    );
    assert_eq!(
        g.heartbeat(beat("zz", 1), &md, 20).err(),
        Some(GroupError::UnknownMemberId)
    );
    let steady = g.heartbeat(beat("a", 2), &md, 30).expect("steady");
    assert_eq!(steady.assignment, None);
}

#[test]
fn more_members_than_partitions_share_partitions() {
    let mut g = ShareGroup::new("g", ShareGroupConfig::default());
    let md = topics(1, 1);
    for id in ["a", "b", "c"] {
        g.heartbeat(join(id), &md, 0).expect("join");
    }
    for m in g.members() {
        assert_eq!(m.assignment[&T], BTreeSet::from([0]), "{}", m.member_id);
    }
}

#[test]
fn leaving_and_expiry_remove_members_and_bump_the_epoch() {
    let mut g = ShareGroup::new("g", ShareGroupConfig::default());
    let md = topics(3, 1);
    g.heartbeat(join("a"), &md, 0).expect("join");
    g.heartbeat(join("b"), &md, 40_000).expect("join");
    let left = g.heartbeat(beat("b", -1), &md, 40_001).expect("leave");
    assert_eq!(left.member_epoch, -1);
    assert_eq!(g.group_epoch(), 3);
    assert_eq!(g.tick(44_999, &md), Vec::<String>::new());
    assert_eq!(g.tick(45_000, &md), vec!["a".to_string()]);
    assert_eq!(g.state(), ShareGroupState::Empty);
}

#[test]
fn a_join_needs_a_member_id_and_topics_and_the_group_has_a_size_limit() {
    let config = ShareGroupConfig {
        max_size: 1,
        ..ShareGroupConfig::default()
    };
    let mut g = ShareGroup::new("g", config);
    let md = topics(1, 1);
    assert_eq!(
        g.heartbeat(join(""), &md, 0).err(),
        Some(GroupError::InvalidRequest)
    );
    let mut no_topics = join("a");
    no_topics.subscribed_topic_names = None;
    assert_eq!(
        g.heartbeat(no_topics, &md, 0).err(),
        Some(GroupError::InvalidRequest)
    );
    g.heartbeat(join("a"), &md, 0).expect("join");
    assert_eq!(
        g.heartbeat(join("b"), &md, 0).err(),
        Some(GroupError::GroupMaxSizeReached)
    );
}

#[test]
fn new_partitions_reach_members_at_their_next_heartbeat() {
    let mut g = ShareGroup::new("g", ShareGroupConfig::default());
    g.heartbeat(join("a"), &topics(1, 1), 0).expect("join");
    let r = g.heartbeat(beat("a", 1), &topics(3, 2), 10).expect("beat");
    assert_eq!(r.member_epoch, 2);
    assert_eq!(r.assignment.expect("new")[&T], BTreeSet::from([0, 1, 2]));
}
