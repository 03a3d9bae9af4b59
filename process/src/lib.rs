//! `chronik-process`: the process-wide set-up every Chronik binary's `main`
//! does the same way, defined once (chronik-server, chronik-ingestor,
//! chronik-consumer and chronik-bench share no other crate: the broker does
//! not depend on the harness's rdkafka clients, so this crate depends on
//! nothing of Chronik's and only on tokio and tracing).
//!
//! Layout:
//! - `logging` — the tracing subscriber: stderr, colours only on a
//!   terminal, filtered by an environment variable with a default.
//! - `shutdown` — the future that completes on SIGINT or SIGTERM.
//!
//! Must not: parse arguments, build a runtime or decide exit statuses: each
//! binary's `main` keeps those.

pub mod logging;
pub mod shutdown;

pub use logging::init_tracing;
pub use shutdown::shutdown_signal;
