//! The durable raft log and vote (openraft's `RaftLogStorage`).
//!
//! Owns: `<data_dir>/__cluster_metadata/raft.log` and `vote.json`. The log
//! file is a sequence of records — appended entries, truncations, purges,
//! the committed id — each framed as `[len u32 BE][crc32c u32 BE][json]`;
//! replaying them in order at open rebuilds the in-memory entries. A torn
//! or corrupt tail (a crash mid-append) is cut off at open. Every mutating
//! call fsyncs before it returns (metadata is low-rate), on a blocking
//! thread; the vote is replaced atomically (write, fsync, rename, fsync
//! the directory). When purges leave the file mostly dead records it is
//! rewritten the same atomic way. A write that fails for a full disk is
//! retried until space returns (`retry_while_disk_full`): openraft would
//! stop this node's raft for good on the error.
//!
//! Must not: interpret entries — the state machine applies them.
//!
//! Thread-safety: openraft calls the mutating methods one at a time
//! (`&mut self`); readers (`LogReader` clones used by replication) only
//! take the in-memory map's read lock, never the file's.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{OptionalSend, RaftLogReader, StorageIOError};
use serde::{Deserialize, Serialize};

use crate::raft_types::{Entry, LogId, StorageError, TypeConfig, Vote};

const LOG_FILE: &str = "raft.log";
const VOTE_FILE: &str = "vote.json";
/// Frame header: length + CRC-32C.
const HEADER_LEN: usize = 8;
/// A single record larger than this is corruption, not data.
const MAX_RECORD_LEN: usize = 64 << 20;
/// Rewrite the file once it holds this many more records than live entries.
const COMPACT_SLACK: usize = 512;

#[derive(Serialize, Deserialize)]
enum Record {
    Entry(Entry),
    /// Entries at and after this index were deleted (a conflicting tail).
    TruncateFrom(u64),
    /// Entries up to and including this id were purged (in a snapshot).
    PurgeUpTo(LogId),
    Committed(Option<LogId>),
}

#[derive(Default)]
struct LogMem {
    entries: BTreeMap<u64, Entry>,
    last_purged: Option<LogId>,
    committed: Option<LogId>,
    vote: Option<Vote>,
}

impl LogMem {
    fn replay(&mut self, record: Record) {
        match record {
            Record::Entry(entry) => {
                self.entries.insert(entry.log_id.index, entry);
            }
            Record::TruncateFrom(index) => {
                self.entries.split_off(&index);
            }
            Record::PurgeUpTo(log_id) => {
                self.entries = self.entries.split_off(&(log_id.index + 1));
                self.last_purged = Some(log_id);
            }
            Record::Committed(committed) => self.committed = committed,
        }
    }
}

/// The append-only file and how many records it holds.
struct LogWriter {
    dir: PathBuf,
    file: File,
    len: u64,
    records: usize,
}

impl LogWriter {
    /// Appends `records` and fsyncs; on failure the file is cut back so a
    /// half-written frame never sits in front of later records.
    fn append(&mut self, records: &[Record]) -> io::Result<()> {
        let mut buf = Vec::new();
        for record in records {
            encode_record(record, &mut buf)?;
        }
        let result = self
            .file
            .write_all(&buf)
            .and_then(|()| self.file.sync_data());
        if let Err(e) = result {
            let _ = self.file.set_len(self.len);
            return Err(e);
        }
        self.len += buf.len() as u64;
        self.records += records.len();
        Ok(())
    }

    /// Replaces the file with one record per live entry.
    fn rewrite(&mut self, mem: &LogMem) -> io::Result<()> {
        let mut records = Vec::new();
        if let Some(purged) = mem.last_purged {
            records.push(Record::PurgeUpTo(purged));
        }
        records.push(Record::Committed(mem.committed));
        records.extend(mem.entries.values().cloned().map(Record::Entry));
        let mut buf = Vec::new();
        for record in &records {
            encode_record(record, &mut buf)?;
        }
        let path = self.dir.join(LOG_FILE);
        write_atomically(&path, &buf)?;
        self.file = OpenOptions::new().append(true).open(&path)?;
        self.len = buf.len() as u64;
        self.records = records.len();
        Ok(())
    }
}

