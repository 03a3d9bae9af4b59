//! The ingestor's HTTPS port on the real binary (`--ssl-keystore-location`,
//! mTLS with `--ssl-truststore-location` and `--ssl-client-auth required`,
//! the bearer token on top): a client with the CA, its certificate and the
//! token is served; without the token it gets 401; without a certificate,
//! with a foreign CA's or an expired one the handshake fails; plaintext
//! HTTP and garbage to the TLS port close only that connection, and the
//! next client is served. `--metrics-listen` stays plain HTTP. No broker is
//! needed (librdkafka connects lazily).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use chronik_testkit::certs::Certs;
use common::procs::Ingestor;
use common::status_of;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

const NO_BROKER: &str = "127.0.0.1:1";
const TOKEN: &str = "tls-test-token-0123456789";

/// A TLS client config trusting the test CA, presenting `client`'s
/// certificate (`client.pem` / `client.key`) if named.
fn client_config(certs: &Certs, client: Option<&str>) -> Result<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_file(certs.path("ca.pem"))?)?;
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots);
    Ok(Arc::new(match client {
        Some(name) => builder.with_client_auth_cert(
            vec![CertificateDer::from_pem_file(
                certs.path(&format!("{name}.pem")),
            )?],
            PrivateKeyDer::from_pem_file(certs.path(&format!("{name}.key")))?,
        )?,
        None => builder.with_no_client_auth(),
    }))
}

/// GET `path` over TLS; the status, or an error when the handshake or the
/// connection fails.
fn https_get(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    path: &str,
    token: Option<&str>,
) -> Result<(u16, String)> {
    let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    let name = ServerName::try_from("127.0.0.1")?.to_owned();
    let conn = rustls::ClientConnection::new(config, name)?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let mut head = format!("GET {path} HTTP/1.1\r\nHost: ingestor\r\nConnection: close\r\n");
    if let Some(t) = token {
        head.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    head.push_str("\r\n");
    tls.write_all(head.as_bytes())?;
    let mut raw = Vec::new();
    // A close without close_notify after the response is fine here.
    match tls.read_to_end(&mut raw) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => {}
        Err(e) => return Err(e).context("reading the response"),
    }
    let raw = String::from_utf8_lossy(&raw).into_owned();
    status_of(raw)
}

/// Sends `bytes` in the clear and reads what comes back until close.
fn send_raw(addr: SocketAddr, bytes: &[u8]) -> Result<Vec<u8>> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(15)))?;
    s.write_all(bytes)?;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    Ok(out)
}

#[test]
fn https_with_mtls_and_token() -> Result<()> {
    let certs = Certs::make()?;
    let token = tempfile::NamedTempFile::new()?;
    std::fs::write(token.path(), format!("{TOKEN}\n"))?;
    let ingestor = Ingestor::start(
        NO_BROKER,
        &[
            "--ssl-keystore-location",
            &certs.arg("broker.keystore.pem"),
            "--ssl-truststore-location",
            &certs.arg("ca.pem"),
            "--ssl-client-auth",
            "required",
            "--auth-token-file",
            token.path().to_str().context("temp path")?,
            "--metrics-listen",
            "127.0.0.1:0",
        ],
    )?;
    let with_cert = client_config(&certs, Some("client"))?;

    let (status, raw) = https_get(ingestor.http, with_cert.clone(), "/ledger", Some(TOKEN))?;
    ensure!(status == 200, "/ledger with certificate and token: {raw}");
    ensure!(raw.contains("acknowledged_count"), "/ledger body: {raw}");
    let (status, raw) = https_get(ingestor.http, with_cert.clone(), "/ledger", None)?;
    ensure!(status == 401, "/ledger without the token: {raw}");

    for (what, config) in [
        ("no client certificate", client_config(&certs, None)?),
        (
            "a foreign CA's certificate",
            client_config(&certs, Some("foreign-client"))?,
        ),
        (
            "an expired certificate",
            client_config(&certs, Some("expired-client"))?,
        ),
    ] {
        let got = https_get(ingestor.http, config, "/ledger", Some(TOKEN));
        ensure!(got.is_err(), "{what} was served: {got:?}");
    }

    // plaintext HTTP and garbage to the TLS port: no HTTP answer, and the
    // next client is served
    let plain = send_raw(
        ingestor.http,
        b"GET /ledger HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )?;
    ensure!(
        !String::from_utf8_lossy(&plain).contains("HTTP/1.1 200"),
        "plaintext HTTP was answered: {plain:?}"
    );
    let _ = send_raw(ingestor.http, &[0x16, 0x03, 0x01, 0xff, 0xff, 0x00, 0x00])?;
    let (status, raw) = https_get(ingestor.http, with_cert, "/health", None)?;
    ensure!(status == 200, "/health after hostile input: {raw}");

    // the metrics listener stays plain HTTP
    let metrics = ingestor.metrics.context("no metrics= address")?;
    let health = send_raw(
        metrics,
        b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )?;
    ensure!(
        String::from_utf8_lossy(&health).starts_with("HTTP/1.1 200"),
        "/health on the metrics listener: {:?}",
        String::from_utf8_lossy(&health)
    );
    Ok(())
}

#[test]
fn client_auth_without_a_trust_store_is_refused_at_start() -> Result<()> {
    let certs = Certs::make()?;
    let started = Ingestor::start(
        NO_BROKER,
        &[
            "--ssl-keystore-location",
            &certs.arg("broker.keystore.pem"),
            "--ssl-client-auth",
            "required",
        ],
    );
    ensure!(
        started.is_err(),
        "started without --ssl-truststore-location"
    );
    Ok(())
}
