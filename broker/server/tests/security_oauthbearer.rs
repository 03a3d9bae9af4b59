//! SASL/OAUTHBEARER over raw sockets against the real binary: JWTs signed
//! here (ES256 with a P-256 key ring makes, RS256 with an RSA key
//! `openssl genpkey` makes) and verified by the broker with a JWKS file.
//! A valid token authenticates `User:<sub>` (the authorizer proves it: a
//! super user's DescribeCluster reports DESCRIBE among its cluster
//! operations, another user's reports none) and
//! the session lifetime is bounded by the token's expiry; expired, wrong
//! audience, wrong issuer, forged, unknown kid, `alg: none`, garbage and
//! oversized tokens are answered with `{"status":"invalid_token"}`, the
//! client's `\x01` then fails with SASL_AUTHENTICATION_FAILED and the
//! connection closes while other clients are served; a key added to the
//! JWKS file is picked up; start refuses OAUTHBEARER without a JWKS file
//! and an http(s) endpoint.

mod common;
mod security_support;

use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{ensure, Context, Result};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use kafka_protocol::messages::DescribeClusterRequest;
use ring::rand::SystemRandom;
use ring::signature::{
    EcdsaKeyPair, KeyPair, RsaKeyPair, RsaPublicKeyComponents, ECDSA_P256_SHA256_FIXED_SIGNING,
    RSA_PKCS1_SHA256,
};
use security_support::{Conn, SecureBroker};
use serde_json::{json, Value};

const SASL_AUTHENTICATION_FAILED: i16 = 58;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const INVALID_TOKEN: &[u8] = br#"{"status":"invalid_token"}"#;
const AUDIENCE: &str = "kafka";
const ISSUER: &str = "https://issuer.test";

/// A signing key and its JWK.
enum Signer {
    Ec(EcdsaKeyPair),
    Rsa(RsaKeyPair),
}

impl Signer {
    fn ec() -> Result<Signer> {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|e| anyhow::anyhow!("P-256 key: {e}"))?;
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .map_err(|e| anyhow::anyhow!("P-256 key: {e}"))?;
        Ok(Signer::Ec(key))
    }

    /// An RSA-2048 key from `openssl genpkey` (its DER is RSAPrivateKey).
    fn rsa(dir: &Path) -> Result<Signer> {
        let path = dir.join("rsa.der");
        let output = Command::new("openssl")
            .args([
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
            ])
            .args(["-outform", "DER", "-out"])
            .arg(&path)
            .output()
            .context("running openssl")?;
        ensure!(
            output.status.success(),
            "openssl genpkey: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let key = RsaKeyPair::from_der(&std::fs::read(&path)?)
            .map_err(|e| anyhow::anyhow!("RSA key: {e}"))?;
        Ok(Signer::Rsa(key))
    }

    fn alg(&self) -> &'static str {
        match self {
            Signer::Ec(_) => "ES256",
            Signer::Rsa(_) => "RS256",
        }
    }

    fn jwk(&self, kid: &str) -> Value {
        match self {
            Signer::Ec(key) => {
                let point = key.public_key().as_ref();
                json!({"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig",
                       "x": b64(&point[1..33]), "y": b64(&point[33..65])})
            }
            Signer::Rsa(key) => {
                let public = RsaPublicKeyComponents::<Vec<u8>>::from(key.public());
                json!({"kty": "RSA", "kid": kid, "alg": "RS256",
                       "n": b64(&public.n), "e": b64(&public.e)})
            }
        }
    }

    fn sign(&self, message: &[u8]) -> Result<Vec<u8>> {
        let rng = SystemRandom::new();
        match self {
            Signer::Ec(key) => Ok(key
                .sign(&rng, message)
                .map_err(|e| anyhow::anyhow!("sign: {e}"))?
                .as_ref()
                .to_vec()),
            Signer::Rsa(key) => {
                let mut signature = vec![0; key.public().modulus_len()];
                key.sign(&RSA_PKCS1_SHA256, &rng, message, &mut signature)
                    .map_err(|e| anyhow::anyhow!("sign: {e}"))?;
                Ok(signature)
            }
        }
    }

    /// A compact JWS of `claims` with header `{"alg", "kid"}`.
    fn token(&self, kid: &str, claims: &Value) -> Result<String> {
        let header = json!({"alg": self.alg(), "kid": kid, "typ": "JWT"});
        let signed = format!("{}.{}", b64(header.to_string()), b64(claims.to_string()));
        let signature = self.sign(signed.as_bytes())?;
        Ok(format!("{signed}.{}", b64(signature)))
    }
}

fn b64(bytes: impl AsRef<[u8]>) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Claims valid for ten minutes.
fn claims(sub: &str) -> Value {
    json!({"sub": sub, "iss": ISSUER, "aud": [AUDIENCE, "other"],
           "iat": now(), "exp": now() + 600})
}

fn write_jwks(path: &Path, keys: &[Value]) -> Result<()> {
    Ok(std::fs::write(path, json!({ "keys": keys }).to_string())?)
}

