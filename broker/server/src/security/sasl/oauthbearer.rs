//! SASL/OAUTHBEARER (RFC 7628, Kafka's KIP-255) with Kafka's secured
//! token validation (KIP-768's `OAuthBearerValidatorCallbackHandler`): the
//! client's bearer token is a JWT signed with a key of the JWKS file.
//!
//! The exchange: the client's first message is
//! `n,[a=authzid],\x01auth=Bearer <jwt>\x01[key=value\x01]*\x01`. A valid
//! token authenticates `User:<sub claim>` at once. An invalid one is
//! answered, as RFC 7628 section 3.2.2 and Kafka's `OAuthBearerSaslServer`
//! do, with the error challenge `{"status":"invalid_token"}`; the client
//! acknowledges it with `\x01` and the step fails
//! (SASL_AUTHENTICATION_FAILED). A message that is not RFC 7628 fails at
//! once.
//!
//! Token checks: the header's `alg` is RS256 or ES256 (never `none`) and
//! matches the key `kid` selects; the signature verifies (ring); `exp` is
//! required and not past, `nbf` and `iat` not in the future, each with
//! `sasl.oauthbearer.clock.skew.seconds`; `iss` and `aud` are the expected
//! ones when configured; the principal claim
//! (`sasl.oauthbearer.sub.claim.name`) is a non-empty string and equals
//! the authzid if one is given.
//!
//! Owns: parsing the client's messages and validating tokens. Must not:
//! read the key file (`jwks`) or decide session lifetimes (`session`
//! bounds them with the token's expiry).

use std::sync::Arc;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::signature::{
    RsaPublicKeyComponents, UnparsedPublicKey, ECDSA_P256_SHA256_FIXED, RSA_PKCS1_2048_8192_SHA256,
};
use serde_json::{Map, Value};
use tracing::debug;

use super::jwks::{Jwk, JwksFile, PublicKey};
use super::SaslError;

/// Largest bearer token accepted.
pub const MAX_TOKEN: usize = 16 * 1024;
/// Largest client message accepted (the token, the GS2 header, extensions).
const MAX_MESSAGE: usize = MAX_TOKEN + 4096;

/// The error challenge of RFC 7628 section 3.2.2, as Kafka's validator
/// answers any invalid token.
pub const INVALID_TOKEN_CHALLENGE: &[u8] = br#"{"status":"invalid_token"}"#;

/// Kafka's `sasl.oauthbearer.*` validation settings and the key set.
#[derive(Debug)]
pub struct OAuthBearerValidator {
    pub jwks: Arc<JwksFile>,
    /// `sasl.oauthbearer.expected.audience`: any of these (empty = not checked).
    pub expected_audience: Vec<String>,
    /// `sasl.oauthbearer.expected.issuer`.
    pub expected_issuer: Option<String>,
    /// `sasl.oauthbearer.sub.claim.name`.
    pub sub_claim_name: String,
    /// `sasl.oauthbearer.clock.skew.seconds`.
    pub clock_skew_seconds: u64,
}

/// A token that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidToken {
    pub principal: String,
    /// `exp`, in milliseconds since the epoch.
    pub expires_at_ms: u64,
}

/// Why a token was refused (logged, never sent: the client sees
/// `invalid_token`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenError {
    /// No key of the set has the token's `kid`.
    UnknownKid(String),
    Invalid(String),
}

fn invalid(reason: impl Into<String>) -> TokenError {
    TokenError::Invalid(reason.into())
}

/// What one OAUTHBEARER message leads to.
#[derive(Debug, PartialEq, Eq)]
pub enum OAuthStep {
    Challenge(Vec<u8>),
    Authenticated(ValidToken),
}

/// One connection's OAUTHBEARER exchange.
#[derive(Debug, Default)]
pub struct OAuthBearerExchange {
    /// Set once the error challenge was sent.
    challenged: bool,
}

impl OAuthBearerExchange {
    /// Handles one client message at `now_ms` (milliseconds since the epoch).
    pub fn step(
        &mut self,
        message: &[u8],
        validator: &OAuthBearerValidator,
        now_ms: u64,
    ) -> Result<OAuthStep, SaslError> {
        if self.challenged {
            // RFC 7628 3.2.2: the client answers the error with a lone %x01.
            return Err(SaslError::AuthenticationFailed(
                String::from_utf8_lossy(INVALID_TOKEN_CHALLENGE).into_owned(),
            ));
        }
        let first = parse_client_first(message)?;
        let keys = validator.jwks.keys();
        match validate(first.token, &keys, validator, now_ms) {
            Ok(token) => {
                if first
                    .authzid
                    .as_ref()
                    .is_some_and(|a| *a != token.principal)
                {
                    return Err(SaslError::AuthenticationFailed(
                        "Authentication failed: Client requested an authorization id that is different from the token's principal name".into(),
                    ));
                }
                Ok(OAuthStep::Authenticated(token))
            }
            Err(e) => {
                if let TokenError::UnknownKid(_) = e {
                    validator.jwks.refresh_soon();
                }
                debug!(reason = ?e, "OAUTHBEARER token refused");
                self.challenged = true;
                Ok(OAuthStep::Challenge(INVALID_TOKEN_CHALLENGE.to_vec()))
            }
        }
    }
}

