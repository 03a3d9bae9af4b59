//! SCRAM users loaded at start from `--sasl-scram-credentials-file`: one
//! entry per line in the syntax of `kafka-storage.sh format --add-scram`,
//! `SCRAM-SHA-512=[name=alice,password=alice-secret]` with an optional
//! `iterations=N` (default 4096, Kafka's minimum). Blank lines and `#`
//! comments are skipped.
//!
//! Owns: parsing that file and deriving each credential with a fresh
//! random salt (the password is dropped once derived). Must not: keep
//! passwords.

use anyhow::{bail, Context};

use super::scram::{ScramCredential, ScramCredentials, ScramMechanism, MIN_ITERATIONS};

/// Largest credentials file read.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Loads the file into `store`; returns how many credentials it held.
pub fn load_file(path: &std::path::Path, store: &ScramCredentials) -> anyhow::Result<usize> {
    let bytes =
        crate::security::read_bounded_file(path, MAX_FILE_BYTES, "--sasl-scram-credentials-file")?;
    let text =
        String::from_utf8(bytes).with_context(|| format!("{} is not UTF-8", path.display()))?;
    let mut count = 0;
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (mechanism, user, credential) =
            parse_entry(line).with_context(|| format!("{} line {}", path.display(), number + 1))?;
        store.upsert(mechanism, &user, credential);
        count += 1;
    }
    Ok(count)
}

/// `MECHANISM=[name=N,password=P(,iterations=I)]`.
fn parse_entry(line: &str) -> anyhow::Result<(ScramMechanism, String, ScramCredential)> {
    let (mechanism, body) = line
        .split_once('=')
        .context("expected SCRAM-SHA-256=[...] or SCRAM-SHA-512=[...]")?;
    let mechanism = ScramMechanism::parse(mechanism.trim())
        .with_context(|| format!("unknown SCRAM mechanism {mechanism:?}"))?;
    let body = body
        .trim()
        .strip_prefix('[')
        .and_then(|b| b.strip_suffix(']'))
        .context("the credential must be in [ ]")?;
    let (mut name, mut password, mut iterations) = (None, None, MIN_ITERATIONS);
    for field in body.split(',') {
        let (key, value) = field.split_once('=').context("expected key=value")?;
        let value = value.trim().trim_matches('"');
        match key.trim() {
            "name" => name = Some(value.to_string()),
            "password" => password = Some(value.to_string()),
            "iterations" => iterations = value.parse().context("iterations")?,
            other => bail!("unknown field {other:?} (name, password, iterations)"),
        }
    }
    let name = name.filter(|n| !n.is_empty()).context("name= is missing")?;
    let password = password.context("password= is missing")?;
    let mut salt = vec![0u8; 16];
    super::fill_random(&mut salt);
    let credential = ScramCredential::from_password(mechanism, &password, salt, iterations)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok((mechanism, name, credential))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_use_kafka_storage_syntax() {
        let (m, user, c) =
            parse_entry("SCRAM-SHA-512=[name=alice,password=\"alice-secret\"]").expect("parses");
        assert_eq!(
            (m, user.as_str(), c.iterations),
            (ScramMechanism::Sha512, "alice", 4096)
        );
        let (_, _, c) =
            parse_entry("SCRAM-SHA-256=[name=bob,password=x,iterations=8192]").expect("parses");
        assert_eq!(c.iterations, 8192);
        for bad in [
            "SCRAM-SHA-1=[name=a,password=b]",
            "SCRAM-SHA-256=name=a,password=b",
            "SCRAM-SHA-256=[password=b]",
            "SCRAM-SHA-256=[name=a,password=b,iterations=100]",
            "SCRAM-SHA-256=[name=a,salt=b]",
        ] {
            assert!(parse_entry(bad).is_err(), "{bad}");
        }
    }
}
