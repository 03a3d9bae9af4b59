//! `POST /produce` and `POST /produce/batch`: produce and wait for every
//! delivery report, then say what happened to each message.
//!
//! A batch is sent in one pass (never awaited message by message); the
//! request then waits on one [`BatchWaiter`] that the delivery callback
//! completes. 200 only when every message was acknowledged; otherwise a
//! non-2xx status (see `error::status_for_failures`) with per-message results.
//! Waiting is bounded by the message timeout (plus slack), so a dead broker
//! yields 503s, never a hang.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use chronik_harness::envelope::now_us;
use rdkafka::error::RDKafkaErrorCode;
use serde::Serialize;
use serde_json::json;

use super::{accepted_body, batch_messages, prepare_all};
use crate::app::AppState;
use crate::error::{is_retriable, json_response, kafka_error_name, status_for_failures, AppError};
use crate::message::parse_one;
use crate::producer::{BatchWaiter, Outcome, RunEnd, Staged};

/// Beyond `message.timeout.ms`, how long to wait for librdkafka's report
/// (linger, a last in-flight request) before calling the outcome unknown.
const REPORT_SLACK: Duration = Duration::from_secs(5);

/// `POST /produce`: one message; 200 `{"topic","partition","offset"}`.
pub async fn single(State(state): State<AppState>, request: Request) -> Result<Response, AppError> {
    let accept_time_us = now_us();
    let body = accepted_body(&state, request).await?;
    let msg = parse_one(&body).map_err(AppError::Parse)?;
    let mut staged = prepare_all(&state, vec![msg], &state.config.topic).await?;
    let topic = staged[0].msg.topic.to_string();
    let outcomes = send_and_wait(&state, &mut staged, accept_time_us).await;
    match outcomes[0] {
        Outcome::Delivered { partition, offset } => Ok(Json(
            json!({ "topic": topic, "partition": partition, "offset": offset }),
        )
        .into_response()),
        Outcome::Failed(code) => Err(AppError::Delivery { code }),
        Outcome::Pending => Ok(unknown_outcome_response(1)),
    }
}

/// `POST /produce/batch`: a JSON array of messages.
pub async fn batch(State(state): State<AppState>, request: Request) -> Result<Response, AppError> {
    let accept_time_us = now_us();
    let body = accepted_body(&state, request).await?;
    let msgs = batch_messages(&body)?;
    let mut staged = prepare_all(&state, msgs, &state.config.topic).await?;
    let outcomes = send_and_wait(&state, &mut staged, accept_time_us).await;
    Ok(batch_response(&outcomes))
}

/// Sends every message (retrying while librdkafka's queue is full, up to the
/// message timeout) and waits for all their outcomes.
async fn send_and_wait(
    state: &AppState,
    staged: &mut [Staged<'_>],
    accept_time_us: i64,
) -> Vec<Outcome> {
    let n = staged.len();
    let (waiter, done) = BatchWaiter::new(n);
    send_all(state, staged, accept_time_us, &waiter).await;
    let wait = state.config.message_timeout + REPORT_SLACK;
    if tokio::time::timeout(wait, done).await.is_err() {
        tracing::warn!(
            messages = n,
            ?wait,
            "delivery reports overdue; answering with unknown outcomes"
        );
    }
    waiter.outcomes()
}

async fn send_all(
    state: &AppState,
    staged: &mut [Staged<'_>],
    accept_time_us: i64,
    waiter: &Arc<BatchWaiter>,
) {
    let deadline = tokio::time::Instant::now() + state.config.message_timeout;
    let mut start = 0;
    let mut backoff = Duration::from_millis(1);
    let mut enqueue_errors = Vec::new();
    loop {
        match state.producer.send_run(
            staged,
            start,
            accept_time_us,
            Some(waiter),
            &mut enqueue_errors,
        ) {
            RunEnd::Done => return,
            RunEnd::QueueFull { at } => {
                if tokio::time::Instant::now() >= deadline {
                    for index in at..staged.len() {
                        waiter.complete(index, Outcome::Failed(RDKafkaErrorCode::QueueFull));
                    }
                    state
                        .producer
                        .count_rejected("queue_full", staged.len() - at);
                    return;
                }
                // The client is waiting anyway: let librdkafka drain a little.
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_millis(50));
                start = at;
            }
        }
    }
}

#[derive(Serialize)]
#[serde(untagged)]
enum MessageResult {
    Delivered {
        partition: i32,
        offset: i64,
    },
    Failed {
        error: String,
        detail: String,
        retriable: bool,
    },
}

#[derive(Serialize)]
struct AllDelivered<'a> {
    delivered: usize,
    results: &'a [MessageResult],
}

