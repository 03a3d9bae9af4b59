//! Kafka's transaction coordinator (KIP-98) as pure state transitions.
//!
//! Owns: a transactional id's metadata (producer id and epoch, timeout,
//! state, the partitions in its open transaction) and every transition of
//! it that a request or the clock asks for, with the error Kafka answers
//! when one is not allowed. The owner (the server's `txn` module) persists
//! what a transition returns to `__transaction_state` before acting on it,
//! writes the markers, and feeds the time. Nothing here does I/O, reads a
//! clock or allocates producer ids: callers pass `now` and a fresh id.
//!
//! States and moves, as Kafka's `TransactionState`:
//! ```text
//! Empty ─AddPartitions─▶ Ongoing ─EndTxn(commit)─▶ PrepareCommit ─markers written─▶ CompleteCommit
//!                           │     ─EndTxn(abort)──▶ PrepareAbort ──markers written─▶ CompleteAbort
//!                           └─timeout / InitProducerId: epoch bumped (fencing the old producer)─▶ PrepareAbort
//! Complete*/Empty ─InitProducerId─▶ Empty (epoch + 1)     Complete* ─AddPartitions─▶ Ongoing
//! ```

use std::collections::BTreeSet;

/// (topic, partition)
pub type TopicPartition = (String, i32);

/// Kafka's `transaction.max.timeout.ms` default: a producer may ask for at
/// most 15 minutes.
pub const MAX_TRANSACTION_TIMEOUT_MS: i32 = 900_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
}

impl TxnState {
    pub const ALL: [TxnState; 6] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
    ];

    /// The name DescribeTransactions / ListTransactions use.
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
        }
    }

    pub fn from_name(name: &str) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Kafka's state ids in `__transaction_state` values.
    pub fn id(self) -> u8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
        }
    }

    pub fn from_id(id: u8) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|s| s.id() == id)
    }

    /// Markers are being written: the transaction's end is decided.
    pub fn is_preparing(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }
}

/// One transactional id's state, as stored in `__transaction_state`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    /// The partitions of the open (or ending) transaction.
    pub partitions: BTreeSet<TopicPartition>,
    /// When the open transaction started (-1: none open).
    pub start_ms: i64,
    pub update_ms: i64,
}

/// Why a transition is refused, in Kafka's error names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnError {
    /// A previous transaction is still being completed: retry.
    ConcurrentTransactions,
    /// The request's epoch is not the current one: a newer producer took
    /// over the transactional id (INVALID_PRODUCER_EPOCH for old versions).
    ProducerFenced,
    /// The producer id is not the one this transactional id holds.
    InvalidProducerIdMapping,
    /// The request does not fit the state (e.g. commit of an aborting
    /// transaction).
    InvalidTxnState,
    /// The timeout is not within 1 ms .. transaction.max.timeout.ms.
    InvalidTransactionTimeout,
}

/// What InitProducerId does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitOutcome {
    /// Persist this and answer with its producer id and epoch.
    Ready(TxnMetadata),
    /// An open transaction must be aborted first: persist this (epoch
    /// bumped, PrepareAbort), write abort markers, answer
    /// CONCURRENT_TRANSACTIONS; the producer's retry finds CompleteAbort.
    AbortFirst(TxnMetadata),
}

/// What EndTxn does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndOutcome {
    /// Persist this (PrepareCommit / PrepareAbort), answer, write markers.
    Prepare(TxnMetadata),
    /// A retry of an EndTxn that already completed: answer success.
    AlreadyComplete,
}

fn check_timeout(timeout_ms: i32) -> Result<(), TxnError> {
    if timeout_ms <= 0 || timeout_ms > MAX_TRANSACTION_TIMEOUT_MS {
        Err(TxnError::InvalidTransactionTimeout)
    } else {
        Ok(())
    }
}

