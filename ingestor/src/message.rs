//! The JSON wire format of produce requests and its validation.
//!
//! Owns: parsing a request body (one message object or an array of them) into
//! structs that borrow from the body wherever the JSON string needs no
//! unescaping, and turning each into a [`Prepared`] message (value bytes, key,
//! headers, target topic and partition, CRC-32C) ready for the producer.
//! Errors say which message (index) failed and where the parser stopped.
//! Must not: talk to Kafka, allocate sequence numbers or know about HTTP.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;

use base64::Engine as _;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// A JSON string, borrowed from the request body when it has no escapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonStr<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for JsonStr<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = JsonStr<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(JsonStr(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(JsonStr(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(JsonStr(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V(std::marker::PhantomData))
    }
}

/// `"headers": {"name": "value", ...}` in document order (duplicates kept, as
/// Kafka allows them).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HeadersIn<'a>(pub Vec<(JsonStr<'a>, JsonStr<'a>)>);

impl<'de: 'a, 'a> Deserialize<'de> for HeadersIn<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = HeadersIn<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of string header values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<JsonStr<'a>, JsonStr<'a>>()? {
                    out.push((k, v));
                }
                Ok(HeadersIn(out))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// One message as the client sent it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessageIn<'a> {
    #[serde(borrow, default)]
    pub value: Option<JsonStr<'a>>,
    /// Standard base64 (RFC 4648, with padding) for binary values.
    #[serde(borrow, default)]
    pub value_b64: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    pub key: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    pub headers: Option<HeadersIn<'a>>,
    #[serde(default)]
    pub partition: Option<i32>,
    #[serde(borrow, default)]
    pub topic: Option<JsonStr<'a>>,
}

/// Why a body could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// Syntax (not JSON at all) vs data (valid JSON of the wrong shape).
    pub kind: ParseErrorKind,
    /// The message whose element failed, when the failure was inside one.
    pub index: Option<usize>,
    pub line: usize,
    pub column: usize,
    /// serde_json's message, including the position.
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseErrorKind {
    /// Malformed or truncated JSON.
    Syntax,
    /// Well-formed JSON that is not a message / an array of messages.
    Data,
}

impl ParseError {
    fn from_serde(e: &serde_json::Error, index: Option<usize>) -> ParseError {
        let kind = match e.classify() {
            serde_json::error::Category::Data => ParseErrorKind::Data,
            _ => ParseErrorKind::Syntax,
        };
        ParseError {
            kind,
            index,
            line: e.line(),
            column: e.column(),
            detail: e.to_string(),
        }
    }
}

/// Parses a JSON array of messages, remembering which element failed.
pub fn parse_batch(body: &[u8]) -> Result<Vec<MessageIn<'_>>, ParseError> {
    let failed_at = Cell::new(None);
    let mut de = serde_json::Deserializer::from_slice(body);
    let parsed = BatchSeed {
        failed_at: &failed_at,
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v));
    parsed.map_err(|e| ParseError::from_serde(&e, failed_at.get()))
}

/// Parses one JSON message object.
pub fn parse_one(body: &[u8]) -> Result<MessageIn<'_>, ParseError> {
    serde_json::from_slice(body).map_err(|e| ParseError::from_serde(&e, None))
}

struct BatchSeed<'c> {
    failed_at: &'c Cell<Option<usize>>,
}

impl<'de> DeserializeSeed<'de> for BatchSeed<'_> {
    type Value = Vec<MessageIn<'de>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for BatchSeed<'_> {
    type Value = Vec<MessageIn<'de>>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON array of message objects")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        loop {
            match seq.next_element::<MessageIn<'de>>() {
                Ok(Some(m)) => out.push(m),
                Ok(None) => return Ok(out),
                Err(e) => {
                    self.failed_at.set(Some(out.len()));
                    return Err(e);
                }
            }
        }
    }
}

/// Why a well-formed message cannot be produced; always names the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidMessage {
    pub index: usize,
    pub detail: String,
}

/// A validated message, ready to hand to the producer. Borrows from the body.
#[derive(Debug)]
pub struct Prepared<'a> {
    pub topic: Cow<'a, str>,
    pub partition: Option<i32>,
    pub key: Option<Cow<'a, str>>,
    pub value: Cow<'a, [u8]>,
    pub headers: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    /// CRC-32C of `value`, for the verification envelope.
    pub value_crc32c: u32,
}

/// Kafka's own limit on topic names (`Topic.MAX_NAME_LENGTH`).
pub const MAX_TOPIC_NAME_LEN: usize = 249;

/// Validates message `index` and resolves its topic (`default_topic` when absent).
pub fn prepare<'a>(
    index: usize,
    m: MessageIn<'a>,
    default_topic: &'a str,
) -> Result<Prepared<'a>, InvalidMessage> {
    let invalid = |detail: String| InvalidMessage { index, detail };
    let value: Cow<'a, [u8]> = match (m.value, m.value_b64) {
        (Some(_), Some(_)) => {
            return Err(invalid(format!(
                "message {index} has both \"value\" and \"value_b64\""
            )))
        }
        (None, None) => {
            return Err(invalid(format!(
                "message {index} has no \"value\" (or \"value_b64\")"
            )))
        }
        (Some(JsonStr(Cow::Borrowed(s))), None) => Cow::Borrowed(s.as_bytes()),
        (Some(JsonStr(Cow::Owned(s))), None) => Cow::Owned(s.into_bytes()),
        (None, Some(b64)) => {
            match base64::engine::general_purpose::STANDARD.decode(b64.0.as_bytes()) {
                Ok(bytes) => Cow::Owned(bytes),
                Err(e) => {
                    return Err(invalid(format!(
                        "message {index}: \"value_b64\" is not valid base64: {e}"
                    )))
                }
            }
        }
    };
    let topic = match m.topic {
        Some(t) => {
            validate_topic_name(&t.0)
                .map_err(|why| invalid(format!("message {index}: topic {:?} {why}", t.0)))?;
            t.0
        }
        None => Cow::Borrowed(default_topic),
    };
    if let Some(p) = m.partition {
        if p < 0 {
            return Err(invalid(format!(
                "message {index}: partition {p} is negative"
            )));
        }
    }
    let headers = m
        .headers
        .map(|h| h.0.into_iter().map(|(k, v)| (k.0, v.0)).collect())
        .unwrap_or_default();
    Ok(Prepared {
        value_crc32c: crc32c_of(&value),
        topic,
        partition: m.partition,
        key: m.key.map(|k| k.0),
        value,
        headers,
    })
}

