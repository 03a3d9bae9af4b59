//! Incremental fetch sessions (KIP-227) over the wire: a full fetch at
//! epoch 0 creates a session; an incremental fetch names only what changed
//! and is answered only with partitions that have news (records, or a new
//! high watermark); a parked incremental fetch is woken by any of the
//! session's partitions; forgotten partitions leave the session; a stale
//! epoch is INVALID_FETCH_SESSION_EPOCH, an unknown or closed session
//! FETCH_SESSION_ID_NOT_FOUND; with no cache slots every fetch is full.

mod common;

use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use bytes::Bytes;
use chronik_protocol::records::{build_batch, SimpleRecord};
use common::broker::Broker;
use common::kafka_client::Client;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{FetchRequest, FetchResponse, ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

const TOPIC: &str = "sessions";
const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
const INVALID_FETCH_SESSION_EPOCH: i16 = 71;
const VERSION: i16 = 12;

fn name() -> TopicName {
    TopicName(StrBytes::from_static_str(TOPIC))
}

fn produce(client: &mut Client, partition: i32, value: &str) -> Result<()> {
    let batch = build_batch(&[SimpleRecord {
        key: None,
        value: Some(Bytes::copy_from_slice(value.as_bytes())),
        timestamp: 0,
    }]);
    let r = client.send(
        &ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(name())
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(Bytes::from(batch)))])]),
        9,
    )?;
    let code = r.responses[0].partition_responses[0].error_code;
    ensure!(code == 0, "produce to {partition}: error {code}");
    Ok(())
}

fn fetch(
    client: &mut Client,
    (session_id, epoch): (i32, i32),
    partitions: &[(i32, i64)],
    forgotten: &[i32],
    max_wait_ms: i32,
) -> Result<FetchResponse> {
    let topics = if partitions.is_empty() {
        vec![]
    } else {
        vec![FetchTopic::default().with_topic(name()).with_partitions(
            partitions
                .iter()
                .map(|(p, offset)| {
                    FetchPartition::default()
                        .with_partition(*p)
                        .with_fetch_offset(*offset)
                        .with_partition_max_bytes(1 << 20)
                })
                .collect(),
        )]
    };
    let forgotten = if forgotten.is_empty() {
        vec![]
    } else {
        vec![ForgottenTopic::default()
            .with_topic(name())
            .with_partitions(forgotten.to_vec())]
    };
    client.send(
        &FetchRequest::default()
            .with_max_wait_ms(max_wait_ms)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_session_id(session_id)
            .with_session_epoch(epoch)
            .with_topics(topics)
            .with_forgotten_topics_data(forgotten),
        VERSION,
    )
}

/// (partition, has records) of every partition in the answer.
fn answered(r: &FetchResponse) -> Vec<(i32, bool)> {
    r.responses
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| {
            (
                p.partition_index,
                p.records.as_ref().is_some_and(|b| !b.is_empty()),
            )
        })
        .collect()
}

#[test]
fn an_incremental_fetch_names_and_gets_only_what_changed() -> Result<()> {
    let broker = Broker::start(&["--wal-profile", "low"])?;
    let mut client = Client::connect(&broker)?;
    client.create_topic_replicated(TOPIC, 3, 1, &[])?;
    produce(&mut client, 0, "a")?;

    let full = fetch(&mut client, (0, 0), &[(0, 0), (1, 0), (2, 0)], &[], 0)?;
    let id = full.session_id;
    ensure!(
        full.error_code == 0 && id > 0,
        "a full fetch at epoch 0 creates a session: {full:?}"
    );
    ensure!(
        answered(&full) == [(0, true), (1, false), (2, false)],
        "a full fetch answers every partition: {:?}",
        answered(&full)
    );

    let quiet = fetch(&mut client, (id, 1), &[(0, 1)], &[], 0)?;
    ensure!(
        quiet.session_id == id && answered(&quiet).is_empty(),
        "nothing changed: {:?}",
        answered(&quiet)
    );
    produce(&mut client, 2, "b")?;
    let news = fetch(&mut client, (id, 2), &[], &[], 0)?;
    ensure!(
        answered(&news) == [(2, true)],
        "only the partition with records: {:?}",
        answered(&news)
    );

    // a parked incremental fetch is woken by a partition it did not name
    let producer = {
        let mut other = Client::connect(&broker)?;
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            produce(&mut other, 1, "c")
        })
    };
    let started = Instant::now();
    let woken = fetch(&mut client, (id, 3), &[(2, 1)], &[], 10_000)?;
    producer
        .join()
        .map_err(|_| anyhow::anyhow!("producer thread panicked"))??;
    ensure!(
        answered(&woken) == [(1, true)] && started.elapsed() < Duration::from_secs(8),
        "woken by partition 1 after {:?}: {:?}",
        started.elapsed(),
        answered(&woken)
    );

    let stale = fetch(&mut client, (id, 3), &[], &[], 0)?;
    ensure!(
        stale.error_code == INVALID_FETCH_SESSION_EPOCH,
        "a stale epoch: {}",
        stale.error_code
    );
    let unknown = fetch(&mut client, (id ^ 0x5555, 1), &[], &[], 0)?;
    ensure!(
        unknown.error_code == FETCH_SESSION_ID_NOT_FOUND,
        "an unknown id: {}",
        unknown.error_code
    );

    // a full fetch (epoch 0 or -1) naming an unknown session is served, as
    // Kafka serves it: a fetcher whose session was evicted starts over
    let restart = fetch(&mut client, (id ^ 0x5555, 0), &[(2, 0)], &[], 0)?;
    ensure!(
        restart.error_code == 0 && restart.session_id != 0,
        "a new session in place of an unknown one: error {}, session {}",
        restart.error_code,
        restart.session_id
    );
    let sessionless = fetch(&mut client, (id ^ 0x5555, -1), &[(2, 0)], &[], 0)?;
    ensure!(
        sessionless.error_code == 0 && sessionless.session_id == 0,
        "an unknown session closed: error {}, session {}",
        sessionless.error_code,
        sessionless.session_id
    );

    // a forgotten partition's news is no longer answered
    let forget = fetch(&mut client, (id, 4), &[(1, 1)], &[2], 0)?;
    ensure!(forget.error_code == 0, "forget: {}", forget.error_code);
    produce(&mut client, 2, "d")?;
    let after = fetch(&mut client, (id, 5), &[], &[], 0)?;
    ensure!(
        answered(&after).is_empty(),
        "partition 2 was forgotten: {:?}",
        answered(&after)
    );

    // epoch -1 closes the session (and is served as a full fetch)
    let closed = fetch(&mut client, (id, -1), &[(2, 0)], &[], 0)?;
    ensure!(closed.session_id == 0 && answered(&closed) == [(2, true)]);
    let gone = fetch(&mut client, (id, 6), &[], &[], 0)?;
    ensure!(
        gone.error_code == FETCH_SESSION_ID_NOT_FOUND,
        "a closed session: {}",
        gone.error_code
    );
    Ok(())
}

#[test]
fn without_cache_slots_every_fetch_is_full() -> Result<()> {
    let broker = Broker::start(&["--max-incremental-fetch-session-cache-slots", "0"])?;
    let mut client = Client::connect(&broker)?;
    client.create_topic_replicated(TOPIC, 2, 1, &[])?;
    let full = fetch(&mut client, (0, 0), &[(0, 0), (1, 0)], &[], 0)?;
    ensure!(
        full.error_code == 0 && full.session_id == 0 && answered(&full).len() == 2,
        "no session: {full:?}"
    );
    Ok(())
}
