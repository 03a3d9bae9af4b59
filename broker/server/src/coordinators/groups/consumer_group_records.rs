//! KIP-848 groups in `__consumer_offsets`, as Kafka's coordinator keeps
//! them: per group a ConsumerGroupMetadata (the group epoch), a
//! ConsumerGroupPartitionMetadata (the subscribed topics' partition counts)
//! and a ConsumerGroupTargetAssignmentMetadata (the assignment epoch); per
//! member a ConsumerGroupMemberMetadata (its subscription), a
//! ConsumerGroupTargetAssignmentMember (its target) and a
//! ConsumerGroupCurrentMemberAssignment (its epochs and what it owns); a
//! classic-protocol member's metadata also carries Kafka's
//! ClassicMemberMetadata (session timeout, supported protocols). Each
//! record is keyed by (type, group[, member]), so the compacted topic keeps
//! the latest of each; a removed member or group leaves tombstones.
//!
//! Owns: the records' key and value layout (Chronik's own bytes; key types
//! 10–15, because Kafka's numbers 3–8 collide with this topic's older key
//! types), turning a `StoredConsumerGroup` into records and records back
//! into groups (tolerant: a record that does not decode is skipped, and
//! every count is bounded by the bytes present), and the diff between what
//! was written and what a group holds now. Must not: decide when to write
//! (the group manager) or append (the offset store).

use std::collections::{BTreeMap, BTreeSet};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use chronik_coordinator_state::{
    Assignment, MemberState, StoredClassicProtocol, StoredConsumerGroup, StoredMember, TopicId,
};

use super::classic_group_records::CLASSIC_GROUP_METADATA;
use crate::coordinators::internal_topic::{get_str, put_str};

const GROUP_METADATA: i16 = 10;
const PARTITION_METADATA: i16 = 11;
const TARGET_ASSIGNMENT_METADATA: i16 = 12;
const MEMBER_METADATA: i16 = 13;
const TARGET_ASSIGNMENT_MEMBER: i16 = 14;
const CURRENT_MEMBER_ASSIGNMENT: i16 = 15;
const VALUE_VERSION: i16 = 0;

/// One group's records: key → value (the value of a written tombstone is
/// not kept: the key is simply absent).
pub type GroupRecords = BTreeMap<Bytes, Bytes>;

/// Whether a `__consumer_offsets` key of schema `version` is one of these.
pub fn is_consumer_group_key(version: i16) -> bool {
    (GROUP_METADATA..=CURRENT_MEMBER_ASSIGNMENT).contains(&version)
}

/// The group a key (with its version) belongs to — a KIP-848 group's
/// record or a classic group's (`classic_group_records`), which replay
/// and reload the same way; None for another key or one that does not
/// decode.
pub fn group_of(key: &Bytes) -> Option<String> {
    let mut key = key.clone();
    if key.remaining() < 2 {
        return None;
    }
    let kind = key.get_i16();
    if !is_consumer_group_key(kind) && kind != CLASSIC_GROUP_METADATA {
        return None;
    }
    get_str(&mut key)
}

/// Every record of `group`.
pub fn records_of(group_id: &str, group: &StoredConsumerGroup) -> GroupRecords {
    let mut records = group_level_records(
        group_id,
        group.group_epoch,
        group.assignment_epoch,
        &group.partitions,
    );
    for (member_id, member) in &group.members {
        records.extend(member_records(group_id, member_id, member));
    }
    records
}

/// The group's own three records.
pub fn group_level_records(
    group_id: &str,
    group_epoch: i32,
    assignment_epoch: i32,
    subscribed_partitions: &BTreeMap<TopicId, i32>,
) -> GroupRecords {
    let mut partitions = value();
    put_len(&mut partitions, subscribed_partitions.len());
    for (topic, count) in subscribed_partitions {
        partitions.put_slice(topic);
        partitions.put_i32(*count);
    }
    BTreeMap::from([
        (key(GROUP_METADATA, group_id, None), epoch(group_epoch)),
        (key(PARTITION_METADATA, group_id, None), partitions.freeze()),
        (
            key(TARGET_ASSIGNMENT_METADATA, group_id, None),
            epoch(assignment_epoch),
        ),
    ])
}