/// The parts of the client's first message this broker uses.
#[derive(Debug, PartialEq, Eq)]
struct ClientFirst<'a> {
    authzid: Option<String>,
    token: &'a str,
}

fn malformed(what: &str) -> SaslError {
    SaslError::AuthenticationFailed(format!("Invalid OAUTHBEARER client first message: {what}"))
}

/// Parses `n,[a=authzid],\x01key=value\x01...\x01` (RFC 7628 section 3.1).
fn parse_client_first(message: &[u8]) -> Result<ClientFirst<'_>, SaslError> {
    if message.len() > MAX_MESSAGE {
        return Err(malformed("too large"));
    }
    let text = std::str::from_utf8(message).map_err(|_| malformed("not UTF-8"))?;
    let rest = text
        .strip_prefix("n,")
        .ok_or_else(|| malformed("GS2 header must start with n,"))?;
    let (authzid, rest) = rest
        .split_once(',')
        .ok_or_else(|| malformed("GS2 header is not terminated"))?;
    let authzid = match authzid {
        "" => None,
        a => Some(decode_saslname(
            a.strip_prefix("a=")
                .ok_or_else(|| malformed("bad authzid"))?,
        )?),
    };
    let pairs = rest
        .strip_prefix('\x01')
        .and_then(|r| r.strip_suffix("\x01\x01"))
        .ok_or_else(|| malformed("key-value pairs must be framed by %x01"))?;
    let mut auth = None;
    let mut keys: Vec<&str> = Vec::new();
    for pair in pairs.split('\x01') {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| malformed("a key-value pair without ="))?;
        let key_ok = !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphabetic());
        let value_ok = value
            .bytes()
            .all(|b| (0x21..=0x7E).contains(&b) || matches!(b, b' ' | b'\t' | b'\r' | b'\n'));
        if !key_ok || !value_ok || keys.contains(&key) {
            return Err(malformed("bad or repeated key-value pair"));
        }
        keys.push(key);
        if key == "auth" {
            auth = Some(value);
        }
    }
    let auth = auth.ok_or_else(|| malformed("no auth"))?;
    let (scheme, token) = auth
        .split_once(' ')
        .ok_or_else(|| malformed("auth is not 'Bearer <token>'"))?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(malformed("auth scheme is not Bearer"));
    }
    Ok(ClientFirst {
        authzid,
        token: token.trim_start_matches(' '),
    })
}

/// RFC 5801's saslname: `=2C` is `,`, `=3D` is `=`, no other `=`.
fn decode_saslname(name: &str) -> Result<String, SaslError> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        let escaped = rest.get(at..at + 3);
        match escaped {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(malformed("bad authzid escape")),
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    if out.is_empty() {
        return Err(malformed("empty authzid"));
    }
    Ok(out)
}

