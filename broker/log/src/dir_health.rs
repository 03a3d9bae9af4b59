//! Whether the data directory can be written: Kafka's offline log
//! directory (`LogDirFailureChannel`), with a way back.
//!
//! Owns: `LogDirHealth` — the directory's online/offline flag, the first
//! failure that took it offline (path and error), and which I/O errors count
//! as a directory failure (`is_dir_failure`). Every partition of the
//! directory shares one; while it is offline, appends and truncations
//! refuse with `Error::LogDirOffline`, and the broker reports the directory
//! to the controller, which moves its leaderships and ISR places away.
//! `LogManager::reopen_dir` brings it back once it is writable again.
//! Must not: decide when to probe (the broker does) or touch files.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use tracing::error;

use crate::error::Error;

/// The data directory's health, shared by every partition in it.
#[derive(Debug, Default)]
pub struct LogDirHealth {
    offline: AtomicBool,
    /// What took it offline (the first failure since it was last online).
    reason: Mutex<Option<String>>,
    /// Times the directory went offline since the process started.
    failures: AtomicU64,
}

impl LogDirHealth {
    /// Whether the directory is offline (lock-free: every append asks).
    pub fn is_offline(&self) -> bool {
        self.offline.load(Ordering::Acquire)
    }

    /// What took the directory offline, while it is.
    pub fn reason(&self) -> Option<String> {
        self.reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many times the directory went offline since the process started.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// Records `error` (met by `what`, e.g. "append"): one that counts as a
    /// directory failure takes the directory offline. Returns whether it
    /// did so now (it was online).
    pub fn record(&self, what: &str, error: &Error) -> bool {
        if !is_dir_failure(error) {
            return false;
        }
        let mut reason = self.reason.lock().unwrap_or_else(PoisonError::into_inner);
        if self.offline.swap(true, Ordering::AcqRel) {
            return false;
        }
        let text = format!("{what}: {error}");
        error!(reason = %text, "log directory offline: its partitions refuse writes until it is writable again");
        *reason = Some(text);
        self.failures.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Takes the directory offline for a failed fsync (`what` names it).
    pub fn fail_fsync(&self, what: &str, error: &Error) {
        // A failed fsync is a directory failure whatever its errno.
        let mut reason = self.reason.lock().unwrap_or_else(PoisonError::into_inner);
        if !self.offline.swap(true, Ordering::AcqRel) {
            let text = format!("fsync of {what} failed: {error}");
            error!(reason = %text, "log directory offline: its partitions refuse writes until it is writable again");
            *reason = Some(text);
            self.failures.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Back online (`LogManager::reopen_dir`, after recovery).
    pub(crate) fn set_online(&self) {
        let mut reason = self.reason.lock().unwrap_or_else(PoisonError::into_inner);
        *reason = None;
        self.offline.store(false, Ordering::Release);
    }
}

/// Whether `error` means the directory cannot be written: any I/O error
/// (ENOSPC, EDQUOT, EIO, EROFS, ...) except running out of file
/// descriptors, which says nothing about the disk.
pub fn is_dir_failure(error: &Error) -> bool {
    matches!(error, Error::Io { .. }) && !error.is_resource_exhaustion()
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::path::PathBuf;

    use super::*;

    fn io_error(errno: i32) -> Error {
        Error::Io {
            path: PathBuf::from("/data/t-0/00000000000000000000.log"),
            source: io::Error::from_raw_os_error(errno),
        }
    }

    #[test]
    fn disk_errors_take_the_directory_offline_once_and_resource_exhaustion_does_not() {
        let health = LogDirHealth::default();
        assert!(!health.record("append", &io_error(24)), "EMFILE");
        assert!(!health.record("append", &Error::ShuttingDown));
        assert!(!health.is_offline());
        assert!(health.record("append", &io_error(28)), "ENOSPC");
        assert!(!health.record("roll", &io_error(5)), "already offline");
        assert!(health.is_offline());
        assert!(health.reason().is_some_and(|r| r.starts_with("append: ")));
        health.set_online();
        assert!(!health.is_offline() && health.reason().is_none());
        health.fail_fsync("t-0", &io_error(5));
        assert!(health.is_offline());
        assert_eq!(health.failures(), 2);
    }
}
