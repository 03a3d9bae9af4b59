//! Tables for `verify`: each step's verdict and the resulting counts.

use super::*;

const P: u64 = 7;
const Q: u64 = 8;

/// One step: (partition, offset, envelope as (producer, sequence), value
/// matches?, expected verdict).
type Step = (i32, i64, Option<(u64, u64)>, bool, Verdict);

const OK: Verdict = Verdict::OK;
const DUP: Verdict = Verdict::Verified {
    duplicate: true,
    reordered: false,
    corrupt: false,
};
const REORD: Verdict = Verdict::Verified {
    duplicate: false,
    reordered: true,
    corrupt: false,
};
const CORRUPT: Verdict = Verdict::Verified {
    duplicate: false,
    reordered: false,
    corrupt: true,
};

fn run(steps: &[Step]) -> Verifier {
    let mut v = Verifier::new();
    for (i, &(partition, offset, env, intact, expected)) in steps.iter().enumerate() {
        let value = b"value";
        let header = env.map(|(p, s)| {
            Envelope::new(p, s, 1_000, if intact { value } else { b"other" }).encode()
        });
        let slot = v.partition_slot("t", partition);
        let verdict = v.observe(
            slot,
            &Observed {
                offset,
                envelope: header.as_ref().map(|h| &h[..]),
                value,
                consumed_at_us: 1_500,
            },
        );
        assert_eq!(verdict, expected, "step {i}: {:?}", steps[i]);
    }
    v
}

#[test]
fn verdict_table() {
    // (name, steps, expected counts)
    let cases: Vec<(&str, Vec<Step>, Counts)> = vec![
        (
            "clean, two producers interleaved over two partitions",
            vec![
                (0, 0, Some((P, 0)), true, OK),
                (1, 0, Some((P, 1)), true, OK),
                (0, 1, Some((Q, 0)), true, OK),
                (0, 2, Some((P, 2)), true, OK),
                (1, 1, Some((Q, 1)), true, OK),
            ],
            Counts {
                consumed: 5,
                verified: 5,
                ..Counts::default()
            },
        ),
        (
            "same offset again is a redelivery, never a duplicate",
            vec![
                (0, 0, Some((P, 0)), true, OK),
                (0, 1, Some((P, 1)), true, OK),
                (0, 0, Some((P, 0)), true, Verdict::Redelivery),
                (0, 1, Some((P, 1)), true, Verdict::Redelivery),
                (0, 2, Some((P, 2)), true, OK),
            ],
            Counts {
                consumed: 5,
                verified: 3,
                redeliveries: 2,
                ..Counts::default()
            },
        ),
        (
            "same sequence at another offset is a duplicate, also across partitions",
            vec![
                (0, 0, Some((P, 0)), true, OK),
                (0, 1, Some((P, 0)), true, DUP),
                (1, 0, Some((P, 0)), true, DUP),
                (1, 1, Some((P, 1)), true, OK),
            ],
            Counts {
                consumed: 4,
                verified: 4,
                duplicates: 2,
                ..Counts::default()
            },
        ),
        (
            "a swap within a partition is one reordering; a duplicate of an old sequence is not",
            vec![
                (0, 0, Some((P, 0)), true, OK),
                (0, 1, Some((P, 2)), true, OK),
                (0, 2, Some((P, 1)), true, REORD),
                (0, 3, Some((P, 3)), true, OK),
                (0, 4, Some((P, 0)), true, DUP),
                (0, 5, Some((P, 4)), true, OK),
            ],
            Counts {
                consumed: 6,
                verified: 6,
                duplicates: 1,
                reordered: 1,
                ..Counts::default()
            },
        ),
        (
            "order is per (partition, producer): lower sequences in another partition are fine",
            vec![
                (0, 0, Some((P, 5)), true, OK),
                (1, 0, Some((P, 1)), true, OK),
                (0, 1, Some((Q, 0)), true, OK),
                (0, 2, Some((P, 6)), true, OK),
            ],
            Counts {
                consumed: 4,
                verified: 4,
                ..Counts::default()
            },
        ),
        (
            "corrupt values count apart and still mark the sequence seen",
            vec![
                (0, 0, Some((P, 0)), false, CORRUPT),
                (
                    0,
                    1,
                    Some((P, 0)),
                    false,
                    Verdict::Verified {
                        duplicate: true,
                        reordered: false,
                        corrupt: true,
                    },
                ),
            ],
            Counts {
                consumed: 2,
                verified: 2,
                duplicates: 1,
                corrupt: 2,
                ..Counts::default()
            },
        ),
        (
            "records without an envelope are foreign",
            vec![
                (0, 0, None, true, Verdict::Foreign),
                (0, 1, Some((P, 0)), true, OK),
                (0, 0, None, true, Verdict::Redelivery),
            ],
            Counts {
                consumed: 3,
                verified: 1,
                foreign: 1,
                redeliveries: 1,
                ..Counts::default()
            },
        ),
    ];
    for (name, steps, expected) in cases {
        let v = run(&steps);
        assert_eq!(v.counts(), expected, "{name}");
        let c = v.counts();
        assert_eq!(
            c.consumed,
            c.redeliveries + c.foreign + c.verified,
            "{name}: counts add up"
        );
        assert_eq!(
            v.latency_total().len(),
            c.verified,
            "{name}: one latency per verified record"
        );
    }
}

