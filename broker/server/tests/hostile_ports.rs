//! Hostile clients on the broker's other ports: the metrics HTTP port
//! (served by `chronik-http`) and, in cluster mode, the raft/controller
//! port. Each test names the attack, speaks raw bytes to the real binary
//! and checks that the port bounds it while honest clients are served.
//! The raft port's handshake, admission pools and frame deadlines are
//! tested in depth in `broker/metadata/tests/hostile_raft.rs`; here only
//! what the binary adds (the secret file, the default bind).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use common::{http, Broker};

/// How long an honest request may take while an attack runs.
const PROMPT: Duration = Duration::from_secs(2);

/// GET `path` on a fresh connection; fails when not answered 200 within `PROMPT`.
fn answered_promptly(addr: SocketAddr, path: &str) -> Result<()> {
    let started = Instant::now();
    let response = http::get(addr, path)?;
    ensure!(
        response.status == 200,
        "GET {path} answered {}",
        response.status
    );
    ensure!(
        started.elapsed() < PROMPT,
        "GET {path} took {:?} while under attack",
        started.elapsed()
    );
    Ok(())
}

/// One keep-alive HTTP/1.1 request on an open connection: the status line
/// and headers, read until the end of a `Content-Length` body.
fn get_keep_alive(stream: &mut TcpStream, path: &str) -> Result<String> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: chronik\r\n\r\n")?;
    let mut seen = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = stream.read(&mut buf)?;
        ensure!(n > 0, "connection closed before a response to {path}");
        seen.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&seen);
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().to_string())
                })
                .context("no content-length")?
                .parse::<usize>()?;
            if seen.len() >= end + 4 + length {
                return Ok(text[..end].to_string());
            }
        }
    }
}

/// Seconds from now until the server closes `stream` (read sees EOF or an
/// error), at most `limit`.
fn closed_within(stream: &TcpStream, limit: Duration) -> Result<Duration> {
    let started = Instant::now();
    let mut reader = stream.try_clone()?;
    reader.set_read_timeout(Some(limit))?;
    let mut sink = Vec::new();
    let _ = reader.read_to_end(&mut sink);
    Ok(started.elapsed())
}