fn encode_record(record: &Record, buf: &mut Vec<u8>) -> io::Result<()> {
    let json = serde_json::to_vec(record)?;
    let len = u32::try_from(json.len()).map_err(|_| io::Error::other("log record too large"))?;
    buf.extend_from_slice(&len.to_be_bytes());
    buf.extend_from_slice(&crc32c::crc32c(&json).to_be_bytes());
    buf.extend_from_slice(&json);
    Ok(())
}

/// Decodes records from the start of `bytes`; returns them and the length
/// of the valid prefix (anything after it is a torn or corrupt tail).
fn decode_records(bytes: &[u8]) -> (Vec<Record>, usize) {
    let mut records = Vec::new();
    let mut pos = 0;
    while let Some(header) = bytes.get(pos..pos + HEADER_LEN) {
        let (len, crc) = header.split_at(4);
        let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
        let crc = u32::from_be_bytes([crc[0], crc[1], crc[2], crc[3]]);
        if len > MAX_RECORD_LEN {
            break;
        }
        let Some(body) = bytes.get(pos + HEADER_LEN..pos + HEADER_LEN + len) else {
            break;
        };
        if crc32c::crc32c(body) != crc {
            break;
        }
        let Ok(record) = serde_json::from_slice(body) else {
            break;
        };
        records.push(record);
        pos += HEADER_LEN + len;
    }
    (records, pos)
}

/// Writes `path` so that a crash leaves either the old or the new content
/// (the workspace's one atomic write, `chronik_log::write_atomically`).
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    chronik_log::write_atomically(path, bytes).map_err(io::Error::other)
}

/// The raft log store. Cloning shares the same log (the clone is the
/// `LogReader` openraft hands to replication tasks).
#[derive(Clone)]
pub struct LogStore {
    writer: Arc<Mutex<LogWriter>>,
    mem: Arc<RwLock<LogMem>>,
}

impl LogStore {
    /// Opens (creating if needed) the log in `dir`, cutting off a torn tail.
    pub fn open(dir: &Path) -> io::Result<LogStore> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(LOG_FILE);
        let mut bytes = Vec::new();
        if path.exists() {
            File::open(&path)?.read_to_end(&mut bytes)?;
        }
        let (records, valid_len) = decode_records(&bytes);
        let record_count = records.len();
        let mut mem = LogMem::default();
        for record in records {
            mem.replay(record);
        }
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        if valid_len < bytes.len() {
            tracing::warn!(
                path = %path.display(),
                valid_len,
                file_len = bytes.len(),
                "cutting off a torn or corrupt tail of the raft log"
            );
            file.set_len(valid_len as u64)?;
            file.sync_all()?;
        }
        let vote_path = dir.join(VOTE_FILE);
        if vote_path.exists() {
            let bytes = std::fs::read(&vote_path)?;
            mem.vote = Some(serde_json::from_slice(&bytes)?);
        }
        Ok(LogStore {
            writer: Arc::new(Mutex::new(LogWriter {
                dir: dir.to_path_buf(),
                file,
                len: valid_len as u64,
                records: record_count,
            })),
            mem: Arc::new(RwLock::new(mem)),
        })
    }

    fn mem_read(&self) -> std::sync::RwLockReadGuard<'_, LogMem> {
        // A poisoned lock means a panic mid-update of plain maps; the data
        // is still consistent enough to read.
        self.mem.read().unwrap_or_else(|e| e.into_inner())
    }

    fn mem_write(&self) -> std::sync::RwLockWriteGuard<'_, LogMem> {
        self.mem.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the writer on a blocking thread (it fsyncs), again and
    /// again while the disk is full (`retry_while_disk_full`).
    async fn with_writer<T, F>(&self, mut f: F) -> io::Result<T>
    where
        F: FnMut(&mut LogWriter) -> io::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let writer = self.writer.clone();
        tokio::task::spawn_blocking(move || {
            let mut writer = writer.lock().unwrap_or_else(|e| e.into_inner());
            retry_while_disk_full(|| f(&mut writer))
        })
        .await
        .map_err(io::Error::other)?
    }
}

