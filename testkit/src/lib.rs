//! What the workspace's integration tests share, defined once.
//!
//! Layout:
//! - `server`  — the real `chronik-server` binary as a child process: found
//!   (or built once), started on 127.0.0.1 port 0 with a temp data dir or on
//!   fixed addresses / in a network namespace, readiness polling, SIGTERM /
//!   SIGKILL / SIGSTOP, restarts, CPU and RSS probes.
//! - `cluster` — several of those as one cluster: node N on 127.0.0.N, the
//!   same ports on every node, started together, killed and restarted by id.
//! - `process` — a guard for any child process: stdout lines collected,
//!   stderr in a log file, bounded waits, killed on drop.
//! - `http`    — a minimal blocking HTTP/1.1 client (GET, POST JSON).
//! - `certs`   — test certificates from `scripts/make-certs.sh`.
//!
//! Nothing here asserts on behaviour: helpers return what they saw and the
//! tests decide.

pub mod certs;
pub mod cluster;
pub mod http;
pub mod process;
pub mod server;

pub use cluster::Cluster;
pub use process::Proc;
pub use server::Broker;
