//! The log manager: every topic's logs in one data directory.
//!
//! Owns: opening the data directory (loading and recovering every topic),
//! creating (with a random or a given topic id) and deleting topics on
//! disk, the background threads (`log-flusher`, `log-retention`,
//! `log-cleaner-N`), and clean
//! shutdown (final flush, checkpoint, clean-shutdown marker). Must not: do per-append work or hold
//! the admin lock while serving appends and reads.
//!
//! Thread-safety: `LogManager` is `Send + Sync` and meant to live behind an
//! `Arc` shared by many tasks. Topic creation, deletion and shutdown are
//! serialised by one admin mutex; lookups only take the registry's read lock.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use tracing::{error, info, warn};

use crate::checkpoint::{
    clean_shutdown_marked, clear_clean_shutdown, mark_clean_shutdown, read_checkpoint,
    RecoveryPoints,
};
use crate::cleaner::offset_map::OffsetMap;
use crate::cleaner::{clean_filthiest, run_cleaner, CleanerConfig};
use crate::config::LogConfig;
use crate::dir_health::LogDirHealth;
use crate::durable_file::sync_dir;
use crate::error::{Error, Result};
use crate::flusher::{sync_partition, FlushPolicy, FlushQueue, Flusher, OnFlush};
use crate::partition::{PartitionContext, PartitionLog};
use crate::recovery::RecoveryHint;
use crate::registry::Registry;
use crate::retention::{enforce_all, run_maintenance, StopSignal};
use crate::segment::wall_clock_ms;
use crate::stats::{Counters, FlushObserver, LogStats};
use crate::topic::{validate_topic_name, TopicLog};
use crate::topic_meta::{self, topics_dir, TopicMeta, TOPICS_DIR};

/// How the manager is set up; see `LogManagerConfig::new` for defaults.
#[derive(Clone)]
pub struct LogManagerConfig {
    pub data_dir: PathBuf,
    /// Broker-level defaults that topic overrides are applied to.
    pub default_log_config: LogConfig,
    pub flush_policy: FlushPolicy,
    /// How often retention runs (Kafka's log.retention.check.interval.ms).
    pub retention_check_interval: Duration,
    /// Receives per-fsync and per-round figures for histograms.
    pub flush_observer: Option<Arc<dyn FlushObserver>>,
    /// Kafka's producer.id.expiration.ms: idempotent-producer state unused
    /// this long is dropped (checked every retention_check_interval).
    pub producer_id_expiration: Duration,
    /// The log cleaner (compacted topics).
    pub cleaner: CleanerConfig,
}

/// Kafka's default producer.id.expiration.ms: one day.
pub const DEFAULT_PRODUCER_ID_EXPIRATION: Duration = Duration::from_secs(24 * 3600);

impl LogManagerConfig {
    /// Kafka defaults, no fsync on the hot path, retention every 30 s.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            default_log_config: LogConfig::default(),
            flush_policy: FlushPolicy::Never,
            retention_check_interval: Duration::from_secs(30),
            flush_observer: None,
            producer_id_expiration: DEFAULT_PRODUCER_ID_EXPIRATION,
            cleaner: CleanerConfig::default(),
        }
    }
}

impl fmt::Debug for LogManagerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogManagerConfig")
            .field("data_dir", &self.data_dir)
            .field("default_log_config", &self.default_log_config)
            .field("flush_policy", &self.flush_policy)
            .field("retention_check_interval", &self.retention_check_interval)
            .field("flush_observer", &self.flush_observer.is_some())
            .field("producer_id_expiration", &self.producer_id_expiration)
            .field("cleaner", &self.cleaner)
            .finish()
    }
}

pub struct LogManager {
    data_dir: PathBuf,
    default_log_config: LogConfig,
    producer_id_expiration: Duration,
    cleaner: CleanerConfig,
    registry: Arc<Registry>,
    ctx: PartitionContext,
    observer: Option<Arc<dyn FlushObserver>>,
    on_flush: OnFlush,
    stop: Arc<StopSignal>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Serialises create_topic, delete_topic and shutdown.
    admin: Mutex<()>,
    shut_down: AtomicBool,
}

/// What `LogManager::reopen_dir` did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReopenedDir {
    pub partitions: usize,
    /// Partitions cut back to their durable offset.
    pub truncated: usize,
}

/// Bytes the writability probe writes and fsyncs.
const PROBE_BYTES: usize = 1 << 20;
const PROBE_FILE: &str = ".dir-probe";

