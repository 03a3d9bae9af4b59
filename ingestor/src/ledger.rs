//! The ledger: which of this ingestor's sequence numbers were acknowledged by
//! Kafka and which failed, kept as interval sets so its size follows the
//! number of gaps, not the number of messages.
//!
//! A sequence number is allocated only when librdkafka accepted the message
//! into its queue, so every number below `next_sequence` is exactly one of
//! acknowledged, failed or in flight. A verifying consumer reconciles against
//! it: an acknowledged sequence missing from the topic is a loss; a failed one
//! may or may not be there (a timed-out produce can still have been written).
//! Must not: know about HTTP or rdkafka types.

use chronik_harness::intervals::IntervalSet;
pub use chronik_harness::ledger::Ledger as LedgerSnapshot;

/// Outcomes of every sequence number handed to Kafka.
#[derive(Debug, Default)]
pub struct Ledger {
    pub acknowledged: IntervalSet,
    pub failed: IntervalSet,
}

impl Ledger {
    /// A snapshot in the shared ledger schema; `next_sequence` must be read
    /// after taking the ledger's lock so that every recorded sequence is
    /// below it.
    pub fn snapshot(
        &self,
        ingestor_id: &str,
        producer_id: u64,
        next_sequence: u64,
    ) -> LedgerSnapshot {
        LedgerSnapshot::new(
            Some(ingestor_id.to_owned()),
            producer_id,
            next_sequence,
            self.acknowledged.clone(),
            self.failed.clone(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_counts_in_flight() {
        let mut ledger = Ledger::default();
        for s in [0, 1, 2, 4] {
            ledger.acknowledged.insert(s);
        }
        ledger.failed.insert(3);
        let snap = ledger.snapshot("host-a", 0xabc, 7);
        assert_eq!(snap.acknowledged.ranges(), &[[0, 2], [4, 4]]);
        assert_eq!(snap.failed.ranges(), &[[3, 3]]);
        assert_eq!(
            (snap.acknowledged.len(), snap.failed.len(), snap.in_flight()),
            (4, 1, 2)
        );
        assert_eq!(snap.producer_id_hex.as_deref(), Some("0000000000000abc"));
    }
}
