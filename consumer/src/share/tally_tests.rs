//! The at-least-once verifier: records delivered to share-group members
//! (`state::deliver`), acknowledgement outcomes, and the merged verdict
//! counts — accept-once, a redelivery counted and not a fault, an ACCEPT
//! twice caught, a record never accepted caught, loss decided by the
//! ledgers as in every mode.

use chronik_harness::assess::assess;
use chronik_harness::intervals::IntervalSet;
use chronik_harness::ledger::Ledger;
use chronik_harness::tally::Tally;
use chronik_harness::verify::{Observed, Verdict, Verifier};
use chronik_harness::Envelope;

use super::*;
use crate::share::state::deliver;

const PRODUCER: u64 = 0xc0ffee;

/// One member: its verifier and share tally.
struct Member {
    verifier: Verifier,
    share: ShareTally,
}

impl Member {
    fn new() -> Member {
        Member {
            verifier: Verifier::new(),
            share: ShareTally::default(),
        }
    }

    /// Delivers offsets `offsets` of partition 0 (sequence = offset) with
    /// `count`, and returns the verdicts.
    fn deliver(&mut self, offsets: std::ops::RangeInclusive<u64>, count: u16) -> Vec<Verdict> {
        offsets
            .map(|o| {
                let value = format!("v{o}").into_bytes();
                let env = Envelope::new(PRODUCER, o, 1_000, &value).encode();
                let record = Observed {
                    offset: o as i64,
                    envelope: Some(&env),
                    value: &value,
                    consumed_at_us: 3_000,
                };
                deliver(
                    &mut self.verifier,
                    &mut self.share,
                    ("t", 0),
                    &record,
                    count,
                )
            })
            .collect()
    }

    fn confirm(&mut self, first: u64, last: u64, ok: bool) {
        self.share
            .confirmed("t", 0, &IntervalSet::from_ranges([[first, last]]), ok);
    }

    fn tally(&self) -> (Tally, ShareTally) {
        (Tally::from_verifier(&self.verifier), self.share.clone())
    }
}

fn merge(members: &[&Member]) -> (Tally, ShareTally) {
    let (mut tally, mut share) = (Tally::default(), ShareTally::default());
    for m in members {
        let (t, s) = m.tally();
        tally.absorb(t);
        share.absorb(s);
    }
    (tally, share)
}

fn ledger(last: u64) -> Ledger {
    Ledger {
        producer_id: Some(PRODUCER),
        acknowledged: IntervalSet::from_ranges([[0, last]]),
        next_sequence: Some(last + 1),
        ..Ledger::default()
    }
}

#[test]
fn every_record_accepted_once() {
    let mut a = Member::new();
    assert!(a.deliver(0..=9, 1).iter().all(|v| *v == Verdict::OK));
    a.confirm(0, 9, true);
    let (tally, share) = a.tally();
    let c = share.counts(&tally);
    assert_eq!(c.records_accepted, 10);
    assert_eq!(
        (c.accepted_twice, c.not_accepted, c.accept_outcome_unknown),
        (0, 0, 0)
    );
    assert_eq!(
        (c.deliveries, c.redeliveries, c.max_delivery_count),
        (10, 0, 1)
    );
    assert_eq!(share.first_delivery_latency.len(), 10);
    assert_eq!(assess(&tally, &[&ledger(9)]).totals.lost, 0);
}

#[test]
fn a_redelivery_to_another_member_is_counted_not_a_fault() {
    // A receives 0..=4, its checkpoint names them as being accepted, and it
    // dies before the ACCEPT leaves; B gets them again (delivery count 2)
    // with 5..=9, accepts all.
    let mut a = Member::new();
    a.deliver(0..=4, 1);
    let mut b = Member::new();
    let redelivered = b.deliver(0..=4, 2);
    assert!(
        redelivered.iter().all(|v| *v == Verdict::OK),
        "a redelivery is verified in its new member, never a duplicate"
    );
    b.deliver(5..=9, 1);
    b.confirm(0, 9, true);
    let (tally, share) = merge(&[&a, &b]);
    let c = share.counts(&tally);
    assert_eq!(c.records_accepted, 10);
    assert_eq!((c.accepted_twice, c.not_accepted), (0, 0));
    assert_eq!(
        c.accept_outcome_unknown, 0,
        "A's unconfirmed ones B accepted"
    );
    assert_eq!((c.redeliveries, c.max_delivery_count), (5, 2));
    assert_eq!(share.by_delivery_count[&1], 10);
    assert_eq!(share.by_delivery_count[&2], 5);
    assert_eq!(c.redeliveries_seen_before, 5, "A's report saw them first");
    let totals = assess(&tally, &[&ledger(9)]).totals;
    assert_eq!((totals.records.duplicates, totals.lost), (0, 0));
    assert_eq!(totals.records.redeliveries, 5);
    // only first deliveries are in the first-delivery latency
    assert_eq!(share.first_delivery_latency.len(), 10);
}

#[test]
fn a_redelivery_to_the_same_member_after_a_refused_accept() {
    let mut a = Member::new();
    a.deliver(0..=4, 1);
    a.confirm(0, 4, false); // the lock expired first
    assert_eq!(a.deliver(0..=4, 2), vec![Verdict::Redelivery; 5]);
    a.confirm(0, 4, true);
    let (tally, share) = a.tally();
    let c = share.counts(&tally);
    assert_eq!(
        (c.records_accepted, c.accepted_twice, c.ack_failed),
        (5, 0, 5)
    );
    assert_eq!((c.redeliveries, c.redeliveries_seen_before), (5, 5));
    assert_eq!(c.not_accepted, 0);
}

#[test]
fn an_accept_confirmed_twice_is_caught() {
    let mut a = Member::new();
    a.deliver(0..=4, 1);
    a.confirm(0, 4, true);
    let mut b = Member::new();
    b.deliver(3..=4, 2);
    b.confirm(3, 4, true);
    let (tally, share) = merge(&[&a, &b]);
    let c = share.counts(&tally);
    assert_eq!((c.records_accepted, c.accepted_twice), (5, 2));
}

#[test]
fn a_record_never_accepted_is_caught_and_loss_is_the_ledgers() {
    let mut a = Member::new();
    a.deliver(0..=9, 1);
    a.confirm(0, 7, true);
    a.confirm(8, 8, false); // refused, and nobody got it again
                            // offset 9: the member stopped with its ACCEPT unsent
    let (tally, mut share) = a.tally();
    share.partitions.values_mut().for_each(|s| {
        s.unconfirmed = s
            .unconfirmed
            .difference(&IntervalSet::from_ranges([[9, 9]]))
    });
    let c = share.counts(&tally);
    assert_eq!(
        (c.records_accepted, c.not_accepted, c.ack_failed),
        (8, 2, 1)
    );
    // the producer had 12 acknowledged: 10 and 11 never arrived
    let totals = assess(&tally, &[&ledger(11)]).totals;
    assert_eq!(totals.lost, 2);
}

#[test]
fn a_dead_members_unanswered_accepts_are_explained() {
    let mut a = Member::new();
    a.deliver(0..=4, 1);
    let (tally, mut share) = a.tally();
    share.members.push(MemberSummary {
        client_id: "a".into(),
        member_id: "m".into(),
        stop_reason: "checkpoint".into(),
        written_at_us: 0,
        deliveries: 5,
        accepted: 0,
        unconfirmed: 5,
        checkpoints: 1,
        checkpoint_secs: 0.01,
    });
    let c = share.counts(&tally);
    assert_eq!(
        (c.accept_outcome_unknown, c.not_accepted, c.members_died),
        (5, 0, 1)
    );
}
