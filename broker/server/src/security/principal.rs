//! Who a connection is: Kafka's `KafkaPrincipal` (`User:<name>`), from a
//! SASL login, from an mTLS client certificate's subject (Kafka's
//! `ssl.principal.mapping.rules=DEFAULT`: the distinguished name in RFC 2253
//! form, as Java's `X500Principal.getName()` prints it), else `ANONYMOUS`.
//!
//! Owns: the principal type and reading a certificate's subject name out of
//! its DER. Must not: verify certificates (rustls has, before this runs) or
//! decide what a principal may do (authorization is not done here).

use std::fmt;

/// Kafka's `KafkaPrincipal`, always of type `User`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KafkaPrincipal {
    pub name: String,
}

impl KafkaPrincipal {
    pub const ANONYMOUS: &'static str = "ANONYMOUS";

    pub fn user(name: impl Into<String>) -> KafkaPrincipal {
        KafkaPrincipal { name: name.into() }
    }

    pub fn anonymous() -> KafkaPrincipal {
        KafkaPrincipal::user(Self::ANONYMOUS)
    }

    /// The principal of a verified client certificate (DER): its subject
    /// DN, or `None` when the certificate cannot be read.
    pub fn from_certificate(der: &[u8]) -> Option<KafkaPrincipal> {
        subject_dn(der).map(KafkaPrincipal::user)
    }
}

impl fmt::Display for KafkaPrincipal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "User:{}", self.name)
    }
}

/// One DER element: its tag and contents, and what follows it.
fn element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let len = rest[..count]
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        (len, &rest[count..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;

/// The subject DN of a certificate in RFC 2253 form (RDNs last first,
/// Java's keywords, other attributes as `OID=#hex`).
pub fn subject_dn(certificate: &[u8]) -> Option<String> {
    let (_, cert, _) = element(certificate).filter(|(t, _, _)| *t == SEQUENCE)?;
    let (_, tbs, _) = element(cert).filter(|(t, _, _)| *t == SEQUENCE)?;
    let mut rest = tbs;
    // [0] version (optional), serial, signature algorithm, issuer, validity.
    let (tag, _, after) = element(rest)?;
    if tag == 0xa0 {
        rest = after;
    }
    for _ in 0..4 {
        rest = element(rest)?.2;
    }
    let (tag, subject, _) = element(rest)?;
    (tag == SEQUENCE).then_some(())?;
    let mut rdns = Vec::new();
    let mut names = subject;
    while !names.is_empty() {
        let (tag, set, next) = element(names)?;
        (tag == SET).then_some(())?;
        let mut attributes = Vec::new();
        let mut items = set;
        while !items.is_empty() {
            let (tag, pair, next_item) = element(items)?;
            (tag == SEQUENCE).then_some(())?;
            attributes.push(attribute(pair)?);
            items = next_item;
        }
        rdns.push(attributes.join("+"));
        names = next;
    }
    rdns.reverse();
    Some(rdns.join(","))
}

/// `type=value` of one AttributeTypeAndValue.
fn attribute(pair: &[u8]) -> Option<String> {
    let (tag, oid, value) = element(pair)?;
    (tag == OID).then_some(())?;
    let (value_tag, contents, _) = element(value)?;
    let keyword = match oid {
        [0x55, 0x04, 0x03] => Some("CN"),
        [0x55, 0x04, 0x06] => Some("C"),
        [0x55, 0x04, 0x07] => Some("L"),
        [0x55, 0x04, 0x08] => Some("ST"),
        [0x55, 0x04, 0x09] => Some("STREET"),
        [0x55, 0x04, 0x0a] => Some("O"),
        [0x55, 0x04, 0x0b] => Some("OU"),
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19] => Some("DC"),
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01] => Some("UID"),
        _ => None,
    };
    let text = match value_tag {
        // UTF8String, PrintableString, T61String, IA5String.
        0x0c | 0x13 | 0x14 | 0x16 => std::str::from_utf8(contents).ok().map(str::to_string),
        // BMPString (UTF-16BE).
        0x1e if contents.len() % 2 == 0 => String::from_utf16(
            &contents
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect::<Vec<_>>(),
        )
        .ok(),
        _ => None,
    };
    Some(match (keyword, text) {
        (Some(keyword), Some(text)) => format!("{keyword}={}", escape(&text)),
        (keyword, _) => {
            let name = keyword.map_or_else(|| oid_string(oid), str::to_string);
            let encoded = &value[..value.len() - element(value)?.2.len()];
            let hex: String = encoded.iter().map(|b| format!("{b:02x}")).collect();
            format!("{name}=#{hex}")
        }
    })
}