/// Writes, fsyncs and deletes a probe file: the directory takes writes.
fn probe_writable(data_dir: &Path) -> Result<()> {
    use std::io::Write;
    let path = data_dir.join(PROBE_FILE);
    let result = fs::File::create(&path)
        .and_then(|mut file| {
            file.write_all(&vec![0u8; PROBE_BYTES])?;
            file.sync_all()
        })
        .map_err(Error::io(&path));
    let removed = fs::remove_file(&path).map_err(Error::io(&path));
    result.and(removed)?;
    sync_dir(data_dir)
}

/// `<data_dir>/<topic>-<partition>`, Kafka's layout.
fn partition_dir(data_dir: &Path, topic: &str, partition: u32) -> PathBuf {
    data_dir.join(format!("{topic}-{partition}"))
}

impl LogManager {
    /// Opens `config.data_dir` (creating it if missing), recovers every
    /// topic's partitions and starts the background threads. `on_flush` runs
    /// on the flusher thread after each round that advanced a durable offset,
    /// with the partitions whose offset advanced.
    pub fn open(config: LogManagerConfig, on_flush: OnFlush) -> Result<Arc<LogManager>> {
        let started = Instant::now();
        let data_dir = config.data_dir.clone();
        let topics = topics_dir(&data_dir);
        fs::create_dir_all(&topics).map_err(Error::io(&topics))?;
        let mut clean_shutdown = clean_shutdown_marked(&data_dir);
        let points = read_checkpoint(&data_dir).unwrap_or_else(|e| {
            warn!(error = %e, "unreadable recovery-point checkpoint; recovering every partition fully");
            clean_shutdown = false;
            RecoveryPoints::new()
        });
        let dir = Arc::new(LogDirHealth::default());
        let registry = Arc::new(Registry::new(data_dir.clone(), Arc::clone(&dir)));
        let ctx = PartitionContext {
            flush: Arc::new(FlushQueue::new(config.flush_policy)),
            counters: Arc::new(Counters::default()),
            registry: Arc::downgrade(&registry),
            dir,
        };
        let metas = topic_meta::read_all(&data_dir)?;
        clean_data_dir(&data_dir, &metas)?;
        for meta in metas {
            let name = meta.name.clone();
            let hint = |p: i32| RecoveryHint {
                clean_shutdown,
                recovery_point: points.get(&(name.clone(), p)).copied(),
            };
            let topic = load_topic(&data_dir, &config.default_log_config, meta, &ctx, hint)?;
            registry.insert(Arc::new(topic));
        }
        clear_clean_shutdown(&data_dir)?;
        registry.write_checkpoint()?;
        let summary = ctx.counters.snapshot();
        info!(data_dir = %data_dir.display(), topics = registry.all().len(), partitions = registry.partitions().len(),
            clean_shutdown, truncated_bytes = summary.recovery_truncated_bytes_total,
            elapsed_ms = started.elapsed().as_millis() as u64, flush_policy = %config.flush_policy, "log loaded");
        let manager = Arc::new(LogManager {
            data_dir,
            default_log_config: config.default_log_config,
            producer_id_expiration: config.producer_id_expiration,
            cleaner: config.cleaner,
            registry,
            ctx,
            observer: config.flush_observer,
            on_flush,
            stop: Arc::new(StopSignal::default()),
            threads: Mutex::new(Vec::new()),
            admin: Mutex::new(()),
            shut_down: AtomicBool::new(false),
        });
        manager.start_threads(
            config.retention_check_interval,
            config.producer_id_expiration,
        )?;
        Ok(manager)
    }

    fn start_threads(&self, retention_interval: Duration, producer_ttl: Duration) -> Result<()> {
        let flusher = Flusher {
            queue: Arc::clone(&self.ctx.flush),
            counters: Arc::clone(&self.ctx.counters),
            observer: self.observer.clone(),
            on_flush: Arc::clone(&self.on_flush),
        };
        let (registry, stop) = (Arc::clone(&self.registry), Arc::clone(&self.stop));
        let spawned = [
            thread::Builder::new()
                .name("log-flusher".into())
                .spawn(move || flusher.run()),
            thread::Builder::new()
                .name("log-retention".into())
                .spawn(move || run_maintenance(registry, stop, retention_interval, producer_ttl)),
        ];
        let mut threads = self.threads();
        for handle in spawned {
            threads.push(handle.map_err(Error::io(&self.data_dir))?);
        }
        for n in 0..self.cleaner.threads {
            let (registry, stop) = (Arc::clone(&self.registry), Arc::clone(&self.stop));
            let (config, counters) = (self.cleaner, Arc::clone(&self.ctx.counters));
            let handle = thread::Builder::new()
                .name(format!("log-cleaner-{n}"))
                .spawn(move || run_cleaner(registry, stop, config, counters));
            threads.push(handle.map_err(Error::io(&self.data_dir))?);
        }
        Ok(())
    }

