//! The on-disk swap of cleaned segments, and its completion at open.
//!
//! Owns: the cleaned file names and the crash-safe order in which a
//! cleaned segment replaces the segments it was cleaned from (Kafka's
//! `.cleaned` → `.swap` → `.log`): the fsynced `<base>.log.cleaned` is
//! renamed to `<base>.log.swap` and the directory fsynced (the commit
//! point); then the replaced segments' files go, the swap file becomes
//! `<base>.log`, and its index files are written and fsynced. At open, a
//! `.cleaned` file (not committed) is deleted and a `.swap` file
//! (committed) finishes its swap, so a crash at any point leaves either the
//! old segments or the cleaned one. Must not: decide what is cleaned, or
//! run without the partition's `files` lock (or before the partition is
//! open).

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tracing::{info, warn};

use crate::durable_file::sync_dir;
use crate::error::{Error, Result};
use crate::read::{walk_headers, SegmentSlice};
use crate::recovery::segment_files;
use crate::segment::{
    remove_if_exists, segment_path, write_files, LogSegment, INDEX_EXT, LOG_EXT, TIME_INDEX_EXT,
};

const CLEANED_EXT: &str = "log.cleaned";
const SWAP_EXT: &str = "log.swap";

/// Where the cleaned replacement of the segment at `base_offset` is written.
pub(crate) fn cleaned_path(dir: &Path, base_offset: i64) -> PathBuf {
    segment_path(dir, base_offset, CLEANED_EXT)
}

/// Replaces the segments at `replaced` (sorted; the first is `base_offset`)
/// by the fsynced cleaned file at `base_offset`, whose index files
/// `indexes` holds. Order and crash outcomes: see the module docs.
pub(crate) fn commit(
    dir: &Path,
    base_offset: i64,
    replaced: &[i64],
    indexes: Vec<(PathBuf, Vec<u8>)>,
) -> Result<()> {
    let (cleaned, swap) = (
        cleaned_path(dir, base_offset),
        segment_path(dir, base_offset, SWAP_EXT),
    );
    fs::rename(&cleaned, &swap).map_err(Error::io(&swap))?;
    sync_dir(dir)?;
    finish(dir, base_offset, replaced, &swap)?;
    for target in write_files(indexes)? {
        target.sync()?;
    }
    sync_dir(dir)
}

/// After the commit point: the replaced segments' files go, then the swap
/// file takes the first one's `.log` name (index files are rebuilt or
/// written after).
fn finish(dir: &Path, base_offset: i64, replaced: &[i64], swap: &Path) -> Result<()> {
    for &base in replaced {
        if base != base_offset {
            LogSegment::delete_files(dir, base)?;
        }
    }
    for ext in [INDEX_EXT, TIME_INDEX_EXT] {
        remove_if_exists(&segment_path(dir, base_offset, ext))?;
    }
    let log = segment_path(dir, base_offset, LOG_EXT);
    fs::rename(swap, &log).map_err(Error::io(&log))
}

/// At open, before segments are listed: deletes uncommitted `.cleaned`
/// files and completes committed swaps (the segments a swap file covers
/// are those whose base offset lies within its offsets).
pub(crate) fn recover(dir: &Path) -> Result<()> {
    let (mut logs, mut swaps, mut changed) = (Vec::new(), Vec::new(), false);
    for (base, ext) in segment_files(dir)? {
        match ext.as_str() {
            LOG_EXT => logs.push(base),
            SWAP_EXT => swaps.push(base),
            CLEANED_EXT => {
                warn!(dir = %dir.display(), base_offset = base, "deleting an uncommitted cleaned segment");
                remove_if_exists(&cleaned_path(dir, base))?;
                changed = true;
            }
            _ => {}
        }
    }
    for base in swaps {
        let swap = segment_path(dir, base, SWAP_EXT);
        let Some(last) = last_offset(&swap)? else {
            // Never written so (a cleaned segment keeps its last batch).
            remove_if_exists(&swap)?;
            changed = true;
            continue;
        };
        let replaced: Vec<i64> = logs
            .iter()
            .copied()
            .filter(|&b| b >= base && b <= last)
            .collect();
        info!(dir = %dir.display(), base_offset = base, replaced = replaced.len(), "completing an interrupted segment swap");
        finish(dir, base, &replaced, &swap)?;
        changed = true;
    }
    if changed {
        sync_dir(dir)?;
    }
    Ok(())
}

/// The last offset of the last batch in `path` (None when it has none).
fn last_offset(path: &Path) -> Result<Option<i64>> {
    let file = File::open(path).map_err(Error::io(path))?;
    let end = file.metadata().map_err(Error::io(path))?.len();
    let slice = SegmentSlice {
        file: Arc::new(file),
        path: path.to_path_buf(),
        start: 0,
        end,
    };
    let mut last = None;
    walk_headers(&slice, |h| last = Some(h.last_offset))?;
    Ok(last)
}
