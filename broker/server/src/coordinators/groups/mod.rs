//! Consumer groups on the broker side: the driver around the pure
//! `chronik_coordinator_state` state machine, and committed-offset storage.
//!
//! - `classic_group_records` — classic groups as records (GroupMetadataValue) in `__consumer_offsets`.
//! - `consumer_group_records` — KIP-848 groups as records in `__consumer_offsets`.
//! - `consumer_group_writes` — which of those records (KIP-848 and classic) to append, and in what order.
//! - `consumer_protocol` — the consumer's embedded protocol in classic group messages.
//! - `manager`      — `GroupManager`: groups by id, tickets → waiting requests, the clock tick task.
//! - `offset_store` — `OffsetStore`: committed offsets kept durably in the broker's own
//!   `__consumer_offsets` log and rebuilt from it at start.

pub mod classic_group_records;
pub mod consumer_group_records;
pub mod consumer_group_writes;
pub mod consumer_protocol;
pub mod manager;
pub mod offset_store;

pub use manager::{GroupManager, GroupSnapshot};
pub use offset_store::{CommittedOffset, OffsetStore, OFFSETS_TOPIC};
