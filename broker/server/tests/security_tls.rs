//! Listeners the Kafka way and TLS, over raw sockets: each listener's
//! Metadata names that listener's endpoints; `--listen` with `--listeners`
//! is refused; plaintext bytes on an SSL port close only that connection;
//! `ssl.client.auth=required` refuses a missing, foreign or expired client
//! certificate and takes the principal from a good one; a replaced key
//! store is served to new connections without a restart, a broken one is
//! logged and the previous one kept.

mod common;
mod security_support;

use std::io::Write;

use anyhow::{ensure, Context, Result};
use kafka_protocol::messages::{
    describe_configs_request, ApiVersionsRequest, DescribeConfigsRequest,
};
use kafka_protocol::protocol::StrBytes;
use security_support::{broker_ports, Certs, Conn, SecureBroker};

#[test]
fn each_listener_answers_metadata_with_its_own_endpoints() -> Result<()> {
    let certs = Certs::make()?;
    let broker = SecureBroker::start(
        "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        &[
            "--listener-security-protocol-map",
            "PLAINTEXT:PLAINTEXT,SSL:SSL,INTERNAL:PLAINTEXT",
            "--ssl-keystore-location",
            &certs.arg("broker.keystore.pem"),
        ],
    )?;
    let (plain, ssl, internal) = (
        broker.addr("PLAINTEXT")?,
        broker.addr("SSL")?,
        broker.addr("INTERNAL")?,
    );
    let on_plain = Conn::plain(plain)?.metadata()?;
    ensure!(
        broker_ports(&on_plain) == [i32::from(plain.port())],
        "PLAINTEXT: {on_plain:?}"
    );
    let on_internal = Conn::plain(internal)?.metadata()?;
    ensure!(
        broker_ports(&on_internal) == [i32::from(internal.port())],
        "INTERNAL: {on_internal:?}"
    );
    let mut tls = Conn::tls(ssl, certs.client_tls(None)?)?;
    let on_ssl = tls.metadata()?;
    ensure!(
        broker_ports(&on_ssl) == [i32::from(ssl.port())],
        "SSL: {on_ssl:?}"
    );
    ensure!(
        tls.server_certificate() == Some(certs.der("broker.pem")?),
        "the SSL listener serves the key store's certificate"
    );
    // DescribeConfigs shows the listener settings under Kafka's names.
    let resource = describe_configs_request::DescribeConfigsResource::default()
        .with_resource_type(4)
        .with_resource_name(StrBytes::from_static_str("1"))
        .with_configuration_keys(None);
    let described = tls.send(
        &DescribeConfigsRequest::default().with_resources(vec![resource]),
        4,
    )?;
    let value = |name: &str| {
        described.results[0]
            .configs
            .iter()
            .find(|c| c.name.as_str() == name)
            .and_then(|c| c.value.as_ref().map(|v| v.to_string()))
    };
    let expected = format!(
        "INTERNAL://127.0.0.1:{},PLAINTEXT://127.0.0.1:{},SSL://127.0.0.1:{}",
        internal.port(),
        plain.port(),
        ssl.port()
    );
    ensure!(
        value("advertised.listeners") == Some(expected),
        "{described:?}"
    );
    ensure!(
        value("listener.security.protocol.map").as_deref()
            == Some("PLAINTEXT:PLAINTEXT,SSL:SSL,INTERNAL:PLAINTEXT"),
        "{described:?}"
    );
    Ok(())
}

#[test]
fn listen_and_listeners_together_are_refused() -> Result<()> {
    // testkit's broker always passes --listen.
    let started = chronik_testkit::Broker::start(&["--listeners", "PLAINTEXT://127.0.0.1:0"]);
    let error = format!(
        "{:#}",
        started.err().context("the broker started with both")?
    );
    ensure!(error.contains("--listeners replaces --listen"), "{error}");
    Ok(())
}

#[test]
fn plaintext_bytes_on_an_ssl_port_close_only_that_connection() -> Result<()> {
    let certs = Certs::make()?;
    let broker = SecureBroker::start(
        "SSL://127.0.0.1:0",
        &["--ssl-keystore-location", &certs.arg("broker.keystore.pem")],
    )?;
    let ssl = broker.addr("SSL")?;
    // A Kafka ApiVersions request in the clear, then garbage.
    let mut plain = Conn::plain(ssl)?;
    let refused = plain.send(&ApiVersionsRequest::default(), 3);
    ensure!(
        refused.is_err(),
        "a plaintext request was answered: {refused:?}"
    );
    let mut garbage = Conn::plain(ssl)?;
    garbage
        .stream
        .write_all(&[0x16, 0x03, 0x01, 0xff, 0xff, 1, 2, 3])?;
    ensure!(
        garbage.is_closed(),
        "a broken TLS record left the connection open"
    );
    // The broker still serves TLS clients.
    let versions =
        Conn::tls(ssl, certs.client_tls(None)?)?.send(&ApiVersionsRequest::default(), 3)?;
    ensure!(
        versions.error_code == 0 && !versions.api_keys.is_empty(),
        "{versions:?}"
    );
    Ok(())
}

