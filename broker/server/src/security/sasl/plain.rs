//! SASL/PLAIN (RFC 4616) against the users of a JAAS file, as Kafka's
//! `PlainLoginModule` configures them: `user_<name>="<password>";` entries
//! (the `sasl.jaas.config` / `KafkaServer` section of Kafka's
//! `java.security.auth.login.config` file).
//!
//! Owns: parsing the JAAS file's `user_` entries (and its `username` /
//! `password` options, the broker's own inter-broker login) and checking one PLAIN
//! message (`authzid NUL authcid NUL password`) in constant time. Must
//! not: say whether a user exists (wrong password and unknown user fail
//! alike).

use std::collections::HashMap;

use anyhow::{bail, Context};

use super::scram::constant_time_eq;
use super::SaslError;

/// Largest PLAIN message accepted.
const MAX_MESSAGE: usize = 4096;

/// The PLAIN users and their passwords.
#[derive(Default)]
pub struct PlainUsers {
    passwords: HashMap<String, String>,
}

impl std::fmt::Debug for PlainUsers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlainUsers")
            .field("users", &self.passwords.len())
            .finish()
    }
}

impl PlainUsers {
    /// Reads every `user_NAME="PASSWORD"` option of a JAAS file.
    pub fn from_jaas(text: &str) -> anyhow::Result<PlainUsers> {
        let mut passwords = HashMap::new();
        let mut rest = text;
        while let Some(at) = rest.find("user_") {
            let boundary = at == 0
                || rest[..at]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_whitespace() || c == ';' || c == '{');
            let entry = &rest[at + "user_".len()..];
            if !boundary {
                rest = entry;
                continue;
            }
            let (name, after) = entry
                .split_once('=')
                .context("JAAS: user_ option without '='")?;
            let name = name.trim();
            let after = after.trim_start();
            let quoted = after
                .strip_prefix('"')
                .context("JAAS: user_ password must be quoted")?;
            let end = quoted
                .find('"')
                .context("JAAS: unterminated user_ password")?;
            if name.is_empty() || name.contains(char::is_whitespace) {
                bail!("JAAS: bad user name {name:?}");
            }
            passwords.insert(name.to_string(), quoted[..end].to_string());
            rest = &quoted[end + 1..];
        }
        Ok(PlainUsers { passwords })
    }

    pub fn is_empty(&self) -> bool {
        self.passwords.is_empty()
    }

    /// Checks one PLAIN message; returns the authenticated user.
    /// The user name a PLAIN message gives (`authzid NUL user NUL password`),
    /// for the failed-login log; never the password.
    pub fn attempted_user(message: &[u8]) -> Option<&str> {
        let text = std::str::from_utf8(message.get(..MAX_MESSAGE.min(message.len()))?).ok()?;
        text.split('\0').nth(1).filter(|u| !u.is_empty())
    }

    pub fn authenticate(&self, message: &[u8]) -> Result<String, SaslError> {
        let failed = || SaslError::AuthenticationFailed(PLAIN_FAILED.to_string());
        if message.len() > MAX_MESSAGE {
            return Err(failed());
        }
        let text = std::str::from_utf8(message).map_err(|_| failed())?;
        let mut parts = text.split('\0');
        let (Some(authzid), Some(user), Some(password), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(failed());
        };
        if user.is_empty() || (!authzid.is_empty() && authzid != user) {
            return Err(failed());
        }
        // An unknown user is compared against a password of the same
        // length as the one given, so both take the same time.
        let expected = self.passwords.get(user);
        let compared = expected.map_or(password, String::as_str);
        let matches = constant_time_eq(compared.as_bytes(), password.as_bytes());
        if matches && expected.is_some() {
            Ok(user.to_string())
        } else {
            Err(failed())
        }
    }
}

/// The `username="…"` and `password="…"` options of a JAAS file: the
/// login this broker uses towards other brokers (as Kafka's login modules
/// take them). None unless both are there.
pub fn jaas_login(text: &str) -> Option<(String, String)> {
    Some((
        jaas_option(text, "username")?,
        jaas_option(text, "password")?,
    ))
}

/// The quoted value of option `key` (at a word boundary) in a JAAS file.
fn jaas_option(text: &str, key: &str) -> Option<String> {
    let mut rest = text;
    while let Some(at) = rest.find(key) {
        let boundary = rest[..at]
            .chars()
            .next_back()
            .is_none_or(|c| c.is_whitespace() || c == ';' || c == '{');
        let after = &rest[at + key.len()..];
        rest = after;
        if !boundary {
            continue;
        }
        let Some(value) = after.trim_start().strip_prefix('=') else {
            continue;
        };
        let quoted = value.trim_start().strip_prefix('"')?;
        return quoted.find('"').map(|end| quoted[..end].to_string());
    }
    None
}

/// Kafka's message for a failed PLAIN login (the same for any cause).
const PLAIN_FAILED: &str = "Authentication failed: Invalid username or password";

#[cfg(test)]
mod tests {
    use super::*;

    const JAAS: &str = r#"KafkaServer {
        org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin"
        password="admin-secret"
        user_admin="admin-secret"
        user_alice="alice;secret";
    };"#;

    #[test]
    fn jaas_users_log_in_with_their_password_only() {
        let users = PlainUsers::from_jaas(JAAS).expect("parses");
        assert_eq!(
            users.authenticate(b"\0alice\0alice;secret"),
            Ok("alice".into())
        );
        assert_eq!(
            users.authenticate(b"admin\0admin\0admin-secret"),
            Ok("admin".into())
        );
        let wrong = users
            .authenticate(b"\0alice\0nope")
            .expect_err("wrong password");
        let unknown = users
            .authenticate(b"\0mallory\0nope")
            .expect_err("unknown user");
        assert_eq!(wrong, unknown, "the message does not reveal which");
        for bad in [
            &b"alice\0alice"[..],
            b"bob\0alice\0alice;secret",
            b"\0\0x",
            b"\0a\0b\0c",
        ] {
            assert!(users.authenticate(bad).is_err(), "{bad:?}");
        }
        assert!(PlainUsers::from_jaas("user_x=unquoted;").is_err());
        assert_eq!(
            jaas_login(JAAS),
            Some(("admin".to_string(), "admin-secret".to_string()))
        );
        assert_eq!(jaas_login("KafkaServer { user_admin=\"x\"; };"), None);
    }
}