fn first_message(authzid: &str, token: &str) -> Vec<u8> {
    format!("n,{authzid},\x01host=localhost\x01port=9092\x01auth=Bearer {token}\x01\x01")
        .into_bytes()
}

/// A broker with OAUTHBEARER on SASL_PLAINTEXT, the authorizer and
/// super user `User:alice`.
fn oauth_broker(jwks: &Path, extra: &[&str]) -> Result<SecureBroker> {
    let jwks = format!("file://{}", jwks.display());
    let mut args = vec![
        "--sasl-enabled-mechanisms",
        "OAUTHBEARER",
        "--sasl-oauthbearer-jwks-endpoint-url",
        &jwks,
        "--sasl-oauthbearer-expected-audience",
        "billing,kafka",
        "--sasl-oauthbearer-expected-issuer",
        ISSUER,
        "--authorizer-class-name",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "--super-users",
        "User:alice",
        "--connection-failed-authentication-delay-ms",
        "0",
    ];
    args.extend_from_slice(extra);
    SecureBroker::start(
        "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        &args,
    )
}

/// Handshake and the first message: the SaslAuthenticate answer.
fn login(
    broker: &SecureBroker,
    message: Vec<u8>,
) -> Result<(Conn, kafka_protocol::messages::SaslAuthenticateResponse)> {
    let mut conn = Conn::plain(broker.addr("SASL_PLAINTEXT")?)?;
    let handshake = conn.handshake("OAUTHBEARER")?;
    ensure!(handshake.error_code == 0, "handshake: {handshake:?}");
    let answer = conn.authenticate(message)?;
    Ok((conn, answer))
}

/// The session is served as `User:<sub>`: (0 when DescribeCluster reports
/// DESCRIBE on the cluster among the session's operations, else
/// CLUSTER_AUTHORIZATION_FAILED; the session lifetime). DescribeCluster
/// itself is answered to everyone, as Kafka does.
fn logged_in(broker: &SecureBroker, token: &str) -> Result<(i16, i64)> {
    const DESCRIBE_BIT: i32 = 1 << 8;
    let (mut conn, answer) = login(broker, first_message("", token))?;
    ensure!(answer.error_code == 0, "login: {answer:?}");
    let cluster = conn.send(
        &DescribeClusterRequest::default().with_include_cluster_authorized_operations(true),
        0,
    )?;
    ensure!(
        cluster.error_code == 0,
        "DescribeCluster: {}",
        cluster.error_code
    );
    let code = if cluster.cluster_authorized_operations & DESCRIBE_BIT != 0 {
        0
    } else {
        CLUSTER_AUTHORIZATION_FAILED
    };
    Ok((code, answer.session_lifetime_ms))
}

/// A refused token: challenged, then 58 after `\x01`, then closed.
fn refused_after_challenge(broker: &SecureBroker, token: &str, what: &str) -> Result<()> {
    let (mut conn, answer) = login(broker, first_message("", token))?;
    ensure!(
        answer.error_code == 0 && answer.auth_bytes.as_ref() == INVALID_TOKEN,
        "{what}: the error challenge, got {answer:?}"
    );
    let failed = conn.authenticate(b"\x01".to_vec())?;
    ensure!(
        failed.error_code == SASL_AUTHENTICATION_FAILED,
        "{what}: {failed:?}"
    );
    ensure!(
        failed
            .error_message
            .as_deref()
            .is_some_and(|m| m.contains("invalid_token")),
        "{what}: {failed:?}"
    );
    ensure!(conn.is_closed(), "{what}: the connection stayed open");
    Ok(())
}

#[test]
fn valid_tokens_authenticate_their_subject_until_they_expire() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let ec = Signer::ec()?;
    let rsa = Signer::rsa(dir.path())?;
    let jwks = dir.path().join("jwks.json");
    write_jwks(&jwks, &[ec.jwk("ec-1"), rsa.jwk("rsa-1")])?;
    let broker = oauth_broker(&jwks, &[])?;

    let (code, lifetime) = logged_in(&broker, &ec.token("ec-1", &claims("alice"))?)?;
    ensure!(code == 0, "alice is a super user: DescribeCluster {code}");
    ensure!(
        lifetime > 0 && lifetime <= 600_000,
        "the token's expiry bounds the session: {lifetime}"
    );
    let (code, _) = logged_in(&broker, &rsa.token("rsa-1", &claims("alice"))?)?;
    ensure!(code == 0, "RS256: DescribeCluster {code}");
    let (code, _) = logged_in(&broker, &ec.token("ec-1", &claims("bob"))?)?;
    ensure!(
        code == CLUSTER_AUTHORIZATION_FAILED,
        "bob is no super user: DescribeCluster {code}"
    );
    broker.wait_for_log("principal=User:alice")?;
    broker.wait_for_log("principal=User:bob")?;

    // An authzid must be the token's subject.
    let (_, answer) = login(
        &broker,
        first_message("a=alice", &ec.token("ec-1", &claims("alice"))?),
    )?;
    ensure!(answer.error_code == 0, "authzid = sub: {answer:?}");
    let (mut conn, answer) = login(
        &broker,
        first_message("a=admin", &ec.token("ec-1", &claims("alice"))?),
    )?;
    ensure!(
        answer.error_code == SASL_AUTHENTICATION_FAILED,
        "authzid != sub: {answer:?}"
    );
    ensure!(conn.is_closed(), "authzid != sub: still open");
    // Not RFC 7628 at all: refused at once.
    let (mut conn, answer) = login(&broker, b"Bearer xyz".to_vec())?;
    ensure!(
        answer.error_code == SASL_AUTHENTICATION_FAILED,
        "malformed: {answer:?}"
    );
    ensure!(conn.is_closed(), "malformed: still open");

    // With connections.max.reauth.ms shorter than the token, it bounds the session.
    drop(broker);
    let broker = oauth_broker(&jwks, &["--connections-max-reauth-ms", "120000"])?;
    let (code, lifetime) = logged_in(&broker, &ec.token("ec-1", &claims("alice"))?)?;
    ensure!(code == 0 && lifetime == 120_000, "{code} {lifetime}");
    Ok(())
}

