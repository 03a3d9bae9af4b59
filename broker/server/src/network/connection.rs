//! One client connection: reads size-prefixed frames, runs their handlers
//! concurrently, and writes responses back in request order.
//!
//! Owns: the per-connection read loop, request pipelining (up to
//! `MAX_IN_FLIGHT` requests), produce-memory backpressure, the read deadline
//! of a started request, the idle timeout (`connections.max.idle.ms`), and
//! closing the connection on framing or decoding errors. Must not: interpret
//! request bodies (handlers do).
//!
//! Memory: a request larger than `SMALL_FRAME` reserves its whole size
//! from the broker's budget (`--produce-profile`) once its first body bytes
//! arrive — a size prefix alone holds nothing — and keeps the reservation
//! until its response is encoded; while none is free the connection stops
//! reading. A reservation is all-or-nothing, so connections never each hold
//! part of what they need (no deadlock), and its body must arrive within
//! `--request-read-timeout-ms` (time this side spent not reading excluded),
//! else the connection is closed and the reservation returned. Small
//! requests (ApiVersions, Metadata, most fetches) never wait behind large
//! ones: one small request per connection at a time runs without a
//! reservation, within the per-connection margin. RSS is therefore bounded
//! by the profile plus `max.connections` × 2 × 64 KiB (one read chunk and
//! one small request per connection). Before a SASL connection has logged
//! in, its frames (at most `sasl.server.max.receive.size`) reserve from a
//! budget of their own, `PRE_AUTH_MEMORY_BYTES`: a flood of connections that
//! never log in waits among itself and never holds the memory authenticated
//! producers need. Such a connection also holds a place among the
//! unauthenticated ones (`--max-unauthenticated-connections[-per-ip]`,
//! taken at accept) until it logs in, and is closed if it has not logged
//! in `--connections-max-unauthenticated-ms` after it was accepted: before
//! login a connection can hold at most one read chunk, one small frame and
//! one `sasl.server.max.receive.size` frame paid from the pre-authentication
//! budget, and only for a bounded time.
//!
//! A peer that closes its socket ends the read side for good (EOF is never
//! polled again), so a dead client cannot leave this task spinning.
//!
//! Security: on SSL / SASL_SSL listeners the TLS handshake (bounded in
//! time) comes first; on SASL listeners every frame passes the
//! connection's `SaslSession` gate before a handler sees it, and what the
//! gate refuses closes the connection once earlier responses are written.
//! Handlers receive the `RequestContext`: peer, listener, principal.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::{Bytes, BytesMut};
use chronik_protocol::api::{api_name, api_versions_response};
use chronik_protocol::frame::{peek_frame_len, split_frame, SIZE_PREFIX_LEN};
use chronik_protocol::{decode_request, encode_response, RawHeader, RequestError, Response};
use futures::stream::FuturesOrdered;
use futures::{FutureExt, StreamExt};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::ApiKey;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{broadcast, AcquireError, OwnedSemaphorePermit};
use tracing::{debug, info, warn, Instrument};

use crate::broker::Broker;
use crate::infra::append_order::{AppendOrder, AppendTurn};
use crate::infra::metrics::{ApiLabels, ReasonLabels};
use crate::network::connection_limits::ConnectionSlot;
use crate::requests::handlers::RequestContext;
use crate::security::sasl::session::{Admission, SaslSession};
use crate::security::{KafkaPrincipal, ListenerContext};

/// Bytes that frames of not-yet-authenticated SASL connections may hold at
/// once, all of them together (64 full 512 KiB `sasl.server.max.receive.size`
/// frames).
pub const PRE_AUTH_MEMORY_BYTES: usize = 32 * 1024 * 1024;

/// Requests a single connection may have in progress at once.
const MAX_IN_FLIGHT: usize = 128;
/// The most one read takes off the socket.
const READ_CHUNK: usize = 64 * 1024;

