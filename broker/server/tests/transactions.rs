//! The transaction coordinator over the wire, request by request, with the
//! error Kafka gives for each refusal: invalid timeouts, unknown
//! partitions, stale epochs (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH for old
//! versions), foreign producer ids, EndTxn out of state; DescribeTransactions
//! and ListTransactions report what happened; a coordinator holding
//! --max-transactional-ids refuses new ids; WriteTxnMarkers is refused
//! from a host that is no broker's; an internal topic is never added to a
//! transaction, without an authorizer too. The clients' view (read_committed,
//! fencing, consume-transform-produce) is tests/python/test_transactions.py.

mod common;

use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use common::broker::Broker;
use common::error_codes::{
    CLUSTER_AUTHORIZATION_FAILED, INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING,
    INVALID_REQUEST, INVALID_TRANSACTION_TIMEOUT, INVALID_TXN_STATE, OPERATION_NOT_ATTEMPTED,
    POLICY_VIOLATION, PRODUCER_FENCED, TOPIC_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_NOT_FOUND,
    UNKNOWN_TOPIC_OR_PARTITION,
};
use common::kafka_client::{added_partition_codes, new_producer_request, Client};
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, DescribeTransactionsRequest, EndTxnRequest, ListTransactionsRequest,
    ProducerId, TopicName, TransactionalId, WriteTxnMarkersRequest,
};
use kafka_protocol::protocol::StrBytes;

fn txn_id(id: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(id.to_string()))
}

fn init(client: &mut Client, id: &str, timeout_ms: i32) -> Result<(i16, i64, i16)> {
    let r = client.send(
        &new_producer_request(Some(txn_id(id))).with_transaction_timeout_ms(timeout_ms),
        4,
    )?;
    Ok((r.error_code, r.producer_id.0, r.producer_epoch))
}

/// AddPartitionsToTxn (v0-3 form): every partition's error code.
fn add(
    client: &mut Client,
    version: i16,
    id: &str,
    (pid, epoch): (i64, i16),
    partitions: &[(&str, i32)],
) -> Result<Vec<i16>> {
    let topics = partitions
        .iter()
        .map(|(t, p)| {
            AddPartitionsToTxnTopic::default()
                .with_name(TopicName(StrBytes::from_string(t.to_string())))
                .with_partitions(vec![*p])
        })
        .collect();
    let r = client.send(
        &AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(txn_id(id))
            .with_v3_and_below_producer_id(ProducerId(pid))
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(topics),
        version,
    )?;
    Ok(added_partition_codes(&r))
}

fn end(client: &mut Client, id: &str, (pid, epoch): (i64, i16), commit: bool) -> Result<i16> {
    Ok(client
        .send(
            &EndTxnRequest::default()
                .with_transactional_id(txn_id(id))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_committed(commit),
            3,
        )?
        .error_code)
}

fn describe(client: &mut Client, id: &str) -> Result<(i16, String, usize)> {
    let r = client.send(
        &DescribeTransactionsRequest::default().with_transactional_ids(vec![txn_id(id)]),
        0,
    )?;
    let s = &r.transaction_states[0];
    Ok((
        s.error_code,
        s.transaction_state.to_string(),
        s.topics.iter().map(|t| t.partitions.len()).sum(),
    ))
}