    fn threads(&self) -> MutexGuard<'_, Vec<JoinHandle<()>>> {
        self.threads.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn admin(&self) -> MutexGuard<'_, ()> {
        self.admin.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The data directory's health: offline once a write or fsync there
    /// failed, until `reopen_dir` succeeds.
    pub fn dir_health(&self) -> &Arc<LogDirHealth> {
        &self.ctx.dir
    }

    /// Brings an offline data directory back, without a restart (Kafka
    /// needs one): checks that it takes writes and fsyncs again (a probe
    /// file), then reopens every partition — a failed fsync's offline
    /// state cleared, and the log cut back to its durable offset, since
    /// what was written above it may never reach the disk (the broker
    /// fetches it again from the leaders as a follower) — rewrites the
    /// recovery-point checkpoint and marks the directory online. The
    /// caller must no longer lead any partition here (the controller moved
    /// them): a cut below a leader's high watermark would lose records.
    /// No-op while online; an error leaves the directory offline.
    pub fn reopen_dir(&self) -> Result<ReopenedDir> {
        let _admin = self.admin();
        if !self.ctx.dir.is_offline() {
            return Ok(ReopenedDir::default());
        }
        probe_writable(&self.data_dir)?;
        let mut reopened = ReopenedDir::default();
        for partition in self.registry.partitions() {
            reopened.partitions += 1;
            if partition.reopen_at_durable()? {
                reopened.truncated += 1;
            }
        }
        self.registry.write_checkpoint()?;
        self.ctx.dir.set_online();
        info!(data_dir = %self.data_dir.display(), partitions = reopened.partitions,
            truncated_to_durable_offset = reopened.truncated, "log directory back online");
        Ok(reopened)
    }
    pub fn default_log_config(&self) -> &LogConfig {
        &self.default_log_config
    }
    pub fn flush_policy(&self) -> &FlushPolicy {
        self.ctx.flush.policy()
    }
    pub fn stats(&self) -> LogStats {
        self.ctx.counters.snapshot()
    }

    pub fn topic(&self, name: &str) -> Option<Arc<TopicLog>> {
        self.registry.get(name)
    }
    pub fn topic_by_id(&self, id: [u8; 16]) -> Option<Arc<TopicLog>> {
        self.registry.get_by_id(id)
    }
    /// All topics, sorted by name.
    pub fn topics(&self) -> Vec<Arc<TopicLog>> {
        self.registry.all()
    }

