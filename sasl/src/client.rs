//! The client side of SASL: a login (mechanism, user name, password) and
//! the exchange it runs — PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802)
//! on the SCRAM primitives of `scram` (the broker's server side runs on
//! the same ones). Used by the broker's inter-broker connections (Kafka's
//! `sasl.mechanism.inter.broker.protocol`) and the ingestor's Kafka client.
//!
//! Owns: the client's messages and checking the server's (nonce prefix,
//! Kafka's iteration bounds, the server signature in constant time). Must
//! not: know about Kafka frames or sockets (the caller sends the messages
//! in SaslHandshake / SaslAuthenticate), or show the password (Debug
//! redacts it).

use anyhow::{bail, ensure, Context, Result};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;

use crate::mechanism::SaslMechanism;
use crate::scram::{constant_time_eq, ScramMechanism, MAX_ITERATIONS, MIN_ITERATIONS};

/// Largest server message accepted.
const MAX_MESSAGE: usize = 4096;

/// The mechanism and credentials a client logs in with.
#[derive(Clone)]
pub struct SaslLogin {
    pub mechanism: SaslMechanism,
    pub username: String,
    password: String,
}

impl std::fmt::Debug for SaslLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslLogin")
            .field("mechanism", &self.mechanism.name())
            .field("username", &self.username)
            .field("password", &"[redacted]")
            .finish()
    }
}

impl SaslLogin {
    pub fn new(mechanism: SaslMechanism, username: String, password: String) -> SaslLogin {
        SaslLogin {
            mechanism,
            username,
            password,
        }
    }

    /// Starts an exchange: its state and the first message to send.
    pub fn start(&self) -> Result<(SaslClient, Vec<u8>)> {
        Ok(match self.mechanism {
            SaslMechanism::Plain => (
                SaslClient::Plain,
                format!("\0{}\0{}", self.username, self.password).into_bytes(),
            ),
            SaslMechanism::Scram(mechanism) => {
                let mut nonce = [0u8; 24];
                crate::fill_random(&mut nonce);
                let nonce = BASE64.encode(nonce);
                let first_bare = format!("n={},r={nonce}", encode_saslname(&self.username));
                let message = format!("n,,{first_bare}").into_bytes();
                (
                    SaslClient::Scram(ScramClient {
                        mechanism,
                        password: self.password.clone(),
                        nonce,
                        first_bare,
                        expected_signature: None,
                    }),
                    message,
                )
            }
        })
    }
}

/// Where a client exchange stands.
pub enum SaslClient {
    /// PLAIN: one message; the server's (empty) answer ends it.
    Plain,
    Scram(ScramClient),
}

impl SaslClient {
    /// Feeds the server's answer: the next message to send, or None when
    /// the exchange is complete (and the server verified).
    pub fn step(&mut self, server: &[u8]) -> Result<Option<Vec<u8>>> {
        ensure!(server.len() <= MAX_MESSAGE, "SASL server message too large");
        match self {
            SaslClient::Plain => Ok(None),
            SaslClient::Scram(scram) => scram.step(server),
        }
    }
}

/// A SCRAM exchange between client-first and server-final.
pub struct ScramClient {
    mechanism: ScramMechanism,
    password: String,
    nonce: String,
    first_bare: String,
    /// Set once the client-final message is sent.
    expected_signature: Option<Vec<u8>>,
}