#[test]
fn malformed_envelopes_are_foreign_and_counted() {
    let mut v = Verifier::new();
    let slot = v.partition_slot("t", 0);
    let verdict = v.observe(
        slot,
        &Observed {
            offset: 0,
            envelope: Some(b"junk"),
            value: b"",
            consumed_at_us: 0,
        },
    );
    assert_eq!(verdict, Verdict::BadEnvelope);
    assert_eq!(
        v.counts(),
        Counts {
            consumed: 1,
            foreign: 1,
            envelope_errors: 1,
            ..Counts::default()
        }
    );
    assert_eq!(v.partitions()[slot].foreign.ranges(), &[[0, 0]]);
}

#[test]
fn examples_and_offset_sets_name_the_records() {
    let v = run(&[
        (0, 10, Some((P, 0)), true, OK),
        (0, 11, Some((P, 2)), true, OK),
        (0, 12, Some((P, 1)), true, REORD),
        (
            0,
            13,
            Some((P, 1)),
            false,
            Verdict::Verified {
                duplicate: true,
                reordered: false,
                corrupt: true,
            },
        ),
    ]);
    let e = v.examples();
    assert_eq!(e.reordered.len(), 1);
    assert_eq!(
        (
            e.reordered[0].offset,
            e.reordered[0].sequence,
            e.reordered[0].previous_sequence
        ),
        (12, 1, Some(2))
    );
    assert_eq!((e.duplicates[0].offset, e.corrupt[0].offset), (13, 13));
    let p = &v.partitions()[0];
    assert_eq!(p.consumed.ranges(), &[[10, 13]]);
    assert_eq!(p.reordered.ranges(), &[[12, 12]]);
    assert_eq!(p.corrupt.ranges(), &[[13, 13]]);
    assert_eq!(v.producers()[0].seen.ranges(), &[[0, 2]]);
    assert_eq!(p.position(), Some(14));
}

#[test]
fn latency_is_consume_time_minus_send_time_and_intervals_fold_into_the_total() {
    let mut v = run(&[
        (0, 0, Some((P, 0)), true, OK),
        (0, 1, Some((P, 1)), true, OK),
    ]);
    let interval = v.take_latency_interval();
    assert_eq!(interval.len(), 2);
    assert_eq!(interval.max(), 500);
    assert!(v.take_latency_interval().is_empty());
    assert_eq!(v.latency_total().len(), 2);
}

#[test]
fn partition_slots_are_stable() {
    let mut v = Verifier::new();
    let a = v.partition_slot("a", 3);
    let b = v.partition_slot("b", 3);
    let a0 = v.partition_slot("a", 0);
    assert_ne!(a, b);
    assert_ne!(a, a0);
    assert_eq!(v.partition_slot("a", 3), a);
    assert_eq!(v.partition_slot("b", 3), b);
    v.note_watermarks(a, 0, 10);
    v.note_watermarks(a, 2, 8);
    assert_eq!(
        (
            v.partitions()[a].log_start_offset,
            v.partitions()[a].high_watermark
        ),
        (Some(0), Some(10))
    );
}

#[test]
fn a_verifier_for_one_run_calls_other_runs_records_foreign() {
    let run: u32 = 0xabcd_0123;
    let ours = (u64::from(run) << 32) | 1;
    let mut v = Verifier::for_run(run);
    let slot = v.partition_slot("t", 0);
    let env = |producer, sequence| Some(Ok(Envelope::new(producer, sequence, 0, b"v")));
    assert_eq!(v.judge(slot, 0, env(ours, 0), b"v"), OK);
    assert_eq!(v.judge(slot, 1, env(7, 0), b"v"), Verdict::OtherRun);
    assert_eq!(v.judge(slot, 2, None, b"v"), Verdict::Foreign);
    assert_eq!(v.judge(slot, 3, env(ours, 1), b"x"), CORRUPT);
    assert_eq!(
        v.counts(),
        Counts {
            consumed: 4,
            verified: 2,
            corrupt: 1,
            foreign: 2,
            other_run: 1,
            ..Counts::default()
        }
    );
    assert_eq!(v.partitions()[slot].foreign.ranges(), &[[1, 2]]);
    assert!(
        v.latency_total().is_empty(),
        "judge leaves timing to the caller"
    );
}