    /// Creates a topic with `partitions` empty partitions and a new random
    /// topic id. The meta file is written last, so a crash midway leaves no
    /// half-created topic.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: u32,
        overrides: BTreeMap<String, String>,
    ) -> Result<Arc<TopicLog>> {
        let _admin = self.admin();
        let topic_id = loop {
            let id = *uuid::Uuid::new_v4().as_bytes();
            if id != [0; 16] && self.registry.get_by_id(id).is_none() {
                break id;
            }
        };
        self.create_locked(name, partitions, overrides, topic_id)
    }

    /// Like `create_topic`, with the topic id given (in a cluster every node
    /// uses the controller's). Idempotent: if the topic exists with this id
    /// it is returned as it is (its partition count and config win over the
    /// arguments); with another id it is `TopicAlreadyExists`. An all-zero
    /// id, or one another topic has, is `InvalidTopicId`.
    pub fn create_topic_with_id(
        &self,
        name: &str,
        partitions: u32,
        overrides: BTreeMap<String, String>,
        topic_id: [u8; 16],
    ) -> Result<Arc<TopicLog>> {
        let _admin = self.admin();
        self.create_locked(name, partitions, overrides, topic_id)
    }

    /// `create_topic_with_id` under the admin lock.
    fn create_locked(
        &self,
        name: &str,
        partitions: u32,
        overrides: BTreeMap<String, String>,
        topic_id: [u8; 16],
    ) -> Result<Arc<TopicLog>> {
        if self.shut_down.load(Ordering::Acquire) {
            return Err(Error::ShuttingDown);
        }
        validate_topic_name(name)?;
        if partitions == 0 || i32::try_from(partitions).is_err() {
            return Err(Error::InvalidPartitions(i64::from(partitions)));
        }
        let config = self.default_log_config.with_overrides(&overrides)?;
        if let Some(existing) = self.registry.get(name) {
            if existing.topic_id == topic_id {
                return Ok(existing);
            }
            return Err(Error::TopicAlreadyExists(name.to_string()));
        }
        let invalid_id = |reason: String| Error::InvalidTopicId {
            name: name.to_string(),
            topic_id: uuid::Uuid::from_bytes(topic_id).to_string(),
            reason,
        };
        if topic_id == [0; 16] {
            return Err(invalid_id("the all-zero id is reserved".into()));
        }
        if let Some(other) = self.registry.get_by_id(topic_id) {
            return Err(invalid_id(format!("topic {} has it", other.name)));
        }
        let logs = self.open_new_partitions(name, 0..partitions, &config)?;
        let meta = TopicMeta {
            name: name.to_string(),
            topic_id,
            partitions,
            overrides,
        };
        let committed =
            sync_dir(&self.data_dir).and_then(|()| topic_meta::write(&self.data_dir, &meta));
        if let Err(e) = committed {
            remove_partition_dirs(&self.data_dir, name, 0..partitions);
            return Err(e);
        }
        let topic = Arc::new(TopicLog::new(
            meta.name,
            meta.topic_id,
            meta.overrides,
            config,
            logs,
        ));
        self.registry.insert(Arc::clone(&topic));
        info!(topic = name, partitions, "created topic");
        Ok(topic)
    }

    /// Empty partitions `range` of topic `name`, in fresh directories (a
    /// leftover directory of the same name is removed first). On failure
    /// the directories of `range` made so far are removed.
    fn open_new_partitions(
        &self,
        name: &str,
        range: std::ops::Range<u32>,
        config: &LogConfig,
    ) -> Result<Vec<Arc<PartitionLog>>> {
        let mut logs = Vec::with_capacity(range.len());
        for p in range.clone() {
            let dir = partition_dir(&self.data_dir, name, p);
            if dir.exists() {
                warn!(dir = %dir.display(), "removing a leftover directory of a partition that does not exist");
                fs::remove_dir_all(&dir).map_err(Error::io(&dir))?;
            }
            let hint = RecoveryHint {
                clean_shutdown: false,
                recovery_point: None,
            };
            let partition = i32::try_from(p).map_err(|_| Error::InvalidPartitions(i64::from(p)))?;
            match PartitionLog::open(
                (name, partition),
                dir,
                config.clone(),
                hint,
                self.ctx.clone(),
            ) {
                Ok(log) => logs.push(log),
                Err(e) => {
                    remove_partition_dirs(&self.data_dir, name, range.start..p + 1);
                    return Err(e);
                }
            }
        }
        Ok(logs)
    }

    /// Grows topic `name` to `total` partitions (CreatePartitions). The new
    /// partitions' directories are made and synced before the meta file
    /// names them (the commit point): a crash midway leaves the topic as it
    /// was. Handles to the old `TopicLog` keep working; lookups return the
    /// grown one. A `total` not above the current count is a no-op.
    pub fn add_partitions(&self, name: &str, total: u32) -> Result<Arc<TopicLog>> {
        let _admin = self.admin();
        let topic = self
            .registry
            .get(name)
            .ok_or_else(|| Error::UnknownTopic(name.to_string()))?;
        let current = u32::try_from(topic.partition_count()).unwrap_or(u32::MAX);
        if total <= current {
            return Ok(topic);
        }
        if i32::try_from(total).is_err() {
            return Err(Error::InvalidPartitions(i64::from(total)));
        }
        let added = self.open_new_partitions(name, current..total, &topic.config)?;
        let meta = TopicMeta {
            name: name.to_string(),
            topic_id: topic.topic_id,
            partitions: total,
            overrides: topic.overrides.clone(),
        };
        let committed =
            sync_dir(&self.data_dir).and_then(|()| topic_meta::write(&self.data_dir, &meta));
        if let Err(e) = committed {
            remove_partition_dirs(&self.data_dir, name, current..total);
            return Err(e);
        }
        let mut partitions = topic.partitions().to_vec();
        partitions.extend(added);
        let grown = Arc::new(TopicLog::new(
            meta.name,
            meta.topic_id,
            meta.overrides,
            topic.config.clone(),
            partitions,
        ));
        self.registry.insert(Arc::clone(&grown));
        info!(topic = name, from = current, to = total, "added partitions");
        Ok(grown)
    }

    /// Replaces topic `name`'s config overrides (AlterConfigs): validated
    /// against the broker defaults, stored in the meta file, then applied
    /// to every partition (from its next append, roll or retention pass).
    pub fn set_topic_overrides(
        &self,
        name: &str,
        overrides: BTreeMap<String, String>,
    ) -> Result<Arc<TopicLog>> {
        let _admin = self.admin();
        let topic = self
            .registry
            .get(name)
            .ok_or_else(|| Error::UnknownTopic(name.to_string()))?;
        if topic.overrides == overrides {
            return Ok(topic);
        }
        let config = self.default_log_config.with_overrides(&overrides)?;
        let meta = TopicMeta {
            name: name.to_string(),
            topic_id: topic.topic_id,
            partitions: u32::try_from(topic.partition_count()).unwrap_or(u32::MAX),
            overrides,
        };
        topic_meta::write(&self.data_dir, &meta)?;
        for partition in topic.partitions() {
            partition.set_config(config.clone());
        }
        let altered = Arc::new(TopicLog::new(
            meta.name,
            meta.topic_id,
            meta.overrides,
            config,
            topic.partitions().to_vec(),
        ));
        self.registry.insert(Arc::clone(&altered));
        info!(topic = name, "altered topic configs");
        Ok(altered)
    }

    /// Deletes a topic: its meta file first (the commit point), then its
    /// partition directories. Appends and reads through handles still held
    /// fail with UnknownTopic.
    pub fn delete_topic(&self, name: &str) -> Result<()> {
        let _admin = self.admin();
        let topic = self
            .registry
            .get(name)
            .ok_or_else(|| Error::UnknownTopic(name.to_string()))?;
        topic_meta::remove(&self.data_dir, name)?;
        self.registry.remove(name);
        for partition in topic.partitions() {
            partition.mark_deleted();
        }
        if let Err(e) = self.registry.write_checkpoint() {
            warn!(error = %e, "cannot rewrite the recovery-point checkpoint");
        }
        remove_partition_dirs(&self.data_dir, name, 0..topic.partition_count() as u32);
        info!(topic = name, "deleted topic");
        Ok(())
    }

    /// Applies retention and producer-id expiry to every partition now (the
    /// retention thread does this every retention_check_interval).
    pub fn enforce_retention_now(&self) {
        enforce_all(&self.registry, self.producer_id_expiration);
    }

    /// Runs the log cleaner on this thread until no compacted partition is
    /// due or one fails (what the `log-cleaner-N` threads do every
    /// backoff), at most `max_runs` cleanings. Returns how many ran.
    pub fn clean_now(&self, max_runs: usize) -> usize {
        self.clean_now_at(max_runs, wall_clock_ms())
    }

    /// `clean_now` as of `now_ms` instead of the wall clock (what decides
    /// min.compaction.lag.ms and delete horizons), for tests and tools.
    pub fn clean_now_at(&self, max_runs: usize, now_ms: i64) -> usize {
        let mut map = OffsetMap::with_buffer(self.cleaner.dedupe_buffer_size);
        let mut runs = 0;
        while runs < max_runs
            && clean_filthiest(
                &self.registry,
                &mut map,
                (&self.cleaner, &self.ctx.counters),
                None,
                now_ms,
            )
        {
            runs += 1;
        }
        runs
    }

    /// Stops the background threads, fsyncs everything, writes the
    /// recovery-point checkpoint and the clean-shutdown marker. Later appends
    /// fail with ShuttingDown; reads keep working. Idempotent.
    pub fn shutdown(&self) {
        if self.shut_down.swap(true, Ordering::AcqRel) {
            return;
        }
        let _admin = self.admin();
        self.stop_threads();
        let mut clean = true;
        for partition in self.registry.partitions() {
            if let Err(e) = self.flush_for_shutdown(&partition) {
                error!(topic = partition.topic(), partition = partition.partition(), error = %e, "final flush failed");
                clean = false;
            }
        }
        (self.on_flush)(&self.registry.partitions());
        if let Err(e) = self.registry.write_checkpoint() {
            error!(error = %e, "cannot write the recovery-point checkpoint");
            clean = false;
        }
        if !clean {
            warn!("not marking a clean shutdown; the next open will recover from the checkpoint");
        } else if let Err(e) = mark_clean_shutdown(&self.data_dir) {
            error!(error = %e, "cannot write the clean-shutdown marker");
        } else {
            info!(data_dir = %self.data_dir.display(), "log shut down cleanly");
        }
    }

    fn flush_for_shutdown(&self, partition: &PartitionLog) -> Result<()> {
        for target in partition.close_for_shutdown()? {
            target.sync()?;
        }
        sync_partition(
            partition,
            true,
            &self.ctx.counters,
            self.observer.as_deref(),
        )?;
        sync_dir(partition.dir())?;
        partition.write_producer_snapshot()
    }

    fn stop_threads(&self) {
        self.stop.stop();
        self.ctx.flush.stop();
        let current = thread::current().id();
        for handle in self.threads().drain(..) {
            // A thread cannot join itself; that happens only if the last
            // handle to the manager is dropped from a background thread.
            if handle.thread().id() != current && handle.join().is_err() {
                error!("a log background thread panicked");
            }
        }
    }
}

