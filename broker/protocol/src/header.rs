//! Request header parsing and whole-request decoding.
//!
//! Owns: reading the three fixed header fields every request version shares
//! (api key, api version, correlation id) without trusting anything else, then
//! the full typed header and body for supported API versions. Must not: answer
//! requests or decide what an unsupported one gets back (the server does).

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::Decodable;

use crate::api::{api_name, check_supported, Request};
use crate::error::RequestError;

/// The fields at fixed positions in every request header version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawHeader {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
}

impl RawHeader {
    /// Reads the fixed fields; `frame` is at least `MIN_REQUEST_LEN` long
    /// because framing rejected anything shorter.
    pub fn peek(frame: &[u8]) -> Option<RawHeader> {
        if frame.len() < 8 {
            return None;
        }
        Some(RawHeader {
            api_key: i16::from_be_bytes([frame[0], frame[1]]),
            api_version: i16::from_be_bytes([frame[2], frame[3]]),
            correlation_id: i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]),
        })
    }
}

/// A fully decoded request.
#[derive(Debug, Clone)]
pub struct DecodedRequest {
    pub header: RequestHeader,
    pub api_key: ApiKey,
    pub body: Request,
}

impl DecodedRequest {
    pub fn version(&self) -> i16 {
        self.header.request_api_version
    }
    pub fn correlation_id(&self) -> i32 {
        self.header.correlation_id
    }
}

/// Decodes one request frame (without its size prefix).
pub fn decode_request(mut frame: Bytes) -> Result<DecodedRequest, RequestError> {
    let raw = RawHeader::peek(&frame).ok_or(RequestError::Malformed {
        api: "Unknown",
        version: -1,
        reason: "frame shorter than a request header".into(),
    })?;
    let api_key = check_supported(&raw)?;
    let version = raw.api_version;
    let header_version = api_key.request_header_version(version);
    let header =
        RequestHeader::decode(&mut frame, header_version).map_err(|e| RequestError::Malformed {
            api: api_name(api_key),
            version,
            reason: format!("header: {e}"),
        })?;
    // Trailing bytes after the body are ignored, as Kafka does.
    let body = Request::decode_body(api_key, version, &mut frame)?;
    Ok(DecodedRequest {
        header,
        api_key,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{encode_response, Response};
    use bytes::BytesMut;
    use kafka_protocol::messages::{ApiVersionsRequest, MetadataResponse};
    use kafka_protocol::protocol::{Encodable, StrBytes};

    fn request_frame(api_key: ApiKey, version: i16, body: &impl Encodable) -> Bytes {
        let mut buf = BytesMut::new();
        let header = RequestHeader::default()
            .with_request_api_key(api_key as i16)
            .with_request_api_version(version)
            .with_correlation_id(77)
            .with_client_id(Some(StrBytes::from_static_str("test")));
        header
            .encode(&mut buf, api_key.request_header_version(version))
            .expect("header encodes");
        body.encode(&mut buf, version).expect("body encodes");
        buf.freeze()
    }

    #[test]
    fn decodes_a_flexible_api_versions_request() {
        let body = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("librdkafka"))
            .with_client_software_version(StrBytes::from_static_str("2.12.1"));
        let decoded =
            decode_request(request_frame(ApiKey::ApiVersions, 3, &body)).expect("decodes");
        assert_eq!(decoded.correlation_id(), 77);
        assert!(
            matches!(decoded.body, Request::ApiVersions(r) if r.client_software_name.as_str() == "librdkafka")
        );
    }

    #[test]
    fn rejects_unknown_keys_and_unsupported_versions_with_the_correlation_id() {
        let mut frame = BytesMut::new();
        frame.extend_from_slice(&999i16.to_be_bytes());
        frame.extend_from_slice(&0i16.to_be_bytes());
        frame.extend_from_slice(&5i32.to_be_bytes());
        frame.extend_from_slice(&(-1i16).to_be_bytes());
        assert!(matches!(
            decode_request(frame.freeze()),
            Err(RequestError::UnknownApiKey {
                api_key: 999,
                correlation_id: 5
            })
        ));
        let body = ApiVersionsRequest::default();
        let mut frame = BytesMut::from(&request_frame(ApiKey::ApiVersions, 0, &body)[..]);
        frame[2..4].copy_from_slice(&127i16.to_be_bytes());
        assert!(matches!(
            decode_request(frame.freeze()),
            Err(RequestError::UnsupportedVersion {
                api: "ApiVersions",
                version: 127,
                correlation_id: 77,
                ..
            })
        ));
    }

    #[test]
    fn truncated_bodies_are_malformed_not_panics() {
        let body = kafka_protocol::messages::MetadataRequest::default().with_topics(None);
        let frame = request_frame(ApiKey::Metadata, 12, &body);
        let cut = frame.slice(..frame.len() - 1);
        assert!(matches!(
            decode_request(cut),
            Err(RequestError::Malformed {
                api: "Metadata",
                ..
            })
        ));
    }

    #[test]
    fn response_frames_carry_their_size_and_correlation_id() {
        let bytes = encode_response(42, 12, &Response::Metadata(MetadataResponse::default()))
            .expect("encodes");
        let size = i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
        assert_eq!(size, bytes.len() - 4);
        assert_eq!(
            i32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]),
            42
        );
    }
}
