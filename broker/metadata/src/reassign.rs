//! Partition reassignment (KIP-455) and requested leader elections
//! (KIP-460), as the state machine applies them to one partition.
//!
//! Owns: starting, completing and cancelling a reassignment, and preferred
//! and unclean elections. Must not: read a clock or liveness beyond the
//! image (every node applies the same commands), or decide anything the
//! command does not say.
//!
//! Reassignment, as Kafka's controller does it:
//! - start: `replicas` becomes the target followed by the original replicas
//!   that leave, `adding_replicas` the target's newcomers and
//!   `removing_replicas` the leavers. Newcomers start fetching as
//!   followers; the leader adds each to the ISR (AlterPartition) once it
//!   has caught up.
//! - complete: as soon as every target replica is in the ISR (at start when
//!   nothing is added, else on the AlterPartition that adds the last one),
//!   `replicas` becomes the target, the leavers leave the ISR, and a leader
//!   outside the target hands over to the first target replica in the ISR.
//! - cancel: back to the original replicas; newcomers leave the ISR.
//! - a new target for a partition already moving replaces the old one,
//!   counted from the original replicas.
//!
//! Every change of the replica set bumps the leader epoch as well as the
//! partition epoch, so the leader takes the new set up as a new leadership
//! (it tracks the newcomers' progress; followers re-check their logs).

use std::collections::BTreeSet;

use crate::error::ClusterError;
use crate::image::{MetadataImage, PartitionImage};
use crate::request::{ElectionType, Reassignment};
use crate::NO_LEADER;

/// Starts, replaces or cancels one partition's reassignment.
pub fn alter(image: &mut MetadataImage, change: &Reassignment) -> Result<(), ClusterError> {
    let name = format!("{}-{}", change.topic, change.partition);
    if let Some(target) = &change.target {
        check_target(image, &name, target)?;
    }
    let live = live_set(image);
    let partition = partition_mut(image, &change.topic, change.partition)?;
    match &change.target {
        Some(target) => start(partition, target, &live),
        None => cancel(partition, &name, &live),
    }
}

/// Finishes `partition`'s reassignment if every target replica is in its
/// ISR; returns whether it did.
pub fn maybe_complete(partition: &mut PartitionImage, live: &BTreeSet<i32>) -> bool {
    if !partition.is_reassigning() {
        return false;
    }
    let target = partition.target_replicas();
    if !target.iter().all(|r| partition.isr.contains(r)) {
        return false;
    }
    partition.isr.retain(|r| target.contains(r));
    if !target.contains(&partition.leader) {
        partition.leader = first_live_in_isr(&target, &partition.isr, live).unwrap_or(NO_LEADER);
    }
    partition.replicas = target;
    partition.adding_replicas.clear();
    partition.removing_replicas.clear();
    bump_both(partition);
    true
}

/// KIP-460's election for one partition.
pub fn elect(
    image: &mut MetadataImage,
    topic: &str,
    index: i32,
    election: ElectionType,
) -> Result<(), ClusterError> {
    let name = format!("{topic}-{index}");
    let live = live_set(image);
    let partition = partition_mut(image, topic, index)?;
    match election {
        ElectionType::Preferred => {
            let preferred = partition.replicas.first().copied().unwrap_or(NO_LEADER);
            if partition.leader == preferred {
                return Err(ClusterError::ElectionNotNeeded(format!(
                    "{name}: the preferred replica {preferred} already leads"
                )));
            }
            if !partition.isr.contains(&preferred) || !live.contains(&preferred) {
                return Err(ClusterError::PreferredLeaderNotAvailable(format!(
                    "{name}: the preferred replica {preferred} is not a live member of the ISR {:?}",
                    partition.isr
                )));
            }
            partition.leader = preferred;
        }
        ElectionType::Unclean => {
            if partition.leader != NO_LEADER {
                return Err(ClusterError::ElectionNotNeeded(format!(
                    "{name}: broker {} leads it",
                    partition.leader
                )));
            }
            // A live ISR member would have been elected cleanly already;
            // a live eligible leader replica (KIP-966) goes first, else any
            // live replica may lead now, with an ISR of itself.
            let eligible = crate::elr::choose_leader(partition, &live);
            let Some(chosen) = eligible.or_else(|| {
                partition
                    .replicas
                    .iter()
                    .copied()
                    .find(|r| live.contains(r))
            }) else {
                return Err(ClusterError::EligibleLeadersNotAvailable(format!(
                    "{name}: none of the replicas {:?} is live",
                    partition.replicas
                )));
            };
            if eligible.is_some() {
                tracing::info!(partition = name, leader = chosen, elr = ?partition.elr,
                    "unclean election request: an eligible leader replica leads, nothing is lost");
            } else {
                tracing::warn!(partition = name, leader = chosen, isr = ?partition.isr,
                    "unclean leader election: records only the old ISR held are lost");
            }
            partition.leader = chosen;
            partition.isr = vec![chosen];
        }
    }
    bump_both(partition);
    Ok(())
}

