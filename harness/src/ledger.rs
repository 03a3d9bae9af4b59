//! The ledger JSON: what one producer says happened to its sequence numbers.
//!
//! Owns: the one schema every tool writes (the ingestor's `GET /ledger`,
//! `envelope-producer --ledger`), chronik-bench's producers keep in memory,
//! and the verifying consumer reads (README "Ledger JSON"). Field names are
//! snake_case only.
//! Must not: reconcile ledgers with what was consumed (that is `reconcile`)
//! or know how a ledger is fetched.
//!
//! ```json
//! {"ingestor_id": "ingestor-0", "producer_id": 176, "producer_id_hex": "00000000000000b0",
//!  "next_sequence": 50, "acknowledged": [[0, 24], [26, 49]], "failed": [[25, 25]],
//!  "acknowledged_count": 49, "failed_count": 1, "in_flight": 0}
//! ```
//!
//! Only `acknowledged` and one of `producer_id`/`producer_id_hex` are
//! required when reading. The three counts are written for people and
//! scripts (they follow from the other fields) and ignored when reading.

use serde::{Deserialize, Serialize, Serializer};

use crate::intervals::IntervalSet;

/// One producer's ledger.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Ledger {
    /// The ingestor process that owns the producer, if any.
    #[serde(default)]
    pub ingestor_id: Option<String>,
    /// The envelope's `producer_id` of every message of this producer.
    #[serde(default)]
    pub producer_id: Option<u64>,
    /// The same id as 16 hex digits (JSON numbers lose precision above 2^53
    /// in some parsers).
    #[serde(default)]
    pub producer_id_hex: Option<String>,
    /// Sequences `0..next_sequence` were handed to the Kafka client.
    #[serde(default)]
    pub next_sequence: Option<u64>,
    /// Sequences delivered with an acknowledgement.
    #[serde(default)]
    pub acknowledged: IntervalSet,
    /// Sequences whose delivery was reported as failed.
    #[serde(default)]
    pub failed: IntervalSet,
}

impl Ledger {
    /// A producer's complete ledger (both id spellings filled in).
    pub fn new(
        ingestor_id: Option<String>,
        producer_id: u64,
        next_sequence: u64,
        acknowledged: IntervalSet,
        failed: IntervalSet,
    ) -> Ledger {
        Ledger {
            ingestor_id,
            producer_id: Some(producer_id),
            producer_id_hex: Some(format!("{producer_id:016x}")),
            next_sequence: Some(next_sequence),
            acknowledged,
            failed,
        }
    }

    /// The producer id, from `producer_id` or else `producer_id_hex`.
    pub fn id(&self) -> Option<u64> {
        self.producer_id.or_else(|| {
            let hex = self.producer_id_hex.as_deref()?;
            u64::from_str_radix(hex.trim_start_matches("0x"), 16).ok()
        })
    }

    /// Handed to Kafka with no outcome yet (0 without `next_sequence`).
    pub fn in_flight(&self) -> u64 {
        let done = self.acknowledged.len().saturating_add(self.failed.len());
        self.next_sequence.unwrap_or(0).saturating_sub(done)
    }
}

/// The written form: the fields plus the derived counts.
#[derive(Serialize)]
struct Written<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    ingestor_id: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    producer_id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    producer_id_hex: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_sequence: Option<u64>,
    acknowledged: &'a IntervalSet,
    failed: &'a IntervalSet,
    acknowledged_count: u64,
    failed_count: u64,
    in_flight: u64,
}

impl Serialize for Ledger {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Written {
            ingestor_id: &self.ingestor_id,
            producer_id: self.producer_id,
            producer_id_hex: &self.producer_id_hex,
            next_sequence: self.next_sequence,
            acknowledged: &self.acknowledged,
            failed: &self.failed,
            acknowledged_count: self.acknowledged.len(),
            failed_count: self.failed.len(),
            in_flight: self.in_flight(),
        }
        .serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(r: &[[u64; 2]]) -> IntervalSet {
        IntervalSet::from_ranges(r.iter().copied())
    }

    #[test]
    fn written_form_has_counts_and_reads_back() {
        let ledger = Ledger::new(
            Some("host-a".into()),
            0xabc,
            7,
            set(&[[0, 2], [4, 4]]),
            set(&[[3, 3]]),
        );
        let json = serde_json::to_value(&ledger).expect("serialize");
        assert_eq!(
            json,
            serde_json::json!({
                "ingestor_id": "host-a", "producer_id": 2748, "producer_id_hex": "0000000000000abc",
                "next_sequence": 7, "acknowledged": [[0, 2], [4, 4]], "failed": [[3, 3]],
                "acknowledged_count": 4, "failed_count": 1, "in_flight": 2
            })
        );
        let back: Ledger = serde_json::from_value(json).expect("deserialize");
        assert_eq!(back, ledger);
    }

    #[test]
    fn minimal_ledger_and_hex_id() {
        let l: Ledger = serde_json::from_str(
            r#"{"producer_id_hex": "0x00000000000000b0", "acknowledged": [[0, 9]]}"#,
        )
        .expect("parse");
        assert_eq!(
            (l.id(), l.acknowledged.len(), l.in_flight()),
            (Some(176), 10, 0)
        );
        let none: Ledger = serde_json::from_str(r#"{"acknowledged": []}"#).expect("parse");
        assert_eq!(none.id(), None);
    }
}
