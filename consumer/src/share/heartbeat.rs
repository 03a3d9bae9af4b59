//! Share-group membership: the ShareGroupHeartbeat v1 loop with the group
//! coordinator. Joins with epoch 0 and the subscribed topic names, then
//! heartbeats at the interval the broker gives, takes each new assignment
//! into the shared state, rejoins (epoch 0) when fenced or unknown, finds
//! the coordinator again when it moved, and leaves with epoch -1 once the
//! fetch loops have closed their sessions.
//!
//! Owns: the member epoch and the coordinator connection. Must not: fetch
//! or acknowledge (`fetch`), or decide when to stop (the manager sets
//! `stop_membership`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use chronik_harness::now_us;
use kafka_protocol::messages::share_group_heartbeat_request::ShareGroupHeartbeatRequest;
use kafka_protocol::messages::{GroupId, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::conn::Conn;
use super::metadata::find_coordinator;
use super::state::Shared;
use crate::consume::RebalanceEvent;

const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Wait before retrying after an error.
const BACKOFF: Duration = Duration::from_millis(500);
/// Attempts at leaving before giving up (the session timeout then evicts us).
const LEAVE_ATTEMPTS: u32 = 3;
/// Rebalance events kept.
const MAX_EVENTS: usize = 1000;

// Kafka error codes this loop acts on.
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;
const UNKNOWN_MEMBER_ID: i16 = 25;
const FENCED_MEMBER_EPOCH: i16 = 110;

/// Takes the heartbeat's answer into the shared state: the member epoch,
/// and the assignment when it changed (Kafka repeats an unchanged one in
/// every answer; only a change is a rebalance).
fn take_assignment(shared: &Shared, epoch: i32, assignment: Option<Vec<(uuid::Uuid, i32)>>) {
    let mut st = shared.lock();
    st.member_epoch = epoch;
    let Some(assignment) = assignment else { return };
    if st.assignment_version > 0 && assignment == st.assignment {
        return;
    }
    tracing::info!(partitions = assignment.len(), epoch, "share assignment");
    st.assignment = assignment;
    st.assignment_version += 1;
    st.rebalances += 1;
    if st.rebalance_events.len() < MAX_EVENTS {
        let partitions = st.assignment.len();
        st.rebalance_events.push(RebalanceEvent {
            at_us: now_us(),
            kind: "assign".into(),
            partitions,
        });
    }
}

/// Sleeps `d`, waking early (returning true) when `stop_membership` is set.
async fn nap(shared: &Shared, d: Duration) -> bool {
    let until = tokio::time::Instant::now() + d;
    while tokio::time::Instant::now() < until {
        if shared.stop_membership.load(Ordering::Relaxed) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50).min(d)).await;
    }
    shared.stop_membership.load(Ordering::Relaxed)
}

pub async fn membership(shared: Arc<Shared>) {
    let m = shared.member.clone();
    let mut conn: Option<Conn> = None;
    let mut epoch = 0i32;
    let mut interval;
    let mut leave_attempts = 0u32;
    loop {
        let leaving = shared.stop_membership.load(Ordering::Relaxed);
        if leaving && (epoch == 0 || leave_attempts >= LEAVE_ATTEMPTS) {
            break;
        }
        if leaving {
            leave_attempts += 1;
        }
        if conn.is_none() {
            let found = match find_coordinator(&m.bootstrap, &m.client_id, &m.group).await {
                Ok(addr) => Conn::connect(&addr, &m.client_id).await,
                Err(e) => Err(e),
            };
            match found {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    tracing::warn!(error = %format!("{e:#}"), "share group coordinator not reached; retrying");
                    nap(&shared, BACKOFF * 2).await;
                    continue;
                }
            }
        }
        let Some(c) = conn.as_mut() else { continue };
        let request = ShareGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(m.group.clone())))
            .with_member_id(StrBytes::from_string(m.member_id.clone()))
            .with_member_epoch(if leaving { -1 } else { epoch })
            .with_subscribed_topic_names(if leaving {
                None
            } else {
                Some(
                    m.topics
                        .iter()
                        .map(|t| TopicName(StrBytes::from_string(t.clone())))
                        .collect(),
                )
            });
        let response = match c.call(&request, 1, CALL_TIMEOUT).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "share group heartbeat failed; reconnecting");
                conn = None;
                nap(&shared, BACKOFF).await;
                continue;
            }
        };
        match response.error_code {
            0 if leaving => {
                tracing::info!(member = %m.member_id, "left the share group");
                break;
            }
            0 => {
                if epoch == 0 {
                    tracing::info!(member = %m.member_id, epoch = response.member_epoch, "joined the share group");
                }
                epoch = response.member_epoch;
                interval = Duration::from_millis(
                    u64::try_from(response.heartbeat_interval_ms).unwrap_or(5000),
                )
                .clamp(Duration::from_millis(100), Duration::from_secs(30));
                let assignment: Option<Vec<(uuid::Uuid, i32)>> = response.assignment.map(|a| {
                    let mut v: Vec<(uuid::Uuid, i32)> = a
                        .topic_partitions
                        .iter()
                        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, *p)))
                        .collect();
                    v.sort_unstable();
                    v
                });
                take_assignment(&shared, epoch, assignment);
            }
            NOT_COORDINATOR | COORDINATOR_NOT_AVAILABLE | COORDINATOR_LOAD_IN_PROGRESS => {
                conn = None;
                nap(&shared, BACKOFF).await;
                continue;
            }
            UNKNOWN_MEMBER_ID | FENCED_MEMBER_EPOCH => {
                tracing::warn!(
                    code = response.error_code,
                    "share group member fenced or unknown; rejoining"
                );
                epoch = 0;
                {
                    let mut st = shared.lock();
                    st.member_epoch = 0;
                    st.count_error(format!("heartbeat error {}", response.error_code));
                }
                if leaving {
                    break;
                }
                nap(&shared, BACKOFF).await;
                continue;
            }
            code => {
                tracing::warn!(
                    code,
                    message = response.error_message.as_ref().map_or("", |s| s.as_str()),
                    "share group heartbeat error"
                );
                shared.lock().count_error(format!("heartbeat error {code}"));
                nap(&shared, BACKOFF * 2).await;
                continue;
            }
        }
        if nap(&shared, interval).await {
            continue;
        }
    }
}
