//! Order within a connection: a producer pipelining many small requests to
//! one partition (up to 1000 in flight, acks=1 under group commit, so many
//! requests wait for fsync at once) finds its messages in the log in the
//! order it sent them, at consecutive offsets.

mod common;

use std::time::Duration;

use anyhow::{ensure, Result};
use rdkafka::producer::FutureRecord;

use common::broker::Broker;
use common::clients::{assign_from_beginning, consumer, drain, producer};

const MESSAGES: usize = 20_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_produce_requests_are_appended_in_request_order() -> Result<()> {
    let broker = Broker::start(&["--wal-profile", "medium", "--default-partitions", "1"])?;
    let producer = producer(
        &broker,
        &[
            ("acks", "1"),
            ("linger.ms", "0"),
            ("batch.num.messages", "20"),
            ("max.in.flight.requests.per.connection", "1000"),
            ("retries", "0"),
        ],
    )?;
    let mut deliveries = Vec::with_capacity(MESSAGES);
    for i in 0..MESSAGES {
        let value = format!("{i:08}");
        let record = FutureRecord::to("ordered").payload(&value).key("k");
        deliveries.push(
            producer
                .send_result(record)
                .map_err(|(e, _)| anyhow::anyhow!("enqueue {i}: {e}"))?,
        );
    }
    let mut acked_offsets = Vec::with_capacity(MESSAGES);
    for (i, delivery) in deliveries.into_iter().enumerate() {
        match delivery.await {
            Ok(Ok(d)) => acked_offsets.push(d.offset),
            Ok(Err((e, _))) => anyhow::bail!("message {i} failed: {e}"),
            Err(_) => anyhow::bail!("message {i}: delivery future dropped"),
        }
    }
    ensure!(
        acked_offsets
            .iter()
            .enumerate()
            .all(|(i, o)| *o == i as i64),
        "acknowledged offsets are not 0..N in send order; first mismatch at {:?}",
        acked_offsets
            .iter()
            .enumerate()
            .find(|(i, o)| **o != *i as i64)
    );
    let consumer = consumer(&broker, &[])?;
    assign_from_beginning(&consumer, "ordered", &[0])?;
    let records = drain(&consumer, &[0], MESSAGES, Duration::from_secs(60))?;
    ensure!(
        records.len() == MESSAGES,
        "read {} of {MESSAGES}",
        records.len()
    );
    for (i, r) in records.iter().enumerate() {
        ensure!(
            r.value_str() == format!("{i:08}") && r.offset == i as i64,
            "record {i} is {} at offset {}",
            r.value_str(),
            r.offset
        );
    }
    Ok(())
}
