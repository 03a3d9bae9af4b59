//! Hostile clients on the Kafka port (issue: broker hardening). Each test
//! names the attack it makes, speaks raw bytes where a real client would
//! refuse to send the input, and checks that the broker bounds it: other
//! clients are still served, nothing acknowledged is lost, a restart still
//! works, RSS stays bounded.
//!
//! Malformed framing and decoding attacks are in `malformed_input.rs`; the
//! raft and HTTP ports are in `hostile_ports.rs`.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use common::wire::{self, Reply};
use common::Broker;

const REPLY_TIMEOUT: Duration = Duration::from_secs(5);

/// ApiVersions v0 on a fresh connection must be answered within `within`.
fn api_versions_answers(broker: &Broker, within: Duration) -> Result<Duration> {
    let started = Instant::now();
    let mut stream = wire::connect(broker.kafka_addr())?;
    ensure!(wire::send(&mut stream, &wire::api_versions_v0(7))?, "broker closed a fresh connection");
    match wire::read_reply(&mut stream, within)? {
        Reply::Frame(frame) => {
            ensure!(wire::correlation_id(&frame)? == 7, "wrong correlation id");
            Ok(started.elapsed())
        }
        other => bail!("ApiVersions on a second connection: {other:?} within {within:?}"),
    }
}

/// Attack: announce a request as large as the whole produce-memory budget
/// (a 4-byte size prefix) and never send the body. The prefix alone must
/// hold no memory: other connections are served at once. The connection is
/// closed when the body has not arrived within the read timeout.
#[test]
fn size_prefix_without_body_neither_stalls_others_nor_lingers() -> Result<()> {
    let broker = Broker::start(&["--produce-profile", "low-latency", "--request-read-timeout-ms", "1500"])?;
    let mut stalled = Vec::new();
    for _ in 0..4 {
        let mut s = wire::connect(broker.kafka_addr())?;
        // 16 MiB: the low-latency profile's whole budget.
        s.write_all(&(16 * 1024 * 1024i32).to_be_bytes())?;
        // Part of a body, then nothing more.
        s.write_all(&[0u8; 1000])?;
        stalled.push(s);
    }
    let took = api_versions_answers(&broker, Duration::from_secs(2))?;
    ensure!(took < Duration::from_secs(2), "answered only after {took:?}");
    for s in &mut stalled {
        let reply = wire::read_reply(s, Duration::from_secs(6))?;
        ensure!(reply == Reply::Closed, "a stalled request's connection was not closed: {reply:?}");
    }
    let metrics = broker.metrics_text()?;
    ensure!(metrics.contains("reason=\"request_read_timeout\""), "no request_read_timeout close counted");
    Ok(())
}

/// Attack: hold many half-sent large requests at once (each body partly
/// sent, up to more than the budget in total). Bytes held are only those
/// received; other clients still get answers, and RSS stays near the
/// budget.
#[test]
fn many_half_sent_requests_hold_only_what_they_sent() -> Result<()> {
    let broker = Broker::start(&["--produce-profile", "low-latency", "--request-read-timeout-ms", "20000"])?;
    let mut held = Vec::new();
    let chunk = vec![0u8; 256 * 1024];
    for _ in 0..40 {
        let mut s = wire::connect(broker.kafka_addr())?;
        s.write_all(&(8 * 1024 * 1024i32).to_be_bytes())?;
        // 512 KiB each: 20 MiB in total, more than the 16 MiB budget.
        let _ = s.write_all(&chunk);
        let _ = s.write_all(&chunk);
        held.push(s);
    }
    std::thread::sleep(Duration::from_millis(500));
    api_versions_answers(&broker, Duration::from_secs(2)).context("with the budget taken by half-sent bodies")?;
    let rss = broker.rss_bytes()?;
    ensure!(rss < 256 << 20, "RSS {} MiB with 20 MiB half-sent", rss >> 20);
    drop(held);
    api_versions_answers(&broker, Duration::from_secs(2)).context("after the half-sent requests' connections closed")?;
    Ok(())
}

/// Attack: open connections and leave them idle. `connections.max.idle.ms`
/// closes them.
#[test]
fn idle_connections_are_closed_after_connections_max_idle_ms() -> Result<()> {
    let broker = Broker::start(&["--connections-max-idle-ms", "700"])?;
    let mut idle = wire::connect(broker.kafka_addr())?;
    ensure!(wire::send(&mut idle, &wire::api_versions_v0(1))?);
    ensure!(matches!(wire::read_reply(&mut idle, REPLY_TIMEOUT)?, Reply::Frame(_)), "no ApiVersions answer");
    let started = Instant::now();
    let reply = wire::read_reply(&mut idle, Duration::from_secs(5))?;
    ensure!(reply == Reply::Closed, "idle connection still open after {:?}: {reply:?}", started.elapsed());
    Ok(())
}

/// Attack: open more connections from one address than
/// `max.connections.per.ip` allows. The excess ones are closed at once;
/// those within the cap keep working.
#[test]
fn connections_over_max_connections_per_ip_are_closed() -> Result<()> {
    let broker = Broker::start(&["--max-connections-per-ip", "4"])?;
    // /ready and the harness may hold none on the Kafka port.
    let mut within: Vec<_> = (0..4).map(|_| wire::connect(broker.kafka_addr())).collect::<Result<_>>()?;
    for (i, s) in within.iter_mut().enumerate() {
        ensure!(wire::send(s, &wire::api_versions_v0(i as i32))?);
        ensure!(matches!(wire::read_reply(s, REPLY_TIMEOUT)?, Reply::Frame(_)), "connection {i} within the cap not served");
    }
    let mut excess = wire::connect(broker.kafka_addr())?;
    let _ = wire::send(&mut excess, &wire::api_versions_v0(9));
    let reply = wire::read_reply(&mut excess, REPLY_TIMEOUT)?;
    ensure!(reply == Reply::Closed, "the fifth connection from one IP was served: {reply:?}");
    ensure!(broker.metrics_text()?.contains("reason=\"max_connections_per_ip\""), "refusal not counted");
    drop(within.pop());
    // A place is free again (the close is processed asynchronously).
    let deadline = Instant::now() + REPLY_TIMEOUT;
    loop {
        if api_versions_answers(&broker, Duration::from_secs(1)).is_ok() {
            return Ok(());
        }
        ensure!(Instant::now() < deadline, "no connection accepted after one closed");
        std::thread::sleep(Duration::from_millis(100));
    }
}