/// One member's three records.
pub fn member_records(group_id: &str, member_id: &str, m: &StoredMember) -> GroupRecords {
    let mut metadata = value();
    put_opt_str(&mut metadata, m.instance_id.as_deref());
    put_opt_str(&mut metadata, m.rack_id.as_deref());
    put_str(&mut metadata, &m.client_id);
    put_str(&mut metadata, &m.client_host);
    metadata.put_u64(m.rebalance_timeout_ms);
    put_strs(&mut metadata, m.subscribed_topic_names.iter());
    put_opt_str(&mut metadata, m.subscribed_topic_regex.as_deref());
    match &m.regex_matched_allowed {
        Some(names) => {
            metadata.put_u8(1);
            put_strs(&mut metadata, names.iter());
        }
        None => metadata.put_u8(0),
    }
    put_opt_str(&mut metadata, m.server_assignor.as_deref());
    put_len(&mut metadata, m.subscribed_ids.len());
    for id in &m.subscribed_ids {
        metadata.put_slice(id);
    }
    metadata.put_u8(u8::from(m.departed));
    // ClassicMemberMetadata, last: a record written before it existed
    // simply ends here.
    if let Some(classic) = &m.classic {
        metadata.put_u8(1);
        metadata.put_u64(classic.session_timeout_ms);
        put_len(&mut metadata, classic.protocols.len());
        for (name, subscription) in &classic.protocols {
            put_str(&mut metadata, name);
            put_len(&mut metadata, subscription.len());
            metadata.put_slice(subscription);
        }
    }

    let mut target = value();
    put_assignment(&mut target, &m.target);

    let mut current = value();
    current.put_i32(m.member_epoch);
    current.put_i32(m.previous_member_epoch);
    current.put_u8(match m.state {
        MemberState::Stable => 0,
        MemberState::UnrevokedPartitions => 1,
        MemberState::UnreleasedPartitions => 2,
    });
    put_assignment(&mut current, &m.assigned);
    put_assignment(&mut current, &m.revoking);

    BTreeMap::from([
        (
            key(MEMBER_METADATA, group_id, Some(member_id)),
            metadata.freeze(),
        ),
        (
            key(TARGET_ASSIGNMENT_MEMBER, group_id, Some(member_id)),
            target.freeze(),
        ),
        (
            key(CURRENT_MEMBER_ASSIGNMENT, group_id, Some(member_id)),
            current.freeze(),
        ),
    ])
}

/// The groups `records` (one group's records each, as replayed) describe.
/// A group without its ConsumerGroupMetadata record, and a member without
/// its metadata and current-assignment records, are left out.
pub fn groups_of(
    records: &BTreeMap<String, GroupRecords>,
) -> BTreeMap<String, StoredConsumerGroup> {
    let mut groups = BTreeMap::new();
    for (group_id, records) in records {
        if let Some(group) = group_from(records) {
            groups.insert(group_id.clone(), group);
        }
    }
    groups
}

fn group_from(records: &GroupRecords) -> Option<StoredConsumerGroup> {
    let mut group = StoredConsumerGroup::default();
    let mut found_metadata = false;
    let mut metadata: BTreeMap<String, StoredMember> = BTreeMap::new();
    let mut targets: BTreeMap<String, Assignment> = BTreeMap::new();
    let mut current: BTreeMap<String, Bytes> = BTreeMap::new();
    for (k, v) in records {
        let mut k = k.clone();
        if k.remaining() < 2 {
            continue;
        }
        let kind = k.get_i16();
        let Some(_group) = get_str(&mut k) else {
            continue;
        };
        let member = get_str(&mut k);
        let mut v = v.clone();
        if v.remaining() < 2 || v.get_i16() != VALUE_VERSION {
            continue;
        }
        match (kind, member) {
            (GROUP_METADATA, _) if v.remaining() >= 4 => {
                group.group_epoch = v.get_i32();
                found_metadata = true;
            }
            (TARGET_ASSIGNMENT_METADATA, _) if v.remaining() >= 4 => {
                group.assignment_epoch = v.get_i32();
            }
            (PARTITION_METADATA, _) => {
                if let Some(p) = get_partitions(&mut v) {
                    group.partitions = p;
                }
            }
            (MEMBER_METADATA, Some(member)) => {
                if let Some(m) = get_member_metadata(&mut v) {
                    metadata.insert(member, m);
                }
            }
            (TARGET_ASSIGNMENT_MEMBER, Some(member)) => {
                if let Some(a) = get_assignment(&mut v) {
                    targets.insert(member, a);
                }
            }
            (CURRENT_MEMBER_ASSIGNMENT, Some(member)) => {
                current.insert(member, v);
            }
            _ => {}
        }
    }
    for (member_id, mut m) in metadata {
        let Some(mut v) = current.remove(&member_id) else {
            continue;
        };
        if get_current(&mut v, &mut m).is_none() {
            continue;
        }
        m.target = targets.remove(&member_id).unwrap_or_default();
        group.members.insert(member_id, m);
    }
    found_metadata.then_some(group)
}