fn start(
    partition: &mut PartitionImage,
    target: &[i32],
    live: &BTreeSet<i32>,
) -> Result<(), ClusterError> {
    let original = partition.original_replicas();
    let adding: Vec<i32> = target
        .iter()
        .copied()
        .filter(|r| !original.contains(r))
        .collect();
    let removing: Vec<i32> = original
        .iter()
        .copied()
        .filter(|r| !target.contains(r))
        .collect();
    // Newcomers of a replaced target that are not in the new one leave.
    partition
        .isr
        .retain(|r| original.contains(r) || target.contains(r));
    if partition.isr.is_empty() {
        return Err(ClusterError::InvalidReplicaAssignment(
            "no replica of the partition would stay in sync".to_string(),
        ));
    }
    partition.replicas = target.iter().chain(removing.iter()).copied().collect();
    partition.adding_replicas = adding;
    partition.removing_replicas = removing;
    if !partition.replicas.contains(&partition.leader) {
        partition.leader =
            first_live_in_isr(&partition.replicas, &partition.isr, live).unwrap_or(NO_LEADER);
    }
    if !maybe_complete(partition, live) {
        bump_both(partition);
    }
    Ok(())
}

fn cancel(
    partition: &mut PartitionImage,
    name: &str,
    live: &BTreeSet<i32>,
) -> Result<(), ClusterError> {
    if !partition.is_reassigning() {
        return Err(ClusterError::NoReassignmentInProgress(name.to_string()));
    }
    let original = partition.original_replicas();
    let isr: Vec<i32> = partition
        .isr
        .iter()
        .copied()
        .filter(|r| original.contains(r))
        .collect();
    if isr.is_empty() {
        return Err(ClusterError::InvalidReplicaAssignment(format!(
            "{name}: cannot cancel, none of the original replicas {original:?} is in sync"
        )));
    }
    partition.isr = isr;
    if !original.contains(&partition.leader) {
        partition.leader = first_live_in_isr(&original, &partition.isr, live).unwrap_or(NO_LEADER);
    }
    partition.replicas = original;
    partition.adding_replicas.clear();
    partition.removing_replicas.clear();
    bump_both(partition);
    Ok(())
}

/// Kafka's checks of a manual assignment: replicas present, distinct and
/// registered (fenced brokers are allowed; they catch up when they return).
fn check_target(image: &MetadataImage, name: &str, target: &[i32]) -> Result<(), ClusterError> {
    if target.is_empty() {
        return Err(ClusterError::InvalidReplicaAssignment(format!(
            "{name}: the target replica list is empty"
        )));
    }
    let distinct: BTreeSet<i32> = target.iter().copied().collect();
    if distinct.len() != target.len() {
        return Err(ClusterError::InvalidReplicaAssignment(format!(
            "{name}: the target replica list {target:?} has a duplicate"
        )));
    }
    if let Some(unknown) = target.iter().find(|r| !image.brokers.contains_key(r)) {
        return Err(ClusterError::InvalidReplicaAssignment(format!(
            "{name}: the target includes broker {unknown}, but no such broker is registered"
        )));
    }
    Ok(())
}

pub(crate) fn live_set(image: &MetadataImage) -> BTreeSet<i32> {
    image.live_brokers().map(|b| b.node_id).collect()
}

fn partition_mut<'a>(
    image: &'a mut MetadataImage,
    topic: &str,
    index: i32,
) -> Result<&'a mut PartitionImage, ClusterError> {
    usize::try_from(index)
        .ok()
        .and_then(|i| image.topics.get_mut(topic)?.partitions.get_mut(i))
        .ok_or_else(|| ClusterError::UnknownTopic(format!("{topic}-{index}")))
}

fn first_live_in_isr(order: &[i32], isr: &[i32], live: &BTreeSet<i32>) -> Option<i32> {
    order
        .iter()
        .copied()
        .find(|r| isr.contains(r) && live.contains(r))
}

fn bump_both(partition: &mut PartitionImage) {
    partition.leader_epoch += 1;
    partition.partition_epoch += 1;
}

#[cfg(test)]
#[path = "reassign_tests.rs"]
mod tests;
