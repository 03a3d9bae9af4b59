//! Test support shared by the ingestor's integration tests: the real broker
//! and ingestor as child processes, a tiny HTTP client, and Kafka read-back.
#![allow(dead_code)]

pub use chronik_testkit::http;
pub mod kafka;
pub mod procs;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value;

/// Polls `GET path` until `done(json)` holds.
pub fn poll_json(
    addr: SocketAddr,
    path: &str,
    timeout: Duration,
    done: impl Fn(&Value) -> bool,
) -> Result<Value> {
    let deadline = Instant::now() + timeout;
    loop {
        let last = http::get(addr, path).and_then(|r| r.json());
        if let Ok(v) = &last {
            if done(v) {
                return Ok(v.clone());
            }
        }
        if Instant::now() > deadline {
            bail!("GET {path}: condition not met within {timeout:?}; last: {last:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// (status, the whole response) of a raw HTTP/1.1 response read to its end.
pub fn status_of(raw: String) -> Result<(u16, String)> {
    let status = raw
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("no status in {raw:?}"))?;
    Ok((status, raw))
}

/// The value of an un-labelled metric sample in Prometheus text.
pub fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
    })
}