/// What a finished request asks the connection to do.
enum Outcome {
    /// The answer, and how long to mute the channel after it for the
    /// client's quotas (KIP-219: nothing more is read or started meanwhile).
    Respond(Bytes, Duration),
    /// acks=0 produce: Kafka sends no response (the mute still applies).
    Silent(Duration),
    Close(RequestError),
    /// Refused by the SASL gate: write the response if any, then close.
    CloseAfter(Option<Bytes>, &'static str),
}

type RequestFuture = Pin<Box<dyn Future<Output = Outcome> + Send>>;
type PermitFuture =
    Pin<Box<dyn Future<Output = Result<OwnedSemaphorePermit, AcquireError>> + Send>>;

/// Keeps the open-connections gauge right however the task ends.
struct OpenConnection(Arc<Broker>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.metrics.connections_open.dec();
    }
}

/// Closes the share sessions (KIP-932) this connection used when it ends,
/// releasing the records their members held, as Kafka does on a
/// disconnect: a killed consumer's records are offered again at once, not
/// when their locks run out.
struct ShareSessionsOfConnection(Arc<Broker>, u64);

impl Drop for ShareSessionsOfConnection {
    fn drop(&mut self) {
        self.0.share.connection_closed(self.1);
    }
}

/// Requests up to this size (size prefix included) are "small".
const SMALL_FRAME: usize = 64 * 1024;