#[test]
fn invalid_tokens_get_the_error_challenge_then_fail() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let ec = Signer::ec()?;
    let jwks = dir.path().join("jwks.json");
    write_jwks(&jwks, &[ec.jwk("ec-1")])?;
    let broker = oauth_broker(&jwks, &[])?;
    let valid = claims("alice");
    let with = |name: &str, value: Value| {
        let mut c = valid.clone();
        c[name] = value;
        c
    };
    let other_key = Signer::ec()?;
    let (signed, _) = ec
        .token("ec-1", &valid)?
        .rsplit_once('.')
        .map(|(s, sig)| (s.to_string(), sig.to_string()))
        .context("three parts")?;
    let alg_none = format!(
        "{}.{}.",
        b64(json!({"alg": "none", "kid": "ec-1"}).to_string()),
        b64(valid.to_string())
    );
    let cases = [
        (
            "expired",
            ec.token("ec-1", &with("exp", json!(now() - 3600)))?,
        ),
        (
            "wrong audience",
            ec.token("ec-1", &with("aud", json!("billing-x")))?,
        ),
        (
            "wrong issuer",
            ec.token("ec-1", &with("iss", json!("https://evil.test")))?,
        ),
        ("no subject", ec.token("ec-1", &with("sub", json!("")))?),
        ("bad signature", other_key.token("ec-1", &valid)?),
        (
            "signature of other claims",
            format!("{signed}.{}", b64(ec.sign(b"something else")?)),
        ),
        ("unknown kid", ec.token("ec-9", &valid)?),
        ("alg none", alg_none),
        ("garbage", "not-a-jwt".to_string()),
        ("oversized", "a".repeat(17 * 1024)),
    ];
    for (what, token) in &cases {
        refused_after_challenge(&broker, token, what)?;
        let (code, _) = logged_in(&broker, &ec.token("ec-1", &valid)?)?;
        ensure!(code == 0, "after {what}: another client is served ({code})");
    }
    Ok(())
}

#[test]
fn a_key_added_to_the_jwks_file_is_picked_up() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (first, second) = (Signer::ec()?, Signer::ec()?);
    let jwks = dir.path().join("jwks.json");
    write_jwks(&jwks, &[first.jwk("ec-1")])?;
    let broker = oauth_broker(&jwks, &[])?;
    let token = second.token("ec-2", &claims("alice"))?;
    refused_after_challenge(&broker, &token, "before the key is added")?;
    write_jwks(&jwks, &[first.jwk("ec-1"), second.jwk("ec-2")])?;
    // A token naming an unknown kid makes the broker look at the file
    // again (this attempt may or may not see the new key yet).
    login(&broker, first_message("", &token))?;
    broker.wait_for_log("OAUTHBEARER JWKS reloaded")?;
    let (code, _) = logged_in(&broker, &token)?;
    ensure!(code == 0, "the new key: DescribeCluster {code}");
    let (code, _) = logged_in(&broker, &first.token("ec-1", &claims("alice"))?)?;
    ensure!(code == 0, "the old key still: DescribeCluster {code}");
    Ok(())
}

#[test]
fn oauthbearer_needs_a_jwks_file() -> Result<()> {
    let listeners = "SASL_PLAINTEXT://127.0.0.1:0";
    for (args, expected) in [
        (
            vec!["--sasl-enabled-mechanisms", "OAUTHBEARER"],
            "--sasl-oauthbearer-jwks-endpoint-url",
        ),
        (
            vec![
                "--sasl-enabled-mechanisms",
                "OAUTHBEARER",
                "--sasl-oauthbearer-jwks-endpoint-url",
                "https://idp.test/jwks",
            ],
            "only files are supported",
        ),
    ] {
        let mut broker = SecureBroker::spawn(listeners, &args)?;
        ensure!(
            broker.wait_listening().is_err(),
            "{args:?}: the broker started"
        );
        broker.wait_for_log(expected)?;
    }
    Ok(())
}
