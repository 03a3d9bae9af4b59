//! Rewinding producer state when the log is truncated (a follower dropping
//! a divergent tail): Kafka rebuilds it from a snapshot; Chronik keeps none
//! at run time, so it reads the log backwards only as far as each producer
//! whose retained batches were cut off needs.
//!
//! Owns: choosing the producers a truncation invalidates and merging the
//! batches read back, newest range first, into their state as of the new
//! log end (as `replay` from the log start would leave it). Must not: do
//! I/O (the caller walks the headers) or judge sequences.
//!
//! A producer is done once its history cannot change by reading further
//! back: `BATCHES_TO_RETAIN` batches of its latest epoch were found, or an
//! epoch change was (replay clears the batches at every epoch change).
//! Producers with no batch left before the cut are forgotten: unknown ids
//! are not sequence-checked, as after retention deleted their batches.

use std::collections::HashMap;

use super::{ProducerBatch, ProducerStateEntry, ProducerStateManager, BATCHES_TO_RETAIN};

/// What was read back for one producer.
#[derive(Debug, Clone)]
struct History {
    /// Its state as a replay of the batches read so far leaves it.
    entry: ProducerStateEntry,
    /// An epoch change lies inside what was read: older batches cannot
    /// matter.
    epoch_changed: bool,
}

impl History {
    fn new(batch: &ProducerBatch) -> Self {
        let mut entry = ProducerStateEntry::new(batch.producer_epoch);
        // Rewinds run only for logs without transactions (see
        // `rewind_producer_state`): nothing completes here.
        let _ = entry.apply(batch);
        Self {
            entry,
            epoch_changed: false,
        }
    }

    fn apply(&mut self, batch: &ProducerBatch) {
        self.epoch_changed |= batch.producer_epoch != self.entry.epoch;
        let _ = self.entry.apply(batch);
    }

    fn is_complete(&self) -> bool {
        self.epoch_changed || self.entry.batches.len() == BATCHES_TO_RETAIN
    }

    /// `self` (newer) preceded by `older`, as a replay across both leaves it.
    fn after(mut self, older: History) -> History {
        if self.is_complete() {
            return self;
        }
        if older.entry.epoch != self.entry.epoch {
            self.epoch_changed = true;
            return self;
        }
        let mut entry = older.entry;
        for b in self.entry.batches {
            if entry.batches.len() == BATCHES_TO_RETAIN {
                entry.batches.pop_front();
            }
            entry.batches.push_back(b);
        }
        History {
            entry,
            epoch_changed: older.epoch_changed,
        }
    }
}

/// A rewind in progress. Feed it the batches of byte ranges of the log,
/// ranges newest first and the batches of each range oldest first, until
/// `is_done`, then `finish`.
#[derive(Debug)]
pub(crate) struct Rewind {
    /// The new log end: batches from here on no longer exist.
    end: i64,
    /// Producers still reading back, with what newer ranges gave (None: no
    /// batch found yet).
    pending: HashMap<i64, Option<History>>,
    /// The current range's batches, per pending producer.
    range: HashMap<i64, History>,
    done: Vec<(i64, ProducerStateEntry)>,
}

impl ProducerStateManager {
    /// Starts rewinding to a log that now ends at `end`: every producer with
    /// a retained batch at or past `end` (or with no batch retained, whose
    /// history cannot be told without reading) is taken out, to be rebuilt
    /// from the log by the returned `Rewind`. The others are unaffected: a
    /// later batch of theirs would be retained, or would have cleared them.
    pub(crate) fn begin_rewind(&mut self, end: i64) -> Rewind {
        let affected: Vec<i64> = self
            .producers
            .iter()
            .filter(|(_, e)| e.batches.back().is_none_or(|b| b.last_offset >= end))
            .map(|(&pid, _)| pid)
            .collect();
        for pid in &affected {
            self.producers.remove(pid);
        }
        Rewind {
            end,
            pending: affected.into_iter().map(|pid| (pid, None)).collect(),
            range: HashMap::new(),
            done: Vec::new(),
        }
    }
}

impl Rewind {
    /// No producer needs older batches.
    pub(crate) fn is_done(&self) -> bool {
        self.pending.is_empty()
    }

    /// The next batch of the current range (oldest first).
    pub(crate) fn observe(&mut self, batch: &ProducerBatch) {
        if batch.producer_id < 0
            || batch.base_offset >= self.end
            || !self.pending.contains_key(&batch.producer_id)
        {
            return;
        }
        match self.range.get_mut(&batch.producer_id) {
            Some(history) => history.apply(batch),
            None => {
                self.range.insert(batch.producer_id, History::new(batch));
            }
        }
    }

