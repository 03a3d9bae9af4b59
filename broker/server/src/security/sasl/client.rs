//! The client side of SASL, for this broker's own connections to other
//! brokers on a SASL inter-broker listener (Kafka's
//! `sasl.mechanism.inter.broker.protocol`): PLAIN (RFC 4616) and
//! SCRAM-SHA-256/512 (RFC 5802) on the server side's primitives
//! (`ScramMechanism`'s HMAC, hash and Hi()).
//!
//! Owns: the client's messages and checking the server's (nonce prefix,
//! Kafka's iteration bounds, the server signature in constant time). Must
//! not: know about Kafka frames or sockets (the leader client sends the
//! messages), or show the password (Debug redacts it).

use anyhow::{bail, ensure, Context, Result};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;

use super::scram::{constant_time_eq, ScramMechanism, MAX_ITERATIONS, MIN_ITERATIONS};
use super::Mechanism;

/// Largest server message accepted.
const MAX_MESSAGE: usize = 4096;

/// The mechanism and credentials this broker logs in to other brokers with.
#[derive(Clone)]
pub struct SaslLogin {
    pub mechanism: Mechanism,
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
    pub fn new(mechanism: Mechanism, username: String, password: String) -> SaslLogin {
        SaslLogin {
            mechanism,
            username,
            password,
        }
    }

    /// Starts an exchange: its state and the first message to send.
    /// OAUTHBEARER has no client side here (brokers log in to each other
    /// with PLAIN or SCRAM; `args` refuses it as the inter-broker mechanism).
    pub fn start(&self) -> Result<(SaslClient, Vec<u8>)> {
        Ok(match self.mechanism {
            Mechanism::Plain => (
                SaslClient::Plain,
                format!("\0{}\0{}", self.username, self.password).into_bytes(),
            ),
            Mechanism::OAuthBearer => {
                bail!("OAUTHBEARER cannot be the inter-broker mechanism")
            }
            Mechanism::Scram(mechanism) => {
                let mut nonce = [0u8; 24];
                super::fill_random(&mut nonce);
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
        let client_key = m.hmac(&salted, &[b"Client Key"]);
        let signature = m.hmac(&m.hash(&client_key), &[auth.as_bytes()]);
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = m.hmac(&salted, &[b"Server Key"]);
        self.expected_signature = Some(m.hmac(&server_key, &[auth.as_bytes()]));
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
    use super::super::scram::{ScramCredential, ScramCredentials, ScramExchange, ScramStep};
    use super::*;

    fn run(login: &SaslLogin, credentials: &ScramCredentials) -> Result<String> {
        let Mechanism::Scram(m) = login.mechanism else {
            bail!("not SCRAM");
        };
        let mut server = ScramExchange::new(m);
        let (mut client, first) = login.start()?;
        let random = |buf: &mut [u8]| super::super::fill_random(buf);
        let ScramStep::Challenge(challenge) = server
            .step(&first, credentials, &random, b"k")
            .map_err(|e| anyhow::anyhow!("{e}"))?
        else {
            bail!("expected a challenge");
        };
        let last = client.step(&challenge)?.context("client-final")?;
        let ScramStep::Authenticated { user, response } = server
            .step(&last, credentials, &random, b"k")
            .map_err(|e| anyhow::anyhow!("{e}"))?
        else {
            bail!("expected authentication");
        };
        ensure!(client.step(&response)?.is_none(), "exchange not done");
        Ok(user)
    }

    #[test]
    fn scram_client_authenticates_against_the_server_side() {
        let credentials = ScramCredentials::default();
        let m = ScramMechanism::Sha512;
        let credential = ScramCredential::from_password(m, "broker-secret", vec![3; 16], 4096)
            .expect("credential");
        credentials.upsert(m, "broker,a=b", credential);
        let good = SaslLogin::new(
            Mechanism::Scram(m),
            "broker,a=b".into(),
            "broker-secret".into(),
        );
        assert_eq!(run(&good, &credentials).expect("login"), "broker,a=b");
        let bad = SaslLogin::new(Mechanism::Scram(m), "broker,a=b".into(), "wrong".into());
        assert!(run(&bad, &credentials).is_err());
        assert!(!format!("{good:?}").contains("broker-secret"));
    }

    #[test]
    fn scram_client_refuses_bad_server_messages() {
        let login = SaslLogin::new(
            Mechanism::Scram(ScramMechanism::Sha256),
            "u".into(),
            "p".into(),
        );
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
