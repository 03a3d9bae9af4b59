//! DeleteRecords: moving a partition's log start offset forward on request
//! (Kafka's `deleteRecords`), on the leader and — following the leader's
//! log start offset in fetch responses — on its followers.
//!
//! Owns: the requested log start offset, persisted in the partition
//! directory's `log-start-offset` file (written atomically and durably
//! before the offset moves, so an acknowledged deletion survives a crash),
//! and removing the segments wholly below it (through the retention pass,
//! which deletes files outside the partition lock). Must not: move the log
//! start offset past the log end offset or backwards.

use std::path::Path;
use std::sync::atomic::Ordering;

use tracing::info;

use super::PartitionLog;
use crate::durable_file::write_atomically;
use crate::error::{Error, Result};
use crate::segment::wall_clock_ms;

/// The file holding the log start offset DeleteRecords asked for.
pub(crate) const LOG_START_FILE: &str = "log-start-offset";

/// The stored log start offset of the partition in `dir` (0 when none).
pub(crate) fn read_log_start_file(dir: &Path) -> Result<i64> {
    let path = dir.join(LOG_START_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => text.trim().parse::<i64>().map_err(|e| Error::Corrupt {
            path: path.clone(),
            position: 0,
            reason: format!("log start offset {text:?}: {e}"),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(Error::io(&path)(e)),
    }
}

impl PartitionLog {
    /// Moves the log start offset up to `offset` (no-op when it is not
    /// above the current one) and deletes the segments wholly below it.
    /// Records below the new log start offset are no longer served.
    /// `offset` must lie within [0, log end offset]; callers bound it by the
    /// high watermark. Returns the log start offset now in force.
    pub fn delete_records_before(&self, offset: i64) -> Result<i64> {
        let moved = {
            let mut state = self.lock();
            self.check_open(&state)?;
            let (start, end) = (state.log_start_offset(), state.active().next_offset());
            if offset < 0 || offset > end {
                return Err(Error::OffsetOutOfRange {
                    offset,
                    log_start_offset: start,
                    log_end_offset: end,
                });
            }
            if offset <= start {
                return Ok(start);
            }
            write_atomically(
                &self.dir.join(LOG_START_FILE),
                offset.to_string().as_bytes(),
            )?;
            state.deleted_before = offset;
            let start = state.log_start_offset();
            self.log_start_offset.store(start, Ordering::Release);
            state.producers.prune_aborted(start);
            start
        };
        info!(
            topic = self.topic,
            partition = self.partition,
            log_start_offset = moved,
            "log start offset moved by DeleteRecords"
        );
        self.enforce_retention(wall_clock_ms())?;
        Ok(moved)
    }
}