/// The records that take `written` (what the log holds for a group) to
/// `desired`: changed and new keys, and — when `desired` is the whole group
/// — tombstones (None) for the keys it no longer has.
pub fn diff(
    written: &GroupRecords,
    desired: &GroupRecords,
    whole_group: bool,
) -> Vec<(Bytes, Option<Bytes>)> {
    let mut changes: Vec<(Bytes, Option<Bytes>)> = desired
        .iter()
        .filter(|(k, v)| written.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();
    if whole_group {
        changes.extend(
            written
                .keys()
                .filter(|k| !desired.contains_key(*k))
                .map(|k| (k.clone(), None)),
        );
    }
    changes
}

fn key(kind: i16, group_id: &str, member_id: Option<&str>) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(kind);
    put_str(&mut buf, group_id);
    if let Some(member_id) = member_id {
        put_str(&mut buf, member_id);
    }
    buf.freeze()
}

fn value() -> BytesMut {
    let mut buf = BytesMut::new();
    buf.put_i16(VALUE_VERSION);
    buf
}

fn epoch(epoch: i32) -> Bytes {
    let mut buf = value();
    buf.put_i32(epoch);
    buf.freeze()
}

fn put_len(buf: &mut BytesMut, len: usize) {
    buf.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
}

/// A count read back, None when the bytes left cannot hold that many
/// items of at least `min_item` bytes (a damaged or hostile record).
fn get_len(buf: &mut Bytes, min_item: usize) -> Option<usize> {
    if buf.remaining() < 4 {
        return None;
    }
    let len = usize::try_from(buf.get_u32()).ok()?;
    (len.checked_mul(min_item)? <= buf.remaining()).then_some(len)
}

fn put_opt_str(buf: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => {
            buf.put_u8(1);
            put_str(buf, s);
        }
        None => buf.put_u8(0),
    }
}

fn get_opt_str(buf: &mut Bytes) -> Option<Option<String>> {
    if buf.remaining() < 1 {
        return None;
    }
    match buf.get_u8() {
        0 => Some(None),
        _ => get_str(buf).map(Some),
    }
}

fn put_strs<'a>(buf: &mut BytesMut, strs: impl ExactSizeIterator<Item = &'a String>) {
    put_len(buf, strs.len());
    for s in strs {
        put_str(buf, s);
    }
}

fn get_strs(buf: &mut Bytes) -> Option<Vec<String>> {
    let len = get_len(buf, 2)?;
    (0..len).map(|_| get_str(buf)).collect()
}

fn get_topic_id(buf: &mut Bytes) -> Option<TopicId> {
    if buf.remaining() < 16 {
        return None;
    }
    let mut id = [0u8; 16];
    buf.copy_to_slice(&mut id);
    Some(id)
}

fn put_assignment(buf: &mut BytesMut, a: &Assignment) {
    put_len(buf, a.len());
    for (topic, partitions) in a {
        buf.put_slice(topic);
        put_len(buf, partitions.len());
        for p in partitions {
            buf.put_i32(*p);
        }
    }
}

fn get_assignment(buf: &mut Bytes) -> Option<Assignment> {
    let topics = get_len(buf, 16 + 4)?;
    let mut a = Assignment::new();
    for _ in 0..topics {
        let topic = get_topic_id(buf)?;
        let count = get_len(buf, 4)?;
        let partitions: BTreeSet<i32> = (0..count).map(|_| buf.get_i32()).collect();
        a.insert(topic, partitions);
    }
    Some(a)
}

fn get_partitions(buf: &mut Bytes) -> Option<BTreeMap<TopicId, i32>> {
    let len = get_len(buf, 16 + 4)?;
    (0..len)
        .map(|_| Some((get_topic_id(buf)?, buf.get_i32())))
        .collect()
}

fn get_member_metadata(v: &mut Bytes) -> Option<StoredMember> {
    let instance_id = get_opt_str(v)?;
    let rack_id = get_opt_str(v)?;
    let client_id = get_str(v)?;
    let client_host = get_str(v)?;
    if v.remaining() < 8 {
        return None;
    }
    let rebalance_timeout_ms = v.get_u64();
    let subscribed_topic_names = get_strs(v)?;
    let subscribed_topic_regex = get_opt_str(v)?;
    if v.remaining() < 1 {
        return None;
    }
    let regex_matched_allowed = match v.get_u8() {
        0 => None,
        _ => Some(get_strs(v)?.into_iter().collect()),
    };
    let server_assignor = get_opt_str(v)?;
    let ids = get_len(v, 16)?;
    let subscribed_ids = (0..ids).map(|_| get_topic_id(v)).collect::<Option<_>>()?;
    if v.remaining() < 1 {
        return None;
    }
    let departed = v.get_u8() == 1;
    let classic = match v.has_remaining().then(|| v.get_u8()) {
        None | Some(0) => None,
        Some(_) => Some(get_classic(v)?),
    };
    Some(StoredMember {
        instance_id,
        rack_id,
        client_id,
        client_host,
        rebalance_timeout_ms,
        subscribed_topic_names,
        subscribed_topic_regex,
        regex_matched_allowed,
        server_assignor,
        subscribed_ids,
        departed,
        target: Assignment::new(),
        member_epoch: 0,
        previous_member_epoch: 0,
        state: MemberState::Stable,
        assigned: Assignment::new(),
        revoking: Assignment::new(),
        classic,
    })
}