/// The envelope's checksum, computed here (outside the producer's sequencing
/// lock) to keep that critical section short.
fn crc32c_of(value: &[u8]) -> u32 {
    crc32c::crc32c(value)
}

/// Kafka's topic name rules: 1..=249 chars of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("is empty");
    }
    if name.len() > MAX_TOPIC_NAME_LEN {
        return Err("is longer than 249 characters");
    }
    if name == "." || name == ".." {
        return Err("is not a legal topic name");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err("may only contain ASCII letters, digits, '.', '_' and '-'");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn borrows_unescaped_strings_and_owns_escaped_ones() {
        let body = br#"[{"value":"plain","key":"k\"q","headers":{"a":"1","a":"2"}}]"#;
        let msgs = parse_batch(body).expect("parses");
        assert!(matches!(
            msgs[0].value,
            Some(JsonStr(Cow::Borrowed("plain")))
        ));
        assert!(matches!(&msgs[0].key, Some(JsonStr(Cow::Owned(k))) if k == "k\"q"));
        let headers = &msgs[0].headers.as_ref().expect("headers").0;
        assert_eq!(headers.len(), 2, "duplicate header names are kept");
    }

    #[test]
    fn syntax_errors_carry_position_and_element() {
        let e = parse_batch(b"[{\"value\":\"a\"},\n {\"value\": }]").expect_err("malformed");
        assert_eq!(e.kind, ParseErrorKind::Syntax);
        assert_eq!((e.index, e.line), (Some(1), 2));
        assert!(e.column > 0 && e.detail.contains("line 2"), "{e:?}");
        let e = parse_batch(b"[{\"value\":\"a\"}] trailing").expect_err("trailing");
        assert_eq!((e.kind, e.index), (ParseErrorKind::Syntax, None));
        let e = parse_batch(b"[{\"value\":\"a\"").expect_err("truncated");
        assert_eq!(e.kind, ParseErrorKind::Syntax);
    }

    #[test]
    fn shape_errors_name_the_message() {
        let e =
            parse_batch(br#"[{"value":"a"},{"value":"b"},{"value":5}]"#).expect_err("wrong type");
        assert_eq!((e.kind, e.index), (ParseErrorKind::Data, Some(2)));
        let e = parse_batch(br#"[{"value":"a","vaule":"b"}]"#).expect_err("unknown field");
        assert_eq!((e.kind, e.index), (ParseErrorKind::Data, Some(0)));
        let e = parse_batch(br#"{"value":"a"}"#).expect_err("object, not array");
        assert_eq!((e.kind, e.index), (ParseErrorKind::Data, None));
    }

    #[test]
    fn prepare_checks_value_topic_and_partition() {
        let msgs = parse_batch(
            br#"[{"value":"x"},{"key":"k"},{"value":"x","value_b64":"eA=="},{"value_b64":"AAEC/w=="},
                 {"value":"x","topic":"bad topic"},{"value":"x","partition":-3},{"value_b64":"!!"},
                 {"value":"x","topic":"other","partition":2,"key":null,"headers":null}]"#,
        )
        .expect("parses");
        let results: Vec<_> = msgs
            .into_iter()
            .enumerate()
            .map(|(i, m)| prepare(i, m, "default"))
            .collect();
        let ok = results[0].as_ref().expect("plain value");
        assert_eq!((ok.topic.as_ref(), &*ok.value), ("default", &b"x"[..]));
        assert_eq!(ok.value_crc32c, crc32c_of(b"x"));
        assert_eq!(results[1].as_ref().expect_err("no value").index, 1);
        assert!(results[2]
            .as_ref()
            .expect_err("both")
            .detail
            .contains("both"));
        assert_eq!(
            &*results[3].as_ref().expect("binary").value,
            &[0u8, 1, 2, 255][..]
        );
        assert!(results[4]
            .as_ref()
            .expect_err("topic")
            .detail
            .contains("topic"));
        assert!(results[5]
            .as_ref()
            .expect_err("partition")
            .detail
            .contains("negative"));
        assert!(results[6]
            .as_ref()
            .expect_err("base64")
            .detail
            .contains("base64"));
        let other = results[7].as_ref().expect("explicit topic");
        assert_eq!(
            (other.topic.as_ref(), other.partition, other.key.is_none()),
            ("other", Some(2), true)
        );
    }

    #[test]
    fn topic_names_follow_kafka_rules() {
        assert!(validate_topic_name("orders.v1_x-2").is_ok());
        for bad in ["", ".", "..", "a b", "ä", &"x".repeat(250)] {
            assert!(validate_topic_name(bad).is_err(), "{bad:?}");
        }
    }
}