/// RFC 2253 section 2.4 escaping.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Dotted form of a DER object identifier.
fn oid_string(oid: &[u8]) -> String {
    let mut parts: Vec<u64> = Vec::new();
    let mut value: u64 = 0;
    for &b in oid {
        value = (value << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            if parts.is_empty() {
                let first = (value / 40).min(2);
                parts.push(first);
                parts.push(value - first * 40);
            } else {
                parts.push(value);
            }
            value = 0;
        }
    }
    parts
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DER of `SEQUENCE { tbs }` where tbs has a version, serial, algorithm,
    /// issuer, validity and `subject`.
    fn certificate_with_subject(subject: &[u8]) -> Vec<u8> {
        fn tlv(tag: u8, body: &[u8]) -> Vec<u8> {
            let mut out = vec![tag];
            if body.len() < 0x80 {
                out.push(u8::try_from(body.len()).expect("short"));
            } else {
                out.push(0x82);
                out.extend_from_slice(&u16::try_from(body.len()).expect("fits").to_be_bytes());
            }
            out.extend_from_slice(body);
            out
        }
        let mut tbs = tlv(0xa0, &tlv(0x02, &[2]));
        tbs.extend(tlv(0x02, &[1]));
        tbs.extend(tlv(SEQUENCE, &[]));
        tbs.extend(tlv(SEQUENCE, &[]));
        tbs.extend(tlv(SEQUENCE, &[]));
        tbs.extend(tlv(SEQUENCE, subject));
        tlv(SEQUENCE, &tlv(SEQUENCE, &tbs))
    }

    fn rdn(oid: &[u8], tag: u8, value: &[u8]) -> Vec<u8> {
        let mut pair = vec![OID, u8::try_from(oid.len()).expect("short")];
        pair.extend_from_slice(oid);
        pair.push(tag);
        pair.push(u8::try_from(value.len()).expect("short"));
        pair.extend_from_slice(value);
        let mut seq = vec![SEQUENCE, u8::try_from(pair.len()).expect("short")];
        seq.extend(pair);
        let mut set = vec![SET, u8::try_from(seq.len()).expect("short")];
        set.extend(seq);
        set
    }

    #[test]
    fn subject_is_printed_last_rdn_first_with_escapes() {
        let mut subject = rdn(&[0x55, 4, 6], 0x13, b"US");
        subject.extend(rdn(&[0x55, 4, 0x0a], 0x0c, b"Acme, Inc"));
        subject.extend(rdn(
            &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 1, 9, 1],
            0x16,
            b"a@b",
        ));
        subject.extend(rdn(&[0x55, 4, 3], 0x0c, b"alice"));
        let der = certificate_with_subject(&subject);
        assert_eq!(
            subject_dn(&der).as_deref(),
            Some("CN=alice,1.2.840.113549.1.9.1=#1603614062,O=Acme\\, Inc,C=US")
        );
        assert_eq!(
            KafkaPrincipal::from_certificate(&der).map(|p| p.to_string()),
            Some("User:CN=alice,1.2.840.113549.1.9.1=#1603614062,O=Acme\\, Inc,C=US".into())
        );
    }

    #[test]
    fn truncated_der_is_not_a_subject() {
        let der = certificate_with_subject(&rdn(&[0x55, 4, 3], 0x0c, b"alice"));
        for cut in 0..der.len() {
            assert_eq!(subject_dn(&der[..cut]), None, "cut at {cut}");
        }
    }
}
