//! The log store (with the state machine) against openraft's storage
//! suite, and what survives a reopen: entries, truncations, purges, the
//! vote, a torn tail cut off, snapshots.

use std::sync::Arc;

use openraft::storage::{RaftLogStorageExt, RaftStateMachine};
use openraft::testing::{StoreBuilder, Suite};
use openraft::{CommittedLeaderId, EntryPayload, RaftSnapshotBuilder};
use tokio::sync::watch;

use super::*;
use crate::command::Command;
use crate::image::MetadataImage;
use crate::store_sm::StateMachineStore;

struct TempStores;

impl StoreBuilder<TypeConfig, LogStore, StateMachineStore, tempfile::TempDir> for TempStores {
    async fn build(
        &self,
    ) -> Result<(tempfile::TempDir, LogStore, StateMachineStore), StorageError> {
        let dir = tempfile::tempdir().map_err(|e| StorageIOError::write(&e))?;
        let log = LogStore::open(dir.path()).map_err(|e| StorageIOError::write(&e))?;
        let (tx, _rx) = watch::channel(Arc::new(MetadataImage::default()));
        let sm = StateMachineStore::open(dir.path(), tx).map_err(|e| StorageIOError::write(&e))?;
        Ok((dir, log, sm))
    }
}

#[test]
fn passes_openraft_storage_suite() {
    if let Err(e) = Suite::test_all(TempStores) {
        panic!("openraft storage suite: {e}");
    }
}

fn entry(term: u64, index: u64) -> Entry {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
        payload: EntryPayload::Normal(Command::FenceBroker {
            node_id: i32::try_from(index).expect("small"),
        }),
    }
}

async fn indexes(store: &mut LogStore) -> Vec<u64> {
    store
        .try_get_log_entries(..)
        .await
        .expect("read")
        .iter()
        .map(|e| e.log_id.index)
        .collect()
}

#[tokio::test]
async fn entries_truncation_purge_and_vote_survive_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let mut store = LogStore::open(dir.path()).expect("open");
        store
            .blocking_append((1..=10).map(|i| entry(1, i)))
            .await
            .expect("append");
        store
            .truncate(LogId::new(CommittedLeaderId::new(1, 1), 8))
            .await
            .expect("truncate");
        store.blocking_append([entry(2, 8)]).await.expect("append");
        store
            .purge(LogId::new(CommittedLeaderId::new(1, 1), 3))
            .await
            .expect("purge");
        store.save_vote(&Vote::new(2, 3)).await.expect("vote");
        store
            .save_committed(Some(entry(2, 8).log_id))
            .await
            .expect("committed");
    }
    let mut store = LogStore::open(dir.path()).expect("reopen");
    assert_eq!(indexes(&mut store).await, vec![4, 5, 6, 7, 8]);
    let state = store.get_log_state().await.expect("state");
    assert_eq!(state.last_purged_log_id.map(|id| id.index), Some(3));
    assert_eq!(state.last_log_id, Some(entry(2, 8).log_id));
    assert_eq!(
        store.read_vote().await.expect("vote"),
        Some(Vote::new(2, 3))
    );
    assert_eq!(
        store.read_committed().await.expect("committed"),
        Some(entry(2, 8).log_id)
    );
}

#[tokio::test]
async fn a_torn_tail_is_cut_off_and_appends_continue_after_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let mut store = LogStore::open(dir.path()).expect("open");
        store
            .blocking_append((1..=3).map(|i| entry(1, i)))
            .await
            .expect("append");
    }
    let path = dir.path().join(LOG_FILE);
    let intact_len = std::fs::metadata(&path).expect("stat").len();
    // Half a frame: a length promising more bytes than follow.
    let mut file = OpenOptions::new().append(true).open(&path).expect("open");
    file.write_all(&[0, 0, 1, 0, 1, 2, 3, 4, b'{'])
        .expect("write");
    drop(file);
    {
        let mut store = LogStore::open(dir.path()).expect("reopen");
        assert_eq!(
            std::fs::metadata(&path).expect("stat").len(),
            intact_len,
            "tail cut off"
        );
        assert_eq!(indexes(&mut store).await, vec![1, 2, 3]);
        store.blocking_append([entry(1, 4)]).await.expect("append");
    }
    // A flipped bit in the last record: its CRC fails, earlier records stay.
    let mut bytes = std::fs::read(&path).expect("read");
    let last = bytes.len() - 2;
    bytes[last] ^= 0x01;
    std::fs::write(&path, &bytes).expect("write");
    let mut store = LogStore::open(dir.path()).expect("reopen");
    assert_eq!(indexes(&mut store).await, vec![1, 2, 3]);
}

#[tokio::test]
async fn purges_compact_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(LOG_FILE);
    {
        let mut store = LogStore::open(dir.path()).expect("open");
        for i in 1..=600 {
            store.blocking_append([entry(1, i)]).await.expect("append");
        }
        let before = std::fs::metadata(&path).expect("stat").len();
        store.purge(entry(1, 590).log_id).await.expect("purge");
        let after = std::fs::metadata(&path).expect("stat").len();
        assert!(after * 10 < before, "rewritten: {before} -> {after} bytes");
        store
            .blocking_append([entry(1, 601)])
            .await
            .expect("append after rewrite");
    }
    let mut store = LogStore::open(dir.path()).expect("reopen");
    assert_eq!(indexes(&mut store).await, (591..=601).collect::<Vec<_>>());
}

#[tokio::test]
async fn the_state_machine_restarts_from_its_snapshot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let register = Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), 1),
        payload: EntryPayload::Normal(Command::RegisterBroker {
            node_id: 1,
            host: "h".into(),
            port: 9092,
            listeners: Default::default(),
            log_dir_offline: false,
            rack: None,
        }),
    };
    {
        let (tx, _rx) = watch::channel(Arc::new(MetadataImage::default()));
        let mut sm = StateMachineStore::open(dir.path(), tx).expect("open");
        sm.apply([register]).await.expect("apply");
        let mut builder = sm.get_snapshot_builder().await;
        let snapshot = builder.build_snapshot().await.expect("snapshot");
        assert_eq!(snapshot.meta.last_log_id.map(|id| id.index), Some(1));
    }
    let (tx, rx) = watch::channel(Arc::new(MetadataImage::default()));
    let mut sm = StateMachineStore::open(dir.path(), tx).expect("reopen");
    let (applied, _) = sm.applied_state().await.expect("state");
    assert_eq!(applied.map(|id| id.index), Some(1));
    let image = rx.borrow().clone();
    assert_eq!((image.applied_index, image.is_live(1)), (1, true));
}

#[test]
fn a_full_disk_is_waited_out_and_other_errors_are_returned() {
    // ENOSPC as write(2) returns it, and wrapped the way write_atomically's is.
    let enospc = || io::Error::from_raw_os_error(28);
    let wrapped = io::Error::other(chronik_log::Error::Io {
        path: PathBuf::from("vote.json.tmp"),
        source: enospc(),
    });
    assert!(is_disk_full(&enospc()) && is_disk_full(&wrapped));
    assert!(!is_disk_full(&io::Error::from_raw_os_error(5)));

    let mut tries = 0;
    let result = retry_while_disk_full(|| {
        tries += 1;
        if tries < 3 {
            Err(enospc())
        } else {
            Ok(tries)
        }
    });
    assert_eq!(result.ok(), Some(3));
    let mut tries = 0;
    let result: io::Result<()> = retry_while_disk_full(|| {
        tries += 1;
        Err(io::Error::from_raw_os_error(5))
    });
    assert!(result.is_err() && tries == 1, "EIO is not retried");
}
