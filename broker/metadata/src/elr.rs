//! Eligible leader replicas (KIP-966), as the state machine keeps them for
//! one partition while `eligible.leader.replicas.version` is 1 or more.
//!
//! Owns: the ELR and last-known-ELR rules and the election order that uses
//! them. Must not: read anything but the partition, the live set and the
//! min.insync.replicas it is handed (every node applies the same commands),
//! or act when the feature is off (`command` does not call it then, and
//! clears the fields when the feature is turned off).
//!
//! Rules (Kafka's PartitionChangeBuilder):
//! - with the ISR at or above min.insync.replicas the ELR and the last
//!   known ELR are empty;
//! - when a change leaves the ISR below min.insync.replicas, every replica
//!   that was in the ISR or the ELR before and is not in the new ISR is in
//!   the ELR (it held every record acknowledged with acks=all: those need
//!   min.insync.replicas in-sync copies, so none was acknowledged since
//!   the ISR shrank below it); a replica back in the ISR leaves the ELR,
//!   and so does one that is no longer a replica;
//! - a fenced broker leaves the ISR even when it is the last member (the ISR
//!   may be empty; the broker is then in the ELR);
//! - when the ISR becomes empty the last leader is the last known ELR, until
//!   the partition has a leader again;
//! - a leader that was in neither the ISR nor the ELR (an unclean
//!   election, or the last known leader) clears both: the other replicas'
//!   logs are cut back to its own;
//! - election order: the first live ISR member in replica order, else the
//!   first live ELR member, else the last known leader if it is live (as
//!   before KIP-966 the last ISR member led again when it returned). A
//!   replica elected from the ELR or as the last known leader is the whole
//!   new ISR.
//!
//! Chronik does not tell a clean from an unclean shutdown at registration
//! (Kafka's broker epoch check), so a restarted ELR member stays eligible:
//! its log holds what it fetched before the crash unless the machine lost
//! its page cache (docs/cluster.md says so).

use std::collections::BTreeSet;

use crate::image::PartitionImage;

/// Recomputes the ELR fields after `before` became `after` (the ISR
/// changed or a leader was elected), with `min_isr` in force.
pub fn update(before: &PartitionImage, after: &mut PartitionImage, min_isr: usize) {
    let unclean = after.leader >= 0
        && after.leader != before.leader
        && !before.isr.contains(&after.leader)
        && !before.elr.contains(&after.leader);
    if after.isr.len() >= min_isr || unclean {
        after.elr.clear();
        after.last_known_elr.clear();
        return;
    }
    let mut elr: Vec<i32> = Vec::new();
    for r in before.isr.iter().chain(before.elr.iter()) {
        if !after.isr.contains(r) && after.replicas.contains(r) && !elr.contains(r) {
            elr.push(*r);
        }
    }
    elr.sort_unstable();
    after.elr = elr;
    if after.isr.is_empty() && before.leader >= 0 {
        after.last_known_elr = vec![before.leader];
    } else if after.leader >= 0 {
        after.last_known_elr.clear();
    }
}

/// Who leads a partition whose ISR has no live member: the first live ELR
/// member in replica order, else the last known leader if live.
pub fn choose_leader(partition: &PartitionImage, live: &BTreeSet<i32>) -> Option<i32> {
    partition
        .replicas
        .iter()
        .copied()
        .find(|r| partition.elr.contains(r) && live.contains(r))
        .or_else(|| {
            let last = partition.last_known_elr.first().copied()?;
            (partition.isr.is_empty()
                && partition.elr.is_empty()
                && partition.last_known_elr.len() == 1
                && live.contains(&last))
            .then_some(last)
        })
}

#[cfg(test)]
#[rustfmt::skip]
mod tests {
    use super::*;

    fn part(isr: &[i32], elr: &[i32], leader: i32) -> PartitionImage {
        PartitionImage { elr: elr.to_vec(), ..PartitionImage::new(0, vec![1, 2, 3], isr.to_vec(), leader) }
    }

    #[test]
    fn replicas_enter_the_elr_only_below_min_isr() {
        // (before isr, before elr, after isr, after leader, want elr, want last known, why)
        type Row = (&'static [i32], &'static [i32], &'static [i32], i32, &'static [i32], &'static [i32], &'static str);
        let table: [Row; 5] = [
            (&[1, 2, 3], &[], &[1, 2], 1, &[], &[], "at min isr: no ELR"),
            (&[1, 2], &[], &[1], 1, &[2], &[], "below min isr: the leaver is eligible"),
            (&[1], &[2], &[], -1, &[1, 2], &[1], "the last member fenced: empty ISR, last known leader"),
            (&[], &[1, 2], &[2], 2, &[1], &[], "2 elected from the ELR"),
            (&[2], &[1], &[2, 3], 2, &[], &[], "back at min isr: ELR cleared"),
        ];
        for (isr, elr, new_isr, leader, want_elr, want_last, why) in table {
            let before = part(isr, elr, if isr.is_empty() { -1 } else { isr[0] });
            let mut after = PartitionImage { isr: new_isr.to_vec(), leader, ..before.clone() };
            update(&before, &mut after, 2);
            assert_eq!((after.elr.as_slice(), after.last_known_elr.as_slice()), (want_elr, want_last), "{why}");
        }
    }

    #[test]
    fn election_prefers_live_elr_members_then_the_last_known_leader() {
        let live = |ids: &[i32]| ids.iter().copied().collect::<BTreeSet<i32>>();
        let mut p = part(&[], &[1, 2], -1);
        p.last_known_elr = vec![1];
        assert_eq!(choose_leader(&p, &live(&[3])), None, "3 is not eligible");
        assert_eq!(choose_leader(&p, &live(&[2, 3])), Some(2), "an ELR member");
        p.elr.clear();
        assert_eq!(choose_leader(&p, &live(&[1, 3])), Some(1), "the last known leader");
        assert_eq!(choose_leader(&p, &live(&[2, 3])), None);
    }
}
