//! Recovery from a damaged segment tail.
//!
//! Twenty single-message batches are produced (acks=all) to a one-partition
//! topic, the broker is stopped (SIGKILL or SIGTERM), and the last batch in
//! the newest segment is damaged on disk: truncated by a few bytes, cut inside
//! its 12-byte prefix, or its last 10 bytes garbled (so its CRC fails). On
//! restart the broker must start, serve the 19 intact messages, put the next
//! produce at offset 19, and keep that produce across one more restart (the
//! bad tail must really be gone, not just skipped).

mod common;

use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use rdkafka::consumer::Consumer;
use rdkafka::producer::FutureRecord;

use common::clients::{self, CLIENT_TIMEOUT};
use common::Broker;

const TOPIC: &str = "corrupt-tail";
const MESSAGES: i64 = 20;

#[derive(Debug, Clone, Copy)]
enum Stop {
    Kill,
    Term,
}

#[derive(Debug, Clone, Copy)]
enum Damage {
    /// Drop the last 5 bytes of the last batch.
    TruncateTail,
    /// Keep only 7 bytes of the last batch (inside base offset + length).
    TruncateInsidePrefix,
    /// XOR the last 10 bytes of the last batch with 0xFF.
    GarbleTail,
}

/// One batch found by walking a segment: where it is and what it claims.
#[derive(Debug)]
struct BatchSpan {
    base_offset: i64,
    start: usize,
    end: usize,
}

/// Walks RecordBatch v2 frames (base offset i64, length i32, then `length`
/// bytes) until the data ends or stops looking like a batch.
fn walk_batches(data: &[u8]) -> Vec<BatchSpan> {
    let mut spans = Vec::new();
    let mut pos = 0;
    while pos + 17 <= data.len() {
        let base_offset = i64::from_be_bytes(data[pos..pos + 8].try_into().unwrap_or_default());
        let length = i32::from_be_bytes(data[pos + 8..pos + 12].try_into().unwrap_or_default());
        let magic = data[pos + 16];
        if length <= 0 || magic != 2 {
            break;
        }
        let end = pos + 12 + length as usize;
        if end > data.len() {
            break;
        }
        spans.push(BatchSpan {
            base_offset,
            start: pos,
            end,
        });
        pos = end;
    }
    spans
}

/// The `.log` file with the highest base offset in the partition directory.
fn newest_segment(data_dir: &Path) -> Result<PathBuf> {
    let dir = data_dir.join(format!("{TOPIC}-0"));
    let mut logs: Vec<PathBuf> = fs::read_dir(&dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    let newest = logs
        .pop()
        .with_context(|| format!("no .log segment in {}", dir.display()))?;
    let stem = newest
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    ensure!(
        stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()),
        "segment name {stem:?} is not a 20-digit base offset"
    );
    Ok(newest)
}

/// Damages the last batch of the newest segment; returns the base offset of
/// that batch (= the offset the next produce must get).
fn damage_last_batch(data_dir: &Path, damage: Damage) -> Result<i64> {
    let segment = newest_segment(data_dir)?;
    let mut data = fs::read(&segment).with_context(|| format!("reading {}", segment.display()))?;
    let spans = walk_batches(&data);
    let last = spans.last().context("segment holds no complete batch")?;
    ensure!(
        spans.len() as i64 == MESSAGES && last.base_offset == MESSAGES - 1,
        "expected {MESSAGES} one-record batches ending at base offset {}, found {} ending at {}",
        MESSAGES - 1,
        spans.len(),
        last.base_offset
    );
    let file = OpenOptions::new().write(true).open(&segment)?;
    match damage {
        Damage::TruncateTail => file.set_len((last.end - 5) as u64)?,
        Damage::TruncateInsidePrefix => file.set_len((last.start + 7) as u64)?,
        Damage::GarbleTail => {
            for b in &mut data[last.end - 10..last.end] {
                *b ^= 0xFF;
            }
            drop(file);
            fs::write(&segment, &data)?;
        }
    }
    Ok(last.base_offset)
}

