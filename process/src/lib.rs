//! `chronik-process`: the process-wide set-up every Chronik binary's `main`
//! does the same way, defined once (chronik-server, chronik-ingestor,
//! chronik-consumer and chronik-bench share no other crate: the broker does
//! not depend on the harness's rdkafka clients, so this crate depends on
//! nothing of Chronik's and only on tokio and tracing).
//!
//! Layout:
//! - `logging` — the tracing subscriber: stderr, colours only on a
//!   terminal, filtered by an environment variable with a default; the
//!   effective configuration logged at start.
//! - `shutdown` — the future that completes on SIGINT or SIGTERM.
//! - `runtime` — the multi-threaded tokio runtime `main` blocks on.
//!
//! Must not: parse arguments or decide exit statuses: each binary's `main`
//! keeps those.

pub mod logging;
pub mod runtime;
pub mod shutdown;

pub use logging::{effective_config, init_tracing};
pub use runtime::runtime;
pub use shutdown::shutdown_signal;
