//! Kafka's coordinators as pure state machines: the classic consumer-group
//! protocol, KIP-848 consumer groups (`consumer_group`, `assignor`), and the
//! transaction coordinator's transitions (`txn`).
//!
//! The owner (the server's group manager) feeds events — JoinGroup,
//! SyncGroup, Heartbeat, LeaveGroup and clock ticks, each with the current
//! time in milliseconds — and delivers the `Reply`s that come back. Replies to
//! JoinGroup and SyncGroup may be delayed until a rebalance completes, so the
//! owner tags each such request with a `Ticket` and routes the reply by it.
//! Nothing here does I/O, reads a clock or knows the wire format; tests drive
//! it with tables of steps.
//!
//! Layout:
//! - `types`  — requests, replies and errors in Kafka's terms.
//! - `member` — one member's registration and liveness.
//! - `group`  — the group: states Empty → PreparingRebalance →
//!   CompletingRebalance → Stable (and Dead), generations, leader election.
//! - `txn`    — a transactional id's metadata and its transitions (KIP-98).
//! - `consumer_group` — a KIP-848 group (ConsumerGroupHeartbeat): group
//!   epoch, target assignment, member epochs and reconciliation.
//! - `consumer_member` — one member of a KIP-848 group.
//! - `assignor` — the server-side assignors `uniform` and `range`.
//! - `classic_member` — classic-protocol members inside a KIP-848 group
//!   (JoinGroup / SyncGroup / Heartbeat / LeaveGroup answered by it).
//! - `migration` — `group.consumer.migration.policy`: online upgrade of a
//!   classic group and downgrade of a consumer group.
//! - `classic_stored` — a classic group as its coordinator stores it
//!   (Kafka's GroupMetadataValue), and rebuilt from that after a failover.
//! - `stored` — a KIP-848 group as its coordinator stores it, and rebuilt
//!   from that after a failover.
//! - `share_group` — a share group's membership (KIP-932): epochs, liveness,
//!   the `simple` assignor.
//! - `share_partition` — one share group's state of one partition (KIP-932):
//!   acquisition locks, acknowledgements, delivery counts, its durable form.

mod assignor;
mod classic_member;
mod classic_stored;
mod consumer_group;
mod consumer_member;
mod group;
mod member;
mod migration;
pub mod share_group;
pub mod share_partition;
mod stored;
pub mod txn;
mod types;

pub use assignor::{Assignment, Assignor, TopicId};
pub use classic_member::{ClassicProtocol, ClassicSync};
pub use classic_stored::{StoredClassicGroup, StoredClassicMember};
pub use consumer_group::{
    ConsumerGroup, ConsumerGroupConfig, ConsumerGroupState, ConsumerMember, HeartbeatReply,
    HeartbeatRequest, MemberState, TopicMetadata, MAX_REGEX_BYTES, MAX_STRING_BYTES,
    MAX_SUBSCRIBED_TOPICS,
};
pub use group::{Group, GroupConfig, GroupState};
pub use member::Member;
pub use migration::{ClassicSubscription, DecodedClassicMember, MigrationPolicy, NamedPartitions};
pub use stored::{StoredClassicProtocol, StoredConsumerGroup, StoredMember};
pub use types::*;

#[cfg(test)]
mod assignor_tests;
#[cfg(test)]
mod consumer_group_tests;
#[cfg(test)]
mod migration_tests;
#[cfg(test)]
mod share_group_tests;
#[cfg(test)]
mod share_partition_tests;
#[cfg(test)]
mod tests;
