//! One client connection: reads size-prefixed frames, runs their handlers
//! concurrently, and writes responses back in request order.
//!
//! Owns: the per-connection read loop, request pipelining (up to
//! `MAX_IN_FLIGHT` requests), produce-memory backpressure (a frame's bytes are
//! reserved from the broker's budget before its body is read, and released
//! when its response is written), and closing the connection on framing or
//! decoding errors. Must not: interpret request bodies (handlers do).
//!
//! A peer that closes its socket ends the read side for good (EOF is never
//! polled again), so a dead client cannot leave this task spinning.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use chronik_protocol::api::{api_name, api_versions_response};
use chronik_protocol::frame::{peek_frame_len, split_frame};
use chronik_protocol::{decode_request, encode_response, RawHeader, RequestError, Response};
use futures::stream::FuturesOrdered;
use futures::{FutureExt, StreamExt};
use kafka_protocol::error::ResponseError;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{broadcast, AcquireError, OwnedSemaphorePermit};
use tracing::{debug, info, warn, Instrument};

use crate::broker::Broker;
use crate::handlers;
use crate::metrics::{ApiLabels, ReasonLabels};

/// Requests a single connection may have in progress at once.
const MAX_IN_FLIGHT: usize = 128;
const READ_CHUNK: usize = 64 * 1024;

/// What a finished request asks the connection to do.
enum Outcome {
    Respond(Bytes),
    /// acks=0 produce: Kafka sends no response.
    Silent,
    Close(RequestError),
}

type RequestFuture = Pin<Box<dyn Future<Output = Outcome> + Send>>;
type PermitFuture = Pin<Box<dyn Future<Output = Result<OwnedSemaphorePermit, AcquireError>> + Send>>;

/// Keeps the open-connections gauge right however the task ends.
struct OpenConnection(Arc<Broker>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.metrics.connections_open.dec();
    }
}

pub async fn serve(broker: Arc<Broker>, stream: TcpStream, peer: SocketAddr, mut shutdown: broadcast::Receiver<()>) {
    broker.metrics.connections_open.inc();
    broker.metrics.connections_total.inc();
    let _open = OpenConnection(broker.clone());
    let _ = stream.set_nodelay(true);
    let (mut reader, mut writer) = stream.into_split();
    let max_frame = broker.config.max_request_bytes;
    let memory_limit = broker.config.produce_profile.in_flight_bytes();

    let mut read_buf = BytesMut::with_capacity(READ_CHUNK);
    let mut write_buf = BytesMut::new();
    let mut in_flight: FuturesOrdered<RequestFuture> = FuturesOrdered::new();
    let mut frame_permit: Option<OwnedSemaphorePermit> = None;
    let mut permit_wait: Option<PermitFuture> = None;
    let mut peer_closed = false;

    loop {
        // Start every request whose frame is fully buffered.
        while in_flight.len() < MAX_IN_FLIGHT && permit_wait.is_none() {
            let size = match peek_frame_len(&read_buf, max_frame) {
                Ok(Some(size)) => size,
                Ok(None) => break,
                Err(e) => {
                    warn!(%peer, error = %e, "closing connection: bad frame");
                    count_close(&broker, "bad_frame");
                    return;
                }
            };
            if frame_permit.is_none() {
                // A frame larger than the whole budget still gets through alone.
                let wanted = u32::try_from((size + 4).min(memory_limit)).unwrap_or(u32::MAX);
                match broker.produce_memory.clone().try_acquire_many_owned(wanted) {
                    Ok(p) => frame_permit = Some(p),
                    Err(_) => {
                        broker.metrics.produce_backpressure_total.inc();
                        permit_wait = Some(Box::pin(broker.produce_memory.clone().acquire_many_owned(wanted)));
                        break;
                    }
                }
            }
            match split_frame(&mut read_buf, max_frame) {
                Ok(Some(frame)) => {
                    let permit = frame_permit.take();
                    in_flight.push_back(start_request(run_request(broker.clone(), frame, permit)));
                }
                Ok(None) => {
                    read_buf.reserve((size + 4).saturating_sub(read_buf.len()));
                    break;
                }
                Err(e) => {
                    warn!(%peer, error = %e, "closing connection: bad frame");
                    count_close(&broker, "bad_frame");
                    return;
                }
            }
        }

        if peer_closed && in_flight.is_empty() {
            debug!(%peer, "peer closed the connection");
            return;
        }
        let can_read = !peer_closed && permit_wait.is_none() && in_flight.len() < MAX_IN_FLIGHT;
        if read_buf.capacity() - read_buf.len() < 1024 {
            read_buf.reserve(READ_CHUNK);
        }

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
                        Outcome::Respond(bytes) => write_buf.extend_from_slice(&bytes),
                        Outcome::Silent => {}
                        Outcome::Close(e) => {
                            warn!(%peer, error = %e, "closing connection: request rejected");
                            count_close(&broker, close_reason(&e));
                            let _ = flush(&mut writer, &mut write_buf, &broker).await;
                            return;
                        }
                    }
                    // Gather every response that is already complete into one write.
                    next = in_flight.next().now_or_never().flatten();
                }
                if let Err(e) = flush(&mut writer, &mut write_buf, &broker).await {
                    debug!(%peer, error = %e, "write failed; closing connection");
                    return;
                }
            }
            permit = async { permit_wait.as_mut().expect("guarded by the select condition").await }, if permit_wait.is_some() => {
                permit_wait = None;
                match permit {
                    Ok(p) => frame_permit = Some(p),
                    Err(_) => return, // the semaphore is never closed; nothing to serve if it were
                }
            }
            read = reader.read_buf(&mut read_buf), if can_read => {
                match read {
                    Ok(0) => {
                        peer_closed = true;
                        if !read_buf.is_empty() {
                            info!(%peer, buffered = read_buf.len(), "peer closed mid-frame");
                        }
                    }
                    Ok(n) => {
                        broker.metrics.bytes_in_total.inc_by(n as u64);
                    }
                    Err(e) => {
                        debug!(%peer, error = %e, "read failed; closing connection");
                        return;
                    }
                }
            }
        }
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

