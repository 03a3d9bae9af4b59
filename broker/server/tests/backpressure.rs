//! The produce profile bounds in-flight request memory: with
//! `--produce-profile low-latency` (16 MiB), three clients sending 12 MiB
//! produce requests at once cannot all be held in memory; the broker stops
//! reading some connections until memory frees (counted in
//! `chronik_produce_backpressure_total`), and still stores every request.
//! A single request larger than the whole budget also gets through alone.

mod common;

use std::sync::{Arc, Barrier};
use std::thread;

use anyhow::{ensure, Result};
use bytes::Bytes;

use common::broker::Broker;
use common::kafka_client::Client;
use common::prom;

const CLIENTS: usize = 3;
const RECORDS_PER_REQUEST: usize = 12;
const RECORD_BYTES: usize = 1024 * 1024;

fn values(seed: u8, count: usize) -> Vec<Bytes> {
    (0..count)
        .map(|i| Bytes::from(vec![seed.wrapping_add(i as u8); RECORD_BYTES]))
        .collect()
}

#[test]
fn memory_bound_applies_backpressure_without_losing_requests() -> Result<()> {
    let broker = Broker::start(&["--produce-profile", "low-latency", "--wal-profile", "low"])?;
    let mut admin = Client::connect(&broker)?;
    admin.create_topic_with("bp", &[("max.message.bytes", "104857600")])?;

    let barrier = Arc::new(Barrier::new(CLIENTS));
    let handles: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let mut client = Client::connect(&broker)?;
            let barrier = barrier.clone();
            Ok(thread::spawn(move || -> Result<(i16, i64)> {
                let values = values(c as u8, RECORDS_PER_REQUEST);
                barrier.wait();
                client.produce_values("bp", &values)
            }))
        })
        .collect::<Result<_>>()?;
    let mut base_offsets = Vec::new();
    for handle in handles {
        let (error, base) = handle
            .join()
            .map_err(|_| anyhow::anyhow!("client thread panicked"))??;
        ensure!(
            error == 0,
            "a produce failed with error {error}: {}",
            broker.log_tail(10)
        );
        base_offsets.push(base);
    }
    base_offsets.sort_unstable();
    let expected: Vec<i64> = (0..CLIENTS as i64)
        .map(|c| c * RECORDS_PER_REQUEST as i64)
        .collect();
    ensure!(
        base_offsets == expected,
        "requests were not each stored once: base offsets {base_offsets:?}"
    );

    let samples = prom::parse(&broker.metrics_text()?);
    let backpressure =
        prom::sum(&samples, "chronik_produce_backpressure_total", &[]).unwrap_or(0.0);
    ensure!(
        backpressure >= 1.0,
        "three 12 MiB requests fit a 16 MiB budget without backpressure?"
    );
    let in_use = prom::sum(&samples, "chronik_produce_memory_in_use_bytes", &[]).unwrap_or(-1.0);
    ensure!(
        in_use == 0.0,
        "request memory is released once answered, got {in_use}"
    );

    // One request larger than the whole 16 MiB budget still goes through.
    let mut client = Client::connect(&broker)?;
    let (error, base) = client.produce_values("bp", &values(9, 20))?;
    ensure!(
        error == 0 && base == 36,
        "a 20 MiB request: error {error}, base offset {base}"
    );
    Ok(())
}
