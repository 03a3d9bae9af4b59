//! `POST /produce/fire/batch`: validate, enqueue, answer 202 at once.
//!
//! Delivery outcomes are recorded in the background by the delivery callback
//! (ledger and `ingestor_messages_{delivered,failed}_total`). When
//! librdkafka's queue is full the request answers 503 + `Retry-After`, saying
//! how many messages were accepted and from which index to resend: a message
//! is either accepted (and accounted for) or reported rejected, never dropped.

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use chronik_harness::envelope::now_us;
use serde_json::json;

use super::{accepted_body, batch_messages, prepare_all};
use crate::app::AppState;
use crate::error::{json_response, kafka_error_name, status_for_failures, AppError};
use crate::producer::RunEnd;

pub async fn batch(State(state): State<AppState>, request: Request) -> Result<Response, AppError> {
    let accept_time_us = now_us();
    let body = accepted_body(&state, request).await?;
    let msgs = batch_messages(&body)?;
    let mut staged = prepare_all(&state, msgs, &state.config.topic).await?;
    let total = staged.len();
    let mut enqueue_errors = Vec::new();
    let end = state
        .producer
        .send_run(&mut staged, 0, accept_time_us, None, &mut enqueue_errors);
    let attempted = match end {
        RunEnd::Done => total,
        RunEnd::QueueFull { at } => at,
    };
    let accepted = attempted - enqueue_errors.len();
    match end {
        RunEnd::Done if enqueue_errors.is_empty() => {
            Ok((StatusCode::ACCEPTED, Json(json!({ "accepted": accepted }))).into_response())
        }
        RunEnd::QueueFull { at } if enqueue_errors.is_empty() => {
            state.producer.count_rejected("queue_full", total - at);
            // Messages 0..at were accepted: the client resends from `at`.
            Err(AppError::QueueFull {
                accepted,
                rejected: total - at,
                total,
                resend_from: at,
            })
        }
        _ => {
            // librdkafka refused some messages outright (e.g. too large).
            if let RunEnd::QueueFull { at } = end {
                state.producer.count_rejected("queue_full", total - at);
            }
            let status = status_for_failures(enqueue_errors.iter().map(|&(_, code)| code));
            let rejected: Vec<_> = enqueue_errors
                .iter()
                .map(|&(index, code)| json!({ "index": index, "error": kafka_error_name(code), "detail": code.to_string() }))
                .collect();
            let body = json!({
                "error": "enqueue_failed",
                "detail": format!("{} of {total} messages were accepted; see rejected", accepted),
                "accepted": accepted,
                "rejected": rejected,
                "not_attempted_from": if attempted < total { Some(attempted) } else { None },
            });
            Ok(json_response(
                if status.is_success() {
                    StatusCode::BAD_GATEWAY
                } else {
                    status
                },
                body,
            ))
        }
    }
}
