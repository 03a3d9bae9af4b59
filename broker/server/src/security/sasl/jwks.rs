//! The JSON Web Key Set OAUTHBEARER tokens are verified with (RFC 7517),
//! read from the file Kafka's `sasl.oauthbearer.jwks.endpoint.url` names
//! (only `file:` URLs and paths: this broker makes no HTTP requests), and
//! reloaded when the file changes.
//!
//! Owns: parsing the key set (RSA keys and EC P-256 keys with a `kid`;
//! other key types, curves and `use` other than `sig` are skipped),
//! holding the current set, and the reload loop: every
//! `sasl.oauthbearer.jwks.endpoint.refresh.ms`, and soon after a token
//! names a `kid` the set lacks (as Kafka refreshes its JWKS early for an
//! unknown key id), the file's modification time and size are compared and
//! on a change it is parsed again; a file that does not parse is logged
//! and the previous set kept. Must not: verify tokens (`oauthbearer`
//! does) or read anything but the configured file.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::Value;
use tokio::sync::Notify;
use tracing::{info, warn};

use crate::security::read_bounded_file;

/// Largest JWKS file read.
const MAX_JWKS_FILE: u64 = 1024 * 1024;

/// A verification key of the set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublicKey {
    /// RSA modulus and exponent, big-endian without leading zeros.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// An uncompressed P-256 point (0x04 ‖ x ‖ y).
    EcP256 { point: Vec<u8> },
}

/// One usable key of the set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jwk {
    pub kid: String,
    /// The key's `alg`, when the set names one.
    pub alg: Option<String>,
    pub key: PublicKey,
}

/// The key set's file and its current keys.
#[derive(Debug)]
pub struct JwksFile {
    path: PathBuf,
    refresh: Duration,
    current: RwLock<Arc<Vec<Jwk>>>,
    /// Woken when a token names an unknown `kid`.
    unknown_kid: Arc<Notify>,
}

/// What identifies a version of the file.
type Stamp = Option<(SystemTime, u64)>;

impl JwksFile {
    /// Reads the file; an error (or a set without a usable key) is fatal at start.
    pub fn load(path: PathBuf, refresh: Duration) -> anyhow::Result<Arc<JwksFile>> {
        let keys = read_keys(&path)?;
        info!(path = %path.display(), keys = keys.len(), "OAUTHBEARER JWKS loaded");
        Ok(Arc::new(JwksFile {
            path,
            refresh,
            current: RwLock::new(Arc::new(keys)),
            unknown_kid: Arc::new(Notify::new()),
        }))
    }