/// Checks a compact JWS token against the key set and the settings.
pub fn validate(
    token: &str,
    keys: &[Jwk],
    settings: &OAuthBearerValidator,
    now_ms: u64,
) -> Result<ValidToken, TokenError> {
    if token.len() > MAX_TOKEN {
        return Err(invalid("token larger than 16 KiB"));
    }
    if !token
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err(invalid("token is not base64url"));
    }
    let mut parts = token.split('.');
    let (Some(header_b64), Some(payload_b64), Some(signature_b64), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(invalid("not a compact JWS (three parts)"));
    };
    let header = json_object(header_b64, "header")?;
    let signature = URL_SAFE_NO_PAD
        .decode(signature_b64)
        .map_err(|_| invalid("signature is not base64url"))?;
    if header.contains_key("crit") {
        return Err(invalid("critical header parameters are not understood"));
    }
    let alg = header.get("alg").and_then(Value::as_str).unwrap_or("");
    if alg != "RS256" && alg != "ES256" {
        return Err(invalid(format!("alg {alg:?} is not RS256 or ES256")));
    }
    let kid = header
        .get("kid")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("no kid header"))?;
    let key = keys
        .iter()
        .find(|k| k.kid == kid)
        .ok_or_else(|| TokenError::UnknownKid(kid.chars().take(64).collect()))?;
    if key.alg.as_deref().is_some_and(|a| a != alg) {
        return Err(invalid(format!("key {kid:?} is not for {alg}")));
    }
    let signed = &token.as_bytes()[..header_b64.len() + 1 + payload_b64.len()];
    let verified = match (&key.key, alg) {
        (PublicKey::Rsa { n, e }, "RS256") => RsaPublicKeyComponents { n, e }
            .verify(&RSA_PKCS1_2048_8192_SHA256, signed, &signature)
            .is_ok(),
        (PublicKey::EcP256 { point }, "ES256") => {
            UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point)
                .verify(signed, &signature)
                .is_ok()
        }
        _ => return Err(invalid(format!("key {kid:?} is not for {alg}"))),
    };
    if !verified {
        return Err(invalid("signature does not verify"));
    }
    let claims = json_object(payload_b64, "payload")?;
    check_claims(&claims, settings, now_ms)
}

fn json_object(part: &str, what: &str) -> Result<Map<String, Value>, TokenError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| invalid(format!("{what} is not base64url")))?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(invalid(format!("{what} is not a JSON object"))),
    }
}

/// A NumericDate claim in milliseconds; None if absent.
fn time_claim(claims: &Map<String, Value>, name: &str) -> Result<Option<u64>, TokenError> {
    match claims.get(name) {
        None => Ok(None),
        Some(value) => match value.as_f64() {
            Some(secs) if (0.0..1e13).contains(&secs) => {
                // Within u64 milliseconds by the bound above.
                Ok(Some((secs * 1000.0) as u64))
            }
            _ => Err(invalid(format!("{name} is not a NumericDate"))),
        },
    }
}

