//! Running CPU-heavy work that must stay in order with the request that
//! needs it (bounded decompression during Produce validation and ListOffsets)
//! without stalling the async worker's other tasks.
//!
//! Owns: `off_worker`. Must not: be used for work that waits on I/O (use
//! `spawn_blocking` for that).

/// Runs `f` on this thread after handing the worker's other tasks to
/// another worker (`block_in_place`), so a connection's request order is
/// kept and other connections are not stalled. Inline on a current-thread
/// runtime, where there is no other worker.
pub fn off_worker<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}