/// Runs `write` until it does not fail for a full disk (ENOSPC), waiting
/// between tries. openraft 0.9 treats any storage error as fatal: its core
/// stops for good and the node keeps serving a frozen metadata image even
/// once space returns. A full disk passes, and every write here leaves the
/// files as they were when it fails (the log is cut back, the vote and
/// snapshot are replaced atomically), so waiting for space is safe: the
/// node looks to its peers like a paused one, and resumes without a
/// restart. Other errors are returned (fatal, as before).
pub(crate) fn retry_while_disk_full<T>(mut write: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    let mut wait = Duration::from_millis(50);
    let mut failed_since = None;
    loop {
        match write() {
            Err(e) if is_disk_full(&e) => {
                if failed_since.is_none() {
                    tracing::warn!(error = %e, "metadata log write failed: disk full; retrying until space returns");
                }
                failed_since.get_or_insert_with(Instant::now);
                std::thread::sleep(wait);
                wait = (wait * 2).min(Duration::from_secs(1));
            }
            result => {
                if let Some(since) = failed_since {
                    tracing::info!(waited = ?since.elapsed(), "metadata log writes resumed");
                }
                return result;
            }
        }
    }
}

/// ENOSPC anywhere in `e`'s chain of sources.
fn is_disk_full(e: &io::Error) -> bool {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(error) = next {
        if error
            .downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::StorageFull)
        {
            return true;
        }
        next = error.source();
    }
    false
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        Ok(self
            .mem_read()
            .entries
            .range(range)
            .map(|(_, e)| e.clone())
            .collect())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let mem = self.mem_read();
        let last_log_id = mem
            .entries
            .values()
            .next_back()
            .map(|e| e.log_id)
            .or(mem.last_purged);
        Ok(LogState {
            last_purged_log_id: mem.last_purged,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let bytes = serde_json::to_vec(vote).map_err(|e| StorageIOError::write_vote(&e))?;
        self.with_writer(move |w| write_atomically(&w.dir.join(VOTE_FILE), &bytes))
            .await
            .map_err(|e| StorageIOError::write_vote(&e))?;
        self.mem_write().vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(self.mem_read().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        self.with_writer(move |w| w.append(&[Record::Committed(committed)]))
            .await
            .map_err(|e| StorageIOError::write(&e))?;
        self.mem_write().committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.mem_read().committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        let records: Vec<Record> = entries.iter().cloned().map(Record::Entry).collect();
        match self.with_writer(move |w| w.append(&records)).await {
            Ok(()) => {
                let mut mem = self.mem_write();
                for entry in entries {
                    mem.entries.insert(entry.log_id.index, entry);
                }
                drop(mem);
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                let error = StorageIOError::write_logs(&e);
                callback.log_io_completed(Err(e));
                Err(error.into())
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let index = log_id.index;
        self.with_writer(move |w| w.append(&[Record::TruncateFrom(index)]))
            .await
            .map_err(|e| StorageIOError::write_logs(&e))?;
        self.mem_write().entries.split_off(&index);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let mem = self.mem.clone();
        self.with_writer(move |w| {
            w.append(&[Record::PurgeUpTo(log_id)])?;
            let mut mem = mem.write().unwrap_or_else(|e| e.into_inner());
            mem.replay(Record::PurgeUpTo(log_id));
            if w.records > mem.entries.len() + COMPACT_SLACK {
                w.rewrite(&mem)?;
            }
            Ok(())
        })
        .await
        .map_err(|e| StorageIOError::write_logs(&e))?;
        Ok(())
    }
}

#[cfg(test)]
#[path = "store_log_tests.rs"]
mod tests;