impl Drop for LogManager {
    /// Without `shutdown`, dropping stops the threads but leaves the data as
    /// after a crash: no final flush, no clean-shutdown marker.
    fn drop(&mut self) {
        self.stop_threads();
    }
}

/// Opens one topic's partitions from its meta file.
fn load_topic(
    data_dir: &Path,
    defaults: &LogConfig,
    meta: TopicMeta,
    ctx: &PartitionContext,
    hint: impl Fn(i32) -> RecoveryHint,
) -> Result<TopicLog> {
    let config = defaults.with_overrides(&meta.overrides).unwrap_or_else(|e| {
        warn!(topic = meta.name, error = %e, "stored topic config no longer valid; using broker defaults");
        defaults.clone()
    });
    let mut logs = Vec::with_capacity(meta.partitions as usize);
    for p in 0..meta.partitions {
        let partition = i32::try_from(p).map_err(|_| Error::InvalidPartitions(i64::from(p)))?;
        let dir = partition_dir(data_dir, &meta.name, p);
        logs.push(PartitionLog::open(
            (&meta.name, partition),
            dir,
            config.clone(),
            hint(partition),
            ctx.clone(),
        )?);
    }
    Ok(TopicLog::new(
        meta.name,
        meta.topic_id,
        meta.overrides,
        config,
        logs,
    ))
}