impl ScramClient {
    fn step(&mut self, server: &[u8]) -> Result<Option<Vec<u8>>> {
        let server = std::str::from_utf8(server).context("SCRAM: server message is not UTF-8")?;
        if let Some(expected) = &self.expected_signature {
            if let Some(error) = server.strip_prefix("e=") {
                bail!("SCRAM: the server refused: {error}");
            }
            let signature = server
                .split(',')
                .find_map(|f| f.strip_prefix("v="))
                .context("SCRAM: server-final without v=")?;
            let signature = BASE64
                .decode(signature)
                .context("SCRAM: bad server signature")?;
            ensure!(
                constant_time_eq(&signature, expected),
                "SCRAM: the server's signature does not verify"
            );
            return Ok(None);
        }
        let (mut nonce, mut salt, mut iterations) = (None, None, None);
        for field in server.split(',') {
            match field.split_at_checked(2) {
                Some(("r=", v)) => nonce = Some(v),
                Some(("s=", v)) => salt = Some(BASE64.decode(v).context("SCRAM: bad salt")?),
                Some(("i=", v)) => iterations = Some(v.parse::<u32>().context("SCRAM: bad i=")?),
                _ => {}
            }
        }
        let nonce = nonce.context("SCRAM: server-first without r=")?;
        let salt = salt.context("SCRAM: server-first without s=")?;
        let iterations = iterations.context("SCRAM: server-first without i=")?;
        ensure!(
            nonce.starts_with(&self.nonce) && nonce.len() > self.nonce.len(),
            "SCRAM: the server nonce does not extend ours"
        );
        ensure!(
            (MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations),
            "SCRAM: iterations {iterations} outside {MIN_ITERATIONS}..={MAX_ITERATIONS}"
        );
        let m = self.mechanism;
        let without_proof = format!("c=biws,r={nonce}");
        let auth = format!("{},{server},{without_proof}", self.first_bare);
        let salted = m.salted_password(self.password.as_bytes(), &salt, iterations);
        let proof = m.client_proof(&salted, auth.as_bytes());
        self.expected_signature = Some(m.hmac(&m.server_key(&salted), &[auth.as_bytes()]));
        Ok(Some(
            format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes(),
        ))
    }
}

/// RFC 5802 saslname: ',' is `=2C`, '=' is `=3D`.
fn encode_saslname(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scram(m: ScramMechanism, user: &str) -> SaslLogin {
        SaslLogin::new(SaslMechanism::Scram(m), user.into(), "p".into())
    }

    #[test]
    fn plain_is_one_message_and_debug_redacts_the_password() {
        let login = SaslLogin::new(SaslMechanism::Plain, "alice".into(), "s3cret".into());
        let (mut client, first) = login.start().expect("PLAIN");
        assert_eq!(first, b"\0alice\0s3cret");
        assert!(client.step(b"").expect("done").is_none());
        assert!(!format!("{login:?}").contains("s3cret"));
    }

    #[test]
    fn scram_client_first_escapes_the_name() {
        let login = scram(ScramMechanism::Sha512, "a=b,c");
        let (_, first) = login.start().expect("SCRAM");
        let first = String::from_utf8(first).expect("utf8");
        assert!(first.starts_with("n,,n=a=3Db=2Cc,r="), "{first}");
    }

    #[test]
    fn scram_client_refuses_bad_server_messages() {
        let login = scram(ScramMechanism::Sha256, "u");
        let salt = BASE64.encode([1u8; 16]);
        for bad in [
            format!("r=someoneelse,s={salt},i=4096"),
            "r=NONCEx,s=!!,i=4096".to_string(),
            format!("r=NONCEx,s={salt},i=100"),
            format!("r=NONCEx,s={salt},i=99999999"),
            format!("r=NONCE,s={salt},i=4096"),
        ] {
            let (mut client, first) = login.start().expect("SCRAM");
            let nonce = String::from_utf8(first).expect("utf8");
            let nonce = nonce.rsplit("r=").next().expect("r=").to_string();
            let message = bad.replace("NONCE", &nonce);
            assert!(client.step(message.as_bytes()).is_err(), "{bad}");
        }
        let (mut client, first) = login.start().expect("SCRAM");
        let nonce = String::from_utf8(first).expect("utf8");
        let nonce = nonce.rsplit("r=").next().expect("r=").to_string();
        let ok = format!("r={nonce}xyz,s={salt},i=4096");
        assert!(client.step(ok.as_bytes()).expect("final").is_some());
        assert!(client.step(b"v=AAAA").is_err(), "forged server signature");
    }
}
