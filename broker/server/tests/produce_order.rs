//! A connection's Produce requests append in the order they arrived, also
//! when one waits before appending. A transactional producer's first batches
//! on a partition are verified with its transaction coordinator first
//! (KIP-890); when the coordinator is another broker that is a round trip,
//! and the requests pipelined behind (clients send up to
//! max.in.flight.requests.per.connection = 5) must not append before it:
//! they would be refused OUT_OF_ORDER_SEQUENCE_NUMBER, as franz-go's
//! TestTxnEtl was on a 3-node cluster. Apache Kafka reads a connection's next
//! request only after answering the last, so its order never breaks.

mod common;

use anyhow::{ensure, Result};
use bytes::Bytes;
use common::cluster::Cluster;
use common::kafka_client::Client;
use common::txn;

const TOPIC: &str = "ordered";
const TXN_ID: &str = "produce-order";
/// Produce requests pipelined on one connection.
const PIPELINED: i32 = 20;

#[test]
fn pipelined_transactional_produces_append_in_arrival_order_while_one_is_verified_remotely(
) -> Result<()> {
    let mut cluster = Cluster::start(3, &[])?;
    let (placement, (pid, epoch)) = txn::open(&mut cluster, TOPIC, TXN_ID)?;
    let txn::Placement {
        coordinator,
        partition,
        leader,
    } = placement;

    let requests = (0..PIPELINED)
        .map(|sequence| {
            let value = Bytes::from(format!("seq-{sequence}"));
            let records = txn::one_record(Some((pid, epoch, sequence)), value)?;
            Ok(txn::produce(
                (TOPIC, partition),
                records,
                Some(TXN_ID),
                10_000,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    let responses = Client::connect(cluster.node(leader))?.send_pipelined(&requests, 9)?;
    let answers: Vec<(i16, i64)> = responses
        .iter()
        .map(|r| {
            let p = &r.responses[0].partition_responses[0];
            (p.error_code, p.base_offset)
        })
        .collect();
    let expected: Vec<(i16, i64)> = (0..i64::from(PIPELINED)).map(|o| (0, o)).collect();
    ensure!(
        answers == expected,
        "{PIPELINED} pipelined batches (sequence 0..) of a transactional producer on partition \
         {partition} (leader {leader}, coordinator {coordinator}): want each appended in order \
         at offsets 0.., got (error, base offset) {answers:?}"
    );
    Ok(())
}
