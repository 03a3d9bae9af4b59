//! Bearer-token authentication of the ingestor's HTTP port.
//!
//! Owns: loading the token (`--auth-token-file`: at most 4 KiB, at least
//! 16 characters after trimming), the constant-time comparison, and the
//! middleware that answers 401 `unauthorized` (with `WWW-Authenticate:
//! Bearer`) to any request without `Authorization: Bearer <token>` — every
//! route but `/health` and `/ready`, which orchestrators probe without
//! credentials. Must not: know the routes' work.

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context};
use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::app::AppState;
use crate::error::AppError;

/// Largest token file read.
const MAX_TOKEN_FILE_BYTES: u64 = 4096;
/// Shortest token accepted (guessable tokens are refused at start).
const MIN_TOKEN_CHARS: usize = 16;
/// Routes open without a token.
const OPEN_ROUTES: &[&str] = &["/health", "/ready"];

/// The token; its `Debug` (the logged effective configuration) hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken(Arc<str>);

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken([redacted])")
    }
}

/// Reads the bearer token from `path`.
pub fn load_token(path: &Path) -> anyhow::Result<BearerToken> {
    let len = std::fs::metadata(path)
        .with_context(|| format!("--auth-token-file {}", path.display()))?
        .len();
    if len > MAX_TOKEN_FILE_BYTES {
        bail!(
            "--auth-token-file {} is {len} bytes (at most {MAX_TOKEN_FILE_BYTES})",
            path.display()
        );
    }
    let raw = std::fs::read_to_string(path)
        .with_context(|| format!("reading --auth-token-file {}", path.display()))?;
    let token = raw.trim();
    if token.chars().count() < MIN_TOKEN_CHARS || token.chars().any(char::is_whitespace) {
        bail!(
            "--auth-token-file {}: the token must be one word of at least {MIN_TOKEN_CHARS} characters",
            path.display()
        );
    }
    Ok(BearerToken(Arc::from(token)))
}

/// Equal without revealing, through timing, where two tokens first differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The credentials of an `Authorization: Bearer <token>` value; the scheme's
/// name is case-insensitive (RFC 7235 2.1, RFC 6750 2.1).
fn bearer_credentials(value: &str) -> Option<&str> {
    let (scheme, credentials) = value.trim_start().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("Bearer")
        .then_some(credentials.trim())
}

/// Whether `request` carries `token` as its bearer credentials.
fn presents(request: &Request, token: &BearerToken) -> bool {
    request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_credentials)
        .is_some_and(|given| same(given.as_bytes(), token.0.as_bytes()))
}

/// The middleware: passes requests with the token (or to an open route).
pub async fn require_bearer(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    match &state.config.auth_token {
        Some(token)
            if !OPEN_ROUTES.contains(&request.uri().path()) && !presents(&request, token) =>
        {
            AppError::Unauthorized.into_response()
        }
        _ => next.run(request).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        for value in ["Bearer tok", "bearer tok", "BEARER  tok ", "BeArEr tok"] {
            assert_eq!(bearer_credentials(value), Some("tok"), "{value:?}");
        }
        for value in ["Basic tok", "Bearertok", "Bearer", "Token tok"] {
            assert_eq!(bearer_credentials(value), None, "{value:?}");
        }
    }

    #[test]
    fn comparison_needs_equal_length_and_bytes() {
        assert!(same(b"abcdefghijklmnop", b"abcdefghijklmnop"));
        assert!(!same(b"abcdefghijklmnop", b"abcdefghijklmnoq"));
        assert!(!same(b"abc", b"abcd"));
    }

    #[test]
    fn tokens_are_bounded_and_long_enough() -> anyhow::Result<()> {
        let dir = std::env::temp_dir().join(format!("chronik-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let file = dir.join("token");
        std::fs::write(&file, "short\n")?;
        assert!(load_token(&file).is_err());
        std::fs::write(&file, "two words-------------\n")?;
        assert!(load_token(&file).is_err());
        std::fs::write(&file, "0123456789abcdef0123\n")?;
        let token = load_token(&file)?;
        assert_eq!(&*token.0, "0123456789abcdef0123");
        assert!(
            !format!("{token:?}").contains("0123456789"),
            "Debug must hide the token"
        );
        std::fs::write(&file, "x".repeat(5000))?;
        assert!(load_token(&file).is_err());
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }
}
