//! Where the replicas of new topics and partitions go.
//!
//! Owns: automatic placement — round robin over the live brokers listed
//! rack by rack alternately (Kafka's rack-aware assignment), so a
//! partition's replicas sit in as many racks as there are, and leaders
//! spread over the brokers — and the checks of a manual assignment
//! (`kafka-topics.sh --replica-assignment`), with Kafka's rules and
//! messages. Must not: propose commands or keep state; the controller
//! passes the image and where the rotation starts.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::ClusterError;
use crate::image::MetadataImage;

/// A live broker and its rack (`None`: no `broker.rack`, one rack of its
/// own kind).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slot {
    pub node_id: i32,
    pub rack: Option<String>,
}

/// The live brokers with their racks, by node id.
pub fn live_slots(image: &MetadataImage) -> Vec<Slot> {
    image
        .live_brokers()
        .map(|b| Slot {
            node_id: b.node_id,
            rack: b.rack.clone(),
        })
        .collect()
}

/// The brokers listed rack by rack: the first of every rack, then the
/// second of every rack, ... (racks and brokers in order).
fn rack_alternated(slots: &[Slot]) -> Vec<&Slot> {
    let mut by_rack: BTreeMap<Option<&str>, Vec<&Slot>> = BTreeMap::new();
    for slot in slots {
        by_rack.entry(slot.rack.as_deref()).or_default().push(slot);
    }
    let deepest = by_rack.values().map(Vec::len).max().unwrap_or(0);
    (0..deepest)
        .flat_map(|i| {
            by_rack
                .values()
                .filter_map(move |brokers| brokers.get(i).copied())
        })
        .collect()
}

/// Replica lists for `partitions` over `slots`, starting the rotation at
/// `start`: partition p is led by the (start + p)-th broker of the
/// rack-alternated list, and its followers are the next brokers in that
/// list whose racks hold none of its replicas yet (any rack once every
/// rack holds one).
pub fn place(
    slots: &[Slot],
    partitions: std::ops::Range<i32>,
    replication_factor: usize,
    start: usize,
) -> Result<Vec<Vec<i32>>, ClusterError> {
    if replication_factor < 1 || replication_factor > slots.len() {
        return Err(ClusterError::InvalidReplicationFactor(format!(
            "replication factor {replication_factor} with {} live brokers",
            slots.len()
        )));
    }
    let order = rack_alternated(slots);
    let racks = order.iter().map(|s| &s.rack).collect::<BTreeSet<_>>().len();
    let n = order.len();
    Ok(partitions
        .map(|p| {
            let first = start + usize::try_from(p).unwrap_or(0);
            let mut replicas: Vec<i32> = Vec::with_capacity(replication_factor);
            let mut used: BTreeSet<&Option<String>> = BTreeSet::new();
            for step in 0..n {
                if replicas.len() == replication_factor {
                    break;
                }
                let slot = order[(first + step) % n];
                if used.len() == racks {
                    used.clear();
                }
                if used.insert(&slot.rack) {
                    replicas.push(slot.node_id);
                }
            }
            // Racks too few for a second pass to fill up: the rest in order.
            for step in 0..n {
                if replicas.len() == replication_factor {
                    break;
                }
                let id = order[(first + step) % n].node_id;
                if !replicas.contains(&id) {
                    replicas.push(id);
                }
            }
            replicas
        })
        .collect())
}

/// Kafka's checks of one manual replica list: not empty, every broker
/// registered and named once, as many replicas as `replication_factor`
/// (the previous partitions', or the topic's) when known.
fn check_manual(
    image: &MetadataImage,
    replicas: &[i32],
    replication_factor: Option<usize>,
) -> Result<(), ClusterError> {
    if replicas.is_empty() {
        return Err(ClusterError::InvalidReplicaAssignment(
            "The manual partition assignment includes an empty replica list.".to_string(),
        ));
    }
    let mut sorted = replicas.to_vec();
    sorted.sort_unstable();
    for (i, id) in sorted.iter().enumerate() {
        if !image.brokers.contains_key(id) {
            return Err(ClusterError::InvalidReplicaAssignment(format!(
                "The manual partition assignment includes broker {id}, but no such broker is registered."
            )));
        }
        if i > 0 && sorted[i - 1] == *id {
            return Err(ClusterError::InvalidReplicaAssignment(format!(
                "The manual partition assignment includes the broker {id} more than once."
            )));
        }
    }
    if let Some(expected) = replication_factor.filter(|&r| r != replicas.len()) {
        return Err(ClusterError::InvalidReplicaAssignment(format!(
            "The manual partition assignment includes a partition with {} replica(s), but this is not consistent with previous partitions, which have {expected} replica(s).",
            replicas.len()
        )));
    }
    Ok(())
}

