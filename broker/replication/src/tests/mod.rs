//! Scenario tests across modules: the leader state machine driven by tables
//! of steps (`leader`), and a simulated three-node cluster with a
//! controller and a step-by-step network (`cluster`); and the helpers the
//! unit tests' tables share.

mod cluster;
mod leader;

use std::collections::BTreeSet;

use crate::ReplicaId;

/// Replica ids as a table row writes them.
pub(crate) type Ids = &'static [ReplicaId];

/// `ids` as the set the state machines take (an ISR, the live brokers).
pub(crate) fn set(ids: &[ReplicaId]) -> BTreeSet<ReplicaId> {
    ids.iter().copied().collect()
}
