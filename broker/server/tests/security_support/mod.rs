//! What the security tests share: certificates from `scripts/make-certs.sh`,
//! a broker started with its own `--listeners` (not testkit's `--listen`),
//! and a blocking Kafka client over TCP or TLS (rustls, ring) that can run
//! SASL PLAIN and SCRAM itself.
//!
//! Nothing here asserts on broker behaviour: helpers return what they saw.
#![allow(dead_code)]

pub mod requests;

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use bytes::Bytes;
use chronik_testkit::process::{scratch_dir, Proc};
use chronik_testkit::server::server_binary;
use hmac::{Hmac, Mac};

use crate::common::kafka_client::round_trip;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Request, StrBytes};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use sha2::{Digest, Sha512};

/// The test certificates (chronik-testkit's), with the TLS client pieces
/// these tests need.
pub struct Certs(chronik_testkit::certs::Certs);

impl std::ops::Deref for Certs {
    type Target = chronik_testkit::certs::Certs;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Certs {
    pub fn make() -> Result<Certs> {
        Ok(Certs(chronik_testkit::certs::Certs::make()?))
    }

    /// The DER of the first certificate in a PEM file.
    pub fn der(&self, name: &str) -> Result<Vec<u8>> {
        Ok(CertificateDer::from_pem_file(self.path(name))
            .with_context(|| format!("reading {name}"))?
            .to_vec())
    }

    /// A client TLS config trusting the test CA, presenting `client`
    /// (`name` of `name.pem` / `name.key`) if given.
    pub fn client_tls(&self, client: Option<&str>) -> Result<Arc<rustls::ClientConfig>> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from_pem_file(self.path("ca.pem"))?)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots);
        let config = match client {
            Some(name) => builder.with_client_auth_cert(
                vec![CertificateDer::from_pem_file(
                    self.path(&format!("{name}.pem")),
                )?],
                PrivateKeyDer::from_pem_file(self.path(&format!("{name}.key")))?,
            )?,
            None => builder.with_no_client_auth(),
        };
        Ok(Arc::new(config))
    }
}

/// A broker started with `--listeners`.
pub struct SecureBroker {
    proc: Proc,
    pub listeners: BTreeMap<String, SocketAddr>,
    /// The metrics HTTP port (from the LISTENING line).
    pub metrics: Option<SocketAddr>,
    scratch: tempfile::TempDir,
}

impl SecureBroker {
    pub fn start(listeners: &str, args: &[&str]) -> Result<SecureBroker> {
        let mut broker = SecureBroker::spawn(listeners, args)?;
        broker.wait_listening()?;
        Ok(broker)
    }

    /// Starts the process without waiting (cluster nodes listen only once
    /// their quorum has formed).
    pub fn spawn(listeners: &str, args: &[&str]) -> Result<SecureBroker> {
        let scratch = scratch_dir("chronik-security-")?;
        let mut command = Command::new(server_binary()?);
        command
            .arg("--listeners")
            .arg(listeners)
            .arg("--data-dir")
            .arg(scratch.path().join("data"))
            .args(args);
        if !args.contains(&"--metrics-listen") {
            command.arg("--metrics-listen").arg("127.0.0.1:0");
        }
        let log = scratch.path().join("broker.log");
        let proc = Proc::spawn("chronik-server", command, &log)?;
        Ok(SecureBroker {
            proc,
            listeners: BTreeMap::new(),
            metrics: None,
            scratch,
        })
    }

    /// Waits for the LISTENING line and reads every listener's address.
    pub fn wait_listening(&mut self) -> Result<()> {
        let line = match self.proc.wait_line("LISTENING ", Duration::from_secs(180)) {
            Ok(line) => line,
            Err(e) => bail!("{e:#}\n{}", self.proc.log_tail(40)),
        };
        for token in line.split_whitespace() {
            if let Some(addr) = token.strip_prefix("metrics=") {
                self.metrics = Some(addr.parse()?);
            }
            if let Some((name, addr)) = token
                .strip_prefix("listener.")
                .and_then(|t| t.split_once('='))
            {
                self.listeners.insert(name.to_string(), addr.parse()?);
            }
        }
        Ok(())
    }

    pub fn addr(&self, listener: &str) -> Result<SocketAddr> {
        self.listeners
            .get(listener)
            .copied()
            .with_context(|| format!("no listener {listener} in {:?}", self.listeners))
    }

    /// The broker's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.scratch.path().join("broker.log")).unwrap_or_default()
    }

    pub fn log_tail(&self) -> String {
        self.proc.log_tail(60)
    }

    pub fn scratch(&self) -> &Path {
        self.scratch.path()
    }

    /// Waits (bounded) for `needle` in the log.
    pub fn wait_for_log(&self, needle: &str) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.log().contains(needle) {
            ensure!(
                Instant::now() < deadline,
                "no {needle:?} in the log:\n{}",
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }
}

/// A plain or TLS byte stream.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

/// A blocking Kafka client on one connection.
pub struct Conn {
    pub stream: Stream,
    correlation_id: i32,
}

fn tcp(addr: SocketAddr) -> Result<TcpStream> {
    let stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(20)))?;
    Ok(stream)
}

/// A connection to `addr` from the local address `source` (another
/// loopback address stands for another client host).
pub fn connect_from(source: std::net::IpAddr, addr: SocketAddr) -> Result<TcpStream> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    let stream = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(SocketAddr::new(source, 0))?;
        socket.connect(addr).await?.into_std()
    })?;
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(20)))?;
    Ok(stream)
}

