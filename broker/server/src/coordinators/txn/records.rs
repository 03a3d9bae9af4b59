//! The records of `__transaction_state`: key = (version 0, transactional
//! id), value = the id's `TxnMetadata` (version 0), a tombstone (no value)
//! when the id expired.
//!
//! Owns: that encoding, and refusing anything malformed (a record that does
//! not decode is skipped at load, never half-applied).

use std::collections::BTreeSet;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use chronik_coordinator_state::txn::{TxnMetadata, TxnState};

use crate::coordinators::internal_topic::{get_str, put_str};

const KEY_VERSION: i16 = 0;
const VALUE_VERSION: i16 = 0;
/// Kafka stores transactional ids as a classic string (16-bit length).
pub const MAX_TRANSACTIONAL_ID_BYTES: usize = i16::MAX as usize;

pub fn encode_key(transactional_id: &str) -> Bytes {
    let mut buf = BytesMut::with_capacity(4 + transactional_id.len());
    buf.put_i16(KEY_VERSION);
    put_str(&mut buf, transactional_id);
    buf.freeze()
}

pub fn decode_key(mut key: Bytes) -> Option<String> {
    if key.remaining() < 2 || key.get_i16() != KEY_VERSION {
        return None;
    }
    let id = get_str(&mut key)?;
    key.is_empty().then_some(id)
}

pub fn encode_value(m: &TxnMetadata) -> Bytes {
    let mut buf = BytesMut::with_capacity(64 + m.partitions.len() * 24);
    buf.put_i16(VALUE_VERSION);
    buf.put_i64(m.producer_id);
    buf.put_i16(m.producer_epoch);
    buf.put_i32(m.timeout_ms);
    buf.put_u8(m.state.id());
    buf.put_i64(m.start_ms);
    buf.put_i64(m.update_ms);
    buf.put_u32(u32::try_from(m.partitions.len()).unwrap_or(u32::MAX));
    for (topic, partition) in &m.partitions {
        put_str(&mut buf, topic);
        buf.put_i32(*partition);
    }
    buf.freeze()
}

pub fn decode_value(mut value: Bytes) -> Option<TxnMetadata> {
    if value.remaining() < 2 + 8 + 2 + 4 + 1 + 8 + 8 + 4 || value.get_i16() != VALUE_VERSION {
        return None;
    }
    let producer_id = value.get_i64();
    let producer_epoch = value.get_i16();
    let timeout_ms = value.get_i32();
    let state = TxnState::from_id(value.get_u8())?;
    let start_ms = value.get_i64();
    let update_ms = value.get_i64();
    let count = value.get_u32();
    let mut partitions = BTreeSet::new();
    for _ in 0..count {
        // Each entry takes at least 6 bytes: a count beyond what is left
        // is a damaged record, refused before any allocation.
        let topic = get_str(&mut value)?;
        if value.remaining() < 4 {
            return None;
        }
        partitions.insert((topic, value.get_i32()));
    }
    value.is_empty().then_some(TxnMetadata {
        producer_id,
        producer_epoch,
        timeout_ms,
        state,
        partitions,
        start_ms,
        update_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trips_and_damage_is_refused() {
        let m = TxnMetadata {
            producer_id: 77,
            producer_epoch: 3,
            timeout_ms: 60_000,
            state: TxnState::PrepareCommit,
            partitions: BTreeSet::from([
                ("orders".to_string(), 2),
                ("__consumer_offsets".to_string(), 0),
            ]),
            start_ms: 1000,
            update_ms: 2000,
        };
        let value = encode_value(&m);
        assert_eq!(decode_value(value.clone()), Some(m));
        assert_eq!(
            decode_value(value.slice(..value.len() - 1)),
            None,
            "truncated"
        );
        let mut longer = BytesMut::from(&value[..]);
        longer.put_u8(0);
        assert_eq!(decode_value(longer.freeze()), None, "trailing bytes");
        let mut huge = BytesMut::from(&value[..2 + 8 + 2 + 4 + 1 + 8 + 8]);
        huge.put_u32(u32::MAX);
        assert_eq!(decode_value(huge.freeze()), None, "a count past the record");
        assert_eq!(decode_key(encode_key("tx-1")), Some("tx-1".to_string()));
        assert_eq!(decode_key(Bytes::from_static(b"\x00\x00\x00\x09ab")), None);
    }
}
