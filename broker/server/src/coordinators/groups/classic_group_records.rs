//! Classic groups in `__consumer_offsets`, as Kafka keeps them: one record
//! per group whose value is Kafka's GroupMetadataValue (protocol type,
//! generation, protocol, leader, current-state timestamp, and per member
//! its id, group.instance.id, client id and host, rebalance and session
//! timeouts, subscription and assignment). A dead group leaves a tombstone.
//!
//! Owns: the key (Kafka's GroupMetadataKey layout — a type, then the group
//! — under Chronik's type 16: Kafka's number, 2, is this topic's pending
//! transactional commit key, see `offset_store`) and the value, byte for
//! byte Kafka's: versions 0–4 are read (4 is the flexible one: compact
//! strings, tagged fields), 3 is written (4 only when a string is too long
//! for a version 3 string). Decoding is hostile-input safe: every length
//! and count is bounded by the bytes present, and a value that does not
//! decode is None (the caller skips it). Must not: decide when to write
//! (the group manager) or append (the offset store).

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use chronik_coordinator_state::{StoredClassicGroup, StoredClassicMember};

use super::consumer_group_records::GroupRecords;
use crate::coordinators::internal_topic::put_str;

/// The key type of a classic group's record.
pub const CLASSIC_GROUP_METADATA: i16 = 16;
/// The GroupMetadataValue version written (Kafka 3.x and 4.x write 3).
const WRITTEN_VERSION: i16 = 3;
/// The first flexible GroupMetadataValue version.
const FLEXIBLE_VERSION: i16 = 4;
const MAX_VERSION: i16 = 4;
/// Kafka's currentStateTimestamp default: no timestamp.
const NO_TIMESTAMP: i64 = -1;

/// The key of `group_id`'s record.
pub fn key(group_id: &str) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(CLASSIC_GROUP_METADATA);
    put_str(&mut buf, group_id);
    buf.freeze()
}

/// The records of a classic group as stored: its one record.
pub fn records_of(group_id: &str, group: &StoredClassicGroup) -> GroupRecords {
    BTreeMap::from([(key(group_id), encode(group))])
}

/// The classic groups `records` (one group's records each, as replayed)
/// hold; a value that does not decode is skipped with a warning.
pub fn classic_groups_of(
    records: &BTreeMap<String, GroupRecords>,
) -> BTreeMap<String, StoredClassicGroup> {
    let mut groups = BTreeMap::new();
    for (group_id, records) in records {
        let Some(value) = records.get(&key(group_id)) else {
            continue;
        };
        match decode(value.clone()) {
            Some(group) => {
                groups.insert(group_id.clone(), group);
            }
            None => tracing::warn!(%group_id, "skipping an undecodable GroupMetadataValue"),
        }
    }
    groups
}

/// GroupMetadataValue at the version written (3, or 4 when a string does
/// not fit a version 3 string).
pub fn encode(group: &StoredClassicGroup) -> Bytes {
    let fits = |s: &str| s.len() <= i16::MAX as usize;
    let all_fit = fits(&group.protocol_type)
        && group.protocol_name.as_deref().is_none_or(fits)
        && group.leader.as_deref().is_none_or(fits)
        && group.members.iter().all(|m| {
            fits(&m.member_id)
                && m.group_instance_id.as_deref().is_none_or(fits)
                && fits(&m.client_id)
                && fits(&m.client_host)
        });
    let version = if all_fit {
        WRITTEN_VERSION
    } else {
        FLEXIBLE_VERSION
    };
    encode_version(group, version)
}

fn encode_version(group: &StoredClassicGroup, version: i16) -> Bytes {
    let mut w = Writer {
        buf: BytesMut::new(),
        flexible: version >= FLEXIBLE_VERSION,
    };
    w.buf.put_i16(version);
    w.string(Some(&group.protocol_type));
    w.buf.put_i32(group.generation_id);
    w.string(group.protocol_name.as_deref());
    w.string(group.leader.as_deref());
    if version >= 2 {
        w.buf.put_i64(NO_TIMESTAMP);
    }
    w.count(group.members.len());
    for m in &group.members {
        w.string(Some(&m.member_id));
        if version >= 3 {
            w.string(m.group_instance_id.as_deref());
        }
        w.string(Some(&m.client_id));
        w.string(Some(&m.client_host));
        if version >= 1 {
            w.buf.put_i32(timeout(m.rebalance_timeout_ms));
        }
        w.buf.put_i32(timeout(m.session_timeout_ms));
        w.bytes(&m.subscription);
        w.bytes(&m.assignment);
        w.no_tags();
    }
    w.no_tags();
    w.buf.freeze()
}

