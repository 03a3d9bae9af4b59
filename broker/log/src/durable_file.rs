//! Crash-safe replacement of small metadata files.
//!
//! Owns: write-temp / fsync / rename / fsync-directory, and directory fsync.
//! After `write_atomically` returns, a crash leaves either the old or the
//! new contents, never a mix. Must not: be used for segment data (appended
//! in place and synced by the flusher).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};

/// Makes a directory's entries (creates, renames, deletes) durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(Error::io(dir))
}

/// Replaces `path` with `contents` atomically and durably. The one way the
/// workspace replaces a small file (the broker's and the quorum's too).
pub fn write_atomically(path: &Path, contents: &[u8]) -> Result<()> {
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(Error::io(&tmp))?;
    file.write_all(contents)
        .and_then(|()| file.sync_all())
        .map_err(Error::io(&tmp))?;
    drop(file);
    fs::rename(&tmp, path).map_err(Error::io(path))?;
    sync_dir(parent(path))
}

/// Deletes `path` if present and makes the deletion durable.
pub(crate) fn remove_durably(path: &Path) -> Result<()> {
    crate::segment::remove_if_exists(path)?;
    sync_dir(parent(path))
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_contents_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("meta");
        write_atomically(&path, b"one").expect("first write");
        write_atomically(&path, b"two").expect("second write");
        assert_eq!(fs::read(&path).expect("read"), b"two");
        assert_eq!(fs::read_dir(dir.path()).expect("list").count(), 1);
        remove_durably(&path).expect("remove");
        remove_durably(&path).expect("removing twice is fine");
        assert!(!path.exists());
    }
}
