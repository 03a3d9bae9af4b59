//! Producer ledgers: what each producer says happened to its sequences.
//!
//! Owns: reading ledgers from files and from plain `http://` URLs (an
//! ingestor's `GET /ledger`).
//! Must not: reconcile ledgers with what was consumed
//! (`chronik_harness::reconcile`) or decide the verdict (that is `report`).
//!
//! The schema is `chronik_harness::ledger::Ledger`. A source holds one
//! ledger, a JSON array of them, or an object with a `ledgers` array (how a
//! chronik-bench result file can carry them).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::Error;

pub use chronik_harness::ledger::Ledger;

/// Parses one ledger source's text (`source` names it in errors).
pub fn parse_ledgers(source: &str, text: &str) -> Result<Vec<Ledger>, Error> {
    let bad = |reason: String| Error::Ledger {
        origin: source.to_string(),
        reason,
    };
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
    let ledgers: Vec<Ledger> = match value {
        serde_json::Value::Array(_) => serde_json::from_value(value),
        serde_json::Value::Object(mut fields) if fields.contains_key("ledgers") => {
            serde_json::from_value(fields.remove("ledgers").unwrap_or_default())
        }
        other => serde_json::from_value(other).map(|l| vec![l]),
    }
    .map_err(|e| bad(e.to_string()))?;
    if let Some(i) = ledgers.iter().position(|l| l.id().is_none()) {
        return Err(bad(format!(
            "ledger #{i} has neither producer_id nor producer_id_hex"
        )));
    }
    Ok(ledgers)
}

/// Reads the ledgers of a file path or a plain `http://` URL.
pub fn load_ledgers(source: &str) -> Result<Vec<Ledger>, Error> {
    let text = if source.starts_with("http://") {
        http_get(source)?
    } else if source.starts_with("https://") {
        return Err(Error::Ledger {
            origin: source.to_string(),
            reason: "https is not supported; use http://".into(),
        });
    } else {
        std::fs::read_to_string(source).map_err(|e| Error::Ledger {
            origin: source.to_string(),
            reason: e.to_string(),
        })?
    };
    parse_ledgers(source, &text)
}

const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// A plain HTTP/1.1 GET (no TLS, no redirects); the body of a 200 answer.
pub fn http_get(url: &str) -> Result<String, Error> {
    let bad = |reason: String| Error::Ledger {
        origin: url.to_string(),
        reason,
    };
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| bad("not an http:// URL".into()))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let with_port = if authority
        .rsplit(':')
        .next()
        .is_some_and(|p| p.parse::<u16>().is_ok())
        && !authority.ends_with(']')
    {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    let addr = with_port
        .to_socket_addrs()
        .map_err(|e| bad(format!("resolving {with_port}: {e}")))?
        .next()
        .ok_or_else(|| bad(format!("{with_port} resolves to nothing")))?;
    let mut stream = TcpStream::connect_timeout(&addr, HTTP_TIMEOUT)
        .map_err(|e| bad(format!("connecting: {e}")))?;
    stream
        .set_read_timeout(Some(HTTP_TIMEOUT))
        .map_err(|e| bad(e.to_string()))?;
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nAccept: application/json\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .map_err(|e| bad(format!("sending: {e}")))?;
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .map_err(|e| bad(format!("reading: {e}")))?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no HTTP header end".into()))?;
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let body = &raw[split + 4..];
    let status = head.split_whitespace().nth(1).unwrap_or("");
    if status != "200" {
        return Err(bad(format!("HTTP status {status}")));
    }
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    let body = if chunked {
        dechunk(body).ok_or_else(|| bad("bad chunked body".into()))?
    } else {
        body.to_vec()
    };
    String::from_utf8(body).map_err(|e| bad(e.to_string()))
}

fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&body[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(body.get(..size)?);
        body = body.get(size + 2..)?;
    }
}

#[cfg(test)]
#[allow(clippy::type_complexity)] // test tables
mod tests {
    use super::*;

    #[test]
    fn every_documented_shape_parses() {
        let one = r#"{"producer_id": 18446744073709551615, "acknowledged": [[0, 9]], "failed": [[10, 10]]}"#;
        let many = r#"[{"producer_id": 1, "acknowledged": [[0, 1]]}, {"producer_id": 2, "failed": [[0, 0]]}]"#;
        let wrapped = r#"{"ledgers": [{"producer_id_hex": "00000000000000ff", "acknowledged": []}], "other": 1}"#;
        let ingestor = r#"{"ingestor_id": "a", "producer_id": 5, "producer_id_hex": "0000000000000005",
            "next_sequence": 3, "acknowledged": [[0, 1]], "failed": [], "acknowledged_count": 2, "failed_count": 0, "in_flight": 1}"#;
        let table: &[(&str, &[u64])] = &[
            (one, &[u64::MAX]),
            (many, &[1, 2]),
            (wrapped, &[255]),
            (ingestor, &[5]),
        ];
        for (text, ids) in table {
            let ledgers = parse_ledgers("t", text).expect(text);
            assert_eq!(
                ledgers
                    .iter()
                    .map(|l| l.id().expect("id"))
                    .collect::<Vec<_>>(),
                *ids,
                "{text}"
            );
        }
        let l = &parse_ledgers("t", ingestor).expect("parses")[0];
        assert_eq!(
            (l.next_sequence, l.ingestor_id.as_deref()),
            (Some(3), Some("a"))
        );
        assert!(parse_ledgers("t", r#"{"acknowledged": [[0, 1]]}"#).is_err());
        assert!(parse_ledgers("t", r#"{"producer_id": 1, "acknowledged": [[5, 1]]}"#).is_err());
        assert!(parse_ledgers("t", "not json").is_err());
        // One schema, snake_case only: a camelCase id is no id.
        let camel = parse_ledgers("t", r#"{"producerId": 2, "acknowledged": [[0, 0]]}"#);
        assert!(camel.is_err_and(|e| e.to_string().contains("neither producer_id")));
    }

    #[test]
    fn chunked_bodies_decode() {
        assert_eq!(
            dechunk(b"4\r\nWiki\r\n5;x=1\r\npedia\r\n0\r\n\r\n").as_deref(),
            Some(&b"Wikipedia"[..])
        );
        assert_eq!(dechunk(b"4\r\nWi"), None);
    }

    #[test]
    fn https_is_refused_plainly() {
        let err = load_ledgers("https://example.invalid/ledger").expect_err("refused");
        assert!(err.to_string().contains("https"), "{err}");
    }
}
