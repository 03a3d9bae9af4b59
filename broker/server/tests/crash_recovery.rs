//! Durability across broker crashes and restarts.
//!
//! A numbered stream (value = sequence number, partition = seq % 3) is
//! produced with acks=1 while the broker (`--wal-profile medium`) is SIGKILLed
//! mid-stream. After a restart on the same data dir every acknowledged
//! message must be present exactly once, in order, at the offset its ack
//! reported; new produces must continue right after the recovered log end;
//! and a SIGTERM must exit 0 and keep everything.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::producer::FutureRecord;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

use common::clients::{self, Record, CLIENT_TIMEOUT};
use common::Broker;

const TOPIC: &str = "crash-stream";
const PARTITIONS: [i32; 3] = [0, 1, 2];
const BROKER_ARGS: [&str; 2] = ["--wal-profile", "medium"];

/// One acknowledged produce.
#[derive(Debug, Clone, Copy)]
struct Ack {
    partition: i32,
    offset: i64,
    seq: u64,
}

/// What happened around the kill.
#[derive(Debug)]
struct CrashRun {
    acks: Vec<Ack>,
    sent: u64,
    acked_at_kill: usize,
    sent_at_kill: u64,
}

/// Floods acks=1 produces and SIGKILLs the broker after ~2000 acks (or 1.5 s
/// after the first ack), with sends still in flight. Returns every ack that
/// arrived, including ones read from the socket after the kill.
async fn produce_and_crash(broker: &mut Broker) -> Result<CrashRun> {
    let producer = clients::producer(
        broker,
        &[
            ("acks", "1"),
            ("enable.idempotence", "false"),
            ("linger.ms", "2"),
            // No retries: nothing can be written twice or reordered, so the
            // whole recovered log must be strictly increasing per partition.
            ("message.send.max.retries", "0"),
            ("message.timeout.ms", "5000"),
            ("queue.buffering.max.messages", "20000"),
        ],
    )?;
    let acks: Arc<Mutex<Vec<Ack>>> = Arc::new(Mutex::new(Vec::new()));
    let sent = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));

    let sender = {
        let (acks, sent, stop) = (acks.clone(), sent.clone(), stop.clone());
        tokio::spawn(async move {
            let mut pending = Vec::new();
            let mut seq: u64 = 0;
            while !stop.load(Ordering::Relaxed) {
                let value = seq.to_string();
                let partition = (seq % 3) as i32;
                let record = FutureRecord::<(), _>::to(TOPIC)
                    .partition(partition)
                    .payload(&value);
                match producer.send_result(record) {
                    Ok(delivery) => {
                        let acks = acks.clone();
                        let this_seq = seq;
                        pending.push(tokio::spawn(async move {
                            if let Ok(Ok(d)) = delivery.await {
                                if let Ok(mut acks) = acks.lock() {
                                    acks.push(Ack {
                                        partition: d.partition,
                                        offset: d.offset,
                                        seq: this_seq,
                                    });
                                }
                            }
                        }));
                        seq += 1;
                        sent.store(seq, Ordering::Relaxed);
                    }
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                    Err((e, _)) => return Err(anyhow::Error::from(e).context("enqueueing")),
                }
                if seq & 0xff == 0 {
                    tokio::task::yield_now().await;
                }
            }
            // Every delivery resolves within message.timeout.ms of the kill.
            for p in pending {
                let _ = p.await;
            }
            Ok::<_, anyhow::Error>(())
        })
    };

    let start = Instant::now();
    let mut first_ack: Option<Instant> = None;
    loop {
        let n = acks.lock().map(|a| a.len()).unwrap_or(0);
        if n > 0 && first_ack.is_none() {
            first_ack = Some(Instant::now());
        }
        let enough =
            n >= 2000 || first_ack.is_some_and(|t| t.elapsed() > Duration::from_millis(1500));
        if enough {
            break;
        }
        if start.elapsed() > Duration::from_secs(30) {
            stop.store(true, Ordering::Relaxed);
            bail!("no ack within 30 s; stderr:\n{}", broker.log_tail(30));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let acked_at_kill = acks.lock().map(|a| a.len()).unwrap_or(0);
    let sent_at_kill = sent.load(Ordering::Relaxed);
    broker.kill_hard()?;
    stop.store(true, Ordering::Relaxed);
    sender.await.context("sender task panicked")??;

    let acks = acks.lock().map(|a| a.clone()).unwrap_or_default();
    Ok(CrashRun {
        acks,
        sent: sent.load(Ordering::Relaxed),
        acked_at_kill,
        sent_at_kill,
    })
}

async fn start_with_topic() -> Result<Broker> {
    let broker = Broker::start(&BROKER_ARGS)?;
    let admin = clients::admin(&broker)?;
    clients::create_topic(&admin, TOPIC, 3).await?;
    Ok(broker)
}

/// A broker with `TOPIC`, killed by `produce_and_crash` once at least one
/// message was acknowledged.
async fn crashed_with_acks() -> Result<(Broker, CrashRun)> {
    let mut broker = start_with_topic().await?;
    let run = produce_and_crash(&mut broker).await?;
    ensure!(
        !run.acks.is_empty(),
        "no acknowledged message before the kill"
    );
    Ok((broker, run))
}

fn read_all(broker: &Broker) -> Result<Vec<Record>> {
    let consumer = clients::consumer(broker, &[])?;
    clients::assign_from_beginning(&consumer, TOPIC, &PARTITIONS)?;
    clients::drain(&consumer, &PARTITIONS, 0, Duration::from_secs(60))
}

/// Per partition: offset -> seq, checking contiguity, order and placement.
fn index_log(records: &[Record]) -> Result<BTreeMap<i32, Vec<u64>>> {
    let mut log: BTreeMap<i32, Vec<u64>> = BTreeMap::new();
    for r in records {
        let seq: u64 = r
            .value_str()
            .parse()
            .with_context(|| format!("non-numeric value at p{} o{}", r.partition, r.offset))?;
        let entries = log.entry(r.partition).or_default();
        ensure!(
            r.offset == entries.len() as i64,
            "p{}: offset {} follows {} records (offsets must be contiguous from 0)",
            r.partition,
            r.offset,
            entries.len()
        );
        ensure!(
            seq % 3 == r.partition as u64,
            "seq {seq} found in partition {}",
            r.partition
        );
        if let Some(&prev) = entries.last() {
            ensure!(
                seq > prev,
                "p{}: seq {seq} at offset {} after seq {prev} (duplicate or reorder)",
                r.partition,
                r.offset
            );
        }
        entries.push(seq);
    }
    Ok(log)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_message_survives_sigkill() -> Result<()> {
    let (mut broker, run) = crashed_with_acks().await?;
    ensure!(
        run.sent_at_kill > run.acked_at_kill as u64,
        "nothing was in flight at the kill ({} sent, {} acked)",
        run.sent_at_kill,
        run.acked_at_kill
    );

    broker.restart()?;
    let records = read_all(&broker)?;
    let log = index_log(&records)?;
    println!(
        "sent {}, acked {} ({} sent / {} acked at the kill), recovered {}",
        run.sent,
        run.acks.len(),
        run.sent_at_kill,
        run.acked_at_kill,
        records.len()
    );

    let mut missing = Vec::new();
    for ack in &run.acks {
        let found = log
            .get(&ack.partition)
            .and_then(|l| l.get(ack.offset as usize))
            .copied();
        if found != Some(ack.seq) {
            missing.push(format!(
                "seq {} acked at p{} o{}, found {found:?}",
                ack.seq, ack.partition, ack.offset
            ));
        }
    }
    ensure!(
        missing.is_empty(),
        "{} of {} acknowledged messages lost or moved (sent {}, recovered {}); first: {:?}",
        missing.len(),
        run.acks.len(),
        run.sent,
        records.len(),
        &missing[..missing.len().min(10)]
    );
    ensure!(
        records.len() as u64 <= run.sent,
        "recovered {} records but only {} were sent",
        records.len(),
        run.sent
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produces_after_crash_restart_continue_at_recovered_log_end() -> Result<()> {
    let (mut broker, run) = crashed_with_acks().await?;
    broker.restart()?;

    let consumer = clients::consumer(&broker, &[])?;
    let mut log_end = BTreeMap::new();
    for p in PARTITIONS {
        let (low, high) = consumer.fetch_watermarks(TOPIC, p, CLIENT_TIMEOUT)?;
        ensure!(low == 0, "p{p}: log start {low} after restart");
        let max_acked = run
            .acks
            .iter()
            .filter(|a| a.partition == p)
            .map(|a| a.offset)
            .max()
            .unwrap_or(-1);
        ensure!(
            high > max_acked,
            "p{p}: high watermark {high} but offset {max_acked} was acknowledged"
        );
        log_end.insert(p, high);
    }

    let producer = clients::producer(&broker, &[("acks", "1")])?;
    let mut expected: BTreeMap<i32, Vec<(i64, String)>> = BTreeMap::new();
    for i in 0..30u64 {
        let p = (i % 3) as i32;
        let value = format!("after-restart-{i}");
        let d = producer
            .send(
                FutureRecord::<(), _>::to(TOPIC)
                    .partition(p)
                    .payload(&value),
                CLIENT_TIMEOUT,
            )
            .await
            .map_err(|(e, _)| e)
            .with_context(|| format!("post-restart produce {i}"))?;
        let entries = expected.entry(p).or_default();
        let want = log_end[&p] + entries.len() as i64;
        ensure!(
            d.offset == want,
            "post-restart produce {i} to p{p} got offset {}, expected {want}",
            d.offset
        );
        entries.push((d.offset, value));
    }

    let mut tpl = TopicPartitionList::new();
    for p in PARTITIONS {
        tpl.add_partition_offset(TOPIC, p, Offset::Offset(log_end[&p]))?;
    }
    consumer.assign(&tpl)?;
    let records = clients::drain(&consumer, &PARTITIONS, 30, Duration::from_secs(30))?;
    ensure!(
        records.len() == 30,
        "read back {} post-restart records, expected 30",
        records.len()
    );
    for r in &records {
        let want = expected[&r.partition].iter().find(|(o, _)| *o == r.offset);
        ensure!(
            want.map(|(_, v)| v.as_str()) == Some(r.value_str().as_str()),
            "p{} o{}: read {:?}, expected {:?}",
            r.partition,
            r.offset,
            r.value_str(),
            want
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_exits_zero_and_keeps_every_message() -> Result<()> {
    let mut broker = start_with_topic().await?;
    let producer = clients::producer(&broker, &[("acks", "all")])?;
    let mut acked = Vec::new();
    for i in 0..60u64 {
        let value = i.to_string();
        let d = producer
            .send(
                FutureRecord::<(), _>::to(TOPIC)
                    .partition((i % 3) as i32)
                    .payload(&value),
                CLIENT_TIMEOUT,
            )
            .await
            .map_err(|(e, _)| e)?;
        acked.push(Ack {
            partition: d.partition,
            offset: d.offset,
            seq: i,
        });
    }
    drop(producer);

    let status = broker.stop()?;
    ensure!(
        status.code() == Some(0),
        "SIGTERM exit status {status}; stderr:\n{}",
        broker.log_tail(20)
    );

    broker.restart()?;
    let log = index_log(&read_all(&broker)?)?;
    ensure!(
        log.values().map(Vec::len).sum::<usize>() == 60,
        "recovered {:?}",
        log
    );
    for ack in acked {
        let found = log
            .get(&ack.partition)
            .and_then(|l| l.get(ack.offset as usize))
            .copied();
        ensure!(
            found == Some(ack.seq),
            "seq {} acked at p{} o{}, found {found:?}",
            ack.seq,
            ack.partition,
            ack.offset
        );
    }
    Ok(())
}
