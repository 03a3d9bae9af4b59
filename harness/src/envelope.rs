//! The verification envelope.
//!
//! Wire format (the value of the Kafka record header `chronik-env`), 32 bytes,
//! big-endian:
//!
//! | bytes  | field          | meaning                                                     |
//! |--------|----------------|-------------------------------------------------------------|
//! | 0..2   | magic `"CE"`   | identifies an envelope                                      |
//! | 2      | version = 1    |                                                             |
//! | 3      | reserved = 0   |                                                             |
//! | 4..12  | producer_id    | u64, unique per producing process or task                   |
//! | 12..20 | sequence       | u64, 0,1,2,… per producer id, in send order                 |
//! | 20..28 | send_time_us   | i64, µs since the Unix epoch: intended send time (bench) or HTTP accept time (ingestor) |
//! | 28..32 | value_crc32c   | u32, CRC-32C (Castagnoli) of the record value               |
//!
//! A consumer that sees (producer_id, sequence) twice at different offsets has
//! found a duplicate; a gap in a producer's sequences is a loss candidate
//! (reconciled against the producer's ledger); a value whose CRC differs is
//! corrupt; `consume time − send_time_us` is the end-to-end latency.
//! Must not: depend on any Kafka client library.

use std::time::{SystemTime, UNIX_EPOCH};

use thiserror::Error;

/// The Kafka header key carrying the envelope.
pub const ENVELOPE_HEADER: &str = "chronik-env";
/// Encoded size in bytes.
pub const ENVELOPE_LEN: usize = 32;
const MAGIC: [u8; 2] = *b"CE";
const VERSION: u8 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Envelope {
    pub producer_id: u64,
    pub sequence: u64,
    pub send_time_us: i64,
    pub value_crc32c: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EnvelopeError {
    #[error("envelope is {0} bytes, expected {ENVELOPE_LEN}")]
    Length(usize),
    #[error("envelope magic {0:?} is not \"CE\"")]
    Magic([u8; 2]),
    #[error("envelope version {0} is not supported (expected {VERSION})")]
    Version(u8),
}

impl Envelope {
    /// An envelope for `value`, computing its checksum.
    pub fn new(producer_id: u64, sequence: u64, send_time_us: i64, value: &[u8]) -> Envelope {
        Envelope {
            producer_id,
            sequence,
            send_time_us,
            value_crc32c: crc32c::crc32c(value),
        }
    }

    pub fn encode(&self) -> [u8; ENVELOPE_LEN] {
        let mut out = [0u8; ENVELOPE_LEN];
        out[0..2].copy_from_slice(&MAGIC);
        out[2] = VERSION;
        out[4..12].copy_from_slice(&self.producer_id.to_be_bytes());
        out[12..20].copy_from_slice(&self.sequence.to_be_bytes());
        out[20..28].copy_from_slice(&self.send_time_us.to_be_bytes());
        out[28..32].copy_from_slice(&self.value_crc32c.to_be_bytes());
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Envelope, EnvelopeError> {
        let bytes: &[u8; ENVELOPE_LEN] = bytes
            .try_into()
            .map_err(|_| EnvelopeError::Length(bytes.len()))?;
        if bytes[0..2] != MAGIC {
            return Err(EnvelopeError::Magic([bytes[0], bytes[1]]));
        }
        if bytes[2] != VERSION {
            return Err(EnvelopeError::Version(bytes[2]));
        }
        let u64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[at..at + 8]);
            u64::from_be_bytes(b)
        };
        Ok(Envelope {
            producer_id: u64_at(4),
            sequence: u64_at(12),
            send_time_us: u64_at(20) as i64,
            value_crc32c: u32::from_be_bytes([bytes[28], bytes[29], bytes[30], bytes[31]]),
        })
    }

    /// Whether `value` is the value this envelope was made for.
    pub fn matches(&self, value: &[u8]) -> bool {
        crc32c::crc32c(value) == self.value_crc32c
    }
}

/// Microseconds since the Unix epoch, on the wall clock (comparable across
/// processes on one machine).
pub fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_detects_corruption() {
        let e = Envelope::new(0xdead_beef, 42, 1_700_000_000_123_456, b"payload");
        let bytes = e.encode();
        assert_eq!(&bytes[0..3], b"CE\x01");
        let d = Envelope::decode(&bytes).expect("decodes");
        assert_eq!(d, e);
        assert!(d.matches(b"payload"));
        assert!(!d.matches(b"paYload"));
    }

    #[test]
    fn rejects_foreign_headers() {
        assert_eq!(Envelope::decode(b"short"), Err(EnvelopeError::Length(5)));
        let mut bytes = Envelope::new(1, 2, 3, b"").encode();
        bytes[0] = b'X';
        assert!(matches!(
            Envelope::decode(&bytes),
            Err(EnvelopeError::Magic(_))
        ));
        let mut bytes = Envelope::new(1, 2, 3, b"").encode();
        bytes[2] = 9;
        assert_eq!(Envelope::decode(&bytes), Err(EnvelopeError::Version(9)));
    }

    #[test]
    fn the_layout_is_stable() {
        // Pinned bytes: other languages (the Python reports) decode this.
        let e = Envelope {
            producer_id: 1,
            sequence: 2,
            send_time_us: 3,
            value_crc32c: 4,
        };
        let expected: [u8; 32] = [
            b'C', b'E', 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0,
            3, 0, 0, 0, 4,
        ];
        assert_eq!(e.encode(), expected);
    }
}
