//! chronik-consumer-verifier-bench: the verifier's own cost, without Kafka.
//!
//! Feeds pre-built 256-byte records with envelopes straight into
//! `Verifier::observe` (the same call the poll loop makes, clock read
//! included) and prints records/s and ns/record for a few arrival patterns,
//! plus the envelope decode + CRC-32C alone. Compare with a whole
//! chronik-consumer run (consumer/bench.sh) to see what rdkafka costs.
//!
//! Usage: chronik-consumer-verifier-bench [RECORDS] [VALUE_BYTES]   (defaults 4000000 256)

use std::hint::black_box;
use std::time::Instant;

use chronik_harness::verify::{Observed, Verifier};
use chronik_harness::{now_us, Envelope};

/// A record as the poll loop would see it.
struct Rec {
    partition: i32,
    offset: i64,
    envelope: [u8; 32],
    value: usize,
}

const DISTINCT_VALUES: usize = 1024;

fn main() {
    let mut args = std::env::args().skip(1);
    let records: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(4_000_000);
    let value_bytes: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(256);
    let values: Vec<Vec<u8>> = (0..DISTINCT_VALUES)
        .map(|i| (0..value_bytes).map(|j| (i * 31 + j * 7) as u8).collect())
        .collect();
    let crcs: Vec<u32> = values
        .iter()
        .map(|v| Envelope::new(0, 0, 0, v).value_crc32c)
        .collect();

    println!("verifier micro-benchmark: {records} records of {value_bytes} B, one core");
    println!("{:<58} {:>12} {:>10}", "pattern", "records/s", "ns/record");
    let patterns: [(&str, usize, i32, usize); 3] = [
        ("1 producer, 1 partition, in order", 1, 1, 1),
        (
            "8 producers round-robin over 6 partitions, batches of 500",
            8,
            6,
            500,
        ),
        (
            "64 producers round-robin over 6 partitions, batches of 500",
            64,
            6,
            500,
        ),
    ];
    for (name, producers, partitions, batch) in patterns {
        let recs = build(records, producers, partitions, batch, &crcs);
        // Warm-up pass, then the timed one on a fresh verifier.
        verify_all(&recs, &values);
        let start = Instant::now();
        let v = verify_all(&recs, &values);
        let secs = start.elapsed().as_secs_f64();
        let c = v.counts();
        assert_eq!(
            (c.verified, c.duplicates, c.reordered, c.corrupt),
            (records as u64, 0, 0, 0),
            "{name}"
        );
        println!(
            "{name:<58} {:>12.0} {:>10.1}",
            records as f64 / secs,
            secs * 1e9 / records as f64
        );
    }

    let recs = build(records, 1, 1, 1, &crcs);
    let start = Instant::now();
    let mut ok = 0u64;
    for r in &recs {
        let e = Envelope::decode(black_box(&r.envelope)).ok();
        ok += u64::from(e.is_some_and(|e| e.matches(&values[r.value])));
    }
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(ok, records as u64);
    println!(
        "{:<58} {:>12.0} {:>10.1}",
        "(envelope decode + CRC-32C only)",
        records as f64 / secs,
        secs * 1e9 / records as f64
    );
    let start = Instant::now();
    let mut t = 0i64;
    for _ in 0..records {
        t = t.wrapping_add(black_box(now_us()));
    }
    black_box(t);
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{:<58} {:>12.0} {:>10.1}",
        "(wall clock read only)",
        records as f64 / secs,
        secs * 1e9 / records as f64
    );
}

/// Records whose sequences go round-robin over `producers`; each batch of
/// `batch` consecutive messages lands in one partition, and partitions are
/// consumed batch by batch in turn (as a fetch would return them).
fn build(
    records: usize,
    producers: usize,
    partitions: i32,
    batch: usize,
    crcs: &[u32],
) -> Vec<Rec> {
    let mut next_seq = vec![0u64; producers];
    let mut next_offset = vec![0i64; partitions as usize];
    let mut out = Vec::with_capacity(records);
    for i in 0..records {
        let producer = i % producers;
        let partition = ((i / batch) % partitions as usize) as i32;
        let value = i % DISTINCT_VALUES;
        let sequence = next_seq[producer];
        next_seq[producer] += 1;
        let offset = next_offset[partition as usize];
        next_offset[partition as usize] += 1;
        let envelope = Envelope {
            producer_id: 1000 + producer as u64,
            sequence,
            send_time_us: now_us(),
            value_crc32c: crcs[value],
        };
        out.push(Rec {
            partition,
            offset,
            envelope: envelope.encode(),
            value,
        });
    }
    out
}

fn verify_all(recs: &[Rec], values: &[Vec<u8>]) -> Verifier {
    let mut v = Verifier::new();
    for r in recs {
        let slot = v.partition_slot("bench", r.partition);
        v.observe(
            slot,
            &Observed {
                offset: r.offset,
                envelope: Some(&r.envelope),
                value: &values[r.value],
                consumed_at_us: now_us(),
            },
        );
    }
    v
}