#[test]
fn the_coordinator_answers_each_request_with_kafkas_errors() -> Result<()> {
    let broker = Broker::start(&[])?;
    let mut client = Client::connect(&broker)?;
    client.create_topic("orders")?;
    client.create_topic("payments")?;

    let long = "x".repeat(40_000);
    let (error, pid, _) = init(&mut client, &long, 60_000)?;
    ensure!(
        error == INVALID_REQUEST && pid == -1,
        "a transactional id longer than 32767 bytes: error {error}"
    );
    for bad in [0, -5, 900_001] {
        let (error, pid, _) = init(&mut client, "tx-a", bad)?;
        ensure!(
            error == INVALID_TRANSACTION_TIMEOUT && pid == -1,
            "timeout {bad}: error {error}"
        );
    }
    let (error, pid, epoch) = init(&mut client, "tx-a", 60_000)?;
    ensure!(
        error == 0 && pid >= 0 && epoch == 0,
        "first init: {error} {pid} {epoch}"
    );
    let (_, pid2, epoch2) = init(&mut client, "tx-a", 60_000)?;
    ensure!(
        (pid2, epoch2) == (pid, 1),
        "a second init bumps the epoch: {pid2}/{epoch2}"
    );
    let producer = (pid, 1);

    ensure!(
        end(&mut client, "tx-a", producer, true)? == INVALID_TXN_STATE,
        "EndTxn with no open transaction"
    );
    let errors = add(
        &mut client,
        3,
        "tx-a",
        producer,
        &[("orders", 0), ("nope", 0), ("orders", 99)],
    )?;
    ensure!(
        errors
            == [
                OPERATION_NOT_ATTEMPTED,
                UNKNOWN_TOPIC_OR_PARTITION,
                UNKNOWN_TOPIC_OR_PARTITION
            ],
        "unknown partitions: {errors:?}"
    );
    ensure!(
        describe(&mut client, "tx-a")?.1 == "Empty",
        "a refused AddPartitionsToTxn adds nothing"
    );
    ensure!(
        add(&mut client, 3, "tx-a", (pid, 0), &[("orders", 0)])? == [PRODUCER_FENCED],
        "a stale epoch is fenced"
    );
    ensure!(
        add(&mut client, 1, "tx-a", (pid, 0), &[("orders", 0)])? == [INVALID_PRODUCER_EPOCH],
        "old versions get INVALID_PRODUCER_EPOCH"
    );
    ensure!(
        add(&mut client, 3, "tx-a", (pid + 1, 1), &[("orders", 0)])?
            == [INVALID_PRODUCER_ID_MAPPING],
        "a foreign producer id"
    );
    ensure!(
        add(&mut client, 3, "tx-unknown", producer, &[("orders", 0)])?
            == [INVALID_PRODUCER_ID_MAPPING],
        "an id never initialised"
    );

    let added = add(
        &mut client,
        3,
        "tx-a",
        producer,
        &[("orders", 0), ("payments", 0)],
    )?;
    ensure!(added == [0, 0], "add: {added:?}");
    let (error, state, partitions) = describe(&mut client, "tx-a")?;
    ensure!(
        (error, state.as_str(), partitions) == (0, "Ongoing", 2),
        "described: {error} {state} {partitions}"
    );
    let listed = client.send(
        &ListTransactionsRequest::default()
            .with_state_filters(vec![
                StrBytes::from_static_str("Ongoing"),
                StrBytes::from_static_str("Bogus"),
            ])
            .with_duration_filter(-1),
        1,
    )?;
    ensure!(
        listed.transaction_states.len() == 1
            && listed.transaction_states[0].transactional_id.0.as_str() == "tx-a"
            && listed
                .unknown_state_filters
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                == ["Bogus"],
        "listed: {listed:?}"
    );

    ensure!(end(&mut client, "tx-a", producer, true)? == 0, "commit");
    // markers are written after the answer: wait for CompleteCommit
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, state, partitions) = describe(&mut client, "tx-a")?;
        if state == "CompleteCommit" {
            ensure!(
                partitions == 0,
                "a completed transaction holds no partitions"
            );
            break;
        }
        ensure!(Instant::now() < deadline, "still {state} after 20 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    ensure!(
        end(&mut client, "tx-a", producer, true)? == 0,
        "a retried commit succeeds"
    );
    ensure!(
        end(&mut client, "tx-a", producer, false)? == INVALID_TXN_STATE,
        "abort after commit"
    );
    ensure!(
        describe(&mut client, "tx-never")?.0 == TRANSACTIONAL_ID_NOT_FOUND,
        "describe an unknown id"
    );
    Ok(())
}