/// What pays for a request's bytes while it is in progress.
enum RequestMemory {
    /// A reservation from the produce-memory budget.
    Paid(OwnedSemaphorePermit),
    /// The connection's one small request without a reservation.
    Unpaid(#[allow(dead_code)] UnpaidSlot), // held for its Drop
}

/// The connection's single unpaid place; freed when the request is done.
struct UnpaidSlot(Arc<AtomicBool>);

impl UnpaidSlot {
    fn take(flag: &Arc<AtomicBool>) -> Option<UnpaidSlot> {
        (!flag.swap(true, Ordering::AcqRel)).then(|| UnpaidSlot(flag.clone()))
    }
}

impl Drop for UnpaidSlot {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// A SASL connection that has not logged in yet: its place among the
/// unauthenticated connections, and when it must have logged in.
struct Unauthenticated {
    _slot: ConnectionSlot, // held for its Drop
    deadline: tokio::time::Instant,
}

/// Serves one accepted connection; `pre_auth` is its place among the
/// unauthenticated connections (SASL listeners), given back at login.
pub async fn serve(
    broker: Arc<Broker>,
    stream: TcpStream,
    peer: SocketAddr,
    listener: ListenerContext,
    mut shutdown: broadcast::Receiver<()>,
    _slot: ConnectionSlot,
    pre_auth_slot: Option<ConnectionSlot>,
) {
    let pre_auth = pre_auth_slot.map(|slot| Unauthenticated {
        _slot: slot,
        deadline: tokio::time::Instant::now()
            + broker.config.limits.connections_max_unauthenticated,
    });
    broker.metrics.connections_open.inc();
    broker.metrics.connections_total.inc();
    let _open = OpenConnection(broker.clone());
    let _ = stream.set_nodelay(true);
    let Some(tls) = listener.tls.clone() else {
        let (stream, principal) = (stream.into_split(), KafkaPrincipal::anonymous());
        return serve_stream(
            broker, stream, peer, listener, principal, pre_auth, shutdown,
        )
        .await;
    };
    let accepted = tokio::select! {
        accepted = tls.accept(stream) => accepted,
        _ = shutdown.recv() => return,
    };
    let accepted = accepted.and_then(|stream| {
        let principal = match chronik_tls::peer_certificate(&stream) {
            Some(leaf) => KafkaPrincipal::from_certificate(leaf)
                .context("client certificate without a readable subject")?,
            None => KafkaPrincipal::anonymous(),
        };
        Ok((stream, principal))
    });
    match accepted {
        Ok((stream, principal)) => {
            if principal.name == KafkaPrincipal::ANONYMOUS {
                debug!(%peer, "TLS handshake done");
            } else {
                info!(%peer, listener = %listener.name, %principal, "TLS client authenticated");
            }
            let stream = tokio::io::split(stream);
            serve_stream(
                broker, stream, peer, listener, principal, pre_auth, shutdown,
            )
            .await;
        }
        Err(e) => {
            info!(%peer, listener = %listener.name, error = format!("{e:#}"), "closing connection: TLS handshake refused");
            count_close(&broker, "tls_handshake");
        }
    }
}

/// Serves one connection (after its TLS handshake, if any).
async fn serve_stream<R, W>(
    broker: Arc<Broker>,
    (mut reader, mut writer): (R, W),
    peer: SocketAddr,
    listener: ListenerContext,
    principal: KafkaPrincipal,
    mut unauthenticated: Option<Unauthenticated>,
    mut shutdown: broadcast::Receiver<()>,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut sasl = listener
        .sasl
        .clone()
        .map(|config| SaslSession::new(config, peer));
    let connection_id = crate::security::request_context::next_connection_id();
    let _share_sessions = ShareSessionsOfConnection(broker.clone(), connection_id);
    let mut context = Arc::new(RequestContext::new(
        peer,
        listener.name.clone(),
        principal,
        connection_id,
    ));
    // Set once the SASL gate refused a frame: nothing more is read.
    let mut closing = false;
    let max_request = broker.config.max_request_bytes;
    let memory_limit = broker.config.produce_profile.in_flight_bytes();
    let limits = broker.config.limits;

    let mut read_buf = BytesMut::with_capacity(READ_CHUNK);
    let mut write_buf = BytesMut::new();
    let mut in_flight: FuturesOrdered<RequestFuture> = FuturesOrdered::new();
    let mut append_order = AppendOrder::default();
    // The reservation of the frame being read, and the unpaid place.
    let mut reservation: Option<OwnedSemaphorePermit> = None;
    let unpaid = Arc::new(AtomicBool::new(false));
    let mut permit_wait: Option<PermitFuture> = None;
    let mut peer_closed = false;
    // When the frame now partly buffered must be complete, and since when
    // this side has not been reading (that time does not count against it).
    let mut frame_deadline: Option<tokio::time::Instant> = None;
    let mut paused_at: Option<tokio::time::Instant> = None;
    let mut last_activity = tokio::time::Instant::now();

    // Until when the channel is muted for the client's quotas.
    let mut muted_until: Option<tokio::time::Instant> = None;

    loop {
        if muted_until.is_some_and(|t| t <= tokio::time::Instant::now()) {
            muted_until = None;
        }
        let muted = muted_until.is_some();
        // Start every request whose frame is fully buffered (paying for it
        // first); reserve for a large frame whose body has begun.
        while in_flight.len() < MAX_IN_FLIGHT && permit_wait.is_none() && !closing && !muted {
            let max_frame = sasl
                .as_ref()
                .map_or(max_request, |s| s.max_frame(max_request));
            let size = match peek_frame_len(&read_buf, max_frame) {
                Ok(Some(size)) => size,
                Ok(None) => break,
                Err(e) => {
                    warn!(%peer, error = %e, "closing connection: bad frame");
                    count_close(&broker, "bad_frame");
                    return;
                }
            };
            let frame_bytes = size + SIZE_PREFIX_LEN;
            let complete = read_buf.len() >= frame_bytes;
            let mut memory = reservation.take().map(RequestMemory::Paid);
            if memory.is_none() && frame_bytes <= SMALL_FRAME {
                if !complete {
                    break; // a partial small frame is within the margin
                }
                memory = UnpaidSlot::take(&unpaid).map(RequestMemory::Unpaid);
            }
            if memory.is_none() {
                if !complete && read_buf.len() <= SIZE_PREFIX_LEN {
                    break; // only the size prefix so far: it reserves nothing
                }
                let pre_auth = sasl.as_ref().is_some_and(|s| s.principal().is_none());
                let (pool, limit) = if pre_auth {
                    (&broker.pre_auth_memory, PRE_AUTH_MEMORY_BYTES)
                } else {
                    (&broker.produce_memory, memory_limit)
                };
                let wanted = u32::try_from(frame_bytes.min(limit)).unwrap_or(u32::MAX);
                match pool.clone().try_acquire_many_owned(wanted) {
                    Ok(p) => memory = Some(RequestMemory::Paid(p)),
                    Err(_) => {
                        broker.metrics.produce_backpressure_total.inc();
                        permit_wait = Some(Box::pin(pool.clone().acquire_many_owned(wanted)));
                        break;
                    }
                }
            }
            if !complete {
                // Keep the reservation while the body arrives.
                if let Some(RequestMemory::Paid(p)) = memory {
                    reservation = Some(p);
                }
                break;
            }
            match split_frame(&mut read_buf, max_frame) {
                Ok(Some(frame)) => {
                    let mut answer_delay = std::time::Duration::ZERO;
                    let admission = match &mut sasl {
                        Some(session) => {
                            let admission = session.admit(&frame);
                            answer_delay = session.take_answer_delay();
                            if session.principal().is_some() {
                                unauthenticated = None; // its place is given back
                            }
                            if let Some(p) =
                                session.principal().filter(|p| **p != context.principal)
                            {
                                info!(%peer, listener = %listener.name, principal = %p, "SASL authenticated");
                                context = Arc::new(RequestContext::new(
                                    peer,
                                    listener.name.clone(),
                                    p.clone(),
                                    connection_id,
                                ));
                            }
                            admission
                        }
                        None => Admission::Serve,
                    };
                    let outcome = match admission {
                        Admission::Serve => None,
                        Admission::Respond(bytes) => Some(Outcome::Respond(bytes, Duration::ZERO)),
                        Admission::RespondAndClose(bytes, reason) => {
                            Some(Outcome::CloseAfter(Some(bytes), reason))
                        }
                        Admission::Close(reason) => Some(Outcome::CloseAfter(None, reason)),
                    };
                    match outcome {
                        None => {
                            // A Produce appends after the connection's earlier ones.
                            let turn = match RawHeader::peek(&frame) {
                                Some(h) if h.api_key == ApiKey::Produce as i16 => {
                                    append_order.next_turn()
                                }
                                _ => AppendTurn::unordered(),
                            };
                            in_flight.push_back(start_request(run_request(
                                broker.clone(),
                                frame,
                                memory,
                                context.clone(),
                                turn,
                            )))
                        }
                        Some(outcome) => {
                            closing = matches!(outcome, Outcome::CloseAfter(..));
                            // The attempted name's login-failure back-off.
                            in_flight.push_back(Box::pin(async move {
                                if !answer_delay.is_zero() {
                                    tokio::time::sleep(answer_delay).await;
                                }
                                outcome
                            }));
                        }
                    }
                    // The deadline is per request: the next one starts now.
                    frame_deadline = None;
                }
                Ok(None) => break,
                Err(e) => {
                    warn!(%peer, error = %e, "closing connection: bad frame");
                    count_close(&broker, "bad_frame");
                    return;
                }
            }
        }
        if read_buf.is_empty() {
            frame_deadline = None;
        } else if frame_deadline.is_none() {
            frame_deadline = Some(tokio::time::Instant::now() + limits.request_read_timeout);
        }

        if peer_closed && in_flight.is_empty() {
            debug!(%peer, "peer closed the connection");
            return;
        }
        let can_read = !peer_closed
            && !closing
            && !muted
            && permit_wait.is_none()
            && in_flight.len() < MAX_IN_FLIGHT;
        match (can_read, paused_at) {
            (false, None) => paused_at = Some(tokio::time::Instant::now()),
            (true, Some(since)) => {
                if let Some(deadline) = &mut frame_deadline {
                    *deadline += since.elapsed();
                }
                paused_at = None;
            }
            _ => {}
        }
        if read_buf.capacity() - read_buf.len() < READ_CHUNK {
            read_buf.reserve(READ_CHUNK);
        }
        let read_deadline = frame_deadline.filter(|_| can_read);
        let idle_deadline = (in_flight.is_empty() && read_buf.is_empty())
            .then(|| last_activity + limits.connections_max_idle);
        let login_deadline = unauthenticated.as_ref().map(|u| u.deadline);

        tokio::select! {
            biased;
            _ = shutdown.recv() => {
                debug!(%peer, "closing connection for shutdown");
                return;
            }
            Some(outcome) = in_flight.next(), if !in_flight.is_empty() => {
                let mut next = Some(outcome);
                while let Some(outcome) = next.take() {
                    match outcome {
                        Outcome::Respond(bytes, mute) => {
                            write_buf.extend_from_slice(&bytes);
                            mute_for(&mut muted_until, mute);
                        }
                        Outcome::Silent(mute) => mute_for(&mut muted_until, mute),
                        Outcome::Close(e) => {
                            warn!(%peer, error = %e, "closing connection: request rejected");
                            count_close(&broker, close_reason(&e));
                            let _ = flush(&mut writer, &mut write_buf, &broker, &mut shutdown).await;
                            return;
                        }
                        Outcome::CloseAfter(last, reason) => {
                            info!(%peer, listener = %listener.name, reason, "closing connection (SASL)");
                            if let Some(bytes) = last {
                                // Kafka's connection.failed.authentication.delay.ms:
                                // a refused login is answered late, slowing guessing.
                                let delay = listener.sasl.as_ref().map_or(std::time::Duration::ZERO, |s| s.failed_authentication_delay);
                                tokio::select! {
                                    () = tokio::time::sleep(delay) => {}
                                    _ = shutdown.recv() => return,
                                }
                                write_buf.extend_from_slice(&bytes);
                            }
                            count_close(&broker, reason);
                            let _ = flush(&mut writer, &mut write_buf, &broker, &mut shutdown).await;
                            let _ = writer.shutdown().await;
                            return;
                        }
                    }
                    // Gather every response that is already complete into one write.
                    next = in_flight.next().now_or_never().flatten();
                }
                if let Err(e) = flush(&mut writer, &mut write_buf, &broker, &mut shutdown).await {
                    debug!(%peer, error = %e, "write failed; closing connection");
                    return;
                }
                last_activity = tokio::time::Instant::now();
            }
            permit = async { permit_wait.as_mut().expect("guarded by the select condition").await }, if permit_wait.is_some() => {
                permit_wait = None;
                match permit {
                    Ok(p) => reservation = Some(p),
                    Err(_) => return, // the semaphore is never closed; nothing to serve if it were
                }
            }
            read = read_chunk(&mut reader, &mut read_buf), if can_read => {
                match read {
                    Ok(0) => {
                        peer_closed = true;
                        if !read_buf.is_empty() {
                            info!(%peer, buffered = read_buf.len(), "peer closed mid-frame");
                        }
                    }
                    Ok(n) => {
                        broker.metrics.bytes_in_total.inc_by(n as u64);
                        last_activity = tokio::time::Instant::now();
                    }
                    Err(e) => {
                        debug!(%peer, error = %e, "read failed; closing connection");
                        return;
                    }
                }
            }
            () = sleep_until_opt(muted_until), if muted => {}
            () = sleep_until_opt(read_deadline) => {
                warn!(%peer, buffered = read_buf.len(), timeout_ms = limits.request_read_timeout.as_millis() as u64,
                      "closing connection: request body not received within the read timeout");
                count_close(&broker, "request_read_timeout");
                return;
            }
            () = sleep_until_opt(login_deadline) => {
                info!(%peer, listener = %listener.name, timeout_ms = limits.connections_max_unauthenticated.as_millis() as u64,
                      "closing connection: not authenticated in time (--connections-max-unauthenticated-ms)");
                count_close(&broker, "unauthenticated_timeout");
                return;
            }
            () = sleep_until_opt(idle_deadline) => {
                debug!(%peer, "closing idle connection (connections.max.idle.ms)");
                count_close(&broker, "idle");
                return;
            }
        }
    }
}

/// Reads at most `READ_CHUNK` bytes (what one read may hold unpaid for).
async fn read_chunk<R: AsyncRead + Unpin>(
    reader: &mut R,
    buf: &mut BytesMut,
) -> std::io::Result<usize> {
    (&mut *reader).take(READ_CHUNK as u64).read_buf(buf).await
}

/// Mutes the channel for `mute` from now, unless it already is for longer.
fn mute_for(muted_until: &mut Option<tokio::time::Instant>, mute: Duration) {
    if mute.is_zero() {
        return;
    }
    let until = tokio::time::Instant::now() + mute;
    *muted_until = Some(muted_until.map_or(until, |t| t.max(until)));
}

/// Sleeps until `deadline`, or forever when there is none.
async fn sleep_until_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Runs a request up to its first wait right away, so the synchronous part
/// of every handler — decoding, and for Produce the append that assigns
/// offsets — happens in the order the requests arrived on this connection.
/// A request still waiting (for durability, or Fetch data) is polled again
/// later by the in-flight set with a real waker; a future may be polled with
/// different wakers, the last one is the one woken.
fn start_request(request: impl Future<Output = Outcome> + Send + 'static) -> RequestFuture {
    let mut request: RequestFuture = Box::pin(request);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match request.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(outcome) => Box::pin(std::future::ready(outcome)),
        std::task::Poll::Pending => request,
    }
}

/// Writes what is buffered. A client that stops reading cannot hold the
/// connection past shutdown: the write is abandoned when shutdown comes.
async fn flush<W: AsyncWrite + Unpin>(
    writer: &mut W,
    write_buf: &mut BytesMut,
    broker: &Broker,
    shutdown: &mut broadcast::Receiver<()>,
) -> std::io::Result<()> {
    if write_buf.is_empty() {
        return Ok(());
    }
    tokio::select! {
        // TLS buffers records until flushed; a TCP flush is a no-op.
        written = async { writer.write_all(write_buf).await?; writer.flush().await } => written?,
        _ = shutdown.recv() => return Err(std::io::Error::other("shutting down")),
    }
    broker
        .metrics
        .bytes_out_total
        .inc_by(write_buf.len() as u64);
    write_buf.clear();
    Ok(())
}

fn count_close(broker: &Broker, reason: &'static str) {
    broker
        .metrics
        .connections_closed_on_error_total
        .get_or_create(&ReasonLabels { reason })
        .inc();
}

fn close_reason(e: &RequestError) -> &'static str {
    match e {
        RequestError::UnknownApiKey { .. } => "unknown_api_key",
        RequestError::UnsupportedVersion { .. } => "unsupported_version",
        RequestError::Malformed { .. } => "malformed_request",
    }
}