/// Checks a manual assignment of partitions `first..` (`replication_factor`:
/// the topic's, when it grows) and returns the ISRs to create them with:
/// each partition's live replicas — empty when every replica is live (the
/// command then puts them all in). Kafka's rule: a partition none of whose
/// replicas is live is refused.
pub fn check_manual_assignment(
    image: &MetadataImage,
    first: i32,
    assignments: &[Vec<i32>],
    mut replication_factor: Option<usize>,
) -> Result<Vec<Vec<i32>>, ClusterError> {
    let mut isrs = Vec::with_capacity(assignments.len());
    for (index, replicas) in assignments.iter().enumerate() {
        check_manual(image, replicas, replication_factor)?;
        replication_factor = Some(replicas.len());
        let isr: Vec<i32> = replicas
            .iter()
            .copied()
            .filter(|&id| image.is_live(id))
            .collect();
        if isr.is_empty() {
            let partition = i64::from(first) + i64::try_from(index).unwrap_or(i64::MAX);
            return Err(ClusterError::InvalidReplicaAssignment(format!(
                "All brokers specified in the manual partition assignment for partition {partition} are fenced or in controlled shutdown."
            )));
        }
        isrs.push(isr);
    }
    let all_live = isrs
        .iter()
        .zip(assignments)
        .all(|(isr, r)| isr.len() == r.len());
    Ok(if all_live { Vec::new() } else { isrs })
}

/// Checks a manual assignment of the partitions a topic with `current`
/// partitions and `replication_factor` replicas each grows by to reach
/// `total` (one replica list per new partition), as
/// `check_manual_assignment`.
pub fn check_added_partitions(
    image: &MetadataImage,
    (current, total): (i32, i32),
    assignments: &[Vec<i32>],
    replication_factor: usize,
) -> Result<Vec<Vec<i32>>, ClusterError> {
    let added = i64::from(total) - i64::from(current);
    if i64::try_from(assignments.len()).ok() != Some(added) {
        return Err(ClusterError::InvalidReplicaAssignment(format!(
            "Attempted to add {added} additional partition(s), but only {} assignment(s) were specified.",
            assignments.len()
        )));
    }
    check_manual_assignment(image, current, assignments, Some(replication_factor))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(racks: &[(i32, Option<&str>)]) -> Vec<Slot> {
        racks
            .iter()
            .map(|&(node_id, rack)| Slot {
                node_id,
                rack: rack.map(str::to_string),
            })
            .collect()
    }

    fn racks_of(slots: &[Slot], replicas: &[i32]) -> BTreeSet<Option<String>> {
        replicas
            .iter()
            .map(|id| {
                slots
                    .iter()
                    .find(|s| s.node_id == *id)
                    .expect("a slot")
                    .rack
                    .clone()
            })
            .collect()
    }

    #[test]
    fn without_racks_it_is_plain_round_robin() {
        let s = slots(&[(1, None), (2, None), (3, None)]);
        assert_eq!(
            place(&s, 0..3, 2, 0).expect("placed"),
            vec![vec![1, 2], vec![2, 3], vec![3, 1]]
        );
    }

    #[test]
    fn replicas_span_every_rack_and_leaders_spread() {
        // Unequal racks: a has 3 brokers, b 2, c 1.
        let s = slots(&[
            (1, Some("a")),
            (2, Some("a")),
            (3, Some("a")),
            (4, Some("b")),
            (5, Some("b")),
            (6, Some("c")),
        ]);
        let placed = place(&s, 0..60, 3, 7).expect("placed");
        let mut leaders: BTreeMap<i32, usize> = BTreeMap::new();
        for replicas in &placed {
            assert_eq!(replicas.len(), 3);
            assert_eq!(
                racks_of(&s, replicas).len(),
                3,
                "{replicas:?} spans every rack"
            );
            assert_eq!(replicas.iter().collect::<BTreeSet<_>>().len(), 3);
            *leaders.entry(replicas[0]).or_default() += 1;
        }
        assert_eq!(leaders.len(), 6, "every broker leads some: {leaders:?}");
        assert!(leaders.values().all(|&n| n == 10), "{leaders:?}");
    }

    #[test]
    fn more_replicas_than_racks_fill_from_every_rack_again() {
        let s = slots(&[
            (1, Some("a")),
            (2, Some("a")),
            (3, Some("b")),
            (4, Some("b")),
        ]);
        for replicas in place(&s, 0..8, 4, 0).expect("placed") {
            assert_eq!(replicas.iter().collect::<BTreeSet<_>>().len(), 4);
        }
        for replicas in place(&s, 0..8, 2, 3).expect("placed") {
            assert_eq!(racks_of(&s, &replicas).len(), 2, "{replicas:?}");
        }
    }

    #[test]
    fn a_replication_factor_beyond_the_live_brokers_is_refused() {
        let s = slots(&[(1, None)]);
        assert!(matches!(
            place(&s, 0..1, 2, 0),
            Err(ClusterError::InvalidReplicationFactor(_))
        ));
    }
}
