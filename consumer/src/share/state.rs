//! What the share client's tasks (membership, one fetch loop per leader,
//! the manager) share: the verifier and share tally, the assignment, the
//! topic ids' names, the checkpoint generations, and the stop flags.
//!
//! Owns: [`Shared`] and [`State`]. One `std::sync::Mutex` guards `State`;
//! no task holds it across an await. Must not: do I/O.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Mutex;
use std::time::Instant;

use chronik_harness::verify::{Observed, Verdict, Verifier};
use chronik_harness::Envelope;
use uuid::Uuid;

use super::tally::ShareTally;
use crate::consume::RebalanceEvent;

/// The member's identity and what it subscribes to.
#[derive(Debug, Clone)]
pub struct Member {
    pub group: String,
    /// Chosen by this client (a UUID, base64url as Kafka's clients write it).
    pub member_id: String,
    pub client_id: String,
    pub topics: Vec<String>,
    pub bootstrap: Vec<String>,
}

/// The verification and membership state.
#[derive(Debug)]
pub struct State {
    pub verifier: Verifier,
    pub share: ShareTally,
    /// Acknowledgements decided now are tagged with this generation; a
    /// checkpoint covers every generation below the one it starts.
    pub generation: u64,
    /// Something was decided since the last checkpoint.
    pub dirty: bool,
    /// (topic id, partition) assigned by the group coordinator.
    pub assignment: Vec<(Uuid, i32)>,
    pub assignment_version: u64,
    pub member_epoch: i32,
    pub rebalances: u64,
    pub rebalance_events: Vec<RebalanceEvent>,
    pub names: BTreeMap<Uuid, String>,
    pub first_delivery: Option<Instant>,
    pub last_delivery: Option<Instant>,
    /// Fetch-loop errors (acknowledge errors, partition errors) by name.
    pub errors: BTreeMap<String, u64>,
    /// Report checkpoints written, and the time they took.
    pub checkpoints: u64,
    pub checkpoint_secs: f64,
}

impl State {
    pub fn new() -> State {
        State {
            verifier: Verifier::new(),
            share: ShareTally::default(),
            generation: 1,
            dirty: false,
            assignment: Vec::new(),
            assignment_version: 0,
            member_epoch: 0,
            rebalances: 0,
            rebalance_events: Vec::new(),
            names: BTreeMap::new(),
            first_delivery: None,
            last_delivery: None,
            errors: BTreeMap::new(),
            checkpoints: 0,
            checkpoint_secs: 0.0,
        }
    }

    pub fn count_error(&mut self, what: String) {
        *self.errors.entry(what).or_default() += 1;
    }
}

impl Default for State {
    fn default() -> Self {
        State::new()
    }
}

/// One delivery of a record: verified as any record (envelope, latency,
/// duplicates), counted by its delivery count, and marked as being
/// accepted. The at-least-once verifier: a record delivered again (to this
/// member or another) is a redelivery, never a duplicate.
pub fn deliver(
    verifier: &mut Verifier,
    share: &mut ShareTally,
    (topic, partition): (&str, i32),
    record: &Observed<'_>,
    delivery_count: u16,
) -> Verdict {
    let slot = verifier.partition_slot(topic, partition);
    let verdict = verifier.observe(slot, record);
    let first_latency = match verdict {
        Verdict::Verified { .. } if delivery_count <= 1 => record
            .envelope
            .and_then(|e| Envelope::decode(e).ok())
            .map(|e| {
                u64::try_from(record.consumed_at_us.saturating_sub(e.send_time_us)).unwrap_or(0)
            }),
        _ => None,
    };
    share.note_delivery(delivery_count, first_latency);
    share.accepting(topic, partition, u64::try_from(record.offset).unwrap_or(0));
    verdict
}

/// Everything the tasks share.
#[derive(Debug)]
pub struct Shared {
    pub member: Member,
    pub state: Mutex<State>,
    /// The newest checkpoint generation on disk (u64::MAX: no report file,
    /// nothing to wait for).
    pub durable: AtomicU64,
    /// Fetch loops: stop fetching, close the sessions.
    pub stop_fetch: AtomicBool,
    /// Membership: leave the group.
    pub stop_membership: AtomicBool,
    /// A fetch loop saw a leadership or topic error.
    pub refresh_metadata: AtomicBool,
}

impl Shared {
    pub fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}