async fn produce_one(broker: &Broker, value: &str) -> Result<i64> {
    let producer = clients::producer(broker, &[("acks", "all"), ("linger.ms", "0")])?;
    let d = producer
        .send(
            FutureRecord::<(), _>::to(TOPIC).partition(0).payload(value),
            CLIENT_TIMEOUT,
        )
        .await
        .map_err(|(e, _)| e)
        .with_context(|| format!("producing {value:?}"))?;
    Ok(d.offset)
}

fn intact_value(i: i64) -> String {
    // Long enough that the garbled last 10 bytes lie inside the record value.
    format!("intact-{i:03}-{}", "x".repeat(100))
}

/// Reads partition 0 from offset 0 to its end and returns the values.
fn read_values(broker: &Broker) -> Result<Vec<(i64, String)>> {
    let consumer = clients::consumer(broker, &[])?;
    clients::assign_from_beginning(&consumer, TOPIC, &[0])?;
    let records = clients::drain(&consumer, &[0], 0, Duration::from_secs(30))?;
    Ok(records
        .into_iter()
        .map(|r| (r.offset, r.value_str()))
        .collect())
}

async fn scenario(stop: Stop, damage: Damage) -> Result<()> {
    let mut broker = Broker::start(&["--wal-profile", "low"])?;
    let admin = clients::admin(&broker)?;
    clients::create_topic(&admin, TOPIC, 1).await?;
    drop(admin);

    // One awaited produce per message: one batch per message on disk.
    for i in 0..MESSAGES {
        let offset = produce_one(&broker, &intact_value(i)).await?;
        ensure!(offset == i, "message {i} got offset {offset}");
    }
    match stop {
        Stop::Kill => {
            broker.kill_hard()?;
        }
        Stop::Term => {
            let status = broker.stop()?;
            ensure!(status.code() == Some(0), "SIGTERM exit status {status}");
        }
    }

    let next_offset = damage_last_batch(broker.data_dir(), damage)?;
    if let Err(e) = broker.restart() {
        bail!("broker did not start on a segment with a damaged tail ({damage:?}): {e:#}");
    }

    let expected: Vec<(i64, String)> = (0..next_offset).map(|i| (i, intact_value(i))).collect();
    let values = read_values(&broker)?;
    ensure!(
        values == expected,
        "after {damage:?}: read {} records {:?}..., expected the {} intact ones",
        values.len(),
        values.iter().map(|(o, _)| o).collect::<Vec<_>>(),
        expected.len()
    );
    let consumer = clients::consumer(&broker, &[])?;
    let watermarks = consumer.fetch_watermarks(TOPIC, 0, CLIENT_TIMEOUT)?;
    ensure!(
        watermarks == (0, next_offset),
        "watermarks {watermarks:?} after recovery, expected (0, {next_offset})"
    );

    let offset = produce_one(&broker, "after-recovery").await?;
    ensure!(
        offset == next_offset,
        "first produce after recovery got offset {offset}, expected {next_offset}"
    );

    // The new batch must follow the intact ones on disk, not the damaged bytes.
    let status = broker.stop()?;
    ensure!(status.code() == Some(0), "SIGTERM exit status {status}");
    broker.restart()?;
    let mut expected = expected;
    expected.push((next_offset, "after-recovery".to_string()));
    let values = read_values(&broker)?;
    ensure!(
        values == expected,
        "after a second restart: read offsets {:?}, values of the tail {:?}",
        values.iter().map(|(o, _)| o).collect::<Vec<_>>(),
        values.last()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_then_truncated_tail() -> Result<()> {
    scenario(Stop::Kill, Damage::TruncateTail).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_then_tail_cut_inside_batch_prefix() -> Result<()> {
    scenario(Stop::Kill, Damage::TruncateInsidePrefix).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_then_garbled_tail() -> Result<()> {
    scenario(Stop::Kill, Damage::GarbleTail).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_then_truncated_tail() -> Result<()> {
    scenario(Stop::Term, Damage::TruncateTail).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_then_garbled_tail() -> Result<()> {
    scenario(Stop::Term, Damage::GarbleTail).await
}
