//! The leader-epoch checkpoint of one partition directory
//! (`leader-epoch-checkpoint`, Kafka's text format): loaded at start,
//! rewritten atomically (temp file, fsync, rename, fsync of the directory)
//! whenever the cache changes.

use std::fs::File;
use std::io::Write;
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
    let tmp = dir.join(format!("{CHECKPOINT_FILE_NAME}.tmp"));
    {
        let mut file = File::create(&tmp)?;
        file.write_all(cache.to_checkpoint().as_bytes())?;
        file.sync_all()?;
    }
    std::fs::rename(&tmp, dir.join(CHECKPOINT_FILE_NAME))?;
    File::open(dir)?.sync_all()
}