fn result_of(outcome: &Outcome) -> MessageResult {
    match *outcome {
        Outcome::Delivered { partition, offset } => MessageResult::Delivered { partition, offset },
        Outcome::Failed(code) => {
            MessageResult::Failed { error: kafka_error_name(code), detail: code.to_string(), retriable: is_retriable(code) }
        }
        Outcome::Pending => MessageResult::Failed {
            error: "DeliveryUnknown".into(),
            detail: "no delivery report within the message timeout; the message may or may not have been written".into(),
            retriable: true,
        },
    }
}

/// 200 `{"delivered": n, "results": [...]}` when all were acknowledged, else
/// the failure status with `{"error","detail","delivered","failed","results"}`.
fn batch_response(outcomes: &[Outcome]) -> Response {
    let results: Vec<MessageResult> = outcomes.iter().map(result_of).collect();
    let delivered = outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Delivered { .. }))
        .count();
    if delivered == outcomes.len() {
        // Serialized straight from the struct: this is the hot path.
        return Json(AllDelivered {
            delivered,
            results: &results,
        })
        .into_response();
    }
    let pending = outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Pending))
        .count();
    let failed_codes = outcomes.iter().filter_map(|o| match o {
        Outcome::Failed(code) => Some(*code),
        _ => None,
    });
    let status = if pending > 0 {
        StatusCode::GATEWAY_TIMEOUT
    } else {
        status_for_failures(failed_codes)
    };
    let failed = outcomes.len() - delivered;
    let (first_index, first) = outcomes
        .iter()
        .enumerate()
        .find(|(_, o)| !matches!(o, Outcome::Delivered { .. }))
        .map(|(i, o)| (i, result_of(o)))
        .unwrap_or((
            0,
            MessageResult::Delivered {
                partition: 0,
                offset: 0,
            },
        ));
    let first_detail = match first {
        MessageResult::Failed { detail, .. } => detail,
        MessageResult::Delivered { .. } => String::new(),
    };
    let body = json!({
        "error": if pending > 0 { "delivery_unknown" } else { "delivery_failed" },
        "detail": format!("{failed} of {} messages were not acknowledged (first: message {first_index}: {first_detail})", outcomes.len()),
        "delivered": delivered,
        "failed": failed,
        "results": results,
    });
    json_response(status, body)
}

fn unknown_outcome_response(n: usize) -> Response {
    batch_response(&vec![Outcome::Pending; n])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_status_is_200_only_when_all_delivered() {
        let ok = Outcome::Delivered {
            partition: 0,
            offset: 1,
        };
        let timed_out = Outcome::Failed(RDKafkaErrorCode::MessageTimedOut);
        let unknown_partition = Outcome::Failed(RDKafkaErrorCode::UnknownPartition);
        let table = [
            (vec![ok, ok], StatusCode::OK),
            (vec![ok, timed_out], StatusCode::SERVICE_UNAVAILABLE),
            (vec![unknown_partition, ok], StatusCode::NOT_FOUND),
            (vec![ok, Outcome::Pending], StatusCode::GATEWAY_TIMEOUT),
        ];
        for (outcomes, status) in table {
            assert_eq!(batch_response(&outcomes).status(), status, "{outcomes:?}");
        }
    }
}
