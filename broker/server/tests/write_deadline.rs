//! A Produce's timeout_ms bounds everything it waits for, not only the fsync
//! and the ISR: the wait for the connection's earlier Produce requests to
//! append (the append turn) and KIP-890's verification with the transaction
//! coordinator too (`replica::write`). A transaction coordinator frozen with
//! SIGSTOP accepts the verifying connection (the kernel does) and never
//! answers; before this rule the leader waited for it 10 s whatever the
//! request's timeout, and every Produce pipelined behind waited as long and
//! then appended.
//!
//! On one connection to a partition leader that is not the coordinator, two
//! requests pipelined while the coordinator is frozen: a transactional batch
//! (timeout_ms 1,500) stalls in verification and a plain batch behind it
//! (timeout_ms 500) stalls on its append turn. Both answer REQUEST_TIMED_OUT
//! (7). Neither appends late: once the coordinator runs again, a third
//! request on the same connection appends the transaction's first batch at
//! offset 0.

mod common;

use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use bytes::Bytes;
use common::cluster::Cluster;
use common::kafka_client::{read_response, write_request, Client};
use common::txn;
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};

const TOPIC: &str = "deadlines";
const TXN_ID: &str = "write-deadline";
const PRODUCE_VERSION: i16 = 9;
const REQUEST_TIMED_OUT: i16 = 7;

/// (error code, base offset) of a one-partition answer.
fn answer(response: &ProduceResponse) -> (i16, i64) {
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

#[test]
fn a_produce_behind_a_stalled_verification_or_append_turn_times_out_at_its_own_timeout(
) -> Result<()> {
    let mut cluster = Cluster::start(3, &[])?;
    let (at, (pid, epoch)) = txn::open(&mut cluster, TOPIC, TXN_ID)?;
    let (coordinator, partition, leader) = (at.coordinator, at.partition, at.leader);
    let value = || Bytes::from_static(b"deadline");
    let first_batch = || txn::one_record(Some((pid, epoch, 0)), value());

    let mut producer = Client::connect(cluster.node(leader))?;
    cluster.node(coordinator).pause()?;
    let stalled = (|| -> Result<[(i16, Duration); 2]> {
        let stream = producer.stream();
        let sent = Instant::now();
        let verified = txn::produce((TOPIC, partition), first_batch()?, Some(TXN_ID), 1_500);
        write_request(stream, 1, &verified, PRODUCE_VERSION)?;
        let behind = txn::produce(
            (TOPIC, partition),
            txn::one_record(None, value())?,
            None,
            500,
        );
        write_request(stream, 2, &behind, PRODUCE_VERSION)?;
        let first = answer(&read_response::<ProduceRequest, _>(
            stream,
            1,
            PRODUCE_VERSION,
        )?);
        let first_at = sent.elapsed();
        let second = answer(&read_response::<ProduceRequest, _>(
            stream,
            2,
            PRODUCE_VERSION,
        )?);
        Ok([(first.0, first_at), (second.0, sent.elapsed())])
    })();
    cluster.node(coordinator).resume()?;
    let [(verified_error, verified_at), (behind_error, behind_at)] = stalled?;
    println!(
        "coordinator {coordinator} frozen, leader {leader}: the verified batch (timeout 1,500 ms) \
         answered {verified_error} after {verified_at:?}, the batch behind it (timeout 500 ms) \
         answered {behind_error} after {behind_at:?} (answers leave in request order)"
    );
    ensure!(
        verified_error == REQUEST_TIMED_OUT,
        "a transactional batch whose verification stalls past its timeout_ms: want \
         REQUEST_TIMED_OUT (7), got {verified_error}"
    );
    ensure!(
        behind_error == REQUEST_TIMED_OUT,
        "a batch waiting past its timeout_ms for the stalled one's append turn: want \
         REQUEST_TIMED_OUT (7), got {behind_error}"
    );

    // Neither appended, late or at all: the transaction's first batch,
    // verified now, lands at offset 0.
    let retried = txn::produce((TOPIC, partition), first_batch()?, Some(TXN_ID), 20_000);
    let deadline = Instant::now() + Duration::from_secs(30);
    let appended = loop {
        let got = answer(&producer.send(&retried, PRODUCE_VERSION)?);
        // The coordinator may still be catching up right after SIGCONT.
        if got.0 == 0 || Instant::now() > deadline {
            break got;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    ensure!(
        appended == (0, 0),
        "after the coordinator resumed, the transaction's first batch: want (error 0, base \
         offset 0) — nothing appended by the timed-out requests — got {appended:?}"
    );
    Ok(())
}