fn check_claims(
    claims: &Map<String, Value>,
    settings: &OAuthBearerValidator,
    now_ms: u64,
) -> Result<ValidToken, TokenError> {
    let skew_ms = settings.clock_skew_seconds.saturating_mul(1000);
    let exp = time_claim(claims, "exp")?.ok_or_else(|| invalid("no exp"))?;
    if now_ms >= exp.saturating_add(skew_ms) {
        return Err(invalid("expired"));
    }
    if let Some(nbf) = time_claim(claims, "nbf")? {
        if now_ms.saturating_add(skew_ms) < nbf {
            return Err(invalid("not valid yet (nbf)"));
        }
    }
    if let Some(iat) = time_claim(claims, "iat")? {
        if now_ms.saturating_add(skew_ms) < iat {
            return Err(invalid("issued in the future (iat)"));
        }
    }
    if let Some(issuer) = &settings.expected_issuer {
        if claims.get("iss").and_then(Value::as_str) != Some(issuer.as_str()) {
            return Err(invalid("unexpected issuer"));
        }
    }
    if !settings.expected_audience.is_empty() {
        let audiences: Vec<&str> = match claims.get("aud") {
            Some(Value::String(a)) => vec![a.as_str()],
            Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !audiences
            .iter()
            .any(|a| settings.expected_audience.iter().any(|e| e == a))
        {
            return Err(invalid("unexpected audience"));
        }
    }
    let principal = claims
        .get(&settings.sub_claim_name)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| invalid(format!("no {} claim", settings.sub_claim_name)))?;
    Ok(ValidToken {
        principal: principal.to_string(),
        expires_at_ms: exp,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An RSA-2048 key made with `openssl genpkey` for this test only
    /// (the JWK's n and e, base64url) and an RS256 token it signed with
    /// `openssl dgst -sha256 -sign`: header {"alg":"RS256","kid":"rsa-1","typ":"JWT"},
    /// claims sub=alice, iss=https://issuer.test, aud=[kafka,other],
    /// iat=1700000000, exp=1700003600.
    const RSA_N: &str = "0Utnj8qoM-jnp_IjZgYNMeVaGHf3jRRfO-tKr4e7hIdAN7S8Qn78P7c8y7nX8Lk3399wM7Uxw3fjWGPXnRIKAUtZImWI41ILrTKG73FiQwzzBG5UC6Dx8I-wxtqgd-2kArMTpVcjqvTv35gRZBHb6MM3vAKUU3g_agXsPsnSIMnAmwVvsSZcsrmjk8yvmJw46g8pUU1XnE1MIq6jXhNMdmQmi7X2kzoZOyHEgNv1DLPatV35KOh-rOG6fdbgcwaXwF4qtrZY8yNZRR-hrJs4LIj0tRarcZejKp7RXvU2pFLeZdb4ivpf077aVV34QxBBIdibUtV77Xot3fdHDpClbw";
    const RS256_TOKEN: &str = "eyJhbGciOiJSUzI1NiIsImtpZCI6InJzYS0xIiwidHlwIjoiSldUIn0.eyJzdWIiOiJhbGljZSIsImlzcyI6Imh0dHBzOi8vaXNzdWVyLnRlc3QiLCJhdWQiOlsia2Fma2EiLCJvdGhlciJdLCJpYXQiOjE3MDAwMDAwMDAsImV4cCI6MTcwMDAwMzYwMH0.bh1Z1JaF48212ATtM6ZKYbMuGuuep8q8w5ZnBXu1rYCJblq7VclZBZ0W9BGxdVbtnLpGf5Er6VyAnB5LVC_2ylhlU3RYO31CkeEKawOCpgPwxRz2MtVhcuJdW3MjwYsgQWCDXttn87mW2-ktEaK8OZX_rMc8Z8N04lH42N9wbFt4LznI-436mRFlfn1RtkLJvxbpFGiohWtEO1I2eswF82R_DFokvcUjWF9P_HKGd8BOv9aqmDkOYJmw_Wq6ZQvDieOxPabIM3Im-H_HP_wqgHS-BqJ2e51z6E6rS1HX8DJMsFS3QIeKwgklRq_eMM1YSVV8SA-pdxQL-xISk-3Tzw";
    const ISSUED_MS: u64 = 1_700_000_000_000;

    fn validator(jwks: &str, audience: &[&str], issuer: Option<&str>) -> OAuthBearerValidator {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("jwks.json");
        std::fs::write(&path, jwks).expect("write");
        OAuthBearerValidator {
            jwks: JwksFile::load(path, std::time::Duration::from_secs(3600)).expect("jwks"),
            expected_audience: audience.iter().map(|s| s.to_string()).collect(),
            expected_issuer: issuer.map(str::to_string),
            sub_claim_name: "sub".into(),
            clock_skew_seconds: 30,
        }
    }

    fn rsa_jwks(kid: &str, alg: &str) -> String {
        format!(
            r#"{{"keys":[{{"kty":"RSA","kid":"{kid}","alg":"{alg}","n":"{RSA_N}","e":"AQAB"}}]}}"#
        )
    }

    #[test]
    fn rs256_tokens_are_checked_like_kafkas_validator() {
        let v = validator(
            &rsa_jwks("rsa-1", "RS256"),
            &["kafka"],
            Some("https://issuer.test"),
        );
        let keys = v.jwks.keys();
        let at = |ms| validate(RS256_TOKEN, &keys, &v, ms);
        assert_eq!(
            at(ISSUED_MS + 60_000),
            Ok(ValidToken {
                principal: "alice".into(),
                expires_at_ms: ISSUED_MS + 3_600_000
            })
        );
        assert!(
            at(ISSUED_MS + 3_600_000 + 29_000).is_ok(),
            "within the skew"
        );
        assert_eq!(at(ISSUED_MS + 3_600_000 + 30_000), Err(invalid("expired")));
        assert!(at(ISSUED_MS - 29_000).is_ok(), "iat within the skew");
        assert!(at(ISSUED_MS - 31_000).is_err(), "issued in the future");
        let now = ISSUED_MS + 1000;
        let wrong_aud = validator(&rsa_jwks("rsa-1", "RS256"), &["billing"], None);
        assert_eq!(
            validate(RS256_TOKEN, &wrong_aud.jwks.keys(), &wrong_aud, now),
            Err(invalid("unexpected audience"))
        );
        let other_aud = validator(&rsa_jwks("rsa-1", "RS256"), &["billing", "other"], None);
        assert!(validate(RS256_TOKEN, &other_aud.jwks.keys(), &other_aud, now).is_ok());
        let wrong_iss = validator(&rsa_jwks("rsa-1", "RS256"), &[], Some("https://evil"));
        assert_eq!(
            validate(RS256_TOKEN, &wrong_iss.jwks.keys(), &wrong_iss, now),
            Err(invalid("unexpected issuer"))
        );
        let other_kid = validator(&rsa_jwks("rsa-2", "RS256"), &[], None);
        assert_eq!(
            validate(RS256_TOKEN, &other_kid.jwks.keys(), &other_kid, now),
            Err(TokenError::UnknownKid("rsa-1".into()))
        );
        let es_only = validator(&rsa_jwks("rsa-1", "ES256"), &[], None);
        assert!(validate(RS256_TOKEN, &es_only.jwks.keys(), &es_only, now).is_err());
        // One flipped bit of the signature, of the claims.
        let (signed, sig) = RS256_TOKEN.rsplit_once('.').expect("three parts");
        let mut flipped = sig.as_bytes().to_vec();
        flipped[10] = if flipped[10] == b'A' { b'B' } else { b'A' };
        let forged = format!("{signed}.{}", String::from_utf8(flipped).expect("ascii"));
        assert_eq!(
            validate(&forged, &keys, &v, now),
            Err(invalid("signature does not verify"))
        );
        let mut parts: Vec<String> = RS256_TOKEN.split('.').map(str::to_string).collect();
        let claims = URL_SAFE_NO_PAD.decode(&parts[1]).expect("claims");
        let claims = String::from_utf8(claims)
            .expect("utf8")
            .replace("alice", "admin");
        parts[1] = URL_SAFE_NO_PAD.encode(claims);
        assert_eq!(
            validate(&parts.join("."), &keys, &v, now),
            Err(invalid("signature does not verify"))
        );
        // alg none, with the key's kid and no signature.
        let none = format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(r#"{"alg":"none","kid":"rsa-1"}"#),
            parts[1]
        );
        assert!(validate(&none, &keys, &v, now).is_err());
        for garbage in [
            "",
            "a.b",
            "a.b.c.d",
            "x.y.z",
            "é.a.b",
            &"A".repeat(MAX_TOKEN + 1),
        ] {
            assert!(validate(garbage, &keys, &v, now).is_err(), "{garbage:.20}");
        }
    }

    #[test]
    fn client_first_messages_follow_rfc_7628() {
        fn ok(m: &str) -> Result<ClientFirst<'_>, SaslError> {
            parse_client_first(m.as_bytes())
        }
        assert_eq!(
            ok("n,,\x01auth=Bearer abc.def.ghi\x01\x01"),
            Ok(ClientFirst {
                authzid: None,
                token: "abc.def.ghi"
            })
        );
        assert_eq!(
            ok("n,a=al=2Cice,\x01host=b\x01auth=bearer  t.t.t\x01port=9\x01\x01"),
            Ok(ClientFirst {
                authzid: Some("al,ice".into()),
                token: "t.t.t"
            })
        );
        for bad in [
            "",
            "\x01",
            "y,,\x01auth=Bearer t\x01\x01",
            "n,,auth=Bearer t\x01\x01",
            "n,,\x01auth=Bearer t\x01",
            "n,,\x01auth=Basic t\x01\x01",
            "n,,\x01host=x\x01\x01",
            "n,,\x01auth=Bearer t\x01auth=Bearer u\x01\x01",
            "n,,\x01k-y=v\x01auth=Bearer t\x01\x01",
            "n,a=x=41,\x01auth=Bearer t\x01\x01",
            "n,b=x,\x01auth=Bearer t\x01\x01",
        ] {
            assert!(ok(bad).is_err(), "{bad:?}");
        }
        let huge = format!("n,,\x01auth=Bearer {}\x01\x01", "a".repeat(MAX_MESSAGE));
        assert!(ok(&huge).is_err());
    }

    #[test]
    fn an_invalid_token_is_challenged_then_fails() {
        let v = validator(&rsa_jwks("rsa-1", "RS256"), &[], None);
        let now = ISSUED_MS + 1000;
        let mut exchange = OAuthBearerExchange::default();
        let message = format!("n,,\x01auth=Bearer {RS256_TOKEN}\x01\x01");
        assert!(matches!(
            exchange.step(message.as_bytes(), &v, now),
            Ok(OAuthStep::Authenticated(t)) if t.principal == "alice"
        ));
        let mut exchange = OAuthBearerExchange::default();
        let wrong_authzid = format!("n,a=bob,\x01auth=Bearer {RS256_TOKEN}\x01\x01");
        assert!(exchange.step(wrong_authzid.as_bytes(), &v, now).is_err());
        let mut exchange = OAuthBearerExchange::default();
        let expired = format!("n,,\x01auth=Bearer {RS256_TOKEN}\x01\x01");
        assert_eq!(
            exchange.step(expired.as_bytes(), &v, ISSUED_MS + 7_200_000),
            Ok(OAuthStep::Challenge(INVALID_TOKEN_CHALLENGE.to_vec()))
        );
        assert_eq!(
            exchange.step(b"\x01", &v, now),
            Err(SaslError::AuthenticationFailed(
                r#"{"status":"invalid_token"}"#.into()
            ))
        );
    }
}
