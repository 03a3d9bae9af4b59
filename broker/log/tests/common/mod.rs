//! Helpers shared by the integration tests: temp-dir managers and batches.

#![allow(dead_code)]

pub mod compaction;

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use chronik_log::{AppendInfo, FlushPolicy, LogConfig, LogManager, LogManagerConfig, PartitionLog};
use chronik_protocol::record_batch::{build_test_batch, parse_batches};

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

/// Manager config over `dir` with small segments so tests roll often.
pub fn config(dir: &Path, log: LogConfig) -> LogManagerConfig {
    LogManagerConfig {
        default_log_config: log,
        retention_check_interval: Duration::from_secs(3600),
        ..LogManagerConfig::new(dir)
    }
}

pub fn small_segments(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

/// Opens a manager and counts its on_flush calls.
pub fn open_counting(config: LogManagerConfig) -> (Arc<LogManager>, Arc<AtomicUsize>) {
    let flushes = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&flushes);
    let manager = LogManager::open(
        config,
        Arc::new(move |_: &[Arc<chronik_log::PartitionLog>]| {
            counter.fetch_add(1, Ordering::SeqCst);
        }),
    )
    .expect("open log manager");
    (manager, flushes)
}

pub fn open(config: LogManagerConfig) -> Arc<LogManager> {
    open_counting(config).0
}

pub fn open_with(dir: &Path, log: LogConfig, policy: FlushPolicy) -> Arc<LogManager> {
    open(LogManagerConfig {
        flush_policy: policy,
        ..config(dir, log)
    })
}

pub fn create(manager: &LogManager, topic: &str, partitions: u32) -> Arc<PartitionLog> {
    let t = manager
        .create_topic(topic, partitions, BTreeMap::new())
        .expect("create topic");
    Arc::clone(t.partition(0).expect("partition 0"))
}

/// Appends one batch of `count` records with `timestamp` and a payload of
/// `payload_len` bytes.
pub fn append(log: &PartitionLog, count: i32, timestamp: i64, payload_len: usize) -> AppendInfo {
    let mut bytes = build_test_batch(count, timestamp, &vec![b'x'; payload_len]);
    let headers = parse_batches(&bytes).expect("valid batch");
    log.append(&mut bytes, &headers).expect("append")
}

/// Appends several batches in one call.
pub fn append_many(log: &PartitionLog, counts: &[i32], timestamp: i64) -> AppendInfo {
    let mut bytes = Vec::new();
    for &c in counts {
        bytes.extend(build_test_batch(c, timestamp, b"records"));
    }
    let headers = parse_batches(&bytes).expect("valid batches");
    log.append(&mut bytes, &headers).expect("append")
}

/// (base offset, last offset) of every batch in a read result.
pub fn offsets(bytes: &[u8]) -> Vec<(i64, i64)> {
    parse_batches(bytes)
        .expect("reads return whole valid batches")
        .iter()
        .map(|h| (h.base_offset, h.last_offset()))
        .collect()
}

/// Every batch from `from` to the log end.
pub fn read_all(log: &PartitionLog, from: i64) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    let mut next = from;
    while next < log.log_end_offset() {
        let bytes = log.read(next, 1 << 20, i64::MAX).expect("read");
        let batches = offsets(&bytes);
        let last = batches
            .last()
            .expect("a read below the log end returns a batch")
            .1;
        out.extend(batches);
        next = last + 1;
    }
    out
}

pub fn partition_dir(data_dir: &Path, topic: &str, partition: i32) -> PathBuf {
    data_dir.join(format!("{topic}-{partition}"))
}

/// Cut the last `bytes` bytes off `file`, the torn tail a crash mid-write
/// leaves; returns the length it had.
pub fn chop_tail(file: &Path, bytes: u64) -> u64 {
    let len = std::fs::metadata(file).expect("stat").len();
    OpenOptions::new()
        .write(true)
        .open(file)
        .expect("open")
        .set_len(len - bytes)
        .expect("chop");
    len
}

/// Sorted names of the files in a partition directory that `keep` accepts.
pub fn file_names(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list partition dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| keep(n))
        .collect();
    names.sort();
    names
}

/// Sorted `.log` file names in a partition directory.
pub fn log_files(dir: &Path) -> Vec<String> {
    file_names(dir, |n| n.ends_with(".log"))
}

/// Polls `condition` until it holds or `timeout` passes.
pub fn wait_until(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// One idempotent batch of a produce request.
#[derive(Debug, Clone, Copy)]
pub struct Idempotent {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records: i32,
}

pub const fn idem(
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    records: i32,
) -> Idempotent {
    Idempotent {
        producer_id,
        producer_epoch,
        base_sequence,
        records,
    }
}

/// CRC-32C (Castagnoli), bit by bit: only for building test batches.
pub fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A test batch carrying a producer id, epoch and base sequence, with its
/// CRC recomputed (bytes 21.. into 17..21).
pub fn idempotent_batch(b: Idempotent, payload: &[u8]) -> Vec<u8> {
    let mut bytes = build_test_batch(b.records, now_ms(), payload);
    bytes[43..51].copy_from_slice(&b.producer_id.to_be_bytes());
    bytes[51..53].copy_from_slice(&b.producer_epoch.to_be_bytes());
    bytes[53..57].copy_from_slice(&b.base_sequence.to_be_bytes());
    let crc = crc32c(&bytes[21..]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    bytes
}

/// Appends one request made of `batches` (each with a 100-byte payload).
pub fn produce(log: &PartitionLog, batches: &[Idempotent]) -> chronik_log::Result<AppendInfo> {
    let mut bytes: Vec<u8> = batches
        .iter()
        .flat_map(|&b| idempotent_batch(b, &[b'i'; 100]))
        .collect();
    let headers = parse_batches(&bytes).expect("valid idempotent batches");
    log.append(&mut bytes, &headers)
}
