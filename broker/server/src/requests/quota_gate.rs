//! Which quota a request counts against, and how an answer is throttled
//! (Kafka's rules): a Produce's request bytes count against
//! producer_byte_rate; a consumer's Fetch answer bytes against
//! consumer_byte_rate (an answer that would go over is replaced by an empty
//! one and its bytes taken back, so the consumer fetches them again after
//! the throttle); every request's time on the broker's threads against
//! request_percentage. Replication (a follower's Fetch), the brokers' own
//! requests (WriteTxnMarkers, the raft voter calls) and the handshake
//! (ApiVersions, SASL) are exempt. The answer carries the largest throttle
//! earned; the connection mutes the channel for as long.
//!
//! Owns: `Charge` (what a request will count, read before it runs) and
//! `settle` (recording it, the throttled answer). Must not: measure or
//! resolve quotas (`crate::quotas`) or mute sockets (`network::connection`).

use std::time::Duration;

use chronik_protocol::{Request, Response};
use kafka_protocol::messages::FetchResponse;

use crate::quotas::{ClientQuotaManager, QuotaType};
use crate::requests::handlers::Handled;

/// What a request counts against, read before its handler runs.
#[derive(Debug, Default)]
pub struct Charge {
    produce_bytes: Option<usize>,
    /// A consumer's Fetch: its session epoch (0 opens a session).
    consumer_fetch: Option<i32>,
    /// Exempt from request_percentage.
    exempt: bool,
}

impl Charge {
    /// Replication, the brokers' own calls, the handshake: never throttled.
    pub fn is_exempt(&self) -> bool {
        self.exempt
    }
}

/// The charge of `request` (`request_bytes`: its whole frame).
pub fn charge_of(request: &Request, version: i16, request_bytes: usize) -> Charge {
    match request {
        Request::Produce(_) => Charge {
            produce_bytes: Some(request_bytes),
            ..Charge::default()
        },
        Request::Fetch(r) => {
            let replica_id = if version >= 15 {
                r.replica_state.replica_id.0
            } else {
                r.replica_id.0
            };
            Charge {
                consumer_fetch: (replica_id < 0).then_some(r.session_epoch),
                exempt: replica_id >= 0,
                ..Charge::default()
            }
        }
        Request::ApiVersions(_)
        | Request::SaslHandshake(_)
        | Request::SaslAuthenticate(_)
        | Request::WriteTxnMarkers(_)
        | Request::AddRaftVoter(_)
        | Request::RemoveRaftVoter(_)
        | Request::UpdateRaftVoter(_) => Charge {
            exempt: true,
            ..Charge::default()
        },
        _ => Charge::default(),
    }
}

/// Record bytes a Fetch answer returns.
fn fetch_bytes(response: &FetchResponse) -> usize {
    response
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| p.records.as_ref().map_or(0, |r| r.len()))
        .sum()
}

/// Records what `charge` counts for `user` and `client_id` (`busy`: the
/// request's time on the broker's threads), throttles the answer, and
/// returns the throttle in ms (the connection mutes the channel that long;
/// for acks=0, with no answer, that is all it gets).
pub fn settle(
    quotas: &ClientQuotaManager,
    charge: &Charge,
    (user, client_id): (&str, &str),
    handled: Option<&mut Handled>,
    busy: Duration,
) -> u64 {
    let mut throttle = handled.as_ref().map_or(0, |h| h.throttle_ms);
    if let Some(bytes) = charge.produce_bytes {
        throttle = throttle.max(quotas.record(QuotaType::Produce, user, client_id, bytes as f64));
    }
    if !charge.exempt {
        let percent_seconds = busy.as_secs_f64() * 100.0;
        throttle =
            throttle.max(quotas.record(QuotaType::Request, user, client_id, percent_seconds));
    }
    let Some(handled) = handled else {
        return throttle;
    };
    if let (Some(session_epoch), Response::Fetch(response)) =
        (charge.consumer_fetch, &mut handled.response)
    {
        let bytes = fetch_bytes(response) as f64;
        let fetch_throttle = quotas.record(QuotaType::Fetch, user, client_id, bytes);
        if fetch_throttle > 0 {
            quotas.unrecord(QuotaType::Fetch, user, client_id, bytes);
            response.responses.clear();
            if session_epoch == 0 {
                // A session opened by this answer is not one the client
                // can use without its partitions (Kafka answers no session).
                response.session_id = 0;
            }
        }
        throttle = throttle.max(fetch_throttle);
    }
    if throttle > 0 {
        let ms = i32::try_from(throttle).unwrap_or(i32::MAX);
        handled
            .response
            .set_throttle_time_ms(ms.max(handled.response.throttle_time_ms()));
    }
    throttle
}
