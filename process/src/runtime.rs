//! The tokio runtime a Chronik binary's `main` blocks on: multi-threaded,
//! with I/O, timers and signals enabled (the shutdown signal needs them).
//! Must not: be built inside another runtime.

use tokio::runtime::Runtime;

/// A multi-threaded runtime with every driver enabled; `worker_threads`
/// caps its workers (`None`: tokio's default, one per core).
pub fn runtime(worker_threads: Option<usize>) -> std::io::Result<Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = worker_threads {
        builder.worker_threads(n);
    }
    builder.enable_all().build()
}
