//! The live topics, by name and by id, and the checkpoint of their
//! partitions' recovery points.
//!
//! Owns: the in-memory topic table shared by the manager and the background
//! threads, and serialised writes of the recovery-point checkpoint. Must
//! not: create or delete topic files (the manager does).
//!
//! Thread-safety: the table is behind an RwLock held only to clone `Arc`s;
//! checkpoint writes are serialised by their own mutex.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::checkpoint::write_checkpoint;
use crate::dir_health::LogDirHealth;
use crate::error::Result;
use crate::partition::PartitionLog;
use crate::topic::TopicLog;

#[derive(Default)]
struct Topics {
    by_name: BTreeMap<String, Arc<TopicLog>>,
    by_id: HashMap<[u8; 16], Arc<TopicLog>>,
}

pub(crate) struct Registry {
    data_dir: PathBuf,
    /// A failed checkpoint write takes the directory offline.
    dir: Arc<LogDirHealth>,
    topics: RwLock<Topics>,
    /// The entries last written to the checkpoint file.
    last_checkpoint: Mutex<Option<Vec<(String, i32, i64)>>>,
}

impl Registry {
    pub(crate) fn new(data_dir: PathBuf, dir: Arc<LogDirHealth>) -> Self {
        Self {
            data_dir,
            dir,
            topics: RwLock::default(),
            last_checkpoint: Mutex::new(None),
        }
    }

    // Poisoning is ignored: writers only insert or remove whole entries.
    fn read(&self) -> RwLockReadGuard<'_, Topics> {
        self.topics.read().unwrap_or_else(PoisonError::into_inner)
    }
    fn write(&self) -> RwLockWriteGuard<'_, Topics> {
        self.topics.write().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn get(&self, name: &str) -> Option<Arc<TopicLog>> {
        self.read().by_name.get(name).cloned()
    }

    pub(crate) fn get_by_id(&self, id: [u8; 16]) -> Option<Arc<TopicLog>> {
        self.read().by_id.get(&id).cloned()
    }

    /// All topics sorted by name.
    pub(crate) fn all(&self) -> Vec<Arc<TopicLog>> {
        self.read().by_name.values().cloned().collect()
    }

    pub(crate) fn partitions(&self) -> Vec<Arc<PartitionLog>> {
        self.read()
            .by_name
            .values()
            .flat_map(|t| t.partitions().iter().cloned())
            .collect()
    }

    pub(crate) fn insert(&self, topic: Arc<TopicLog>) {
        let mut topics = self.write();
        topics.by_id.insert(topic.topic_id, Arc::clone(&topic));
        topics.by_name.insert(topic.name.clone(), topic);
    }

    pub(crate) fn remove(&self, name: &str) -> Option<Arc<TopicLog>> {
        let mut topics = self.write();
        let topic = topics.by_name.remove(name)?;
        topics.by_id.remove(&topic.topic_id);
        Some(topic)
    }

    fn recovery_points(&self) -> Vec<(String, i32, i64)> {
        self.partitions()
            .iter()
            .map(|p| (p.topic().to_string(), p.partition(), p.recovery_point()))
            .collect()
    }

    /// Rewrites the checkpoint file with every partition's recovery point.
    pub(crate) fn write_checkpoint(&self) -> Result<()> {
        let mut last = self
            .last_checkpoint
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let points = self.recovery_points();
        self.write_points(&points)?;
        *last = Some(points);
        Ok(())
    }

    /// Rewrites the checkpoint file unless nothing changed since the last
    /// write; returns whether it wrote.
    pub(crate) fn write_checkpoint_if_changed(&self) -> Result<bool> {
        let mut last = self
            .last_checkpoint
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let points = self.recovery_points();
        if last.as_ref() == Some(&points) {
            return Ok(false);
        }
        self.write_points(&points)?;
        *last = Some(points);
        Ok(true)
    }

    fn write_points(&self, points: &[(String, i32, i64)]) -> Result<()> {
        write_checkpoint(&self.data_dir, points).inspect_err(|e| {
            self.dir.record("writing the recovery-point checkpoint", e);
        })
    }
}
