//! HTTP handlers, one file per group of routes, and the request steps they
//! share: content-type and size checks, reading the body, validating messages
//! and their topics, and staging them for the producer.
//!
//! Order of checks (so each bad input gets its own status): 415 content type,
//! 413 size, 400 JSON syntax / shape, 400 empty batch, 422 per message, 404
//! topic / partition, 503 broker unreachable. Nothing is sent to Kafka until
//! every message of the request passed every check.

pub mod fire;
pub mod produce;
pub mod status;

use std::error::Error as _;

use axum::body::{to_bytes, Body, Bytes};
use axum::extract::Request;
use axum::http::{header, HeaderMap};

use crate::app::AppState;
use crate::error::AppError;
use crate::message::{parse_batch, prepare, MessageIn, Prepared};
use crate::producer::Staged;

/// Accepts `application/json` and `application/<anything>+json`, with parameters.
fn require_json(headers: &HeaderMap) -> Result<(), AppError> {
    let Some(value) = headers.get(header::CONTENT_TYPE) else {
        return Err(AppError::UnsupportedMediaType(
            "no Content-Type header".into(),
        ));
    };
    let text = value
        .to_str()
        .map_err(|_| AppError::UnsupportedMediaType("a non-ASCII Content-Type".into()))?;
    let mime = text
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let is_json =
        mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"));
    if is_json {
        Ok(())
    } else {
        Err(AppError::UnsupportedMediaType(format!("{text:?}")))
    }
}

/// Checks the content type and reads the whole body, at most `limit` bytes
/// (413 from a larger Content-Length before reading any of it; 408 when it
/// does not arrive within the server's body read timeout).
pub async fn read_json_body(request: Request, limit: usize) -> Result<Bytes, AppError> {
    let (parts, body): (_, Body) = request.into_parts();
    require_json(&parts.headers)?;
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(AppError::PayloadTooLarge { limit });
    }
    to_bytes(body, limit).await.map_err(|e| {
        let mut source: Option<&(dyn std::error::Error + 'static)> = e.source();
        while let Some(s) = source {
            if s.is::<http_body_util::LengthLimitError>() {
                return AppError::PayloadTooLarge { limit };
            }
            if let Some(elapsed) = s.downcast_ref::<chronik_http::BodyDeadlineElapsed>() {
                return AppError::BodyTimeout(elapsed.timeout);
            }
            source = s.source();
        }
        AppError::BodyRead(e.to_string())
    })
}

/// The JSON body of a produce request, once the ingestor is accepting
/// requests (`AppState::check_accepting`): at most `max_body_bytes`.
pub async fn accepted_body(state: &AppState, request: Request) -> Result<Bytes, AppError> {
    state.check_accepting()?;
    read_json_body(request, state.config.max_body_bytes).await
}

/// The messages of a batch body: a JSON array, not empty.
pub fn batch_messages(body: &[u8]) -> Result<Vec<MessageIn<'_>>, AppError> {
    let msgs = parse_batch(body).map_err(AppError::Parse)?;
    if msgs.is_empty() {
        return Err(AppError::EmptyBatch);
    }
    Ok(msgs)
}

/// Validates every message, checks their topics and partitions against the
/// broker's metadata, and stages them (user headers built).
pub async fn prepare_all<'a>(
    state: &AppState,
    msgs: Vec<MessageIn<'a>>,
    default_topic: &'a str,
) -> Result<Vec<Staged<'a>>, AppError> {
    let prepared = msgs
        .into_iter()
        .enumerate()
        .map(|(i, m)| prepare(i, m, default_topic))
        .collect::<Result<Vec<Prepared<'a>>, _>>()
        .map_err(AppError::InvalidMessage)?;
    check_topics(state, &prepared).await?;
    Ok(prepared
        .into_iter()
        .map(|m| state.producer.stage(m))
        .collect())
}

/// One entry per distinct topic: (topic, partitions needed, first message index).
async fn check_topics(state: &AppState, prepared: &[Prepared<'_>]) -> Result<(), AppError> {
    let mut topics: Vec<(&str, i32, usize)> = Vec::with_capacity(1);
    for (index, p) in prepared.iter().enumerate() {
        let needed = p.partition.map_or(1, |n| n.saturating_add(1));
        match topics.iter_mut().find(|(t, _, _)| *t == p.topic.as_ref()) {
            Some(entry) => entry.1 = entry.1.max(needed),
            None => topics.push((p.topic.as_ref(), needed, index)),
        }
    }
    for (topic, needed, first_index) in topics {
        let partitions = state
            .topics
            .partitions(&state.producer, topic, needed, state.config.message_timeout)
            .await
            .map_err(|source| AppError::Topic {
                index: first_index,
                source,
            })?;
        if needed > partitions {
            let (index, partition) = prepared
                .iter()
                .enumerate()
                .find_map(|(i, p)| {
                    p.partition
                        .filter(|&n| n >= partitions && p.topic == topic)
                        .map(|n| (i, n))
                })
                .unwrap_or((first_index, needed - 1));
            return Err(AppError::UnknownPartition {
                index,
                topic: topic.to_owned(),
                partition,
                partitions,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn content_types() {
        let table = [
            (Some("application/json"), true),
            (Some("Application/JSON; charset=utf-8"), true),
            (Some("application/vnd.chronik+json"), true),
            (Some("text/plain"), false),
            (Some("application/x-www-form-urlencoded"), false),
            (None, false),
        ];
        for (ct, ok) in table {
            let mut headers = HeaderMap::new();
            if let Some(ct) = ct {
                headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
            }
            assert_eq!(require_json(&headers).is_ok(), ok, "{ct:?}");
        }
    }
}