#[test]
fn write_txn_markers_is_refused_from_a_host_that_is_no_brokers() -> Result<()> {
    // The broker registers 127.0.0.2; the client connects from 127.0.0.1.
    let port = common::cluster::free_port;
    let mut broker = Broker::spawn_at(
        &format!("127.0.0.2:{}", port()?),
        &format!("127.0.0.2:{}", port()?),
        &[],
    )?;
    broker.finish_start()?;
    let mut client = Client::connect(&broker)?;
    client.create_topic("victim")?;
    let request =
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(ProducerId(1))
            .with_producer_epoch(0)
            .with_transaction_result(false)
            .with_coordinator_epoch(0)
            .with_topics(vec![WritableTxnMarkerTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("victim")))
                .with_partition_indexes(vec![0])])]);
    let response = client.send(&request, 1)?;
    let code = response.markers[0].topics[0].partitions[0].error_code;
    ensure!(
        code == CLUSTER_AUTHORIZATION_FAILED,
        "marker from a client: {code}"
    );
    ensure!(
        client.log_end_offset("victim")? == 0,
        "nothing was written to the partition"
    );
    Ok(())
}

#[test]
fn new_transactional_ids_beyond_the_cap_are_refused() -> Result<()> {
    let broker = Broker::start(&["--max-transactional-ids", "2"])?;
    let mut client = Client::connect(&broker)?;
    ensure!(init(&mut client, "one", 60_000)?.0 == 0);
    ensure!(init(&mut client, "two", 60_000)?.0 == 0);
    let (error, pid, _) = init(&mut client, "three", 60_000)?;
    ensure!(
        error == POLICY_VIOLATION && pid == -1,
        "a third id: error {error}"
    );
    let (error, _, epoch) = init(&mut client, "one", 60_000)?;
    ensure!(
        error == 0 && epoch == 1,
        "a known id is still served: {error} {epoch}"
    );
    Ok(())
}

/// Kafka's rule for a client's AddPartitionsToTxn holds on a broker without
/// an authorizer too: an internal topic is never added to a transaction
/// (TOPIC_AUTHORIZATION_FAILED), and the other topics of that request are
/// not added either (OPERATION_NOT_ATTEMPTED).
#[test]
fn an_internal_topic_is_never_added_to_a_transaction() -> Result<()> {
    let broker = Broker::start(&[])?;
    let mut client = Client::connect(&broker)?;
    client.create_topic("orders")?;
    let (error, pid, epoch) = init(&mut client, "tx-internal", 60_000)?;
    ensure!(error == 0, "InitProducerId: {error}");
    // (version, partitions to add, each one's expected code)
    type Case = (i16, &'static [(&'static str, i32)], &'static [i16]);
    let refused: [Case; 3] = [
        (
            0,
            &[("__consumer_offsets", 0), ("orders", 0)],
            &[TOPIC_AUTHORIZATION_FAILED, OPERATION_NOT_ATTEMPTED],
        ),
        (
            3,
            &[("__consumer_offsets", 0), ("orders", 0)],
            &[TOPIC_AUTHORIZATION_FAILED, OPERATION_NOT_ATTEMPTED],
        ),
        (
            3,
            &[("__transaction_state", 0)],
            &[TOPIC_AUTHORIZATION_FAILED],
        ),
    ];
    for (version, partitions, expected) in refused {
        let codes = add(
            &mut client,
            version,
            "tx-internal",
            (pid, epoch),
            partitions,
        )?;
        ensure!(codes == expected, "v{version} {partitions:?}: {codes:?}");
    }
    let (error, state, partitions) = describe(&mut client, "tx-internal")?;
    ensure!(
        error == 0 && state == "Empty" && partitions == 0,
        "nothing may have been added: error {error}, state {state}, {partitions} partitions"
    );
    // the same request without the internal topic is served
    let codes = add(
        &mut client,
        3,
        "tx-internal",
        (pid, epoch),
        &[("orders", 0)],
    )?;
    ensure!(codes == [0], "orders alone: {codes:?}");
    Ok(())
}
