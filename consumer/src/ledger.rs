//! Producer ledgers: what each producer says happened to its sequences.
//!
//! Owns: reading ledgers from
//! files and from plain `http://` URLs (an ingestor's `GET /ledger`), and
//! reconciling one producer's ledger with the sequences consumed.
//! Must not: decide the verdict (that is `report`).
//!
//! The schema is `chronik_harness::ledger::Ledger`. A source holds one
//! ledger, a JSON array of them, or an object with a `ledgers` array (how a
//! chronik-bench result file can carry them).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use serde::Serialize;

use crate::Error;
use chronik_harness::intervals::IntervalSet;

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

/// One producer's ledger against what was consumed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProducerReconciliation {
    pub acknowledged: u64,
    /// Acknowledged but never consumed: real loss.
    pub lost: IntervalSet,
    /// Production failed and the message is not in the topic: expected gaps.
    pub failed_not_consumed: IntervalSet,
    /// Production reported failure yet the message arrived (at-least-once ambiguity).
    pub delivered_despite_failure: u64,
    /// Below `next_sequence`, neither acknowledged nor failed, not consumed
    /// (in flight when the ledger was read, or never sent).
    pub unknown_not_consumed: IntervalSet,
    /// Consumed but in neither list (in flight when the ledger was read).
    pub consumed_not_in_ledger: u64,
}

/// Reconciles `ledger` (the union of every ledger of one producer id) with
/// the sequences `seen` of that producer.
pub fn reconcile(ledger: &Ledger, seen: &IntervalSet) -> ProducerReconciliation {
    let outcome_known = ledger.acknowledged.union(&ledger.failed);
    let unknown = match ledger.next_sequence {
        Some(next) if next > 0 => IntervalSet::from_ranges([[0, next - 1]])
            .difference(&outcome_known)
            .difference(seen),
        _ => IntervalSet::new(),
    };
    ProducerReconciliation {
        acknowledged: ledger.acknowledged.len(),
        lost: ledger.acknowledged.difference(seen),
        failed_not_consumed: ledger.failed.difference(seen),
        delivered_despite_failure: ledger.failed.intersection(seen).len(),
        unknown_not_consumed: unknown,
        consumed_not_in_ledger: seen.difference(&outcome_known).len(),
    }
}

/// Combines the ledgers of one producer id (several snapshots, or several
/// sources): acknowledged and failed are unioned; a sequence both
/// acknowledged and failed counts as acknowledged.
pub fn combine(ledgers: &[&Ledger]) -> Ledger {
    let mut acknowledged = IntervalSet::new();
    let mut failed = IntervalSet::new();
    for l in ledgers {
        acknowledged = acknowledged.union(&l.acknowledged);
        failed = failed.union(&l.failed);
    }
    Ledger {
        ingestor_id: ledgers.iter().find_map(|l| l.ingestor_id.clone()),
        producer_id: ledgers.iter().find_map(|l| l.id()),
        producer_id_hex: None,
        next_sequence: ledgers.iter().filter_map(|l| l.next_sequence).max(),
        failed: failed.difference(&acknowledged),
        acknowledged,
    }
}

#[cfg(test)]
#[allow(clippy::type_complexity)] // test tables
mod tests {
    use super::*;

    fn set(r: &[[u64; 2]]) -> IntervalSet {
        IntervalSet::from_ranges(r.iter().copied())
    }

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
    fn reconciliation_table() {
        // (acknowledged, failed, next_sequence, seen, lost, failed_not_consumed, despite, unknown, not_in_ledger)
        type R = &'static [[u64; 2]];
        let table: &[(R, R, Option<u64>, R, R, R, u64, R, u64)] = &[
            (&[[0, 9]], &[], Some(10), &[[0, 9]], &[], &[], 0, &[], 0),
            (
                &[[0, 10]],
                &[],
                None,
                &[[0, 9]],
                &[[10, 10]],
                &[],
                0,
                &[],
                0,
            ),
            (
                &[[0, 4], [6, 9]],
                &[[5, 5]],
                Some(10),
                &[[0, 4], [6, 9]],
                &[],
                &[[5, 5]],
                0,
                &[],
                0,
            ),
            (
                &[[0, 4]],
                &[[5, 5]],
                Some(10),
                &[[0, 5], [8, 8]],
                &[],
                &[],
                1,
                &[[6, 7], [9, 9]],
                1,
            ),
            (&[[0, 3]], &[], Some(4), &[], &[[0, 3]], &[], 0, &[], 0),
        ];
        for (i, &(ack, failed, next, seen, lost, fnc, despite, unknown, not_in)) in
            table.iter().enumerate()
        {
            let ledger = Ledger {
                producer_id: Some(1),
                producer_id_hex: None,
                acknowledged: set(ack),
                failed: set(failed),
                next_sequence: next,
                ingestor_id: None,
            };
            let r = reconcile(&ledger, &set(seen));
            assert_eq!(r.lost.ranges(), lost, "row {i}");
            assert_eq!(r.failed_not_consumed.ranges(), fnc, "row {i}");
            assert_eq!(r.delivered_despite_failure, despite, "row {i}");
            assert_eq!(r.unknown_not_consumed.ranges(), unknown, "row {i}");
            assert_eq!(r.consumed_not_in_ledger, not_in, "row {i}");
        }
    }

    #[test]
    fn combining_snapshots_prefers_acknowledged() {
        let a = parse_ledgers("a", r#"{"producer_id": 1, "acknowledged": [[0, 4]], "failed": [[5, 6]], "next_sequence": 7}"#)
            .expect("a");
        let b = parse_ledgers(
            "b",
            r#"{"producer_id": 1, "acknowledged": [[5, 5], [7, 9]], "next_sequence": 10}"#,
        )
        .expect("b");
        let c = combine(&[&a[0], &b[0]]);
        assert_eq!(c.acknowledged.ranges(), &[[0, 5], [7, 9]]);
        assert_eq!(c.failed.ranges(), &[[6, 6]]);
        assert_eq!(c.next_sequence, Some(10));
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
