//! Both transports against each other over real TCP on 127.0.0.1, with
//! the test certificates (scripts/make-certs.sh): mutual TLS carries the
//! handshake; every mismatch (cleartext against TLS either way, a
//! certificate the other side does not trust) fails on both ends, each
//! naming the cause.

use chronik_testkit::certs::Certs;
use chronik_tls::TlsSettings;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use super::*;
use crate::peer_auth::{client_handshake, server_handshake, ClusterSecret};

fn ssl(certs: &Certs, keystore: &str) -> ControllerSecurity {
    ControllerSecurity::ssl(&TlsSettings {
        keystore: certs.path(keystore),
        truststore: Some(certs.path("ca.pem")),
        client_auth: ClientAuth::None, // the raft port requires certificates anyway
        reload_interval: std::time::Duration::from_secs(3600),
        handshake_timeout: HANDSHAKE_TIMEOUT,
    })
    .expect("TLS loads")
}

/// One connection: the server side's and the client side's outcome.
async fn connect_pair(
    server: &ControllerSecurity,
    client: &ControllerSecurity,
) -> (Result<(), HandshakeError>, Result<i32, HandshakeError>) {
    let secret = ClusterSecret::from_bytes(b"0123456789abcdef");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let server = server.clone();
    let server_secret = secret.clone();
    let accepted = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.expect("accept");
        let mut stream = accept(&server, stream).await?;
        server_handshake(&mut stream, &server_secret, &|_| true).await
    });
    let tcp = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let client = async {
        let mut stream = connect(client, tcp, &addr).await?;
        client_handshake(&mut stream, &secret, 2).await?;
        // A frame's worth of bytes goes through, then the stream closes.
        stream
            .write_all(b"frame")
            .await
            .map_err(|error| HandshakeError::Io {
                step: Step::ServerAnswer,
                error,
            })?;
        Ok(())
    }
    .await;
    (client, accepted.await.expect("server task"))
}

#[tokio::test]
async fn mutual_tls_carries_the_cluster_secret_handshake() {
    let certs = Certs::make().expect("certs");
    let tls = ssl(&certs, "broker.keystore.pem");
    let (client, server) = connect_pair(&tls, &tls).await;
    client.expect("client");
    assert_eq!(server.expect("server"), 2);
    let plain = ControllerSecurity::Plaintext;
    let (client, server) = connect_pair(&plain, &plain).await;
    client.expect("cleartext client");
    assert_eq!(server.expect("cleartext server"), 2);
}

#[tokio::test]
async fn a_cleartext_client_on_a_tls_raft_port_is_refused_and_both_ends_say_why() {
    let certs = Certs::make().expect("certs");
    let (client, server) = connect_pair(
        &ssl(&certs, "broker.keystore.pem"),
        &ControllerSecurity::Plaintext,
    )
    .await;
    let server = server.expect_err("a cleartext client accepted");
    assert!(
        matches!(server, HandshakeError::CleartextPeer { node_id: 2 }),
        "{server:?}"
    );
    assert!(server.is_refusal() && !server.is_routine());
    assert!(server.to_string().contains("requires TLS"), "{server}");
    let client = client.expect_err("the client went on");
    assert!(
        matches!(client, HandshakeError::Refused(RefusalReason::TlsRequired)),
        "{client:?}"
    );
    assert!(
        client
            .to_string()
            .contains("--controller-listener-security-protocol"),
        "{client}"
    );
}

#[tokio::test]
async fn a_tls_client_on_a_cleartext_raft_port_is_refused_and_both_ends_say_why() {
    let certs = Certs::make().expect("certs");
    let (client, server) = connect_pair(
        &ControllerSecurity::Plaintext,
        &ssl(&certs, "broker.keystore.pem"),
    )
    .await;
    let server = server.expect_err("a TLS client accepted in cleartext");
    assert!(matches!(server, HandshakeError::TlsPeer), "{server:?}");
    assert!(server.to_string().contains("opened with TLS"), "{server}");
    let client = client.expect_err("the client fell back to cleartext");
    assert!(
        matches!(client, HandshakeError::PeerCleartext),
        "{client:?}"
    );
    assert!(client.is_refusal(), "{client:?}");
}

/// A node whose certificate the peer's trust store does not vouch for is
/// refused by the TLS handshake itself, before any cluster-secret proof.
#[tokio::test]
async fn a_certificate_of_another_ca_is_refused_on_both_ends() {
    let certs = Certs::make().expect("certs");
    let foreign = certs.path("foreign.keystore.pem");
    let mut pem = std::fs::read(certs.path("foreign-client.key")).expect("key");
    pem.extend(std::fs::read(certs.path("foreign-client.pem")).expect("cert"));
    std::fs::write(&foreign, pem).expect("write");
    let (client, server) = connect_pair(
        &ssl(&certs, "broker.keystore.pem"),
        &ssl(&certs, "foreign.keystore.pem"),
    )
    .await;
    let server = server.expect_err("a foreign certificate accepted");
    assert!(
        matches!(server, HandshakeError::Tls { refused: true, .. }),
        "{server:?}"
    );
    assert!(
        server.to_string().contains("TLS handshake failed"),
        "{server}"
    );
    let client = client.expect_err("the client went on");
    assert!(client.is_refusal(), "{client:?}: {client}");
    assert!(client.to_string().contains("TLS"), "{client}");
}
