//! The coordinators a broker runs while it leads their internal topics:
//! consumer groups (`groups/`, committed offsets in `__consumer_offsets`) and
//! transactions (`txn/`, state in `__transaction_state`), share groups
//! (`share/`, KIP-932, state in `__share_group_state`), what the topics
//! share (`internal_topic`: replay, acks=all writes, the loaded epoch), and
//! producer ids (`producer_ids`). Must not: serve client connections or
//! decode client requests (handlers call in). The transaction coordinator
//! is itself a Kafka client of other brokers: it sends WriteTxnMarkers
//! (`txn::markers`) and KIP-890's AddPartitionsToTxn verify_only
//! (`txn::verify`) over `replica::leader_client`.

pub mod groups;
pub mod internal_topic;
pub mod producer_ids;
pub mod share;
pub mod txn;
