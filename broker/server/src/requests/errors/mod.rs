//! Kafka error codes for failures below the handlers: the metadata
//! quorum's (`cluster`), the group coordinator's (`group`) and the
//! transaction coordinator's (`txn`). A failed log append maps in
//! `replica::write`. Must not: decide what fails.

pub mod cluster;
pub mod group;
pub mod txn;
