//! The ingestor's HTTP authentication on the real binary: with
//! `--auth-token-file`, every route but /health and /ready answers 401
//! `unauthorized` (with `WWW-Authenticate: Bearer`) unless the request
//! carries `Authorization: Bearer <token>`; a wrong or missing token gets
//! the same answer. `--metrics-listen` serves /metrics, /health and /ready
//! on a second address without a token, and nothing else there. No broker
//! is needed (librdkafka connects lazily), so the bootstrap is a closed port.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use common::procs::Ingestor;
use common::status_of;

const NO_BROKER: &str = "127.0.0.1:1";
const TOKEN: &str = "s3cret-token-0123456789";

/// One HTTP/1.1 request with optional extra header lines; (status, whole response).
fn call(addr: SocketAddr, method: &str, path: &str, headers: &[&str]) -> Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: ingestor\r\nConnection: close\r\nContent-Length: 0\r\n"
    );
    for h in headers {
        head.push_str(h);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw)?;
    status_of(raw)
}

fn token_file() -> Result<tempfile::NamedTempFile> {
    let mut f = tempfile::NamedTempFile::new()?;
    writeln!(f, "{TOKEN}")?;
    Ok(f)
}

#[test]
fn every_route_but_the_probes_needs_the_bearer_token() -> Result<()> {
    let file = token_file()?;
    let path = file.path().to_str().context("temp path")?;
    let ingestor = Ingestor::start(NO_BROKER, &["--auth-token-file", path])?;
    let good = format!("Authorization: Bearer {TOKEN}");
    for (method, route) in [
        ("GET", "/metrics"),
        ("GET", "/ledger"),
        ("POST", "/produce"),
        ("POST", "/produce/batch"),
        ("POST", "/produce/fire/batch"),
    ] {
        for headers in [
            vec![],
            vec!["Authorization: Bearer wrong-token-0123456789"],
            vec!["Authorization: Basic dXNlcjpwYXNz"],
        ] {
            let (status, raw) = call(ingestor.http, method, route, &headers)?;
            ensure!(
                status == 401,
                "{method} {route} with {headers:?}: {status}\n{raw}"
            );
            ensure!(
                raw.contains("\"unauthorized\""),
                "{method} {route}: body {raw}"
            );
            ensure!(
                raw.to_ascii_lowercase()
                    .contains("www-authenticate: bearer"),
                "{method} {route}: {raw}"
            );
        }
    }
    let (status, _) = call(ingestor.http, "GET", "/metrics", &[&good])?;
    ensure!(status == 200, "/metrics with the token: {status}");
    let (status, _) = call(ingestor.http, "GET", "/ledger", &[&good])?;
    ensure!(status == 200, "/ledger with the token: {status}");
    // with the token a produce gets past authentication (415: no JSON content type)
    let (status, _) = call(ingestor.http, "POST", "/produce", &[&good])?;
    ensure!(status == 415, "/produce with the token: {status}");
    for probe in ["/health", "/ready"] {
        let (status, _) = call(ingestor.http, "GET", probe, &[])?;
        ensure!(status != 401, "{probe} must not need a token: {status}");
    }
    Ok(())
}

#[test]
fn the_metrics_listener_serves_only_metrics_and_probes_without_a_token() -> Result<()> {
    let file = token_file()?;
    let path = file.path().to_str().context("temp path")?;
    let ingestor = Ingestor::start(
        NO_BROKER,
        &["--auth-token-file", path, "--metrics-listen", "127.0.0.1:0"],
    )?;
    let metrics = ingestor
        .metrics
        .context("no metrics= on the LISTENING line")?;
    ensure!(metrics != ingestor.http);
    let (status, raw) = call(metrics, "GET", "/metrics", &[])?;
    ensure!(
        status == 200 && raw.contains("# TYPE"),
        "/metrics on the metrics listener: {status}"
    );
    let (status, _) = call(metrics, "GET", "/health", &[])?;
    ensure!(status == 200, "/health: {status}");
    for (method, route) in [("GET", "/ledger"), ("POST", "/produce/batch")] {
        let (status, _) = call(metrics, method, route, &[])?;
        ensure!(
            status == 404,
            "{method} {route} on the metrics listener: {status}"
        );
    }
    let (status, _) = call(ingestor.http, "GET", "/metrics", &[])?;
    ensure!(
        status == 401,
        "/metrics on the main listener still needs the token: {status}"
    );
    Ok(())
}

#[test]
fn a_short_token_is_refused_at_start() -> Result<()> {
    let mut f = tempfile::NamedTempFile::new()?;
    writeln!(f, "short")?;
    let path = f.path().to_str().context("temp path")?;
    ensure!(
        Ingestor::start(NO_BROKER, &["--auth-token-file", path]).is_err(),
        "an ingestor started with a 5-character token"
    );
    Ok(())
}