    /// The current keys.
    pub fn keys(&self) -> Arc<Vec<Jwk>> {
        match self.current.read() {
            Ok(k) => k.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Asks the reload loop to look at the file now (a token named a
    /// `kid` the set lacks). Requests coalesce.
    pub fn refresh_soon(&self) {
        self.unknown_kid.notify_one();
    }

    /// Polls the file while the set lives. Must run inside the runtime.
    pub fn spawn_reloader(self: &Arc<Self>) {
        let weak: Weak<JwksFile> = Arc::downgrade(self);
        let mut seen = stamp(&self.path);
        let refresh = self.refresh;
        let unknown_kid = self.unknown_kid.clone();
        tokio::spawn(async move {
            loop {
                let _ = tokio::time::timeout(refresh, unknown_kid.notified()).await;
                let Some(jwks) = weak.upgrade() else {
                    return;
                };
                let now = stamp(&jwks.path);
                if now == seen {
                    continue;
                }
                seen = now;
                let path = jwks.path.clone();
                match tokio::task::spawn_blocking(move || read_keys(&path)).await {
                    Ok(Ok(keys)) => {
                        let count = keys.len();
                        match jwks.current.write() {
                            Ok(mut k) => *k = Arc::new(keys),
                            Err(poisoned) => *poisoned.into_inner() = Arc::new(keys),
                        }
                        info!(path = %jwks.path.display(), keys = count, "OAUTHBEARER JWKS reloaded");
                    }
                    Ok(Err(e)) => warn!(
                        error = format!("{e:#}"),
                        "OAUTHBEARER JWKS file changed but does not load; keeping the previous keys"
                    ),
                    Err(e) => warn!(error = %e, "OAUTHBEARER JWKS reload task failed"),
                }
            }
        });
    }
}

fn stamp(path: &Path) -> Stamp {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

fn read_keys(path: &Path) -> anyhow::Result<Vec<Jwk>> {
    let what = "--sasl-oauthbearer-jwks-endpoint-url";
    let bytes = read_bounded_file(path, MAX_JWKS_FILE, what)?;
    parse_jwks(&bytes).with_context(|| format!("{what} {}", path.display()))
}

/// The usable keys of a JWKS document; an error if it is not one or has none.
pub fn parse_jwks(bytes: &[u8]) -> anyhow::Result<Vec<Jwk>> {
    let doc: Value = serde_json::from_slice(bytes).context("not JSON")?;
    let Some(entries) = doc.get("keys").and_then(Value::as_array) else {
        bail!("not a JWKS: no \"keys\" array");
    };
    let mut keys: Vec<Jwk> = Vec::new();
    for entry in entries {
        let Some(jwk) = parse_jwk(entry)? else {
            continue;
        };
        if keys.iter().any(|k| k.kid == jwk.kid) {
            bail!("two keys with kid {:?}", jwk.kid);
        }
        keys.push(jwk);
    }
    if keys.is_empty() {
        bail!("no RSA or EC P-256 signature key with a kid");
    }
    Ok(keys)
}

/// One key, None when it is not a signature key this broker verifies with.
fn parse_jwk(entry: &Value) -> anyhow::Result<Option<Jwk>> {
    let text = |name: &str| entry.get(name).and_then(Value::as_str);
    let Some(kid) = text("kid") else {
        return Ok(None);
    };
    if text("use").is_some_and(|u| u != "sig") {
        return Ok(None);
    }
    let member = |name: &str| -> anyhow::Result<Vec<u8>> {
        let value = text(name).with_context(|| format!("key {kid:?}: no {name:?}"))?;
        URL_SAFE_NO_PAD
            .decode(value)
            .with_context(|| format!("key {kid:?}: {name:?} is not base64url"))
    };
    let key = match (text("kty"), text("crv")) {
        (Some("RSA"), _) => {
            let n = strip_zeros(member("n")?);
            let e = strip_zeros(member("e")?);
            if n.len() < 256 || e.is_empty() {
                bail!("key {kid:?}: RSA keys of at least 2048 bits only");
            }
            PublicKey::Rsa { n, e }
        }
        (Some("EC"), Some("P-256")) => {
            let (x, y) = (member("x")?, member("y")?);
            if x.len() != 32 || y.len() != 32 {
                bail!("key {kid:?}: P-256 coordinates are 32 bytes");
            }
            let mut point = Vec::with_capacity(65);
            point.push(4);
            point.extend_from_slice(&x);
            point.extend_from_slice(&y);
            PublicKey::EcP256 { point }
        }
        _ => return Ok(None),
    };
    Ok(Some(Jwk {
        kid: kid.to_string(),
        alg: text("alg").map(str::to_string),
        key,
    }))
}

fn strip_zeros(mut bytes: Vec<u8>) -> Vec<u8> {
    let zeros = bytes.iter().take_while(|b| **b == 0).count();
    bytes.drain(..zeros);
    bytes
}

/// The file `--sasl-oauthbearer-jwks-endpoint-url` names: a `file:` URL or
/// a path; http(s) endpoints are refused.
pub fn jwks_path(url: &str) -> anyhow::Result<PathBuf> {
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        bail!(
            "--sasl-oauthbearer-jwks-endpoint-url {url}: only files are supported (a file: URL or a path to a JWKS JSON file); fetch the key set to a file"
        );
    }
    let path = match url.strip_prefix("file://") {
        // file:///path, or file://localhost/path
        Some(rest) => rest.strip_prefix("localhost").unwrap_or(rest),
        None => url.strip_prefix("file:").unwrap_or(url),
    };
    if path.is_empty() || (lower.contains("://") && !lower.starts_with("file://")) {
        bail!("--sasl-oauthbearer-jwks-endpoint-url {url}: not a file: URL or a path");
    }
    Ok(PathBuf::from(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_sets_keep_rsa_and_p256_signature_keys_only() {
        let n = URL_SAFE_NO_PAD.encode([[0u8].as_slice(), &[0xC1; 256]].concat());
        let xy = URL_SAFE_NO_PAD.encode([7u8; 32]);
        let doc = format!(
            r#"{{"keys":[
              {{"kty":"RSA","kid":"r","alg":"RS256","n":"{n}","e":"AQAB"}},
              {{"kty":"EC","crv":"P-256","kid":"e","x":"{xy}","y":"{xy}"}},
              {{"kty":"EC","crv":"P-384","kid":"p384","x":"{xy}","y":"{xy}"}},
              {{"kty":"oct","kid":"hmac","k":"c2VjcmV0"}},
              {{"kty":"RSA","kid":"enc","use":"enc","n":"{n}","e":"AQAB"}},
              {{"kty":"RSA","n":"{n}","e":"AQAB"}}
            ]}}"#
        );
        let keys = parse_jwks(doc.as_bytes()).expect("parses");
        let kids: Vec<&str> = keys.iter().map(|k| k.kid.as_str()).collect();
        assert_eq!(kids, ["r", "e"]);
        assert!(
            matches!(&keys[0].key, PublicKey::Rsa { n, e } if n.len() == 256 && e == &[1, 0, 1]),
            "leading zero stripped"
        );
        assert!(matches!(&keys[1].key, PublicKey::EcP256 { point } if point.len() == 65));
        for bad in [
            "[]",
            r#"{"keys":[]}"#,
            r#"{"keys":[{"kty":"EC","crv":"P-256","kid":"e","x":"AA","y":"AA"}]}"#,
            r#"{"keys":[{"kty":"RSA","kid":"r","n":"AQAB","e":"AQAB"}]}"#,
            "{\"keys\":[",
        ] {
            assert!(parse_jwks(bad.as_bytes()).is_err(), "{bad}");
        }
    }

    #[test]
    fn endpoint_urls_are_files_only() {
        assert_eq!(
            jwks_path("file:///etc/jwks.json").expect("file URL"),
            PathBuf::from("/etc/jwks.json")
        );
        assert_eq!(
            jwks_path("file:/etc/jwks.json").expect("file URL"),
            PathBuf::from("/etc/jwks.json")
        );
        assert_eq!(
            jwks_path("jwks.json").expect("path"),
            PathBuf::from("jwks.json")
        );
        let refused = jwks_path("https://idp.example/keys").expect_err("https");
        assert!(refused.to_string().contains("only files are supported"));
        assert!(jwks_path("ftp://x/keys").is_err());
    }
}
