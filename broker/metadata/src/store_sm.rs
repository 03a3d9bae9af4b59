//! The state machine (openraft's `RaftStateMachine`): the metadata image in
//! memory, published to watchers after every applied batch, and its
//! snapshots.
//!
//! Owns: the applied image, the last applied log id and membership, and
//! `<data_dir>/__cluster_metadata/snapshot.json`. A snapshot is the
//! serialized `MetadataImage`; it is written to disk (atomically) before
//! openraft may purge the log it covers, and loaded at open, so a restart
//! rebuilds the image from snapshot + log. Must not: decide anything —
//! entries go through `command::apply`, which is deterministic.
//!
//! Thread-safety: openraft drives the state machine from one task; the
//! snapshot builder shares the same state behind a mutex held only for
//! in-memory work, never across an await or file I/O.

use std::io::{self, Cursor};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use openraft::storage::RaftStateMachine;
use openraft::{EntryPayload, OptionalSend, RaftSnapshotBuilder, Snapshot, StorageIOError};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::command::{self, CommandResult};
use crate::image::MetadataImage;
use crate::raft_types::{Entry, LogId, SnapshotMeta, StorageError, StoredMembership, TypeConfig};
use crate::store_log::{retry_while_disk_full, write_atomically};

const SNAPSHOT_FILE: &str = "snapshot.json";

/// What `snapshot.json` holds: the meta openraft needs and the image.
#[derive(Clone, Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta,
    /// The serialized `MetadataImage` (the snapshot data openraft ships).
    data: Vec<u8>,
}

struct SmState {
    image: MetadataImage,
    last_applied: Option<LogId>,
    last_membership: StoredMembership,
    snapshot: Option<StoredSnapshot>,
    snapshots_built: u64,
}

/// The state machine. Cloning shares it (the clone is the snapshot builder).
#[derive(Clone)]
pub struct StateMachineStore {
    dir: PathBuf,
    state: Arc<Mutex<SmState>>,
    published: Arc<watch::Sender<Arc<MetadataImage>>>,
}

impl StateMachineStore {
    /// Opens the state machine in `dir`, starting from the stored snapshot
    /// if there is one. Images are published to `published`.
    pub fn open(dir: &Path, published: watch::Sender<Arc<MetadataImage>>) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(SNAPSHOT_FILE);
        let mut state = SmState {
            image: MetadataImage::default(),
            last_applied: None,
            last_membership: StoredMembership::default(),
            snapshot: None,
            snapshots_built: 0,
        };
        if path.exists() {
            let stored: StoredSnapshot = serde_json::from_slice(&std::fs::read(&path)?)?;
            state.image = serde_json::from_slice(&stored.data)?;
            state.last_applied = stored.meta.last_log_id;
            state.last_membership = stored.meta.last_membership.clone();
            state.snapshot = Some(stored);
        }
        published.send_replace(Arc::new(state.image.clone()));
        Ok(StateMachineStore {
            dir: dir.to_path_buf(),
            state: Arc::new(Mutex::new(state)),
            published: Arc::new(published),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SmState> {
        // Poisoning means a panic in apply; the image is still the last
        // fully applied one or a partly applied command, and raft cannot
        // continue either way, so reading it is no worse than failing.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn publish(&self, image: MetadataImage) {
        self.published.send_replace(Arc::new(image));
    }

    async fn persist(&self, stored: StoredSnapshot) -> io::Result<()> {
        let path = self.dir.join(SNAPSHOT_FILE);
        tokio::task::spawn_blocking(move || {
            let bytes = serde_json::to_vec(&stored)?;
            retry_while_disk_full(|| write_atomically(&path, &bytes))
        })
        .await
        .map_err(io::Error::other)?
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachineStore {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let stored = {
            let mut state = self.lock();
            state.snapshots_built += 1;
            let data = serde_json::to_vec(&state.image)
                .map_err(|e| StorageIOError::read_state_machine(&e))?;
            let snapshot_id = match state.last_applied {
                Some(id) => format!(
                    "{}-{}-{}",
                    id.leader_id.term, id.index, state.snapshots_built
                ),
                None => format!("none-{}", state.snapshots_built),
            };
            StoredSnapshot {
                meta: SnapshotMeta {
                    last_log_id: state.last_applied,
                    last_membership: state.last_membership.clone(),
                    snapshot_id,
                },
                data,
            }
        };
        self.persist(stored.clone())
            .await
            .map_err(|e| StorageIOError::write_snapshot(Some(stored.meta.signature()), &e))?;
        let snapshot = Snapshot {
            meta: stored.meta.clone(),
            snapshot: Box::new(Cursor::new(stored.data.clone())),
        };
        self.lock().snapshot = Some(stored);
        Ok(snapshot)
    }
}

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotBuilder = StateMachineStore;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let state = self.lock();
        Ok((state.last_applied, state.last_membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<CommandResult>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut state = self.lock();
        let mut results = Vec::new();
        for entry in entries {
            state.last_applied = Some(entry.log_id);
            state.image.applied_index = entry.log_id.index;
            let result = match entry.payload {
                EntryPayload::Blank => CommandResult::Done,
                EntryPayload::Normal(ref command) => command::apply(&mut state.image, command),
                EntryPayload::Membership(membership) => {
                    state.last_membership = StoredMembership::new(Some(entry.log_id), membership);
                    CommandResult::Done
                }
            };
            results.push(result);
        }
        let image = state.image.clone();
        drop(state);
        self.publish(image);
        Ok(results)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let data = snapshot.into_inner();
        let mut image: MetadataImage = serde_json::from_slice(&data)
            .map_err(|e| StorageIOError::read_snapshot(Some(meta.signature()), &e))?;
        if let Some(last) = meta.last_log_id {
            image.applied_index = last.index;
        }
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data,
        };
        self.persist(stored.clone())
            .await
            .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
        {
            let mut state = self.lock();
            state.image = image.clone();
            state.last_applied = meta.last_log_id;
            state.last_membership = meta.last_membership.clone();
            state.snapshot = Some(stored);
        }
        self.publish(image);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        Ok(self.lock().snapshot.clone().map(|stored| Snapshot {
            meta: stored.meta,
            snapshot: Box::new(Cursor::new(stored.data)),
        }))
    }
}
