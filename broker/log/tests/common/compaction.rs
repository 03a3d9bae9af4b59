//! What the compaction tests share: a manager whose cleaner runs only when
//! a test calls it, compacted-topic overrides, and single-record writes and
//! reads of one partition.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use chronik_log::{
    CleanerConfig, FlushPolicy, LogConfig, LogManager, LogManagerConfig, PartitionLog,
};
use chronik_protocol::record_batch::parse_batches;
use chronik_protocol::records::{build_batch, read_records, SimpleRecord};

use super::{log_files, offsets, open};

/// (offset, key, value) of a stored record.
pub type Record = (i64, Option<String>, Option<String>);

pub fn manager_config(dir: &Path) -> LogManagerConfig {
    LogManagerConfig {
        flush_policy: FlushPolicy::Never,
        // Tests run the cleaner themselves (`clean_now`).
        cleaner: CleanerConfig {
            threads: 0,
            ..CleanerConfig::default()
        },
        ..super::config(dir, LogConfig::default())
    }
}

pub fn compacted(extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut o: BTreeMap<String, String> = [
        ("cleanup.policy", "compact"),
        ("min.cleanable.dirty.ratio", "0.01"),
        ("segment.bytes", "1024"),
        ("index.interval.bytes", "128"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    for (k, v) in extra {
        o.insert(k.to_string(), v.to_string());
    }
    o
}

pub fn create(manager: &LogManager, topic: &str, overrides: BTreeMap<String, String>) {
    manager
        .create_topic(topic, 1, overrides)
        .expect("create topic");
}

pub fn partition(manager: &LogManager, topic: &str) -> Arc<PartitionLog> {
    Arc::clone(
        manager
            .topic(topic)
            .expect("topic")
            .partition(0)
            .expect("partition 0"),
    )
}

/// Appends one single-record batch; a None value is a tombstone.
pub fn put(log: &PartitionLog, key: &str, value: Option<&str>, timestamp: i64) -> i64 {
    let mut bytes = build_batch(&[SimpleRecord {
        key: Some(Bytes::from(key.to_string())),
        value: value.map(|v| Bytes::from(v.to_string())),
        timestamp,
    }]);
    let headers = parse_batches(&bytes).expect("valid batch");
    log.append(&mut bytes, &headers)
        .expect("append")
        .base_offset
}

/// Every record from offset 0, with its offset.
pub fn records(log: &PartitionLog) -> Vec<Record> {
    let text = |b: &Option<Bytes>| b.as_ref().map(|b| String::from_utf8_lossy(b).into_owned());
    let mut out = Vec::new();
    let mut next = log.log_start_offset();
    while next < log.log_end_offset() {
        let chunk = log.read(next, 1 << 20, i64::MAX).expect("read");
        let batches = offsets(&chunk);
        next = batches
            .last()
            .expect("a read below the end returns a batch")
            .1
            + 1;
        for (offset, r) in read_records(&chunk).expect("uncompressed records") {
            out.push((offset, text(&r.key), text(&r.value)));
        }
    }
    out
}

/// Shuts the manager down and opens the directory again (recovery point at
/// the log end, so every closed segment may be cleaned).
pub fn reopen(manager: Arc<LogManager>, dir: &Path) -> Arc<LogManager> {
    manager.shutdown();
    drop(manager);
    open(manager_config(dir))
}

/// `rounds` rounds of one write to each of keys k0..k{keys}, the value
/// naming the offset; returns the offsets written per key.
pub fn write_rounds(
    log: &PartitionLog,
    keys: usize,
    rounds: usize,
    ts: i64,
) -> HashMap<String, Vec<i64>> {
    let mut written: HashMap<String, Vec<i64>> = HashMap::new();
    for _ in 0..rounds {
        for k in 0..keys {
            let key = format!("k{k}");
            let offset = log.log_end_offset();
            assert_eq!(put(log, &key, Some(&format!("v{offset}")), ts), offset);
            written.entry(key).or_default().push(offset);
        }
    }
    written
}

pub fn active_base(dir: &Path) -> i64 {
    let files = log_files(dir);
    let last = files.last().expect("a segment");
    last.trim_end_matches(".log")
        .parse()
        .expect("base offset name")
}

/// A manager over `dir` with one compacted topic "c" (`compacted(extra)`),
/// and its partition 0.
pub fn compacted_topic(dir: &Path, extra: &[(&str, &str)]) -> (Arc<LogManager>, Arc<PartitionLog>) {
    let manager = open(manager_config(dir));
    create(&manager, "c", compacted(extra));
    let log = partition(&manager, "c");
    (manager, log)
}

/// `reopen`, then topic "c"'s partition 0.
pub fn reopened(manager: Arc<LogManager>, dir: &Path) -> (Arc<LogManager>, Arc<PartitionLog>) {
    let manager = reopen(manager, dir);
    let log = partition(&manager, "c");
    (manager, log)
}
