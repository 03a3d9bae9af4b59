//! Transactions (KIP-98) on the broker side: the transaction coordinator.
//!
//! The leader of `__transaction_state`-0 coordinates every transactional
//! id (as the leader of `__consumer_offsets`-0 coordinates every group).
//! Its state lives in that topic, replicated like any partition, so a new
//! leader reloads it and finishes what the old one prepared.
//!
//! - `records`     — the `__transaction_state` record encoding.
//! - `store`       — `TxnStore`: the id -> metadata map, loaded from and persisted to the topic.
//! - `coordinator` — `TxnCoordinator`: requests as transitions, per-id locking, completion, the clock.
//! - `markers`     — writing COMMIT/ABORT markers here or through WriteTxnMarkers to other leaders.
//! - `verify`      — KIP-890: a leader asks whether a partition is in a producer's open transaction.
//!
//! The transitions themselves are pure: `chronik_coordinator_state::txn`. What a
//! partition does with transactional batches and markers (the last stable
//! offset, aborted transactions for read_committed fetches) is the log's:
//! `chronik_log`'s producer state.

pub mod coordinator;
pub mod markers;
pub mod records;
pub mod store;
pub mod verify;

pub use coordinator::{spawn_ticker, txn_error, TxnCoordinator, TxnDependencies};
pub use store::TXN_TOPIC;