impl Conn {
    pub fn plain(addr: SocketAddr) -> Result<Conn> {
        Ok(Conn {
            stream: Stream::Plain(tcp(addr)?),
            correlation_id: 0,
        })
    }

    /// Connects with TLS and completes the handshake.
    pub fn tls(addr: SocketAddr, config: Arc<rustls::ClientConfig>) -> Result<Conn> {
        Conn::tls_over(tcp(addr)?, config)
    }

    /// Completes a TLS handshake on a connected socket.
    pub fn tls_over(socket: TcpStream, config: Arc<rustls::ClientConfig>) -> Result<Conn> {
        let name = ServerName::try_from("localhost")?;
        let connection = rustls::ClientConnection::new(config, name)?;
        let mut stream = rustls::StreamOwned::new(connection, socket);
        while stream.conn.is_handshaking() {
            stream.conn.complete_io(&mut stream.sock)?;
        }
        Ok(Conn {
            stream: Stream::Tls(Box::new(stream)),
            correlation_id: 0,
        })
    }

    /// The broker's certificate (TLS only).
    pub fn server_certificate(&self) -> Option<Vec<u8>> {
        match &self.stream {
            Stream::Tls(s) => s.conn.peer_certificates()?.first().map(|c| c.to_vec()),
            Stream::Plain(_) => None,
        }
    }

    pub fn send<R: Request>(&mut self, request: &R, version: i16) -> Result<R::Response> {
        self.correlation_id += 1;
        round_trip(&mut self.stream, self.correlation_id, request, version)
    }

    /// Whether the broker closed the connection: reads see EOF or a reset
    /// (each bounded by the read timeout) within a few bytes (a TLS alert
    /// may precede the close), not a Kafka response.
    pub fn is_closed(&mut self) -> bool {
        let mut buf = [0u8; 256];
        let mut seen = 0;
        while seen < 1024 {
            match self.stream.read(&mut buf) {
                Ok(0) => return true,
                Ok(n) => seen += n,
                Err(e) => return !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
            }
        }
        false
    }

    pub fn metadata(&mut self) -> Result<MetadataResponse> {
        self.send(&MetadataRequest::default().with_topics(None), 12)
    }

    pub fn handshake(&mut self, mechanism: &str) -> Result<SaslHandshakeResponse> {
        self.send(
            &SaslHandshakeRequest::default()
                .with_mechanism(StrBytes::from_string(mechanism.to_string())),
            1,
        )
    }

    pub fn authenticate(&mut self, bytes: Vec<u8>) -> Result<SaslAuthenticateResponse> {
        self.send(
            &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(bytes)),
            2,
        )
    }

    /// SaslHandshake PLAIN + SaslAuthenticate.
    pub fn login_plain(&mut self, user: &str, password: &str) -> Result<SaslAuthenticateResponse> {
        let handshake = self.handshake("PLAIN")?;
        ensure!(
            handshake.error_code == 0,
            "handshake error {}",
            handshake.error_code
        );
        self.authenticate(format!("\0{user}\0{password}").into_bytes())
    }

    /// SaslHandshake SCRAM-SHA-512 and the exchange; the last response.
    pub fn login_scram512(
        &mut self,
        user: &str,
        password: &str,
    ) -> Result<SaslAuthenticateResponse> {
        let handshake = self.handshake("SCRAM-SHA-512")?;
        ensure!(
            handshake.error_code == 0,
            "handshake error {}",
            handshake.error_code
        );
        let client_nonce = BASE64.encode(uuid::Uuid::new_v4().as_bytes());
        let first_bare = format!("n={user},r={client_nonce}");
        let first = self.authenticate(format!("n,,{first_bare}").into_bytes())?;
        if first.error_code != 0 {
            return Ok(first);
        }
        let server_first = String::from_utf8(first.auth_bytes.to_vec())?;
        let (mut nonce, mut salt, mut iterations) = ("", Vec::new(), 0u32);
        for field in server_first.split(',') {
            match field.split_at(2) {
                ("r=", v) => nonce = v,
                ("s=", v) => salt = BASE64.decode(v)?,
                ("i=", v) => iterations = v.parse()?,
                _ => {}
            }
        }
        ensure!(nonce.starts_with(&client_nonce), "server nonce {nonce:?}");
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{first_bare},{server_first},{without_proof}");
        let salted = hi(password.as_bytes(), &salt, iterations);
        let client_key = hmac512(&salted, b"Client Key");
        let stored_key = Sha512::digest(&client_key);
        let signature = hmac512(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let last =
            self.authenticate(format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes())?;
        if last.error_code == 0 {
            let server_key = hmac512(&salted, b"Server Key");
            let expected = format!(
                "v={}",
                BASE64.encode(hmac512(&server_key, auth_message.as_bytes()))
            );
            if last.auth_bytes.as_ref() != expected.as_bytes() {
                bail!("the server's signature does not verify");
            }
        }
        Ok(last)
    }
}

fn hmac512(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = <Hmac<Sha512> as Mac>::new_from_slice(key).expect("any key length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

pub fn hi(password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
    let mut block = salt.to_vec();
    block.extend_from_slice(&1u32.to_be_bytes());
    let mut u = hmac512(password, &block);
    let mut out = u.clone();
    for _ in 1..iterations {
        u = hmac512(password, &u);
        out.iter_mut().zip(&u).for_each(|(o, x)| *o ^= x);
    }
    out
}

/// The port each broker of a Metadata answer is given.
pub fn broker_ports(metadata: &MetadataResponse) -> Vec<i32> {
    metadata.brokers.iter().map(|b| b.port).collect()
}
