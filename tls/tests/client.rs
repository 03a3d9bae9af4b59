//! `TlsClient` (a client without a server key store) and the server's own
//! outgoing connections (`TlsAcceptor::connect`, built by the same code)
//! against a `TlsAcceptor` that requires client certificates, on the test
//! certificates of `scripts/make-certs.sh`.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{ensure, Result};
use chronik_testkit::certs::Certs;
use chronik_tls::{ClientAuth, TlsAcceptor, TlsClient, TlsSettings};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const TIMEOUT: Duration = Duration::from_secs(10);

/// An mTLS echo server (`--ssl-client-auth required`) on 127.0.0.1.
async fn echo_server(certs: &Certs) -> Result<(SocketAddr, Arc<TlsAcceptor>)> {
    let acceptor = TlsAcceptor::load(TlsSettings {
        keystore: certs.path("broker.keystore.pem"),
        truststore: Some(certs.path("ca.pem")),
        client_auth: ClientAuth::Required,
        reload_interval: Duration::from_secs(3600),
        handshake_timeout: TIMEOUT,
    })?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = acceptor.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let server = server.clone();
            tokio::spawn(async move {
                if let Ok(mut tls) = server.accept(stream).await {
                    let mut buf = [0u8; 5];
                    if tls.read_exact(&mut buf).await.is_ok() {
                        let _ = tls.write_all(&buf).await;
                        let _ = tls.flush().await;
                    }
                }
            });
        }
    });
    Ok((addr, acceptor))
}

async fn echo<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S) -> Result<()> {
    stream.write_all(b"hello").await?;
    stream.flush().await?;
    let mut buf = [0u8; 5];
    tokio::time::timeout(TIMEOUT, stream.read_exact(&mut buf)).await??;
    ensure!(&buf == b"hello", "echoed {buf:?}");
    Ok(())
}

async fn round_trip(client: &TlsClient, addr: SocketAddr, host: &str) -> Result<()> {
    let stream = TcpStream::connect(addr).await?;
    echo(client.connect(stream, host).await?).await
}

#[tokio::test]
async fn tls_client_speaks_to_an_mtls_listener_by_ip_literal() -> Result<()> {
    let certs = Certs::make()?;
    let (addr, acceptor) = echo_server(&certs).await?;
    let identity = Some((certs.path("client.pem"), certs.path("client.key")));
    let identity_ref = identity.as_ref().map(|(c, k)| (c.as_path(), k.as_path()));
    let client = TlsClient::load(&certs.path("ca.pem"), identity_ref, TIMEOUT)?;
    round_trip(&client, addr, "127.0.0.1").await?;

    // The broker's own outgoing connections: the same client code with
    // the key store as client certificate.
    echo(
        acceptor
            .connect(TcpStream::connect(addr).await?, "127.0.0.1")
            .await?,
    )
    .await?;

    // Without a client certificate the listener refuses (in TLS 1.3 the
    // client learns it on its first read).
    let anonymous = TlsClient::load(&certs.path("ca.pem"), None, TIMEOUT)?;
    assert!(round_trip(&anonymous, addr, "127.0.0.1").await.is_err());

    // A name the server certificate does not carry, and a CA that did not
    // sign it, fail the handshake.
    assert!(round_trip(&client, addr, "wrong.example").await.is_err());
    let foreign = TlsClient::load(&certs.path("foreign-ca.pem"), identity_ref, TIMEOUT)?;
    assert!(round_trip(&foreign, addr, "127.0.0.1").await.is_err());
    Ok(())
}

#[test]
fn tls_client_load_refuses_bad_files() -> Result<()> {
    let certs = Certs::make()?;
    let ca = certs.path("ca.pem");
    let load = |ca: &Path, identity: Option<(&str, &str)>| {
        let paths = identity.map(|(c, k)| (certs.path(c), certs.path(k)));
        TlsClient::load(
            ca,
            paths.as_ref().map(|(c, k)| (c.as_path(), k.as_path())),
            TIMEOUT,
        )
    };
    assert!(load(&certs.path("missing.pem"), None).is_err());
    assert!(
        load(&certs.path("client.key"), None).is_err(),
        "no CA certificate"
    );
    assert!(load(&ca, Some(("client.pem", "foreign-client.key"))).is_err());
    assert!(load(&ca, Some(("client.key", "client.key"))).is_err());
    assert!(load(&ca, Some(("client.pem", "client.pem"))).is_err());
    load(&ca, Some(("client.pem", "client.key")))?;
    Ok(())
}