fn timeout(ms: u64) -> i32 {
    i32::try_from(ms).unwrap_or(i32::MAX)
}

/// A GroupMetadataValue of any version Kafka defines (0–4); None when it
/// does not decode.
pub fn decode(value: Bytes) -> Option<StoredClassicGroup> {
    let mut r = Reader {
        buf: value,
        flexible: false,
    };
    let version = r.i16()?;
    if !(0..=MAX_VERSION).contains(&version) {
        return None;
    }
    r.flexible = version >= FLEXIBLE_VERSION;
    let protocol_type = r.string()?.unwrap_or_default();
    let generation_id = r.i32()?;
    let protocol_name = r.string()?;
    let leader = r.string()?;
    if version >= 2 {
        r.i64()?;
    }
    // A member is at least its strings' lengths, two timeouts and two
    // byte arrays' lengths: never fewer than 8 bytes.
    let count = r.count(8)?;
    let mut members = Vec::with_capacity(count);
    for _ in 0..count {
        let member_id = r.string()??;
        let group_instance_id = if version >= 3 { r.string()? } else { None };
        let client_id = r.string()??;
        let client_host = r.string()??;
        let rebalance_timeout = if version >= 1 { Some(r.i32()?) } else { None };
        let session_timeout_ms = u64::try_from(r.i32()?.max(0)).ok()?;
        // Version 0 has no rebalance timeout: Kafka uses the session timeout.
        let rebalance_timeout_ms =
            rebalance_timeout.map_or(Some(session_timeout_ms), |t| u64::try_from(t.max(0)).ok())?;
        let subscription = r.bytes()?;
        let assignment = r.bytes()?;
        r.skip_tags()?;
        members.push(StoredClassicMember {
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            subscription,
            assignment,
        });
    }
    r.skip_tags()?;
    Some(StoredClassicGroup {
        protocol_type,
        generation_id,
        protocol_name,
        leader,
        members,
    })
}

/// Kafka's primitive types, classic (i16 string and i32 bytes lengths) or
/// flexible (compact lengths as unsigned varints, tagged fields).
struct Writer {
    buf: BytesMut,
    flexible: bool,
}

impl Writer {
    fn uvarint(&mut self, mut n: u64) {
        while n >= 0x80 {
            self.buf.put_u8((n as u8 & 0x7f) | 0x80);
            n >>= 7;
        }
        self.buf.put_u8(n as u8);
    }

    /// A (nullable) string; callers pick a version whose strings hold it.
    fn string(&mut self, s: Option<&str>) {
        match (s, self.flexible) {
            (None, false) => self.buf.put_i16(-1),
            (None, true) => self.uvarint(0),
            (Some(s), false) => {
                let len = s.len().min(i16::MAX as usize);
                self.buf.put_i16(i16::try_from(len).unwrap_or(i16::MAX));
                self.buf.put_slice(&s.as_bytes()[..len]);
            }
            (Some(s), true) => {
                self.uvarint(s.len() as u64 + 1);
                self.buf.put_slice(s.as_bytes());
            }
        }
    }

    fn bytes(&mut self, b: &[u8]) {
        if self.flexible {
            self.uvarint(b.len() as u64 + 1);
        } else {
            self.buf.put_i32(i32::try_from(b.len()).unwrap_or(i32::MAX));
        }
        self.buf.put_slice(b);
    }

    fn count(&mut self, n: usize) {
        if self.flexible {
            self.uvarint(n as u64 + 1);
        } else {
            self.buf.put_i32(i32::try_from(n).unwrap_or(i32::MAX));
        }
    }

    fn no_tags(&mut self) {
        if self.flexible {
            self.uvarint(0);
        }
    }
}