fn get_classic(v: &mut Bytes) -> Option<StoredClassicProtocol> {
    if v.remaining() < 8 {
        return None;
    }
    let session_timeout_ms = v.get_u64();
    // a protocol is at least a name's length and the metadata's
    let count = get_len(v, 2 + 4)?;
    let protocols = (0..count)
        .map(|_| {
            let name = get_str(v)?;
            let len = get_len(v, 1)?;
            Some((name, v.split_to(len)))
        })
        .collect::<Option<Vec<_>>>()?;
    Some(StoredClassicProtocol {
        session_timeout_ms,
        protocols,
    })
}

fn get_current(v: &mut Bytes, m: &mut StoredMember) -> Option<()> {
    if v.remaining() < 9 {
        return None;
    }
    m.member_epoch = v.get_i32();
    m.previous_member_epoch = v.get_i32();
    m.state = match v.get_u8() {
        0 => MemberState::Stable,
        1 => MemberState::UnrevokedPartitions,
        2 => MemberState::UnreleasedPartitions,
        _ => return None,
    };
    m.assigned = get_assignment(v)?;
    m.revoking = get_assignment(v)?;
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(epoch: i32) -> StoredMember {
        let t: TopicId = [7; 16];
        StoredMember {
            instance_id: Some("i-1".into()),
            rack_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            rebalance_timeout_ms: 30_000,
            subscribed_topic_names: vec!["orders".into()],
            subscribed_topic_regex: Some("ord.*".into()),
            regex_matched_allowed: Some(BTreeSet::from(["orders".to_string()])),
            server_assignor: Some("uniform".into()),
            subscribed_ids: BTreeSet::from([t]),
            departed: false,
            target: Assignment::from([(t, BTreeSet::from([0, 1]))]),
            member_epoch: epoch,
            previous_member_epoch: epoch - 1,
            state: MemberState::UnrevokedPartitions,
            assigned: Assignment::from([(t, BTreeSet::from([0]))]),
            revoking: Assignment::from([(t, BTreeSet::from([2]))]),
            classic: None,
        }
    }

    fn classic_member(epoch: i32) -> StoredMember {
        StoredMember {
            classic: Some(StoredClassicProtocol {
                session_timeout_ms: 45_000,
                protocols: vec![
                    ("range".into(), Bytes::from_static(b"\x00\x03sub")),
                    ("roundrobin".into(), Bytes::new()),
                ],
            }),
            ..member(epoch)
        }
    }

    fn group() -> StoredConsumerGroup {
        StoredConsumerGroup {
            group_epoch: 5,
            assignment_epoch: 4,
            partitions: BTreeMap::from([([7; 16], 3)]),
            members: BTreeMap::from([
                ("m1".into(), member(4)),
                ("m2".into(), member(3)),
                ("c3".into(), classic_member(4)),
            ]),
        }
    }

    #[test]
    fn a_group_round_trips_through_its_records() {
        let records = records_of("g", &group());
        assert_eq!(records.len(), 3 + 3 * 3);
        assert!(records.keys().all(|k| group_of(k).as_deref() == Some("g")));
        let groups = groups_of(&BTreeMap::from([("g".to_string(), records)]));
        assert_eq!(groups.get("g"), Some(&group()));
    }

    #[test]
    fn the_diff_writes_changes_only_and_tombstones_what_left() {
        let before = records_of("g", &group());
        let mut after = group();
        after.members.remove("m2");
        after.group_epoch = 6;
        let desired = records_of("g", &after);
        let changes = diff(&before, &desired, true);
        // the group epoch changed; m2's three records go (c3's stay)
        assert_eq!(changes.iter().filter(|(_, v)| v.is_some()).count(), 1);
        assert_eq!(changes.iter().filter(|(_, v)| v.is_none()).count(), 3);
        // a member's own records never tombstone others'
        let partial = member_records("g", "m1", &member(9));
        assert!(diff(&before, &partial, false)
            .iter()
            .all(|(_, v)| v.is_some()));
    }

    #[test]
    fn damaged_records_are_skipped_not_trusted() {
        let mut records = records_of("g", &group());
        for v in records.values_mut() {
            // every value cut short, and one count made huge
            *v = v.slice(..v.len() / 2);
        }
        let groups = groups_of(&BTreeMap::from([("g".to_string(), records)]));
        // the metadata record (a short epoch) is cut too: nothing restored
        assert!(groups.get("g").is_none_or(|g| g.members.is_empty()));
        let mut huge = value();
        huge.put_u32(u32::MAX);
        assert!(get_assignment(&mut huge.freeze().slice(2..)).is_none());
    }
}