async fn flush(
    writer: &mut tokio::net::tcp::OwnedWriteHalf,
    write_buf: &mut BytesMut,
    broker: &Broker,
) -> std::io::Result<()> {
    if write_buf.is_empty() {
        return Ok(());
    }
    writer.write_all(write_buf).await?;
    broker.metrics.bytes_out_total.inc_by(write_buf.len() as u64);
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
async fn run_request(broker: Arc<Broker>, frame: Bytes, permit: Option<OwnedSemaphorePermit>) -> Outcome {
    let _permit = permit;
    let raw = RawHeader::peek(&frame);
    let request = match decode_request(frame) {
        Ok(request) => request,
        Err(RequestError::UnsupportedVersion { api: "ApiVersions", correlation_id, .. }) => {
            // Kafka answers an unknown ApiVersions version with a v0 response
            // carrying UNSUPPORTED_VERSION and the supported ranges, so the
            // client can retry with a version both sides know.
            let body = api_versions_response(ResponseError::UnsupportedVersion.code());
            return encode(correlation_id, 0, &Response::ApiVersions(body));
        }
        Err(e) => {
            debug!(?raw, error = %e, "undecodable request");
            return Outcome::Close(e);
        }
    };
    let api = api_name(request.api_key);
    let labels = ApiLabels { api };
    let started = Instant::now();
    let correlation_id = request.correlation_id();
    let version = request.version();
    let span = tracing::debug_span!("request", api, version, correlation_id);
    let response = handlers::handle(&broker, request).instrument(span).await;
    broker.metrics.requests_total.get_or_create(&labels).inc();
    broker
        .metrics
        .request_duration_seconds
        .get_or_create(&labels)
        .observe(started.elapsed().as_secs_f64());
    match response {
        Some(handled) => {
            if handled.has_error {
                broker.metrics.request_errors_total.get_or_create(&labels).inc();
            }
            encode(correlation_id, version, &handled.response)
        }
        None => Outcome::Silent,
    }
}

fn encode(correlation_id: i32, version: i16, response: &Response) -> Outcome {
    match encode_response(correlation_id, version, response) {
        Ok(bytes) => Outcome::Respond(bytes),
        Err(e) => Outcome::Close(RequestError::Malformed {
            api: e.api,
            version: e.version,
            reason: format!("response encoding failed: {}", e.reason),
        }),
    }
}