struct Reader {
    buf: Bytes,
    flexible: bool,
}

impl Reader {
    fn i16(&mut self) -> Option<i16> {
        (self.buf.remaining() >= 2).then(|| self.buf.get_i16())
    }
    fn i32(&mut self) -> Option<i32> {
        (self.buf.remaining() >= 4).then(|| self.buf.get_i32())
    }
    fn i64(&mut self) -> Option<i64> {
        (self.buf.remaining() >= 8).then(|| self.buf.get_i64())
    }

    fn uvarint(&mut self) -> Option<u64> {
        let mut n = 0u64;
        for shift in (0..35).step_by(7) {
            if !self.buf.has_remaining() {
                return None;
            }
            let b = self.buf.get_u8();
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(n);
            }
        }
        None
    }

    /// A length, None (null) for a negative classic or a zero compact one.
    fn len(&mut self, classic: Option<i64>) -> Option<Option<usize>> {
        let len = match classic {
            Some(len) => len,
            None => i64::try_from(self.uvarint()?).ok()? - 1,
        };
        if len < 0 {
            return Some(None);
        }
        let len = usize::try_from(len).ok()?;
        (len <= self.buf.remaining()).then_some(Some(len))
    }

    /// A nullable string: Some(None) for null, None when it does not decode.
    fn string(&mut self) -> Option<Option<String>> {
        let classic = if self.flexible {
            None
        } else {
            Some(i64::from(self.i16()?))
        };
        match self.len(classic)? {
            None => Some(None),
            Some(len) => String::from_utf8(self.buf.split_to(len).to_vec())
                .ok()
                .map(Some),
        }
    }

    /// Bytes (null read as empty).
    fn bytes(&mut self) -> Option<Bytes> {
        let classic = if self.flexible {
            None
        } else {
            Some(i64::from(self.i32()?))
        };
        Some(match self.len(classic)? {
            None => Bytes::new(),
            Some(len) => self.buf.split_to(len),
        })
    }

    /// An array's count, None unless the bytes left hold that many items
    /// of at least `min_item` bytes.
    fn count(&mut self, min_item: usize) -> Option<usize> {
        let classic = if self.flexible {
            None
        } else {
            Some(i64::from(self.i32()?))
        };
        let n = match classic {
            Some(n) => n,
            None => i64::try_from(self.uvarint()?).ok()? - 1,
        };
        let n = usize::try_from(n.max(0)).ok()?;
        (n.checked_mul(min_item)? <= self.buf.remaining()).then_some(n)
    }

    /// Tagged fields (flexible versions): none are known, all are skipped.
    fn skip_tags(&mut self) -> Option<()> {
        if !self.flexible {
            return Some(());
        }
        let tags = self.uvarint()?;
        for _ in 0..tags {
            self.uvarint()?;
            let size = usize::try_from(self.uvarint()?).ok()?;
            if size > self.buf.remaining() {
                return None;
            }
            self.buf.advance(size);
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group() -> StoredClassicGroup {
        StoredClassicGroup {
            protocol_type: "consumer".into(),
            generation_id: 7,
            protocol_name: Some("range".into()),
            leader: Some("m1".into()),
            members: vec![
                StoredClassicMember {
                    member_id: "m1".into(),
                    group_instance_id: Some("i-1".into()),
                    client_id: "c1".into(),
                    client_host: "/127.0.0.1".into(),
                    rebalance_timeout_ms: 300_000,
                    session_timeout_ms: 45_000,
                    subscription: Bytes::from_static(b"\x00\x01sub"),
                    assignment: Bytes::from_static(b"\x00\x01assign"),
                },
                StoredClassicMember {
                    member_id: "m2".into(),
                    group_instance_id: None,
                    client_id: "c2".into(),
                    client_host: "/127.0.0.2".into(),
                    rebalance_timeout_ms: 60_000,
                    session_timeout_ms: 10_000,
                    subscription: Bytes::new(),
                    assignment: Bytes::new(),
                },
            ],
        }
    }

    #[test]
    fn every_version_round_trips() {
        for version in 0..=MAX_VERSION {
            let mut expected = group();
            for m in &mut expected.members {
                if version < 3 {
                    m.group_instance_id = None;
                }
                if version < 1 {
                    m.rebalance_timeout_ms = m.session_timeout_ms;
                }
            }
            let value = encode_version(&group(), version);
            assert_eq!(decode(value), Some(expected), "version {version}");
        }
        let written = encode(&group());
        assert_eq!(&written[..2], &WRITTEN_VERSION.to_be_bytes());
        assert_eq!(decode(written), Some(group()));
    }

    /// GroupMetadataValue v3 laid out by hand from Kafka's schema: an
    /// Empty group (no protocol, no leader) and one with a member.
    #[test]
    fn kafkas_v3_layout() {
        let mut v = BytesMut::new();
        v.put_i16(3);
        v.put_i16(8);
        v.put_slice(b"consumer");
        v.put_i32(2);
        v.put_i16(5);
        v.put_slice(b"range");
        v.put_i16(1);
        v.put_slice(b"m");
        v.put_i64(1_700_000_000_000);
        v.put_i32(1);
        v.put_i16(1);
        v.put_slice(b"m");
        v.put_i16(-1); // no group.instance.id
        v.put_i16(1);
        v.put_slice(b"c");
        v.put_i16(1);
        v.put_slice(b"h");
        v.put_i32(300_000);
        v.put_i32(45_000);
        v.put_i32(2);
        v.put_slice(b"su");
        v.put_i32(1);
        v.put_slice(b"a");
        let g = decode(v.freeze()).expect("decodes");
        assert_eq!(g.generation_id, 2);
        assert_eq!(g.leader.as_deref(), Some("m"));
        assert_eq!(g.members.len(), 1);
        assert_eq!(g.members[0].session_timeout_ms, 45_000);
        assert_eq!(&g.members[0].subscription[..], b"su");
        let empty = StoredClassicGroup {
            generation_id: 3,
            ..StoredClassicGroup::default()
        };
        let bytes = encode(&empty);
        assert_eq!(
            &bytes[..],
            b"\x00\x03\x00\x00\x00\x00\x00\x03\xff\xff\xff\xff\
              \xff\xff\xff\xff\xff\xff\xff\xff\x00\x00\x00\x00"
        );
    }

    #[test]
    fn long_strings_are_written_as_version_4() {
        let mut g = group();
        g.members[0].client_id = "x".repeat(40_000);
        let value = encode(&g);
        assert_eq!(&value[..2], &FLEXIBLE_VERSION.to_be_bytes());
        assert_eq!(decode(value), Some(g));
    }

    #[test]
    fn hostile_values_do_not_decode() {
        let value = encode(&group());
        for cut in 0..value.len() {
            assert_eq!(decode(value.slice(..cut)), None, "cut at {cut}");
        }
        // a huge member count over a few bytes
        let mut v = BytesMut::new();
        v.put_i16(3);
        v.put_i16(0);
        v.put_i32(1);
        v.put_i16(-1);
        v.put_i16(-1);
        v.put_i64(-1);
        v.put_i32(i32::MAX);
        v.put_slice(&[0; 64]);
        assert_eq!(decode(v.freeze()), None);
        // an unknown version, and a flexible value with an endless varint
        assert_eq!(decode(Bytes::from_static(b"\x00\x05")), None);
        assert_eq!(
            decode(Bytes::from_static(b"\x00\x04\xff\xff\xff\xff\xff\xff")),
            None
        );
        // a lying string length
        assert_eq!(decode(Bytes::from_static(b"\x00\x00\x7f\xff")), None);
    }

    #[test]
    fn keys_name_their_group() {
        use super::super::consumer_group_records::group_of;
        assert_eq!(group_of(&key("g-1")).as_deref(), Some("g-1"));
        let records = BTreeMap::from([("g".to_string(), records_of("g", &group()))]);
        assert_eq!(classic_groups_of(&records).get("g"), Some(&group()));
        let damaged = BTreeMap::from([(
            "g".to_string(),
            BTreeMap::from([(key("g"), Bytes::from_static(b"\x00\x03\x00"))]),
        )]);
        assert!(classic_groups_of(&damaged).is_empty());
    }
}
