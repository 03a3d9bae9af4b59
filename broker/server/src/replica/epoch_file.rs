//! The leader-epoch checkpoint of one partition directory
//! (`leader-epoch-checkpoint`, Kafka's text format): loaded at start,
//! rewritten atomically (temp file, fsync, rename, fsync of the directory)
//! whenever the cache changes.

use std::path::Path;

use chronik_replication::{LeaderEpochCache, CHECKPOINT_FILE_NAME};

/// The cache stored in `dir`, or an empty one when there is no checkpoint.
pub fn load(dir: &Path) -> Result<LeaderEpochCache, String> {
    let path = dir.join(CHECKPOINT_FILE_NAME);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            LeaderEpochCache::from_checkpoint(&text).map_err(|e| format!("{}: {e}", path.display()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(LeaderEpochCache::new()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Replaces the checkpoint in `dir` with `cache`, durably.
pub fn save(dir: &Path, cache: &LeaderEpochCache) -> std::io::Result<()> {
    chronik_log::write_atomically(
        &dir.join(CHECKPOINT_FILE_NAME),
        cache.to_checkpoint().as_bytes(),
    )
    .map_err(std::io::Error::other)
}
