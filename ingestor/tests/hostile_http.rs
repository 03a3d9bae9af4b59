//! Hostile HTTP clients against the real ingestor binary. `chronik-http`'s
//! own tests cover each bound in depth; these check that the ingestor's
//! flags reach it and that its routes keep their body limit. No broker is
//! needed (librdkafka connects lazily), so the bootstrap is a closed port.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use common::http;
use common::procs::Ingestor;

const NO_BROKER: &str = "127.0.0.1:1";

/// Reads until the server closes the connection (at most `limit`): what it
/// sent and how long that took.
fn until_closed(stream: &TcpStream, limit: Duration) -> Result<(String, Duration)> {
    let started = Instant::now();
    let mut reader = stream.try_clone()?;
    reader.set_read_timeout(Some(limit))?;
    let mut seen = Vec::new();
    let _ = reader.read_to_end(&mut seen);
    Ok((
        String::from_utf8_lossy(&seen).into_owned(),
        started.elapsed(),
    ))
}

/// Writes `bytes` one at a time, `every` apart, on its own thread, until
/// the server stops taking them.
fn drip(stream: &TcpStream, bytes: Vec<u8>, every: Duration) -> Result<thread::JoinHandle<()>> {
    let mut writer = stream.try_clone()?;
    Ok(thread::spawn(move || {
        for byte in bytes {
            if writer.write_all(&[byte]).is_err() {
                return;
            }
            thread::sleep(every);
        }
    }))
}

/// Attack: slowloris, request headers one byte a second. Closed at the
/// header read timeout while /health is answered.
#[test]
fn slowloris_one_byte_a_second_is_cut_off_while_health_answers() -> Result<()> {
    let ingestor = Ingestor::start(NO_BROKER, &["--http-header-read-timeout-ms", "2000"])?;
    let slow = TcpStream::connect(ingestor.http)?;
    let dripping = drip(
        &slow,
        b"GET /health HTTP/1.1\r\nHost: ingestor\r\nUser-Agent: slowloris\r\n\r\n".to_vec(),
        Duration::from_secs(1),
    )?;
    let started = Instant::now();
    ensure!(
        http::get(ingestor.http, "/health")?.status == 200,
        "/health not answered during the attack"
    );
    ensure!(
        started.elapsed() < Duration::from_secs(2),
        "/health took {:?}",
        started.elapsed()
    );
    let (_, held) = until_closed(&slow, Duration::from_secs(20))?;
    ensure!(
        held < Duration::from_secs(4),
        "a slowloris client held its connection {held:?}"
    );
    drop(slow);
    let _ = dripping.join();
    Ok(())
}

/// Attack: a produce body dripped a byte every 100 ms. Refused with 408 at
/// the body read timeout, long before the body could be complete.
#[test]
fn a_dripped_produce_body_is_cut_off_at_the_body_read_timeout() -> Result<()> {
    let ingestor = Ingestor::start(NO_BROKER, &["--http-body-read-timeout-ms", "1000"])?;
    let slow = TcpStream::connect(ingestor.http)?;
    let mut request = b"POST /produce/batch HTTP/1.1\r\nHost: ingestor\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n".to_vec();
    (&slow).write_all(&request)?;
    request.clear();
    request.resize(200, b' ');
    let dripping = drip(&slow, request, Duration::from_millis(100))?;
    let (answer, held) = until_closed(&slow, Duration::from_secs(30))?;
    ensure!(
        held < Duration::from_secs(4),
        "a dripped body held its request {held:?}"
    );
    ensure!(
        answer.starts_with("HTTP/1.1 408") && answer.contains("body_timeout"),
        "a body past its deadline answered {answer:?}"
    );
    drop(slow);
    let _ = dripping.join();
    Ok(())
}

/// Attack: announce a 1 GiB body. Refused with 413 from the headers alone,
/// without waiting for (or buffering) any of it.
#[test]
fn a_declared_oversized_body_is_refused_before_it_is_read() -> Result<()> {
    let ingestor = Ingestor::start(NO_BROKER, &["--max-body-bytes", "65536"])?;
    let stream = TcpStream::connect(ingestor.http)?;
    (&stream).write_all(b"POST /produce/batch HTTP/1.1\r\nHost: ingestor\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n[")?;
    let (answer, held) = until_closed(&stream, Duration::from_secs(10))?;
    ensure!(answer.starts_with("HTTP/1.1 413"), "answered {answer:?}");
    ensure!(held < Duration::from_secs(2), "the 413 took {held:?}");
    Ok(())
}

/// Attack: more connections than `--http-max-connections`. The one past the
/// cap is closed unanswered; the open ones keep being served.
#[test]
fn connections_past_the_cap_are_closed_while_open_ones_work() -> Result<()> {
    let ingestor = Ingestor::start(NO_BROKER, &["--http-max-connections", "2"])?;
    let open = [
        TcpStream::connect(ingestor.http)?,
        TcpStream::connect(ingestor.http)?,
    ];
    for mut stream in &open {
        stream.write_all(b"GET /health HTTP/1.1\r\nHost: ingestor\r\n\r\n")?;
    }
    thread::sleep(Duration::from_millis(200));
    let extra = http::get(ingestor.http, "/health");
    ensure!(
        extra.is_err(),
        "a third connection was served past the cap of 2: {extra:?}"
    );
    for mut stream in &open {
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut buf = [0u8; 4096];
        let n = stream.read(&mut buf)?;
        ensure!(
            buf[..n].starts_with(b"HTTP/1.1 200"),
            "an open connection was not served at the cap"
        );
    }
    Ok(())
}

/// Attack: ask for responses with a tiny receive window and never read
/// them. The ingestor's writes stall; the connection is closed after
/// `--http-write-timeout-ms` and its only place goes to the next client.
#[test]
fn a_client_that_never_reads_is_cut_off() -> Result<()> {
    let ingestor = Ingestor::start(
        NO_BROKER,
        &[
            "--http-max-connections",
            "1",
            "--http-write-timeout-ms",
            "1000",
        ],
    )?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    let stalled = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.set_recv_buffer_size(4096)?;
        socket.connect(ingestor.http).await?.into_std()
    })?;
    stalled.set_nonblocking(false)?;
    stalled.set_write_timeout(Some(Duration::from_secs(2)))?;
    for _ in 0..20_000 {
        if (&stalled)
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: ingestor\r\n\r\n")
            .is_err()
        {
            break;
        }
    }
    let started = Instant::now();
    while http::get(ingestor.http, "/health").is_err() {
        ensure!(
            started.elapsed() < Duration::from_secs(6),
            "a client that never reads held the only place for {:?}",
            started.elapsed()
        );
        thread::sleep(Duration::from_millis(50));
    }
    drop(stalled);
    Ok(())
}
