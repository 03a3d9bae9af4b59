//! The bottom room, importing no other: Prometheus metrics (`metrics`; the
//! replication and quorum ones in `metrics_cluster`, refreshed at scrape
//! time from a `ReplicationSnapshot` the replica manager builds and the
//! quorum's status; the share-group ones in `metrics_share`; their shared
//! label sets in `metric_labels`), the global allocator (`alloc_guard`), bounded CPU
//! work kept in request order (`blocking`) and appends kept in the order
//! they were decided (`append_order`: a connection's Produce requests, the
//! KIP-848 groups' records). Must not: decide what a request
//! gets.

pub mod alloc_guard;
pub mod append_order;
pub mod blocking;
pub mod metric_labels;
pub mod metrics;
pub mod metrics_cluster;
pub mod metrics_share;
