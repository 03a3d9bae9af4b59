//! What every room uses and no request decides: Prometheus metrics
//! (`metrics`, and the replication and quorum ones in `metrics_cluster`),
//! the global allocator (`alloc_guard`) and bounded CPU work kept in request
//! order (`blocking`). Must not: depend on a room above it.

pub mod alloc_guard;
pub mod blocking;
pub mod metrics;
pub mod metrics_cluster;
