//! Log compaction end to end, against the real binary: a compacted topic
//! (cleanup.policy=compact, small segments, min.cleanable.dirty.ratio=0.01)
//! keeps only each key's latest value at its original offset once the
//! cleaner ran, refuses keyless records with Kafka's INVALID_RECORD, and
//! keeps its data, and __consumer_offsets (compacted too) its committed
//! offsets, across a restart; in a 3-node cluster, a follower that was down
//! catches up from a compacted leader (its fetches return offset gaps);
//! transaction markers go once their transactions' records are gone and
//! their delete horizon passed, and librdkafka's read_committed consumer
//! reads the cleaned log.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use chronik_protocol::record_batch::parse_batches;
use common::clients::{assign_from_beginning, consumer};
use common::cluster::{Cluster, FAST_FAILOVER};
use common::kafka_client::Client;
use common::{prom, Broker};
use kafka_protocol::records::{Compression, RecordBatchDecoder};
use rdkafka::config::ClientConfig;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

/// The topic configs of the compacted topics here.
const COMPACTED: &[(&str, &str)] = &[
    ("cleanup.policy", "compact"),
    ("segment.bytes", "1024"),
    ("min.cleanable.dirty.ratio", "0.01"),
];

/// Kafka's INVALID_RECORD.
const INVALID_RECORD: i16 = 87;
const KEYS: usize = 5;
const WRITES: usize = 200;
/// What may be left of the 200 single-record batches: one record per key
/// plus the active 1 KiB segment (about 13 of them).
const LEFT_PLAIN: usize = KEYS + 20;
/// Records per gzip batch.
const GZIP_BATCH: usize = 4;
/// The same for gzip batches (about 8 batches, 32 records, a segment).
const LEFT_GZIP: usize = KEYS + 45;

/// (offset, key, value) of every record from offset 0 to the high watermark.
fn fetch_all(client: &mut Client, topic: &str) -> Result<Vec<(i64, String, Option<String>)>> {
    let text =
        |b: &Option<bytes::Bytes>| b.as_ref().map(|b| String::from_utf8_lossy(b).into_owned());
    let mut out = Vec::new();
    let mut next = 0;
    loop {
        let (error, high_watermark, mut records) = client.fetch_from(topic, next)?;
        ensure!(error == 0, "fetch from {next}: error {error}");
        if next >= high_watermark {
            return Ok(out);
        }
        let batches = parse_batches(&records).context("whole batches")?;
        let last = batches
            .last()
            .context("a fetch below the high watermark returns a batch")?;
        next = last.last_offset() + 1;
        for set in RecordBatchDecoder::decode_all(&mut records)? {
            for r in set.records {
                let key = text(&r.key).context("a record without a key")?;
                out.push((r.offset, key, text(&r.value)));
            }
        }
    }
}

fn metric(broker: &Broker, name: &str) -> Result<f64> {
    let samples = prom::parse(&broker.metrics_text()?);
    Ok(prom::sum(&samples, name, &[]).unwrap_or(0.0))
}

/// Checks a compacted topic: offsets preserved (values name them), each
/// key's latest value present, and at most `max_left` records left.
fn check_compacted(records: &[(i64, String, Option<String>)], max_left: usize) -> Result<()> {
    for (offset, _, value) in records {
        ensure!(
            value.as_deref() == Some(format!("v{offset}").as_str()),
            "offset {offset} moved"
        );
    }
    for k in 0..KEYS {
        let latest = (WRITES - KEYS + k) as i64;
        ensure!(
            records
                .iter()
                .any(|r| r.0 == latest && r.1 == format!("k{k}")),
            "key k{k}'s latest value (offset {latest}) is gone"
        );
    }
    ensure!(
        records.len() <= max_left,
        "{} of {WRITES} records left after cleaning",
        records.len()
    );
    Ok(())
}

