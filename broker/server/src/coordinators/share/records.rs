//! The `__share_group_state` record encoding: one record per share-partition,
//! keyed by (group, topic id, partition), holding its latest snapshot
//! (Kafka's ShareSnapshot: state epoch, leader epoch, start offset and the
//! state batches). A tombstone deletes the share-partition's state.
//!
//! Owns: the byte layout, versioned (a leading i16, 0 today), and its
//! decoding of what a replay finds, which is bounded and refuses anything
//! a store could not have written. Must not: decide what is written.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use chronik_coordinator_state::share_partition::{
    RecordState, ShareSnapshot, StateBatch, MAX_SNAPSHOT_OFFSETS,
};

use crate::coordinators::internal_topic::{get_str, put_str};

const KEY_VERSION: i16 = 0;
const VALUE_VERSION: i16 = 0;
/// Most state batches one record may hold (one per offset at worst).
const MAX_BATCHES: usize = MAX_SNAPSHOT_OFFSETS as usize;

/// A share-partition: (group id, topic id, partition).
pub type ShareKey = (String, [u8; 16], i32);

/// A snapshot with the leader epoch of the partition leader that wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoredShareState {
    pub leader_epoch: i32,
    pub snapshot: ShareSnapshot,
}

pub fn encode_key((group, topic_id, partition): &ShareKey) -> Bytes {
    let mut buf = BytesMut::with_capacity(group.len() + 24);
    buf.put_i16(KEY_VERSION);
    put_str(&mut buf, group);
    buf.put_slice(topic_id);
    buf.put_i32(*partition);
    buf.freeze()
}

pub fn decode_key(mut buf: Bytes) -> Option<ShareKey> {
    if buf.remaining() < 2 || buf.get_i16() != KEY_VERSION {
        return None;
    }
    let group = get_str(&mut buf)?;
    if buf.remaining() != 20 {
        return None;
    }
    let mut topic_id = [0u8; 16];
    buf.copy_to_slice(&mut topic_id);
    Some((group, topic_id, buf.get_i32()))
}

pub fn encode_value(state: &StoredShareState) -> Bytes {
    let s = &state.snapshot;
    let mut buf = BytesMut::with_capacity(22 + s.batches.len() * 19);
    buf.put_i16(VALUE_VERSION);
    buf.put_i32(s.state_epoch);
    buf.put_i32(state.leader_epoch);
    buf.put_i64(s.start_offset);
    buf.put_u32(u32::try_from(s.batches.len()).unwrap_or(u32::MAX));
    for b in &s.batches {
        buf.put_i64(b.first_offset);
        buf.put_i64(b.last_offset);
        buf.put_i8(b.state.id());
        buf.put_u16(b.delivery_count);
    }
    buf.freeze()
}

pub fn decode_value(mut buf: Bytes) -> Option<StoredShareState> {
    if buf.remaining() < 22 || buf.get_i16() != VALUE_VERSION {
        return None;
    }
    let state_epoch = buf.get_i32();
    let leader_epoch = buf.get_i32();
    let start_offset = buf.get_i64();
    let count = usize::try_from(buf.get_u32()).ok()?;
    if count > MAX_BATCHES || buf.remaining() != count * 19 {
        return None;
    }
    let mut batches = Vec::with_capacity(count);
    for _ in 0..count {
        let first_offset = buf.get_i64();
        let last_offset = buf.get_i64();
        let state = RecordState::from_id(buf.get_i8())?;
        let delivery_count = buf.get_u16();
        batches.push(StateBatch {
            first_offset,
            last_offset,
            state,
            delivery_count,
        });
    }
    Some(StoredShareState {
        leader_epoch,
        snapshot: ShareSnapshot {
            state_epoch,
            start_offset,
            batches,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_round_trip_and_garbage_is_refused() {
        let key = ("g".to_string(), [3u8; 16], 7);
        assert_eq!(decode_key(encode_key(&key)), Some(key));
        let state = StoredShareState {
            leader_epoch: 4,
            snapshot: ShareSnapshot {
                state_epoch: 2,
                start_offset: 10,
                batches: vec![StateBatch {
                    first_offset: 10,
                    last_offset: 12,
                    state: RecordState::Acknowledged,
                    delivery_count: 1,
                }],
            },
        };
        let bytes = encode_value(&state);
        assert_eq!(decode_value(bytes.clone()), Some(state));
        assert_eq!(decode_value(bytes.slice(..bytes.len() - 1)), None);
        let mut lying = BytesMut::from(&bytes[..]);
        lying[18..22].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(decode_value(lying.freeze()), None);
        assert_eq!(decode_key(Bytes::from_static(&[0, 0, 0, 1, b'g'])), None);
    }
}
