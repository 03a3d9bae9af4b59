//! A partition's registration in the metadata quorum, and the controller's
//! check of an ISR change (KIP-497 AlterPartition).
//!
//! Owns: `PartitionRegistration` (KRaft's name for replicas + ISR + leader +
//! epochs) and `alter_partition`, the controller-side validation of a
//! leader's proposed ISR. Must not: talk to the quorum — the owner proposes
//! and persists registrations; this only says what they may be.
//!
//! Invariants of a valid registration (`validate`):
//! - `replicas` is non-empty and has no duplicates;
//! - `isr` is non-empty and a subset of `replicas`;
//! - the leader, when there is one, is in the ISR;
//! - `leader_epoch` changes only when the leader changes (election) and
//!   `partition_epoch` on every change at all.

use std::collections::BTreeSet;

use crate::error::{check_leader_epoch, Error, Result};
use crate::ReplicaId;

/// What the metadata quorum records for one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionRegistration {
    /// Assigned replicas in preference order (the first is the preferred
    /// leader; clean election walks this order).
    pub replicas: Vec<ReplicaId>,
    pub isr: BTreeSet<ReplicaId>,
    /// `None` is Kafka's NO_LEADER (-1): the partition is offline.
    pub leader: Option<ReplicaId>,
    pub leader_epoch: i32,
    /// Kafka's partition epoch (formerly the ZooKeeper version): the ISR
    /// version that AlterPartition proposals must name.
    pub partition_epoch: i32,
}

impl PartitionRegistration {
    /// A new partition as Kafka creates it: every replica in sync, the first
    /// one leading, both epochs 0.
    pub fn new(replicas: Vec<ReplicaId>) -> Result<Self> {
        let reg = PartitionRegistration {
            isr: replicas.iter().copied().collect(),
            leader: replicas.first().copied(),
            replicas,
            leader_epoch: 0,
            partition_epoch: 0,
        };
        reg.validated()
    }

    /// `self` once it holds the invariants in the module doc: what every
    /// step that makes a registration returns.
    pub(crate) fn validated(self) -> Result<Self> {
        self.validate()?;
        Ok(self)
    }

    /// Checks the invariants in the module doc.
    pub fn validate(&self) -> Result<()> {
        let fail = |reason| {
            Err(Error::InvalidRegistration {
                replicas: self.replicas.clone(),
                isr: self.isr.clone(),
                leader: self.leader,
                reason,
            })
        };
        let distinct: BTreeSet<_> = self.replicas.iter().collect();
        if self.replicas.is_empty() {
            return fail("no replicas");
        }
        if distinct.len() != self.replicas.len() {
            return fail("duplicate replica");
        }
        if self.isr.is_empty() {
            return fail("empty isr");
        }
        if !self.isr.iter().all(|r| self.replicas.contains(r)) {
            return fail("isr member not among the replicas");
        }
        if let Some(leader) = self.leader {
            if !self.isr.contains(&leader) {
                return fail("leader not in the isr");
            }
        }
        Ok(())
    }

    /// The controller's handling of an AlterPartition request from
    /// `leader`: the leader and leader epoch must be current (else
    /// FENCED_LEADER_EPOCH / NOT_LEADER), the proposal must be based on the
    /// current partition epoch (else INVALID_UPDATE_VERSION), and the new
    /// ISR must be valid and keep the leader. On success the returned
    /// registration has the new ISR and `partition_epoch + 1`; the owner
    /// persists it before answering the leader, which then calls
    /// `PartitionReplicaState::isr_committed`.
    ///
    /// Kafka's controller also refuses to add fenced or shutting-down
    /// brokers (INELIGIBLE_REPLICA); that needs broker liveness, which the
    /// caller checks before calling this.
    pub fn alter_partition(
        &self,
        leader: ReplicaId,
        leader_epoch: i32,
        version: i32,
        new_isr: BTreeSet<ReplicaId>,
    ) -> Result<PartitionRegistration> {
        if self.leader != Some(leader) {
            return Err(Error::NotLeader {
                replica_id: leader,
                leader: self.leader,
            });
        }
        check_leader_epoch(leader_epoch, self.leader_epoch)?;
        if version != self.partition_epoch {
            return Err(Error::InvalidUpdateVersion {
                version,
                current_version: self.partition_epoch,
            });
        }
        let next = PartitionRegistration {
            isr: new_isr,
            partition_epoch: self.partition_epoch + 1,
            ..self.clone()
        };
        next.validated()
    }
}

#[cfg(test)]
#[rustfmt::skip]
mod tests {
    use super::*;
    use crate::tests::{set, Ids};

    #[test]
    fn validation() {
        let ok = PartitionRegistration::new(vec![1, 2, 3]).expect("valid");
        assert_eq!(ok.leader, Some(1));
        assert_eq!(ok.isr, set(&[1, 2, 3]));
        let table: [(Ids, Ids, Option<ReplicaId>, &str); 5] = [
            (&[], &[1], Some(1), "no replicas"),
            (&[1, 1, 2], &[1], Some(1), "duplicate replica"),
            (&[1, 2], &[], None, "empty isr"),
            (&[1, 2], &[1, 3], Some(1), "isr member not among the replicas"),
            (&[1, 2], &[2], Some(1), "leader not in the isr"),
        ];
        for (replicas, isr, leader, why) in table {
            let reg = PartitionRegistration { replicas: replicas.to_vec(), isr: set(isr), leader, leader_epoch: 0, partition_epoch: 0 };
            match reg.validate() {
                Err(Error::InvalidRegistration { reason, .. }) => assert_eq!(reason, why),
                other => panic!("{why}: {other:?}"),
            }
        }
    }

    #[test]
    fn alter_partition_checks_leader_epochs_and_version() {
        let reg = PartitionRegistration::new(vec![1, 2, 3]).expect("valid");
        let shrunk = reg.alter_partition(1, 0, 0, set(&[1, 2])).expect("accepted");
        assert_eq!((shrunk.isr.clone(), shrunk.partition_epoch, shrunk.leader_epoch), (set(&[1, 2]), 1, 0));
        assert_eq!(
            shrunk.alter_partition(1, 0, 0, set(&[1])),
            Err(Error::InvalidUpdateVersion { version: 0, current_version: 1 }),
            "a proposal built on an old version"
        );
        assert_eq!(reg.alter_partition(2, 0, 0, set(&[1, 2])), Err(Error::NotLeader { replica_id: 2, leader: Some(1) }));
        assert_eq!(reg.alter_partition(1, 1, 0, set(&[1])), Err(Error::UnknownLeaderEpoch { request_epoch: 1, current_epoch: 0 }));
        assert!(matches!(reg.alter_partition(1, 0, 0, set(&[2, 3])), Err(Error::InvalidRegistration { reason: "leader not in the isr", .. })));
    }
}
