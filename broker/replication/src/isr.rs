//! The leader's view of the ISR: what the controller has committed and the
//! one change the leader has proposed but not yet seen committed.
//!
//! Owns: Kafka's `PartitionState` (CommittedPartitionState /
//! PendingExpandIsr / PendingShrinkIsr) and the partition epoch (ISR
//! version). Must not: decide *when* to expand or shrink (the leader state
//! does) or talk to the controller.
//!
//! KIP-497: a leader never acts on an ISR the controller has not recorded.
//! While a change is in flight it computes with the *maximal* ISR — the
//! committed ISR plus a replica being added; a replica being removed still
//! counts — so that:
//! - the high watermark never passes a replica that the controller could
//!   still elect (a shrink only lets the HW advance once committed);
//! - a replica being added already holds the HW back, so it has every
//!   offset below any HW reported once it is committed.
//!
//! Invariants: the committed ISR always contains the leader; at most one
//! change is in flight; the maximal ISR is a superset of the committed one.

use std::collections::BTreeSet;

use crate::ReplicaId;

/// A proposed ISR change awaiting the controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PendingIsrChange {
    /// `replica_id` caught up and is proposed for the ISR.
    Expand {
        replica_id: ReplicaId,
        proposed: BTreeSet<ReplicaId>,
    },
    /// `removed` fell behind and are proposed for removal.
    Shrink {
        removed: BTreeSet<ReplicaId>,
        proposed: BTreeSet<ReplicaId>,
    },
}

impl PendingIsrChange {
    pub fn proposed(&self) -> &BTreeSet<ReplicaId> {
        match self {
            PendingIsrChange::Expand { proposed, .. }
            | PendingIsrChange::Shrink { proposed, .. } => proposed,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrState {
    committed: BTreeSet<ReplicaId>,
    partition_epoch: i32,
    pending: Option<PendingIsrChange>,
}

impl IsrState {
    pub(crate) fn new(committed: BTreeSet<ReplicaId>, partition_epoch: i32) -> Self {
        IsrState {
            committed,
            partition_epoch,
            pending: None,
        }
    }

    /// The ISR the controller has recorded. min.insync.replicas is checked
    /// against this before an acks=all append.
    pub fn committed(&self) -> &BTreeSet<ReplicaId> {
        &self.committed
    }

    /// The committed ISR plus a replica being added. The high watermark is
    /// the minimum log end offset over this set.
    pub fn maximal(&self) -> BTreeSet<ReplicaId> {
        let mut isr = self.committed.clone();
        if let Some(PendingIsrChange::Expand { replica_id, .. }) = &self.pending {
            isr.insert(*replica_id);
        }
        isr
    }

    pub fn in_maximal(&self, replica_id: ReplicaId) -> bool {
        self.committed.contains(&replica_id)
            || matches!(&self.pending, Some(PendingIsrChange::Expand { replica_id: r, .. }) if *r == replica_id)
    }

    /// The ISR version this state is based on (Kafka's partition epoch).
    pub fn partition_epoch(&self) -> i32 {
        self.partition_epoch
    }

    pub fn pending(&self) -> Option<&PendingIsrChange> {
        self.pending.as_ref()
    }

    pub fn is_inflight(&self) -> bool {
        self.pending.is_some()
    }

    /// Records a proposal to add `replica_id`; returns the proposed ISR.
    pub(crate) fn propose_expand(&mut self, replica_id: ReplicaId) -> BTreeSet<ReplicaId> {
        let mut proposed = self.committed.clone();
        proposed.insert(replica_id);
        self.pending = Some(PendingIsrChange::Expand {
            replica_id,
            proposed: proposed.clone(),
        });
        proposed
    }

    /// Records a proposal to remove `removed`; returns the proposed ISR.
    pub(crate) fn propose_shrink(&mut self, removed: BTreeSet<ReplicaId>) -> BTreeSet<ReplicaId> {
        let proposed: BTreeSet<_> = self.committed.difference(&removed).copied().collect();
        self.pending = Some(PendingIsrChange::Shrink {
            removed,
            proposed: proposed.clone(),
        });
        proposed
    }

    /// The controller recorded `isr` at `partition_epoch` (whatever was
    /// proposed: the controller's word wins). The caller has validated it.
    pub(crate) fn commit(&mut self, isr: BTreeSet<ReplicaId>, partition_epoch: i32) {
        self.committed = isr;
        self.partition_epoch = partition_epoch;
        self.pending = None;
    }

    /// The proposal failed; the committed state stands and the next fetch
    /// or tick may propose again.
    pub(crate) fn abandon_pending(&mut self) {
        self.pending = None;
    }
}
