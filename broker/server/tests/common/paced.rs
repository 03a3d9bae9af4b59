//! An idempotent acks=all producer sending `0..count` as values to one
//! partition at a fixed pace on its own thread, recording each message's
//! outcome and send-to-acknowledgement latency; and the check that a
//! partition holds exactly those values once each, in order.

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use rdkafka::producer::FutureRecord;

use super::clients::{assign_from_beginning, consumer_at, drain, producer_at};

/// (sequence number, offset or error, send-to-acknowledgement latency)
pub type Delivery = (u64, Result<i64, String>, Duration);

/// Sends `count` messages to partition 0 of `topic`, one every `every`.
pub fn spawn(
    bootstrap: String,
    topic: &'static str,
    count: u64,
    every: Duration,
) -> JoinHandle<Result<Vec<Delivery>>> {
    std::thread::spawn(move || -> Result<Vec<Delivery>> {
        let producer = producer_at(
            &bootstrap,
            &[
                ("acks", "all"),
                ("enable.idempotence", "true"),
                ("message.timeout.ms", "60000"),
                ("linger.ms", "0"),
            ],
        )?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async move {
            let start = Instant::now();
            let mut tasks = Vec::new();
            for seq in 0..count {
                let value = seq.to_string();
                let future = producer
                    .send_result(
                        FutureRecord::<(), _>::to(topic)
                            .partition(0)
                            .payload(&value),
                    )
                    .map_err(|(e, _)| anyhow::anyhow!("enqueue failed: {e}"))?;
                let sent = Instant::now();
                tasks.push(tokio::spawn(async move {
                    let outcome = match future.await {
                        Ok(Ok(delivery)) => Ok(delivery.offset),
                        Ok(Err((e, _))) => Err(e.to_string()),
                        Err(_) => Err("cancelled".to_string()),
                    };
                    (seq, outcome, sent.elapsed())
                }));
                let due = every * u32::try_from(seq).unwrap_or(u32::MAX);
                if let Some(wait) = due.checked_sub(start.elapsed()) {
                    tokio::time::sleep(wait).await;
                }
            }
            let mut results = Vec::new();
            for task in tasks {
                results.push(task.await?);
            }
            Ok(results)
        })
    })
}

/// Waits for the producer; fails if any message was not acknowledged.
pub fn join_all_acknowledged(producer: JoinHandle<Result<Vec<Delivery>>>) -> Result<Vec<Delivery>> {
    let results = producer
        .join()
        .map_err(|_| anyhow::anyhow!("producer thread panicked"))??;
    let failed: Vec<_> = results
        .iter()
        .filter(|(_, r, _)| r.is_err())
        .take(5)
        .collect();
    ensure!(failed.is_empty(), "the producer saw errors: {failed:?}");
    Ok(results)
}

/// Reads partition 0 of `topic` from the beginning through `bootstrap`:
/// exactly `0..count`, once each and in order.
pub fn check_read_back(bootstrap: &str, topic: &str, count: u64) -> Result<()> {
    let consumer = consumer_at(bootstrap, &[])?;
    assign_from_beginning(&consumer, topic, &[0])?;
    let records = drain(&consumer, &[0], count as usize, Duration::from_secs(30))?;
    let values: Vec<u64> = records
        .iter()
        .filter_map(|r| r.value_str().parse().ok())
        .collect();
    ensure!(
        values == (0..count).collect::<Vec<_>>(),
        "read back {} records, not 0..{count} once each in order (first values {:?})",
        values.len(),
        &values[..values.len().min(10)]
    );
    Ok(())
}