/// Decodes one frame, runs its handler and encodes the response. The memory
/// permit is held until the response bytes exist (then the request is gone).
async fn run_request(
    broker: Arc<Broker>,
    frame: Bytes,
    memory: Option<RequestMemory>,
    context: Arc<RequestContext>,
    turn: AppendTurn,
) -> Outcome {
    let _memory = memory;
    let request_bytes = frame.len() + SIZE_PREFIX_LEN;
    let raw = RawHeader::peek(&frame);
    let request = match decode_request(frame) {
        Ok(request) => request,
        Err(RequestError::UnsupportedVersion {
            api: "ApiVersions",
            correlation_id,
            ..
        }) => {
            // Kafka answers an unknown ApiVersions version with a v0 response
            // carrying UNSUPPORTED_VERSION and the supported ranges, so the
            // client can retry with a version both sides know.
            let body = api_versions_response(ResponseError::UnsupportedVersion.code());
            return encode(
                correlation_id,
                0,
                &Response::ApiVersions(body),
                Duration::ZERO,
            );
        }
        Err(e) => {
            debug!(?raw, error = %e, "undecodable request");
            return Outcome::Close(e);
        }
    };
    let api = api_name(request.api_key);
    let named = crate::network::request_size::entries_named(&request.body);
    let max = broker.config.limits.max_partitions_per_request;
    if named > max {
        broker
            .metrics
            .requests_refused_total
            .get_or_create(&ReasonLabels {
                reason: "too_many_partitions",
            })
            .inc();
        return Outcome::Close(RequestError::Malformed {
            api,
            version: request.version(),
            reason: format!("names {named} partitions (or topics, groups); --max-partitions-per-request is {max}"),
        });
    }
    let labels = ApiLabels { api };
    let started = Instant::now();
    let correlation_id = request.correlation_id();
    let version = request.version();
    let span = tracing::debug_span!("request", api, version, correlation_id);
    let answer = crate::broker::dispatch::handle(&broker, request, &context, turn, request_bytes)
        .instrument(span)
        .await;
    let mute = Duration::from_millis(answer.throttle_ms);
    broker.metrics.requests_total.get_or_create(&labels).inc();
    broker
        .metrics
        .request_duration_seconds
        .get_or_create(&labels)
        .observe(started.elapsed().as_secs_f64());
    match answer.handled {
        Some(handled) => {
            if handled.has_error {
                broker
                    .metrics
                    .request_errors_total
                    .get_or_create(&labels)
                    .inc();
            }
            encode(correlation_id, version, &handled.response, mute)
        }
        None => Outcome::Silent(mute),
    }
}

fn encode(correlation_id: i32, version: i16, response: &Response, mute: Duration) -> Outcome {
    match encode_response(correlation_id, version, response) {
        Ok(bytes) => Outcome::Respond(bytes, mute),
        Err(e) => Outcome::Close(RequestError::Malformed {
            api: e.api,
            version: e.version,
            reason: format!("response encoding failed: {}", e.reason),
        }),
    }
}
