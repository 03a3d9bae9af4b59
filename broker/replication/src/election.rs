//! Clean leader election, as Kafka's controller does it on failover.
//!
//! Owns: choosing the next leader from a registration and the set of live
//! brokers. Must not: know how liveness is learned (heartbeats, sessions) or
//! publish anything — the owner feeds the live set and records the result.
//!
//! Rules (unclean election disabled):
//! - only a live ISR member may lead, so every offset below any high
//!   watermark the old leader reported is on the new leader (the HW never
//!   passes an ISR member's log end offset);
//! - among those, the first in replica order wins (Kafka's
//!   `offlinePartitionLeaderElection`);
//! - dead brokers leave the ISR, which then always contains the new leader;
//! - the leader epoch and the partition epoch both go up by one;
//! - with no live ISR member there is no election: `NoEligibleLeader`, and
//!   the controller keeps the ISR as it is with no leader, so the last
//!   in-sync replica can lead again when it returns.

use std::collections::BTreeSet;

use crate::error::{Error, Result};
use crate::registration::PartitionRegistration;
use crate::ReplicaId;

/// The first replica, in replica order, that is both live and in the ISR.
pub fn choose_leader(
    replicas: &[ReplicaId],
    isr: &BTreeSet<ReplicaId>,
    live_brokers: &BTreeSet<ReplicaId>,
) -> Option<ReplicaId> {
    replicas
        .iter()
        .copied()
        .find(|r| isr.contains(r) && live_brokers.contains(r))
}

/// The registration after a clean election among `live_brokers`: new leader,
/// ISR without dead brokers, both epochs bumped. Call it when the leader is
/// gone (or fenced); it also works as a preferred-leader election, since a
/// live preferred replica in the ISR wins.
pub fn elect_leader(
    current: &PartitionRegistration,
    live_brokers: &BTreeSet<ReplicaId>,
) -> Result<PartitionRegistration> {
    current.validate()?;
    let leader = choose_leader(&current.replicas, &current.isr, live_brokers).ok_or_else(|| {
        Error::NoEligibleLeader {
            replicas: current.replicas.clone(),
            isr: current.isr.clone(),
            live_brokers: live_brokers.clone(),
        }
    })?;
    PartitionRegistration {
        replicas: current.replicas.clone(),
        isr: current.isr.intersection(live_brokers).copied().collect(),
        leader: Some(leader),
        leader_epoch: current.leader_epoch + 1,
        partition_epoch: current.partition_epoch + 1,
    }
    .validated()
}

#[cfg(test)]
#[rustfmt::skip]
mod tests {
    use super::*;
    use crate::tests::{set, Ids};

    #[test]
    fn the_first_live_isr_replica_in_replica_order_leads() {
        // (replicas, isr, live, expected leader, expected isr, why)
        type Row = (Ids, Ids, Ids, Option<ReplicaId>, Ids, &'static str);
        let table: [Row; 5] = [
            (&[1, 2, 3], &[1, 2, 3], &[2, 3], Some(2), &[2, 3], "leader 1 died: next in replica order"),
            (&[3, 1, 2], &[1, 2, 3], &[1, 2], Some(1), &[1, 2], "replica order, not id order"),
            (&[1, 2, 3], &[1, 3], &[2, 3], Some(3), &[3], "2 is live but out of sync: not eligible"),
            (&[1, 2, 3], &[1], &[2, 3], None, &[1], "only out-of-sync replicas live: offline"),
            (&[1, 2, 3], &[1, 2, 3], &[1, 2, 3], Some(1), &[1, 2, 3], "all live: the preferred replica"),
        ];
        for (replicas, isr, live, leader, new_isr, why) in table {
            let current = PartitionRegistration {
                replicas: replicas.to_vec(),
                isr: set(isr),
                leader: Some(isr[0]),
                leader_epoch: 4,
                partition_epoch: 9,
            };
            assert_eq!(choose_leader(replicas, &set(isr), &set(live)), leader, "{why}");
            match (elect_leader(&current, &set(live)), leader) {
                (Ok(next), Some(l)) => {
                    assert_eq!(next.leader, Some(l), "{why}");
                    assert_eq!(next.isr, set(new_isr), "{why}");
                    assert_eq!((next.leader_epoch, next.partition_epoch), (5, 10), "{why}: epochs bumped");
                    assert_eq!(next.replicas, replicas, "{why}: assignment unchanged");
                }
                (Err(Error::NoEligibleLeader { isr: kept, .. }), None) => assert_eq!(kept, set(new_isr), "{why}"),
                (other, _) => panic!("{why}: {other:?}"),
            }
        }
    }
}