/// Attack: slowloris — request headers sent one byte a second, never
/// finished. The connection is closed at the header read timeout (long
/// before the headers could be complete) while /health and /metrics on
/// other connections are answered at once.
#[test]
fn metrics_port_slowloris_one_byte_a_second_is_cut_off() -> Result<()> {
    let broker = Broker::start(&["--http-header-read-timeout-ms", "2000"])?;
    let slow = TcpStream::connect(broker.metrics_addr())?;
    let mut dripper = slow.try_clone()?;
    let drip = std::thread::spawn(move || {
        for byte in b"GET /metrics HTTP/1.1\r\nHost: chronik\r\nUser-Agent: slowloris\r\n\r\n" {
            if dripper.write_all(&[*byte]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    std::thread::sleep(Duration::from_millis(500));
    answered_promptly(broker.metrics_addr(), "/health")?;
    answered_promptly(broker.metrics_addr(), "/metrics")?;
    let held = closed_within(&slow, Duration::from_secs(20))?;
    ensure!(
        held < Duration::from_secs(4),
        "a slowloris client held its connection {held:?} past a 2 s header timeout"
    );
    drop(slow);
    let _ = drip.join();
    Ok(())
}

/// Attack: more connections than `--http-max-connections`. The ones past
/// the cap are closed unanswered; the open ones keep being served, and a
/// place freed is taken by the next client.
#[test]
fn metrics_port_connections_past_the_cap_are_closed_while_open_ones_work() -> Result<()> {
    let broker = Broker::start(&["--http-max-connections", "4"])?;
    // The readiness probe's connection may still hold a place for a moment
    // after the probe closed it: a connection refused then is tried again.
    let mut open = Vec::new();
    for _ in 0..4 {
        let started = Instant::now();
        let stream = loop {
            let mut stream = TcpStream::connect(broker.metrics_addr())?;
            match get_keep_alive(&mut stream, "/health") {
                Ok(response) if response.contains("200") => break stream,
                other => ensure!(
                    started.elapsed() < PROMPT,
                    "connection {} of 4 was not served: {other:?}",
                    open.len() + 1
                ),
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        open.push(stream);
    }
    let extra = http::get(broker.metrics_addr(), "/metrics");
    ensure!(
        extra.is_err(),
        "a fifth connection was served past --http-max-connections 4: {extra:?}"
    );
    for stream in &mut open {
        ensure!(
            get_keep_alive(stream, "/metrics")?.contains("200"),
            "an open connection stopped being served at the cap"
        );
    }
    drop(open.pop());
    let started = Instant::now();
    while http::get(broker.metrics_addr(), "/health").is_err() {
        ensure!(
            started.elapsed() < PROMPT,
            "a freed place was not given to the next client"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Attack: keep-alive hoarding — connections left open and silent after a
/// request. Closed once idle for the header read timeout.
#[test]
fn metrics_port_idle_keep_alive_connections_are_closed() -> Result<()> {
    let broker = Broker::start(&["--http-header-read-timeout-ms", "1000"])?;
    let mut idle = TcpStream::connect(broker.metrics_addr())?;
    ensure!(get_keep_alive(&mut idle, "/health")?.contains("200"));
    let held = closed_within(&idle, Duration::from_secs(20))?;
    ensure!(
        held < Duration::from_secs(3),
        "an idle keep-alive connection was held {held:?}"
    );
    Ok(())
}

/// Attack: pipeline requests for /metrics with a tiny receive window and
/// never read the answers. The broker's writes stall; the connection is
/// closed after `--http-write-timeout-ms` and the only place under the cap
/// goes to the next client.
#[test]
fn metrics_port_client_that_never_reads_is_cut_off() -> Result<()> {
    let broker = Broker::start(&[
        "--http-max-connections",
        "1",
        "--http-write-timeout-ms",
        "1000",
    ])?;
    let stalled = tiny_window_connect(broker.metrics_addr())?;
    let mut writer = stalled.try_clone()?;
    writer.set_write_timeout(Some(Duration::from_secs(2)))?;
    // Write until the broker stops reading or the requests would be plenty.
    for _ in 0..5_000 {
        if writer
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: chronik\r\n\r\n")
            .is_err()
        {
            break;
        }
    }
    let started = Instant::now();
    while http::get(broker.metrics_addr(), "/health").is_err() {
        ensure!(
            started.elapsed() < Duration::from_secs(6),
            "a client that never reads held the only metrics connection for {:?}",
            started.elapsed()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(stalled);
    Ok(())
}

/// A connection whose receive buffer is as small as the kernel allows, so
/// that responses back up into the broker quickly.
fn tiny_window_connect(addr: SocketAddr) -> Result<TcpStream> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    let stream = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.set_recv_buffer_size(4096)?;
        socket.connect(addr).await
    })?;
    let stream = stream.into_std()?;
    stream.set_nonblocking(false)?;
    Ok(stream)
}

/// A cluster-mode node started without `--cluster-secret-file` creates a
/// random secret in its data dir, readable by its owner only, and says
/// loudly that its peers must share it; the raft port then refuses a
/// heartbeat sent without the handshake (an attacker registering a broker
/// at its own host).
#[test]
fn cluster_node_without_a_secret_file_creates_one_and_refuses_strangers() -> Result<()> {
    // Cluster mode wants fixed ports (below the ephemeral range, as the
    // cluster harness picks them).
    let free_port = common::cluster::free_port;
    let raft_listen = format!("127.0.0.1:{}", free_port()?);
    let (listen, metrics_listen) = (
        format!("127.0.0.1:{}", free_port()?),
        format!("127.0.0.1:{}", free_port()?),
    );
    let mut broker = Broker::spawn_at(
        &listen,
        &metrics_listen,
        &[
            "--node-id",
            "1",
            "--peers",
            "1@127.0.0.1",
            "--raft-listen",
            &raft_listen,
        ],
    )?;
    broker.finish_start()?;
    let secret = broker.data_dir().join("cluster.secret");
    let meta = std::fs::metadata(&secret)
        .with_context(|| format!("{} was not created", secret.display()))?;
    use std::os::unix::fs::PermissionsExt;
    ensure!(
        meta.permissions().mode() & 0o777 == 0o600,
        "cluster.secret has mode {:o}",
        meta.permissions().mode() & 0o777
    );
    ensure!(
        meta.len() >= 16,
        "cluster.secret holds only {} bytes",
        meta.len()
    );
    let log = broker.log_tail(400);
    // A quorum of one has no peers to share it with: logged, not warned.
    ensure!(
        log.contains("created the cluster secret"),
        "the new secret is not logged:\n{log}"
    );

    let mut stranger = TcpStream::connect(raft_listen.as_str())?;
    let heartbeat = br#"{"Controller":{"Heartbeat":{"node_id":9,"host":"10.6.6.6","port":9092}}}"#;
    let mut frame = u32::try_from(heartbeat.len())?.to_be_bytes().to_vec();
    frame.extend_from_slice(heartbeat);
    let _ = stranger.write_all(&frame);
    stranger.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut answer = Vec::new();
    let _ = stranger.read_to_end(&mut answer);
    // All a stranger ever gets is the server's 32-byte nonce and (unless
    // a reset overtakes it) the 32-byte refusal, never a frame.
    ensure!(
        answer.len() <= 32
            || (answer.len() == 64 && answer[32..].starts_with(b"chronik-refused\0")),
        "a stranger got {} bytes from the raft port",
        answer.len()
    );
    let metadata = common::kafka_client::Client::connect(&broker)?
        .send(&kafka_protocol::messages::MetadataRequest::default(), 12)?;
    let brokers: Vec<(i32, String)> = metadata
        .brokers
        .iter()
        .map(|b| (b.node_id.0, b.host.to_string()))
        .collect();
    ensure!(
        brokers == [(1, "127.0.0.1".to_string())],
        "Metadata lists {brokers:?} after a stranger's heartbeat"
    );
    Ok(())
}
