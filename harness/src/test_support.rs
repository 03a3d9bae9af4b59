//! Test support (for this crate's tests and other crates' tests): a
//! verifier fed a table of records, for the tables of every crate that
//! tests what is built on the verifier.
//!
//! Owns: [`Rec`] and [`replica`]. Must not: be used by a tool at run time.

use crate::verify::{Observed, Verifier};
use crate::Envelope;

/// (partition, offset, Some((producer, sequence)) or None for a record
/// without an envelope); every value is `b"v"`, intact.
pub type Rec = (i32, i64, Option<(u64, u64)>);

/// A verifier fed `records` of topic "t" whose partitions' high watermarks
/// are `hw` (partition i has hw[i], log start 0).
pub fn replica(records: &[Rec], hw: &[i64]) -> Verifier {
    let mut v = Verifier::new();
    for (partition, &high) in hw.iter().enumerate() {
        let slot = v.partition_slot("t", partition as i32);
        v.note_watermarks(slot, 0, high);
    }
    for &(partition, offset, env) in records {
        let header = env.map(|(p, s)| Envelope::new(p, s, 0, b"v").encode());
        let slot = v.partition_slot("t", partition);
        v.observe(
            slot,
            &Observed {
                offset,
                envelope: header.as_ref().map(|h| &h[..]),
                value: b"v",
                consumed_at_us: 10,
            },
        );
    }
    v
}
