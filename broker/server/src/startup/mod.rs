//! Start-up and shutdown: starting a node (log recovery, joining the
//! metadata quorum, the listeners) from its `Config` (`crate::config`) and
//! stopping it in order.
//!
//! Owns: `server` (a broker's start-up and ordered
//! shutdown), `cluster_start` (joining the quorum, the cluster id, the internal
//! topics, the first sync), `controller_node` (a controller-only node),
//! `meta_properties` (the data directory's cluster, node and directory ids) and
//! `join_diagnosis` (why a node that has not joined is not serving). Must not:
//! serve a request.

pub mod cluster_start;
pub mod controller_node;
pub mod join_diagnosis;
pub mod meta_properties;
pub mod server;