#[test]
fn compaction_keeps_latest_values_and_survives_a_restart() -> Result<()> {
    let mut broker = Broker::start(&[
        "--log-cleaner-backoff-ms",
        "100",
        // Internal topics get small segments too, so __consumer_offsets is
        // cleaned as well.
        "--segment-bytes",
        "2048",
    ])?;
    let mut client = Client::connect(&broker)?;
    for topic in ["compacted", "compressed"] {
        client.create_topic_with(topic, COMPACTED)?;
    }
    // The same 200 writes as gzip batches of 4 records: keys straddle
    // batches, so cleaning keeps some records of a batch and rewrites it.
    for i in (0..WRITES).step_by(GZIP_BATCH) {
        let pairs: Vec<(String, String)> = (i..i + GZIP_BATCH)
            .map(|n| (format!("k{}", n % KEYS), format!("v{n}")))
            .collect();
        let records: Vec<(Option<&str>, Option<&str>)> = pairs
            .iter()
            .map(|(k, v)| (Some(k.as_str()), Some(v.as_str())))
            .collect();
        let (error, offset) = client.produce_keyed("compressed", &records, Compression::Gzip)?;
        ensure!(
            error == 0 && offset == i as i64,
            "produce {i}: error {error} at {offset}"
        );
    }
    for i in 0..WRITES {
        let (key, value) = (format!("k{}", i % KEYS), format!("v{i}"));
        let (error, offset) = client.produce_keyed(
            "compacted",
            &[(Some(&key), Some(&value))],
            Compression::None,
        )?;
        ensure!(
            error == 0 && offset == i as i64,
            "produce {i}: error {error} at {offset}"
        );
    }
    let (error, _) =
        client.produce_keyed("compacted", &[(None, Some("no key"))], Compression::None)?;
    ensure!(
        error == INVALID_RECORD,
        "a keyless record got error {error}, not INVALID_RECORD"
    );

    let mut committed = BTreeMap::new();
    for round in 0..60 {
        for group in ["g1", "g2"] {
            let offset = round * 3 + i64::from(group == "g2");
            ensure!(
                client.commit_offset(group, "compacted", offset)? == 0,
                "commit"
            );
            committed.insert(group, offset);
        }
    }

    // 240 commits of two keys: once cleaned, __consumer_offsets keeps
    // about one 2 KiB active segment and one record per key before it.
    let offsets_small = |broker: &Broker| -> Result<bool> {
        let samples = prom::parse(&broker.metrics_text()?);
        let size = prom::sum(
            &samples,
            "chronik_log_size_bytes",
            &[("topic", "__consumer_offsets")],
        );
        Ok(size.is_some_and(|s| s < 5_000.0))
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut records = fetch_all(&mut client, "compacted")?;
    let gzip_done = |client: &mut Client| -> Result<bool> {
        Ok(check_compacted(&fetch_all(client, "compressed")?, LEFT_GZIP).is_ok())
    };
    while check_compacted(&records, LEFT_PLAIN).is_err()
        || !offsets_small(&broker)?
        || !gzip_done(&mut client)?
    {
        ensure!(
            Instant::now() < deadline,
            "not compacted within 30 s: {} records, {}",
            records.len(),
            broker.log_tail(20)
        );
        std::thread::sleep(Duration::from_millis(200));
        records = fetch_all(&mut client, "compacted")?;
    }
    // The counters move once a cleaning's last segment is swapped in.
    let metrics_moved = |broker: &Broker| -> Result<bool> {
        Ok(metric(broker, "chronik_log_cleaner_runs_total")? >= 1.0
            && metric(broker, "chronik_log_cleaner_cleaned_bytes_total")? > 0.0
            && metric(broker, "chronik_log_cleaner_last_run_timestamp_seconds")? > 0.0)
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !metrics_moved(&broker)? {
        ensure!(
            Instant::now() < deadline,
            "the cleaner metrics did not move"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let end = client.log_end_offset("compacted")?;
    ensure!(end == WRITES as i64, "log end {end}");

    broker.restart()?;
    let mut client = Client::connect(&broker)?;
    let after = fetch_all(&mut client, "compacted")?;
    check_compacted(&after, LEFT_PLAIN)?;
    check_compacted(&fetch_all(&mut client, "compressed")?, LEFT_GZIP)?;
    ensure!(
        after.iter().all(|r| records.contains(r)),
        "a restart brought records back"
    );
    for (group, offset) in &committed {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match client.committed_offset(group, "compacted") {
                Ok(got) => {
                    ensure!(
                        got == *offset,
                        "{group}: committed {offset}, replayed {got}"
                    );
                    break;
                }
                Err(e) if Instant::now() < deadline => {
                    eprintln!("waiting for the offsets to load: {e:#}");
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => return Err(e),
            }
        }
    }
    let (error, offset) = client.produce_keyed(
        "compacted",
        &[(Some("k0"), Some("v200"))],
        Compression::None,
    )?;
    ensure!(
        error == 0 && offset == end,
        "produce after restart: error {error} at {offset}"
    );
    Ok(())
}

/// Produces the 200 single-record writes of keys k0..k4 (value `v<offset>`),
/// retrying the first while the new partition settles.
fn produce_updates(client: &mut Client, topic: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    for i in 0..WRITES {
        let (key, value) = (format!("k{}", i % KEYS), format!("v{i}"));
        loop {
            let (error, offset) =
                client.produce_keyed(topic, &[(Some(&key), Some(&value))], Compression::None)?;
            if error == 0 {
                ensure!(offset == i as i64, "write {i} at offset {offset}");
                break;
            }
            ensure!(
                i == 0 && Instant::now() < deadline,
                "produce {i}: error {error}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Ok(())
}

#[test]
fn a_follower_catches_up_from_a_compacted_leader() -> Result<()> {
    let mut flags = FAST_FAILOVER.to_vec();
    flags.extend_from_slice(&["--log-cleaner-backoff-ms", "100"]);
    let mut cluster = Cluster::start(3, &flags)?;
    let topic = "compacted-rf3";
    let mut configs = COMPACTED.to_vec();
    configs.push(("min.insync.replicas", "2"));
    Client::connect(cluster.node(1))?.create_topic_replicated(topic, 1, 3, &configs)?;
    cluster.wait_for(topic, Duration::from_secs(20), "a full ISR", |ps| {
        ps[0].leader > 0 && ps[0].isr.len() == 3
    })?;
    let (leader, follower) = cluster.kill_a_follower(topic)?;

    let mut client = Client::connect(cluster.node(leader))?;
    produce_updates(&mut client, topic)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while check_compacted(&fetch_all(&mut client, topic)?, LEFT_PLAIN).is_err() {
        ensure!(
            Instant::now() < deadline,
            "the leader did not compact within 30 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    cluster.restart_follower(topic, follower)?;
    let leo = |node: &Broker| -> Result<f64> {
        let samples = prom::parse(&node.metrics_text()?);
        prom::sum(&samples, "chronik_log_end_offset", &[("topic", topic)])
            .context("no chronik_log_end_offset sample")
    };
    ensure!(leo(cluster.node(leader))? == WRITES as f64);
    ensure!(
        leo(cluster.node(follower))? == WRITES as f64,
        "the follower did not catch up\n{}",
        cluster.logs()
    );
    Ok(())
}

/// (base offset, record count) of every control batch from offset 0.
fn control_batches(client: &mut Client, topic: &str) -> Result<Vec<(i64, i32)>> {
    let (mut out, mut next) = (Vec::new(), 0);
    loop {
        let (error, high_watermark, records) = client.fetch_from(topic, next)?;
        ensure!(error == 0, "fetch from {next}: error {error}");
        if next >= high_watermark {
            return Ok(out);
        }
        let batches = parse_batches(&records).context("whole batches, valid CRCs")?;
        next = batches
            .last()
            .context("a batch below the high watermark")?
            .last_offset()
            + 1;
        out.extend(
            batches
                .iter()
                .filter(|h| h.is_control())
                .map(|h| (h.base_offset, h.records_count)),
        );
    }
}

/// One transaction of keyed records, committed or aborted (librdkafka).
fn transaction(
    p: &BaseProducer,
    topic: &str,
    records: &[(&str, &str)],
    commit: bool,
) -> Result<()> {
    p.begin_transaction()?;
    for (key, value) in records {
        p.send(BaseRecord::to(topic).key(*key).payload(*value).partition(0))
            .map_err(|(e, _)| e)?;
    }
    p.flush(Duration::from_secs(30))?;
    match commit {
        true => p.commit_transaction(Duration::from_secs(30))?,
        false => p.abort_transaction(Duration::from_secs(30))?,
    }
    Ok(())
}

#[test]
fn transaction_markers_go_once_their_records_are_gone() -> Result<()> {
    let broker = Broker::start(&["--log-cleaner-backoff-ms", "100"])?;
    let mut client = Client::connect(&broker)?;
    let topic = "compacted-txn";
    let mut configs = COMPACTED.to_vec();
    configs.push(("delete.retention.ms", "0"));
    client.create_topic_with(topic, &configs)?;
    let p: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("broker.address.family", "v4")
        .set("transactional.id", "compacted-txn")
        .set("linger.ms", "1")
        .create()?;
    p.init_transactions(Duration::from_secs(30))?;
    // Superseded below, then aborted, then a record that stays its key's
    // latest: only the last transaction's marker may stay.
    transaction(&p, topic, &[("k0", "committed"), ("k1", "committed")], true)?;
    transaction(&p, topic, &[("k2", "aborted"), ("k3", "aborted")], false)?;
    transaction(&p, topic, &[("live", "committed")], true)?;
    // The coordinator writes markers after answering EndTxn.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut markers = control_batches(&mut client, topic)?;
    while markers.len() < 3 {
        ensure!(Instant::now() < deadline, "markers written: {markers:?}");
        std::thread::sleep(Duration::from_millis(100));
        markers = control_batches(&mut client, topic)?;
    }
    ensure!(markers.len() == 3, "three markers written: {markers:?}");
    let last_marker = markers[2];

    // Plain writes over k0..k4 keep the log dirty, so it is cleaned again
    // and again, until only the live transaction's marker is left.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut latest = BTreeMap::new();
    let mut round = 0;
    while control_batches(&mut client, topic)? != vec![last_marker] {
        ensure!(
            Instant::now() < deadline,
            "markers left after 60 s: {:?}\n{}",
            control_batches(&mut client, topic)?,
            broker.log_tail(20)
        );
        for k in 0..KEYS {
            let (key, value) = (format!("k{k}"), format!("round {round}"));
            let (error, _) =
                client.produce_keyed(topic, &[(Some(&key), Some(&value))], Compression::None)?;
            ensure!(error == 0, "produce: error {error}");
            latest.insert(key, value);
        }
        round += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    latest.insert("live".to_string(), "committed".to_string());

    let c = consumer(
        &broker,
        &[
            ("isolation.level", "read_committed"),
            ("enable.partition.eof", "true"),
        ],
    )?;
    assign_from_beginning(&c, topic, &[0])?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    loop {
        ensure!(
            Instant::now() < deadline,
            "read_committed did not reach the end: {seen:?}"
        );
        match c.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                let text =
                    |b: Option<&[u8]>| String::from_utf8_lossy(b.unwrap_or_default()).into_owned();
                let value = text(m.payload());
                ensure!(value != "aborted", "read_committed got an aborted record");
                seen.insert(text(m.key()), value);
            }
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(_))) => break,
            Some(Err(e)) => anyhow::bail!("consume: {e}"),
            None => {}
        }
    }
    ensure!(
        seen == latest,
        "read_committed: {seen:?}, latest: {latest:?}"
    );
    Ok(())
}
