//! Keeping `__consumer_offsets` in step with the groups in memory — KIP-848
//! groups and classic groups alike — so a coordinator failover (or a
//! restart) finds every member at the epoch (generation) and with the
//! assignment it was last told.
//!
//! Owns: what the log holds per group (the mirror each change is diffed
//! against, so only changed records are appended), the order writes append
//! in (a turn taken with the change, under the group manager's lock, so a
//! later change never lands first), the groups to rewrite whole (`dirty`:
//! changed by a classic-protocol request, the clock or a deletion, or whose
//! write failed), and the mirror's reload. A group id's records are
//! whichever kind it is now: a whole write tombstones the other kind's.
//! Must not: change groups (the manager does), encode records
//! (`consumer_group_records`, `classic_group_records`) or append (the
//! offset store).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bytes::Bytes;
use chronik_coordinator_state::ConsumerGroup;

use super::classic_group_records;
use super::consumer_group_records::{
    diff, group_level_records, member_records, records_of, GroupRecords,
};
use crate::infra::append_order::{AppendOrder, AppendTurn};

/// Which records of a group a change can have touched.
#[derive(Debug, Clone, Copy)]
pub enum Scope<'a> {
    /// Any: membership, epochs or several members' assignments.
    Whole,
    /// The group's own records and this member's (a heartbeat that moved
    /// neither epoch nor membership changes nothing else).
    Member(&'a str),
}

/// Records to append for one group, in their turn.
#[derive(Debug)]
pub struct PendingWrite {
    pub group_id: String,
    /// (key, value), None for a tombstone.
    pub changes: Vec<(Bytes, Option<Bytes>)>,
    pub turn: AppendTurn,
}

/// What a whole write takes a group id's records to.
#[derive(Debug)]
pub enum Desired {
    /// Exactly these (none: the group is gone, every record is tombstoned).
    Records(GroupRecords),
    /// A classic group mid-rebalance: its last stored generation stands,
    /// any other record of the id goes.
    KeepClassic,
}

#[derive(Debug, Default)]
pub struct GroupWrites {
    written: HashMap<String, GroupRecords>,
    dirty: BTreeSet<String>,
    order: AppendOrder,
}

/// A value no record has (every value starts with its version): a key
/// whose write failed holds it, so the next diff writes that key again.
fn unknown() -> Bytes {
    Bytes::new()
}

impl GroupWrites {
    /// The write that brings the log to `group` as it is now (None: the
    /// group is gone, so its records are tombstoned); None when nothing
    /// changed.
    pub fn take(
        &mut self,
        group_id: &str,
        group: Option<&ConsumerGroup>,
        scope: Scope,
    ) -> Option<PendingWrite> {
        let whole = matches!(scope, Scope::Whole) || group.is_none();
        let desired = match (group, scope) {
            (None, _) => GroupRecords::new(),
            (Some(g), Scope::Whole) => records_of(group_id, &g.stored()),
            (Some(g), Scope::Member(member_id)) => {
                let mut records = group_level_records(
                    group_id,
                    g.group_epoch(),
                    g.assignment_epoch(),
                    g.subscribed_partitions(),
                );
                if let Some(m) = g.stored_member_of(member_id) {
                    records.extend(member_records(group_id, member_id, &m));
                }
                records
            }
        };
        self.take_records(group_id, desired, whole)
    }

    /// The whole write that brings the log to `desired` for `group_id`;
    /// None when nothing changed.
    pub fn take_whole(&mut self, group_id: &str, desired: Desired) -> Option<PendingWrite> {
        let desired = match desired {
            Desired::Records(records) => records,
            Desired::KeepClassic => {
                let key = classic_group_records::key(group_id);
                self.written
                    .get(group_id)
                    .and_then(|w| w.get(&key))
                    .map(|v| GroupRecords::from([(key, v.clone())]))
                    .unwrap_or_default()
            }
        };
        self.take_records(group_id, desired, true)
    }

    fn take_records(
        &mut self,
        group_id: &str,
        desired: GroupRecords,
        whole: bool,
    ) -> Option<PendingWrite> {
        if whole {
            self.dirty.remove(group_id);
        }
        let written = self.written.entry(group_id.to_string()).or_default();
        let changes = diff(written, &desired, whole);
        for (key, value) in &changes {
            match value {
                Some(value) => written.insert(key.clone(), value.clone()),
                None => written.remove(key),
            };
        }
        if written.is_empty() {
            self.written.remove(group_id);
        }
        if changes.is_empty() {
            return None;
        }
        Some(PendingWrite {
            group_id: group_id.to_string(),
            changes,
            turn: self.order.next_turn(),
        })
    }

    /// `write` was not stored: its keys are written again with the group's
    /// next whole write, which the ticker makes.
    pub fn failed(&mut self, write: &PendingWrite) {
        let written = self.written.entry(write.group_id.clone()).or_default();
        for (key, _) in &write.changes {
            written.insert(key.clone(), unknown());
        }
        self.dirty.insert(write.group_id.clone());
    }

    /// The group changed in a way only a whole write records.
    pub fn mark_dirty(&mut self, group_id: &str) {
        self.dirty.insert(group_id.to_string());
    }

    /// The groups to write whole, emptied.
    pub fn take_dirty(&mut self) -> BTreeSet<String> {
        std::mem::take(&mut self.dirty)
    }

    /// The log as just replayed by a new coordinator.
    pub fn load(&mut self, records: &BTreeMap<String, GroupRecords>) {
        self.written = records.clone().into_iter().collect();
        self.dirty.clear();
    }
}
