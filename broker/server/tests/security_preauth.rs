//! What a client that never logs in can take from a SASL listener, and what
//! guessing passwords costs: the caps on unauthenticated connections (per
//! IP and in total) hold a TLS flood back while a logged-in rdkafka
//! producer keeps producing; a connection that has not logged in by
//! `--connections-max-unauthenticated-ms` is closed, and one that logs in
//! gives its place back; failed logins for one user name slow that name's
//! next attempt (from any address) and not another user's.

mod common;
mod security_support;

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use common::prom;
use kafka_protocol::messages::ApiVersionsRequest;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use security_support::{connect_from, Certs, Conn, SecureBroker};

/// A broker with SASL_PLAINTEXT and SASL_SSL listeners and PLAIN users
/// alice and bob.
fn sasl_broker(certs: &Certs, extra: &[&str]) -> Result<SecureBroker> {
    std::fs::write(
        certs.path("jaas.conf"),
        "KafkaServer {\n  org.apache.kafka.common.security.plain.PlainLoginModule required\n  \
         user_alice=\"alice-secret\"\n  user_bob=\"bob-secret\";\n};\n",
    )?;
    let mut args = vec![
        "--ssl-keystore-location".to_string(),
        certs.arg("broker.keystore.pem"),
        "--sasl-enabled-mechanisms".into(),
        "PLAIN".into(),
        "--sasl-jaas-config-file".into(),
        certs.arg("jaas.conf"),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    SecureBroker::start("SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0", &args)
}

/// The sum of a metric's samples with `labels`, 0 when absent.
fn metric(broker: &SecureBroker, name: &str, labels: &[(&str, &str)]) -> Result<f64> {
    let addr = broker.metrics.context("no metrics address")?;
    let text = chronik_testkit::http::get(addr, "/metrics")?.text();
    Ok(prom::sum(&prom::parse(&text), name, labels).unwrap_or(0.0))
}

/// A TLS connection from `source` that never logs in: it announces a
/// frame of `sasl.server.max.receive.size` and sends 4 KiB of it. None if
/// the broker closed it before the TLS handshake finished (refused).
fn flood_connection(
    source: IpAddr,
    addr: SocketAddr,
    tls: &std::sync::Arc<rustls::ClientConfig>,
) -> Option<Conn> {
    let socket = connect_from(source, addr).ok()?;
    socket.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut conn = Conn::tls_over(socket.try_clone().ok()?, tls.clone()).ok()?;
    // Later reads only check the connection is still open.
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .ok()?;
    conn.stream
        .write_all(&(512 * 1024 - 4_i32).to_be_bytes())
        .ok()?;
    conn.stream.write_all(&[0u8; 4096]).ok()?;
    conn.stream.flush().ok()?;
    Some(conn)
}

/// 80 TLS connections from two addresses never log in; the caps (16 per
/// IP, 24 in all) accept exactly 24 and close the other 56 at once, each
/// counted by reason. Meanwhile an rdkafka producer logged in with PLAIN
/// over SASL_SSL keeps producing 200 KiB messages (each a frame that must
/// reserve request memory); every one is acknowledged and the slowest
/// acknowledgement is printed. (Before the caps and the separate
/// pre-authentication budget, such a flood held the producer until the
/// 30 s read timeout.)
#[test]
fn unauthenticated_flood_is_capped_while_a_logged_in_producer_produces() -> Result<()> {
    let certs = Certs::make()?;
    let broker = sasl_broker(
        &certs,
        &[
            "--produce-profile",
            "low-latency",
            "--max-unauthenticated-connections",
            "24",
            "--max-unauthenticated-connections-per-ip",
            "16",
            "--connections-max-unauthenticated-ms",
            "60000",
        ],
    )?;
    let addr = broker.addr("SASL_SSL")?;
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", addr.to_string())
        .set("broker.address.family", "v4")
        .set("security.protocol", "SASL_SSL")
        .set("sasl.mechanisms", "PLAIN")
        .set("sasl.username", "alice")
        .set("sasl.password", "alice-secret")
        .set("ssl.ca.location", certs.arg("ca.pem"))
        .set("enable.idempotence", "false")
        .set("acks", "all")
        .set("linger.ms", "0")
        .set("message.max.bytes", "1000000")
        .set("message.timeout.ms", "60000")
        .set("allow.auto.create.topics", "true")
        .create()
        .context("creating the producer")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let value = vec![b'v'; 200 * 1024];
    let produce = |key: String| -> Result<Duration> {
        let started = Instant::now();
        let record = FutureRecord::to("flooded").key(&key).payload(&value);
        runtime
            .block_on(producer.send(record, Duration::from_secs(60)))
            .map_err(|(e, _)| anyhow::anyhow!("produce {key}: {e}"))?;
        Ok(started.elapsed())
    };
    // Logged in and the topic created before the flood starts.
    let first = produce("before".into())?;

    let tls = certs.client_tls(None)?;
    let mut accepted = Vec::new();
    let mut refused = 0;
    for source in ["127.0.0.2", "127.0.0.3"] {
        let source: IpAddr = source.parse()?;
        for _ in 0..40 {
            match flood_connection(source, addr, &tls) {
                Some(conn) => accepted.push(conn),
                None => refused += 1,
            }
        }
    }
    println!(
        "flood: {} connections held, {refused} refused",
        accepted.len()
    );
    let per_ip = metric(
        &broker,
        "chronik_connections_refused_total",
        &[("reason", "max_unauthenticated_connections_per_ip")],
    )?;
    let total = metric(
        &broker,
        "chronik_connections_refused_total",
        &[("reason", "max_unauthenticated_connections")],
    )?;
    ensure!(
        accepted.len() == 24 && refused == 56,
        "the caps (16 per IP, 24 in all) let {} of 80 connections in",
        accepted.len()
    );
    ensure!(
        per_ip == 24.0 && total == 32.0,
        "refusals counted: {per_ip} per IP, {total} in total (expected 24 and 32)"
    );
    broker.wait_for_log("connection refused: cap reached")?;

    let mut slowest = first;
    for i in 0..100 {
        slowest = slowest.max(produce(format!("during-{i}"))?);
    }
    println!("authenticated producer under the flood: 100 acks, slowest {slowest:?}");
    ensure!(
        slowest < Duration::from_secs(15),
        "a logged-in producer waited {slowest:?} for an acknowledgement under the flood"
    );
    ensure!(
        accepted.iter_mut().all(|c| !c.is_closed()),
        "the held flood connections are still open (closed only by the login deadline):\n{}",
        broker.log_tail()
    );
    Ok(())
}

/// A connection that has not logged in within
/// `--connections-max-unauthenticated-ms` is closed (even though it was
/// served ApiVersions, which keeps `connections.max.idle.ms` away); one that
/// logged in stays open and no longer counts against the per-IP cap.
#[test]
fn connections_must_log_in_in_time_and_then_free_their_place() -> Result<()> {
    let certs = Certs::make()?;
    let broker = sasl_broker(
        &certs,
        &[
            "--connections-max-unauthenticated-ms",
            "1500",
            "--max-unauthenticated-connections-per-ip",
            "1",
        ],
    )?;
    let addr = broker.addr("SASL_PLAINTEXT")?;
    let mut logged_in = Conn::plain(addr)?;
    ensure!(
        logged_in.login_plain("alice", "alice-secret")?.error_code == 0,
        "alice logs in"
    );
    // alice's place was given back: another unauthenticated one fits.
    let mut idle = Conn::plain(addr)?;
    idle.send(&ApiVersionsRequest::default(), 3)?;
    let started = Instant::now();
    ensure!(
        idle.is_closed(),
        "a connection that never logs in is closed"
    );
    let after = started.elapsed();
    println!("unauthenticated connection closed {after:?} after ApiVersions");
    ensure!(
        after >= Duration::from_millis(700) && after < Duration::from_secs(15),
        "closed after {after:?}, not by the 1.5 s login deadline"
    );
    ensure!(
        metric(
            &broker,
            "chronik_connections_closed_on_error_total",
            &[("reason", "unauthenticated_timeout")],
        )? == 1.0,
        "the close is counted"
    );
    broker.wait_for_log("not authenticated in time")?;
    ensure!(
        logged_in.metadata().is_ok(),
        "the logged-in connection outlives the login deadline"
    );
    Ok(())
}

/// Failed logins for one name slow that name's next attempt, from any
/// connection, while another user logs in at once; the failure is logged
/// with the name and the peer address, never the password; a successful
/// login resets the back-off.
#[test]
fn failed_logins_slow_that_user_only() -> Result<()> {
    let certs = Certs::make()?;
    let broker = sasl_broker(
        &certs,
        &[
            "--connection-failed-authentication-delay-ms",
            "0",
            "--failed-authentication-backoff-ms",
            "400",
            "--failed-authentication-backoff-max-ms",
            "3000",
        ],
    )?;
    let addr = broker.addr("SASL_PLAINTEXT")?;
    let login = |user: &str, password: &str| -> Result<(i16, Duration)> {
        let mut conn = Conn::plain(addr)?;
        let started = Instant::now();
        let answer = conn.login_plain(user, password)?;
        Ok((answer.error_code, started.elapsed()))
    };
    let mut waits = Vec::new();
    for _ in 0..4 {
        let (code, took) = login("alice", "guess-123")?;
        ensure!(code != 0, "a wrong password is refused");
        waits.push(took);
    }
    println!("alice's 4 wrong passwords answered after {waits:?}");
    // Right after the 4th failure alice's back-off is 3 s (400 ms doubled
    // three times, capped); bob's is nothing.
    let bob = std::thread::spawn(move || {
        let mut conn = Conn::plain(addr)?;
        let started = Instant::now();
        let answer = conn.login_plain("bob", "bob-secret")?;
        anyhow::Ok((answer.error_code, started.elapsed()))
    });
    let (alice_code, alice_took) = login("alice", "alice-secret")?;
    let (bob_code, bob_took) = bob.join().map_err(|_| anyhow::anyhow!("bob panicked"))??;
    println!("next login: alice {alice_took:?}, bob {bob_took:?}");
    ensure!(alice_code == 0 && bob_code == 0, "both log in");
    ensure!(
        alice_took >= Duration::from_millis(2000),
        "alice's login after 4 failures was answered after {alice_took:?}, not held back"
    );
    ensure!(
        bob_took < alice_took / 2,
        "bob ({bob_took:?}) was slowed like alice ({alice_took:?})"
    );
    let (code, again) = login("alice", "alice-secret")?;
    ensure!(
        code == 0 && again < alice_took / 2,
        "the login reset alice's back-off ({again:?})"
    );
    let log = broker.log();
    ensure!(
        log.contains("SASL authentication failed")
            && log.contains("user=alice")
            && log.contains("peer=127.0.0.1:")
            && log.contains("failures=4"),
        "the failure is logged with the name, the peer and the count:\n{}",
        broker.log_tail()
    );
    ensure!(!log.contains("guess-123"), "a password reached the log");
    Ok(())
}