impl TxnMetadata {
    /// A transactional id seen for the first time.
    pub fn new(producer_id: i64, timeout_ms: i32, now: i64) -> Result<TxnMetadata, TxnError> {
        check_timeout(timeout_ms)?;
        Ok(TxnMetadata {
            producer_id,
            producer_epoch: 0,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            update_ms: now,
        })
    }

    /// The same producer with its epoch bumped: a new producer id at epoch
    /// 0 once the epoch would reach i16::MAX (Kafka keeps that value free).
    fn bumped(&self, new_producer_id: impl FnOnce() -> i64) -> (i64, i16) {
        if self.producer_epoch >= i16::MAX - 1 {
            (new_producer_id(), 0)
        } else {
            (self.producer_id, self.producer_epoch + 1)
        }
    }

    /// InitProducerId for this id. `expected` is the (producer id, epoch)
    /// the producer names (KIP-360), if any.
    pub fn init_producer_id(
        &self,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
        now: i64,
        new_producer_id: impl FnOnce() -> i64,
    ) -> Result<InitOutcome, TxnError> {
        check_timeout(timeout_ms)?;
        if let Some(named) = expected {
            if named != (self.producer_id, self.producer_epoch) {
                return Err(TxnError::ProducerFenced);
            }
        }
        match self.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                Err(TxnError::ConcurrentTransactions)
            }
            TxnState::Ongoing => Ok(InitOutcome::AbortFirst(self.fence_and_abort(now))),
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let (producer_id, producer_epoch) = self.bumped(new_producer_id);
                Ok(InitOutcome::Ready(TxnMetadata {
                    producer_id,
                    producer_epoch,
                    timeout_ms,
                    state: TxnState::Empty,
                    partitions: BTreeSet::new(),
                    start_ms: -1,
                    update_ms: now,
                }))
            }
        }
    }

    fn check_producer(&self, producer_id: i64, producer_epoch: i16) -> Result<(), TxnError> {
        if producer_id != self.producer_id {
            Err(TxnError::InvalidProducerIdMapping)
        } else if producer_epoch != self.producer_epoch {
            Err(TxnError::ProducerFenced)
        } else {
            Ok(())
        }
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn: `None` when every partition is
    /// already in the open transaction (nothing to persist).
    pub fn add_partitions(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[TopicPartition],
        now: i64,
    ) -> Result<Option<TxnMetadata>, TxnError> {
        self.check_producer(producer_id, producer_epoch)?;
        if self.state.is_preparing() {
            return Err(TxnError::ConcurrentTransactions);
        }
        let ongoing = self.state == TxnState::Ongoing;
        if ongoing && partitions.iter().all(|p| self.partitions.contains(p)) {
            return Ok(None);
        }
        let mut next = self.clone();
        if !ongoing {
            next.partitions.clear();
            next.start_ms = now;
        }
        next.state = TxnState::Ongoing;
        next.partitions.extend(partitions.iter().cloned());
        next.update_ms = now;
        Ok(Some(next))
    }

    /// Whether `partition` is in this producer's open transaction (KIP-890:
    /// a partition leader asks before appending a transactional batch).
    pub fn verify_partition(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        partition: &TopicPartition,
    ) -> Result<(), TxnError> {
        self.check_producer(producer_id, producer_epoch)?;
        if self.state == TxnState::Ongoing && self.partitions.contains(partition) {
            Ok(())
        } else {
            Err(TxnError::InvalidTxnState)
        }
    }

    /// EndTxn: commit (`commit`) or abort the open transaction.
    pub fn end(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        now: i64,
    ) -> Result<EndOutcome, TxnError> {
        self.check_producer(producer_id, producer_epoch)?;
        match (self.state, commit) {
            (TxnState::Ongoing, _) => {
                let mut next = self.clone();
                next.state = if commit {
                    TxnState::PrepareCommit
                } else {
                    TxnState::PrepareAbort
                };
                next.update_ms = now;
                Ok(EndOutcome::Prepare(next))
            }
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => {
                Ok(EndOutcome::AlreadyComplete)
            }
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                Err(TxnError::ConcurrentTransactions)
            }
            _ => Err(TxnError::InvalidTxnState),
        }
    }

    /// The open transaction aborted by the coordinator (timeout, or a new
    /// InitProducerId): the epoch is bumped first, so the markers fence the
    /// producer that opened it.
    pub fn fence_and_abort(&self, now: i64) -> TxnMetadata {
        let mut next = self.clone();
        // At the last epoch the markers keep it: the next InitProducerId
        // then moves to a new producer id.
        next.producer_epoch = self.producer_epoch.saturating_add(1).min(i16::MAX - 1);
        next.state = TxnState::PrepareAbort;
        next.update_ms = now;
        next
    }

    /// The markers of a prepared end are all written.
    pub fn complete(&self, now: i64) -> Option<TxnMetadata> {
        let state = match self.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            _ => return None,
        };
        Some(TxnMetadata {
            state,
            partitions: BTreeSet::new(),
            start_ms: -1,
            update_ms: now,
            ..self.clone()
        })
    }

    /// An open transaction older than its timeout.
    pub fn timed_out(&self, now: i64) -> bool {
        self.state == TxnState::Ongoing
            && now.saturating_sub(self.start_ms) > i64::from(self.timeout_ms)
    }

    /// An id idle for `expiration_ms` with nothing open may be forgotten
    /// (Kafka's transactional.id.expiration.ms).
    pub fn expired(&self, now: i64, expiration_ms: i64) -> bool {
        matches!(
            self.state,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        ) && now.saturating_sub(self.update_ms) > expiration_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(t: &str, p: i32) -> TopicPartition {
        (t.to_string(), p)
    }

    fn fresh() -> TxnMetadata {
        TxnMetadata::new(1000, 60_000, 0).expect("allowed")
    }

    fn ongoing() -> TxnMetadata {
        fresh()
            .add_partitions(1000, 0, &[tp("a", 0)], 10)
            .expect("allowed")
            .expect("allowed")
    }

    #[test]
    fn a_transaction_commits_through_prepare_and_complete() {
        let m = ongoing();
        assert_eq!(m.state, TxnState::Ongoing);
        assert_eq!(m.start_ms, 10);
        let same = m
            .add_partitions(1000, 0, &[tp("a", 0)], 20)
            .expect("allowed");
        assert_eq!(
            same, None,
            "a partition already in the transaction changes nothing"
        );
        let more = m
            .add_partitions(1000, 0, &[tp("b", 1)], 20)
            .expect("allowed")
            .expect("allowed");
        assert_eq!(more.partitions.len(), 2);
        assert_eq!(more.start_ms, 10, "adding keeps the start");
        let EndOutcome::Prepare(prepared) = more.end(1000, 0, true, 30).expect("allowed") else {
            panic!("expected prepare")
        };
        assert_eq!(prepared.state, TxnState::PrepareCommit);
        assert_eq!(
            prepared.partitions.len(),
            2,
            "the markers need the partitions"
        );
        assert_eq!(
            prepared.add_partitions(1000, 0, &[tp("c", 0)], 31),
            Err(TxnError::ConcurrentTransactions)
        );
        assert_eq!(
            prepared.end(1000, 0, true, 31),
            Err(TxnError::ConcurrentTransactions)
        );
        assert_eq!(
            prepared.end(1000, 0, false, 31),
            Err(TxnError::InvalidTxnState)
        );
        let done = prepared.complete(40).expect("allowed");
        assert_eq!(done.state, TxnState::CompleteCommit);
        assert!(done.partitions.is_empty());
        assert_eq!(done.end(1000, 0, true, 41), Ok(EndOutcome::AlreadyComplete));
        assert_eq!(done.end(1000, 0, false, 41), Err(TxnError::InvalidTxnState));
        let next = done
            .add_partitions(1000, 0, &[tp("z", 0)], 50)
            .expect("allowed")
            .expect("allowed");
        assert_eq!(next.start_ms, 50);
        assert_eq!(next.partitions.len(), 1, "a new transaction starts empty");
    }

    #[test]
    fn a_stale_epoch_is_fenced_and_a_foreign_producer_id_refused() {
        let m = ongoing();
        assert_eq!(
            m.add_partitions(1000, 1, &[tp("a", 1)], 1),
            Err(TxnError::ProducerFenced)
        );
        assert_eq!(
            m.end(999, 0, true, 1),
            Err(TxnError::InvalidProducerIdMapping)
        );
        assert_eq!(
            m.verify_partition(1000, 0, &tp("a", 0)),
            Ok(()),
            "an added partition verifies"
        );
        assert_eq!(
            m.verify_partition(1000, 0, &tp("a", 9)),
            Err(TxnError::InvalidTxnState)
        );
    }

    #[test]
    fn init_producer_id_bumps_the_epoch_and_aborts_an_open_transaction_first() {
        let m = fresh();
        let InitOutcome::Ready(bumped) =
            m.init_producer_id(30_000, None, 5, || 7).expect("allowed")
        else {
            panic!("expected ready")
        };
        assert_eq!((bumped.producer_id, bumped.producer_epoch), (1000, 1));
        assert_eq!(bumped.timeout_ms, 30_000);
        let open = ongoing();
        let InitOutcome::AbortFirst(aborting) = open
            .init_producer_id(60_000, None, 5, || 7)
            .expect("allowed")
        else {
            panic!("expected abort first")
        };
        assert_eq!(aborting.state, TxnState::PrepareAbort);
        assert_eq!(
            aborting.producer_epoch, 1,
            "the markers fence the old producer"
        );
        assert_eq!(
            aborting.init_producer_id(60_000, None, 6, || 7),
            Err(TxnError::ConcurrentTransactions)
        );
        let InitOutcome::Ready(after) = aborting
            .complete(7)
            .expect("allowed")
            .init_producer_id(60_000, None, 8, || 7)
            .expect("allowed")
        else {
            panic!("expected ready")
        };
        assert_eq!(after.producer_epoch, 2);
        assert_eq!(after.state, TxnState::Empty);
    }

    #[test]
    fn an_exhausted_epoch_moves_to_a_new_producer_id() {
        let mut m = fresh();
        m.producer_epoch = i16::MAX - 1;
        let InitOutcome::Ready(next) = m.init_producer_id(1000, None, 0, || 4242).expect("allowed")
        else {
            panic!("expected ready")
        };
        assert_eq!((next.producer_id, next.producer_epoch), (4242, 0));
        assert_eq!(m.fence_and_abort(0).producer_epoch, i16::MAX - 1);
    }

    #[test]
    fn kip_360_names_the_current_producer_or_is_fenced() {
        let m = fresh();
        assert!(m.init_producer_id(1000, Some((1000, 0)), 0, || 1).is_ok());
        assert_eq!(
            m.init_producer_id(1000, Some((1000, 5)), 0, || 1),
            Err(TxnError::ProducerFenced)
        );
    }

    #[test]
    fn timeouts_are_bounded_and_expire_open_transactions() {
        assert_eq!(
            TxnMetadata::new(1, 0, 0),
            Err(TxnError::InvalidTransactionTimeout)
        );
        assert_eq!(
            TxnMetadata::new(1, MAX_TRANSACTION_TIMEOUT_MS + 1, 0),
            Err(TxnError::InvalidTransactionTimeout)
        );
        let m = ongoing();
        assert!(!m.timed_out(10 + 60_000));
        assert!(m.timed_out(10 + 60_001));
        assert!(
            !m.expired(1_000_000_000, 1000),
            "an open transaction never expires"
        );
        assert!(fresh().expired(2000, 1000));
    }

    #[test]
    fn states_round_trip_by_name_and_id() {
        for s in TxnState::ALL {
            assert_eq!(TxnState::from_name(s.name()), Some(s));
            assert_eq!(TxnState::from_id(s.id()), Some(s));
        }
        assert_eq!(TxnState::from_id(99), None);
    }
}
