//! The recovery-point checkpoint file and the clean-shutdown marker.
//!
//! Owns: their names and formats. The checkpoint uses Kafka's layout: a
//! version line (0), an entry-count line, then one `topic partition offset`
//! line per partition; every offset below a partition's recovery point was
//! fsynced when the file was written. Must not: decide what to trust at
//! open (recovery does) or write anything but whole files atomically.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::Path;

use crate::durable_file::{remove_durably, write_atomically};
use crate::error::{Error, Result};

pub(crate) const CHECKPOINT_FILE: &str = "recovery-point-offset-checkpoint";
pub(crate) const CLEAN_SHUTDOWN_FILE: &str = ".clean_shutdown";
const VERSION: &str = "0";

/// Recovery points by (topic, partition).
pub(crate) type RecoveryPoints = HashMap<(String, i32), i64>;

/// Writes the checkpoint for `entries` (sorted for stable output).
pub(crate) fn write_checkpoint(data_dir: &Path, entries: &[(String, i32, i64)]) -> Result<()> {
    let mut text = format!("{VERSION}\n{}\n", entries.len());
    for (topic, partition, offset) in entries {
        // Writing into a String cannot fail.
        let _ = writeln!(text, "{topic} {partition} {offset}");
    }
    write_atomically(&data_dir.join(CHECKPOINT_FILE), text.as_bytes())
}

/// Reads the checkpoint; a missing file is an empty one.
pub(crate) fn read_checkpoint(data_dir: &Path) -> Result<RecoveryPoints> {
    let path = data_dir.join(CHECKPOINT_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(RecoveryPoints::new()),
        Err(e) => return Err(Error::io(&path)(e)),
    };
    parse(&text).map_err(|(line, reason)| Error::Corrupt {
        path,
        position: line,
        reason,
    })
}

/// Parses the checkpoint text; errors carry the 1-based line number.
fn parse(text: &str) -> std::result::Result<RecoveryPoints, (u64, String)> {
    let mut lines = text.lines();
    if lines.next() != Some(VERSION) {
        return Err((1, format!("expected version {VERSION}")));
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or((2, "expected an entry count".to_string()))?;
    let mut points = RecoveryPoints::with_capacity(count);
    for (i, line) in lines.enumerate() {
        let line_no = i as u64 + 3;
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [topic, partition, offset] = fields[..] else {
            return Err((line_no, "expected `topic partition offset`".into()));
        };
        let (Ok(partition), Ok(offset)) = (partition.parse::<i32>(), offset.parse::<i64>()) else {
            return Err((line_no, "partition and offset must be integers".into()));
        };
        points.insert((topic.to_string(), partition), offset);
    }
    if points.len() != count {
        return Err((
            2,
            format!("count says {count} entries, file has {}", points.len()),
        ));
    }
    Ok(points)
}

pub(crate) fn clean_shutdown_marked(data_dir: &Path) -> bool {
    data_dir.join(CLEAN_SHUTDOWN_FILE).exists()
}

pub(crate) fn mark_clean_shutdown(data_dir: &Path) -> Result<()> {
    write_atomically(&data_dir.join(CLEAN_SHUTDOWN_FILE), b"")
}

/// Removes the marker so that a crash from now on is detected.
pub(crate) fn clear_clean_shutdown(data_dir: &Path) -> Result<()> {
    remove_durably(&data_dir.join(CLEAN_SHUTDOWN_FILE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let dir = tempfile::tempdir().expect("temp dir");
        let entries = vec![
            ("orders".to_string(), 0, 42),
            ("orders".to_string(), 1, 0),
            ("a.b-c_d".to_string(), 7, 9),
        ];
        write_checkpoint(dir.path(), &entries).expect("write");
        let points = read_checkpoint(dir.path()).expect("read");
        assert_eq!(points.len(), 3);
        assert_eq!(points[&("orders".to_string(), 0)], 42);
        assert_eq!(points[&("a.b-c_d".to_string(), 7)], 9);
    }

    #[test]
    fn missing_is_empty_and_garbage_is_corrupt() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert!(read_checkpoint(dir.path())
            .expect("missing is fine")
            .is_empty());
        for bad in ["1\n0\n", "0\n2\nt 0 1\n", "0\n1\nt zero 1\n", "0\n1\nt 0\n"] {
            assert!(parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn marker_lifecycle() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert!(!clean_shutdown_marked(dir.path()));
        mark_clean_shutdown(dir.path()).expect("mark");
        assert!(clean_shutdown_marked(dir.path()));
        clear_clean_shutdown(dir.path()).expect("clear");
        assert!(!clean_shutdown_marked(dir.path()));
    }
}