/// Renames each partition directory aside (`<dir>.<uuid>-delete`, Kafka's
/// convention) and removes it; leftovers are removed at the next open.
fn remove_partition_dirs(data_dir: &Path, topic: &str, partitions: std::ops::Range<u32>) {
    let tag = uuid::Uuid::new_v4().simple().to_string();
    for p in partitions {
        let dir = partition_dir(data_dir, topic, p);
        let doomed = data_dir.join(format!("{topic}-{p}.{tag}-delete"));
        let removed = fs::rename(&dir, &doomed).and_then(|()| fs::remove_dir_all(&doomed));
        if let Err(e) = removed.or_else(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Ok(())
            } else {
                Err(e)
            }
        }) {
            warn!(dir = %dir.display(), error = %e, "cannot remove a deleted partition's directory");
        }
    }
}

/// Removes directories of deletions interrupted by a crash and reports
/// directories that belong to no topic.
fn clean_data_dir(data_dir: &Path, metas: &[TopicMeta]) -> Result<()> {
    for entry in fs::read_dir(data_dir).map_err(Error::io(data_dir))? {
        let entry = entry.map_err(Error::io(data_dir))?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if !entry.path().is_dir() || name == TOPICS_DIR {
            continue;
        }
        if name.ends_with("-delete") {
            fs::remove_dir_all(entry.path()).map_err(Error::io(&entry.path()))?;
            continue;
        }
        let owned = name.rsplit_once('-').is_some_and(|(topic, p)| {
            p.parse::<u32>()
                .is_ok_and(|p| metas.iter().any(|m| m.name == topic && p < m.partitions))
        });
        if !owned {
            warn!(dir = %entry.path().display(), "directory belongs to no topic; ignoring it");
        }
    }
    Ok(())
}
