//! The SASL mechanisms a client logs in with, by Kafka's `sasl.mechanism`
//! names (upper case, as Kafka spells them).
//!
//! Owns: the names and parsing them. Must not: know which mechanisms a
//! broker enables (OAUTHBEARER is server-side only here).

use std::fmt;
use std::str::FromStr;

use crate::scram::ScramMechanism;

/// A mechanism `SaslLogin` can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SaslMechanism {
    /// RFC 4616.
    Plain,
    /// RFC 5802 with SHA-256 or SHA-512 (RFC 7677).
    Scram(ScramMechanism),
}

impl SaslMechanism {
    /// Kafka's name: `PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::Scram(m) => m.name(),
        }
    }
}

impl fmt::Display for SaslMechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A `sasl.mechanism` name no client mechanism here has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsupportedMechanism(pub String);

impl fmt::Display for UnsupportedMechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unsupported SASL mechanism {} (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)",
            self.0
        )
    }
}

impl std::error::Error for UnsupportedMechanism {}

impl FromStr for SaslMechanism {
    type Err = UnsupportedMechanism;

    fn from_str(name: &str) -> Result<SaslMechanism, UnsupportedMechanism> {
        match name {
            "PLAIN" => Ok(SaslMechanism::Plain),
            other => ScramMechanism::parse(other)
                .map(SaslMechanism::Scram)
                .ok_or_else(|| UnsupportedMechanism(other.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kafkas_names_and_gives_them_back() {
        for m in [
            SaslMechanism::Plain,
            SaslMechanism::Scram(ScramMechanism::Sha256),
            SaslMechanism::Scram(ScramMechanism::Sha512),
        ] {
            assert_eq!(m.name().parse::<SaslMechanism>(), Ok(m));
            assert_eq!(m.to_string(), m.name());
        }
        for bad in ["plain", "scram-sha-512", "OAUTHBEARER", "GSSAPI", ""] {
            assert_eq!(
                bad.parse::<SaslMechanism>(),
                Err(UnsupportedMechanism(bad.to_string()))
            );
        }
    }
}