/// A TLS client whose first request is refused (TLS 1.3 reports the
/// server's verdict on the client certificate after the client's side of
/// the handshake is done).
fn refused(addr: std::net::SocketAddr, certs: &Certs, client: Option<&str>) -> bool {
    match certs.client_tls(client).and_then(|c| Conn::tls(addr, c)) {
        Err(_) => true,
        Ok(mut conn) => conn.send(&ApiVersionsRequest::default(), 3).is_err(),
    }
}

/// An SSL listener with `--ssl-client-auth client_auth` and the test CA.
fn mtls_broker(certs: &Certs, client_auth: &str) -> Result<SecureBroker> {
    SecureBroker::start(
        "SSL://127.0.0.1:0",
        &[
            "--ssl-keystore-location",
            &certs.arg("broker.keystore.pem"),
            "--ssl-truststore-location",
            &certs.arg("ca.pem"),
            "--ssl-client-auth",
            client_auth,
        ],
    )
}

#[test]
fn mtls_required_refuses_bad_client_certificates_and_names_the_good_one() -> Result<()> {
    let certs = Certs::make()?;
    let broker = mtls_broker(&certs, "required")?;
    let ssl = broker.addr("SSL")?;
    ensure!(
        refused(ssl, &certs, None),
        "no client certificate was accepted"
    );
    ensure!(
        refused(ssl, &certs, Some("foreign-client")),
        "a foreign CA's certificate was accepted"
    );
    ensure!(
        refused(ssl, &certs, Some("expired-client")),
        "an expired certificate was accepted"
    );
    let mut good = Conn::tls(ssl, certs.client_tls(Some("client"))?)?;
    let metadata = good.metadata()?;
    ensure!(
        broker_ports(&metadata) == [i32::from(ssl.port())],
        "{metadata:?}"
    );
    broker.wait_for_log("principal=User:CN=client,O=Chronik,C=US")?;
    Ok(())
}

#[test]
fn mtls_requested_lets_clients_without_a_certificate_in_as_anonymous() -> Result<()> {
    let certs = Certs::make()?;
    let broker = mtls_broker(&certs, "requested")?;
    let ssl = broker.addr("SSL")?;
    Conn::tls(ssl, certs.client_tls(None)?)?.metadata()?;
    ensure!(
        refused(ssl, &certs, Some("foreign-client")),
        "a foreign CA's certificate was accepted"
    );
    Conn::tls(ssl, certs.client_tls(Some("client"))?)?.metadata()?;
    Ok(())
}

#[test]
fn a_replaced_key_store_is_served_to_new_connections() -> Result<()> {
    let certs = Certs::make()?;
    let keystore = certs.path("live.keystore.pem");
    std::fs::copy(certs.path("broker.keystore.pem"), &keystore)?;
    let broker = SecureBroker::start(
        "SSL://127.0.0.1:0",
        &[
            "--ssl-keystore-location",
            &keystore.display().to_string(),
            "--ssl-reload-interval-ms",
            "100",
        ],
    )?;
    let ssl = broker.addr("SSL")?;
    let config = certs.client_tls(None)?;
    let before = Conn::tls(ssl, config.clone())?;
    ensure!(
        before.server_certificate() == Some(certs.der("broker.pem")?),
        "initial certificate"
    );

    // Replaced atomically, as a Secret volume or cert-manager does.
    let staged = certs.path("staged.pem");
    std::fs::copy(certs.path("broker2.keystore.pem"), &staged)?;
    std::fs::rename(&staged, &keystore)?;
    broker.wait_for_log("TLS key store / trust store reloaded")?;
    let after = Conn::tls(ssl, config.clone())?;
    ensure!(
        after.server_certificate() == Some(certs.der("broker2.pem")?),
        "reloaded certificate"
    );

    // A broken file is refused; the last good certificate stays.
    std::fs::write(&staged, b"-----BEGIN CERTIFICATE-----\nnot base64\n")?;
    std::fs::rename(&staged, &keystore)?;
    broker.wait_for_log("keeping the previous ones")?;
    let kept = Conn::tls(ssl, config)?;
    ensure!(
        kept.server_certificate() == Some(certs.der("broker2.pem")?),
        "kept certificate"
    );
    Ok(())
}
