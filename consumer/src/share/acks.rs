//! Acknowledgements: which offsets of an acquired range get ACCEPT and
//! which GAP, their encoding as Kafka's AcknowledgementBatches (runs of one
//! type), and the acknowledgements a fetch loop holds until a report
//! (checkpoint) naming them is on disk.
//!
//! Owns: `AckType`, [`ack_plan`], [`batches`], [`Pending`]. Must not: send
//! anything or touch the tally.

use std::collections::BTreeMap;

use chronik_harness::intervals::IntervalSet;
use kafka_protocol::messages::share_fetch_request::AcknowledgementBatch;

/// Kafka's acknowledge types (GAP is 0: no record at that offset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckType {
    Gap = 0,
    Accept = 1,
}

/// For each acquired range (first, last) and the offsets of the records
/// delivered from it (sorted), the offsets to ACCEPT and those to GAP.
pub fn ack_plan(acquired: &[(i64, i64)], delivered: &[i64]) -> Vec<(i64, AckType)> {
    let mut plan = Vec::new();
    for &(first, last) in acquired {
        if last < first {
            continue;
        }
        let start = delivered.partition_point(|o| *o < first);
        let mut next = start;
        for offset in first..=last {
            if delivered.get(next) == Some(&offset) {
                plan.push((offset, AckType::Accept));
                next += 1;
            } else {
                plan.push((offset, AckType::Gap));
            }
        }
    }
    plan
}

/// `acks` (offset, type), sorted by offset, as batches of consecutive
/// offsets sharing one type.
pub fn batches(acks: &[(i64, AckType)]) -> Vec<AcknowledgementBatch> {
    let mut out: Vec<AcknowledgementBatch> = Vec::new();
    let mut run: Option<(i64, i64, AckType)> = None;
    let flush = |out: &mut Vec<AcknowledgementBatch>, (first, last, t): (i64, i64, AckType)| {
        out.push(
            AcknowledgementBatch::default()
                .with_first_offset(first)
                .with_last_offset(last)
                .with_acknowledge_types(vec![t as i8]),
        );
    };
    for &(offset, t) in acks {
        run = match run {
            Some((first, last, rt)) if rt == t && offset == last + 1 => Some((first, offset, rt)),
            Some(r) => {
                flush(&mut out, r);
                Some((offset, offset, t))
            }
            None => Some((offset, offset, t)),
        };
    }
    if let Some(r) = run {
        flush(&mut out, r);
    }
    out
}

/// One held acknowledgement: (checkpoint generation, offset, type).
type Held = (u64, i64, AckType);

/// Acknowledgements decided but not yet sent, per partition, each tagged
/// with the checkpoint generation it was decided in.
#[derive(Debug, Default)]
pub struct Pending {
    /// (topic id, partition) -> held acknowledgements, in order.
    by_partition: BTreeMap<(uuid::Uuid, i32), Vec<Held>>,
}

/// The acknowledgements of one partition taken for sending.
#[derive(Debug, Clone)]
pub struct Taken {
    pub acks: Vec<(i64, AckType)>,
    /// The ACCEPTed offsets among them (what a confirmation confirms).
    pub accepted: IntervalSet,
}

impl Pending {
    pub fn push(&mut self, key: (uuid::Uuid, i32), generation: u64, offset: i64, t: AckType) {
        self.by_partition
            .entry(key)
            .or_default()
            .push((generation, offset, t));
    }

    pub fn is_empty(&self) -> bool {
        self.by_partition.values().all(Vec::is_empty)
    }

    /// The oldest generation still held, if any.
    pub fn oldest(&self) -> Option<u64> {
        self.by_partition
            .values()
            .filter_map(|v| v.first().map(|a| a.0))
            .min()
    }

    pub fn has(&self, key: &(uuid::Uuid, i32)) -> bool {
        self.by_partition.get(key).is_some_and(|v| !v.is_empty())
    }

    /// Takes every acknowledgement of generation <= `durable`, per partition.
    pub fn take_durable(&mut self, durable: u64) -> BTreeMap<(uuid::Uuid, i32), Taken> {
        let mut out = BTreeMap::new();
        for (key, list) in self.by_partition.iter_mut() {
            let n = list.iter().take_while(|a| a.0 <= durable).count();
            if n == 0 {
                continue;
            }
            let mut acks: Vec<(i64, AckType)> = list.drain(..n).map(|(_, o, t)| (o, t)).collect();
            acks.sort_by_key(|a| a.0);
            acks.dedup_by_key(|a| a.0);
            let mut accepted = IntervalSet::new();
            for (o, t) in &acks {
                if *t == AckType::Accept {
                    accepted.insert(u64::try_from(*o).unwrap_or(0));
                }
            }
            out.insert(*key, Taken { acks, accepted });
        }
        self.by_partition.retain(|_, v| !v.is_empty());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acquired_offsets_without_a_record_are_gaps() {
        let plan = ack_plan(&[(10, 14), (20, 20)], &[10, 11, 13, 14, 20, 99]);
        assert_eq!(
            plan,
            vec![
                (10, AckType::Accept),
                (11, AckType::Accept),
                (12, AckType::Gap),
                (13, AckType::Accept),
                (14, AckType::Accept),
                (20, AckType::Accept),
            ]
        );
        let b = batches(&plan);
        let shape: Vec<(i64, i64, Vec<i8>)> = b
            .iter()
            .map(|b| (b.first_offset, b.last_offset, b.acknowledge_types.clone()))
            .collect();
        assert_eq!(
            shape,
            vec![
                (10, 11, vec![1]),
                (12, 12, vec![0]),
                (13, 14, vec![1]),
                (20, 20, vec![1])
            ]
        );
    }

    #[test]
    fn only_durable_generations_are_taken() {
        let key = (uuid::Uuid::nil(), 0);
        let mut p = Pending::default();
        p.push(key, 1, 5, AckType::Accept);
        p.push(key, 2, 6, AckType::Gap);
        p.push(key, 3, 7, AckType::Accept);
        assert_eq!(p.oldest(), Some(1));
        let taken = p.take_durable(2);
        assert_eq!(
            taken[&key].acks,
            vec![(5, AckType::Accept), (6, AckType::Gap)]
        );
        assert_eq!(taken[&key].accepted.ranges(), &[[5, 5]]);
        assert!(p.has(&key));
        assert_eq!(p.take_durable(3)[&key].acks, vec![(7, AckType::Accept)]);
        assert!(p.is_empty());
    }
}