    /// The current range is read whole; the next one fed is older.
    pub(crate) fn end_range(&mut self) {
        for (pid, older) in self.range.drain() {
            let Some(slot) = self.pending.get_mut(&pid) else {
                continue;
            };
            let merged = match slot.take() {
                Some(newer) => newer.after(older),
                None => older,
            };
            if merged.is_complete() {
                self.pending.remove(&pid);
                self.done.push((pid, merged.entry));
            } else {
                *slot = Some(merged);
            }
        }
    }

    /// Installs the rebuilt producers. What was read of an unfinished range
    /// is dropped (newer batches of it may be missing); producers with
    /// nothing found stay forgotten.
    pub(crate) fn finish(self, into: &mut ProducerStateManager) {
        let found = self
            .pending
            .into_iter()
            .filter_map(|(pid, h)| h.map(|h| (pid, h.entry)));
        for (pid, entry) in self.done.into_iter().chain(found) {
            into.producers.insert(pid, entry);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::AppendCheck;
    use super::*;

    /// A data batch of `records` records at `offset`.
    fn batch(pid: i64, epoch: i16, seq: i32, offset: i64, records: i32) -> ProducerBatch {
        ProducerBatch {
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            base_offset: offset,
            last_offset_delta: records - 1,
            max_timestamp: 0,
            is_control: false,
            is_transactional: false,
            control: None,
        }
    }

    fn replayed(batches: &[ProducerBatch]) -> ProducerStateManager {
        let mut state = ProducerStateManager::default();
        for b in batches {
            state.replay(b);
        }
        state
    }

    /// Rewinds the state of the whole `log` to `end`, reading it back in
    /// ranges of `range_len` batches, and checks it against a replay of the
    /// batches before `end`. Returns how many ranges were read.
    fn check_rewind(log: &[ProducerBatch], end: i64, range_len: usize) -> usize {
        let mut state = replayed(log);
        let mut rewind = state.begin_rewind(end);
        let mut ranges = 0;
        for range in log.chunks(range_len).rev() {
            if rewind.is_done() {
                break;
            }
            ranges += 1;
            for b in range {
                rewind.observe(b);
            }
            rewind.end_range();
        }
        rewind.finish(&mut state);
        let kept: Vec<ProducerBatch> = log
            .iter()
            .copied()
            .filter(|b| b.base_offset < end)
            .collect();
        assert_eq!(
            state,
            replayed(&kept),
            "rewind to {end} in ranges of {range_len}"
        );
        ranges
    }

    /// Producer 1 at epoch 0 (seq 0..=13, one batch per 2 offsets), then at
    /// epoch 1 (seq 0..=5), interleaved with producer 2 and plain batches.
    fn mixed_log() -> Vec<ProducerBatch> {
        let mut log = Vec::new();
        let mut offset = 0;
        let mut push = |pid: i64, epoch: i16, seq: i32| {
            log.push(batch(pid, epoch, seq, offset, 2));
            offset += 2;
        };
        for seq in (0..14).step_by(2) {
            push(1, 0, seq);
            push(-1, -1, -1);
            push(2, 3, seq);
        }
        for seq in (0..6).step_by(2) {
            push(1, 1, seq);
            push(2, 3, 14 + seq);
        }
        log
    }

    #[test]
    fn matches_a_replay_of_what_is_left_wherever_the_log_is_cut() {
        let log = mixed_log();
        let end = log.last().map_or(0, |b| b.base_offset + 2);
        for cut in 0..=end {
            for range_len in [1, 2, 5, 64] {
                check_rewind(&log, cut, range_len);
            }
        }
    }

    #[test]
    fn reads_back_only_as_far_as_needed() {
        let log = mixed_log();
        // Cutting the last batch (producer 2's, alone in the newest range of
        // two): producer 2 has five batches back after six more ranges, far
        // from the log start.
        assert_eq!(log.len(), 27);
        assert_eq!(check_rewind(&log, log[26].base_offset, 2), 7);
        // A cut past every producer's last batch reads nothing.
        let unaffected = replayed(&log).begin_rewind(i64::MAX);
        assert!(unaffected.is_done());
    }

    #[test]
    fn a_producer_resumes_from_its_last_batch_left() {
        // seq 0-2 at 0..=2, seq 3-5 at 3..=5; cut at 3.
        let log = [batch(7, 0, 0, 0, 3), batch(7, 0, 3, 3, 3)];
        let mut state = replayed(&log);
        let mut rewind = state.begin_rewind(3);
        log.iter().for_each(|b| rewind.observe(b));
        rewind.end_range();
        rewind.finish(&mut state);
        let next = |seq| batch(7, 0, seq, 3, 3);
        assert!(matches!(
            state.check_append([next(3)]),
            Ok(AppendCheck::Append(_))
        ));
        assert!(state.check_append([next(6)]).is_err());
        assert!(matches!(
            state.check_append([batch(7, 0, 0, 9, 3)]),
            Ok(AppendCheck::Duplicate {
                base_offset: 0,
                last_offset: 2
            })
        ));
    }
}
