//! `chronik-http`: serving an axum `Router` with the bounds a port open to
//! clients one does not control needs. The broker's metrics endpoint, the
//! ingestor and the verifying consumer all serve through `serve` (one
//! crate rather than one copy per server: the broker may depend on it, it
//! depends on nothing of Chronik's but `chronik-tls`).
//!
//! Owns: the accept loop and per-connection HTTP/1.1 serving (hyper): at
//! most `max_connections` at once (more are closed at accept; the open
//! ones keep being served), a request's headers within
//! `header_read_timeout` (hyper starts that timer whenever it waits for a
//! request, so it is also the keep-alive idle timeout: slowloris and idle
//! hoarding both end), its whole body within `body_read_timeout` of its
//! headers (`deadlines::DeadlineBody`), writes that make progress within
//! `write_timeout` (`deadlines::WriteStall`: a client that never reads
//! its response), and graceful shutdown (stop accepting, let requests in
//! progress finish, close idle connections), and HTTPS when given a
//! `chronik_tls::TlsAcceptor` (`serve_tls`: the handshake runs in the
//! connection's own task, inside its slot, bounded by the acceptor's
//! handshake timeout; a failed handshake closes only that connection).
//! Request body sizes are the routes' business (each knows its own
//! limit). Must not: know any route.

mod deadlines;

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::Router;
use chronik_tls::TlsAcceptor;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tower::ServiceExt;

pub use deadlines::BodyDeadlineElapsed;
use deadlines::{DeadlineBody, WriteStall};

/// The bounds `serve` enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Connections open at once; more are closed at accept.
    pub max_connections: usize,
    /// A request's headers must arrive within this (also: keep-alive idle).
    pub header_read_timeout: Duration,
    /// A request's whole body must arrive within this of its headers.
    pub body_read_timeout: Duration,
    /// A response write making no progress for this long closes the connection.
    pub write_timeout: Duration,
}

impl Default for HttpLimits {
    /// 1024 connections, headers within 10 s, bodies within 30 s, writes
    /// stalled at most 30 s.
    fn default() -> Self {
        HttpLimits {
            max_connections: 1024,
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(30),
        }
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then stops
/// accepting and returns once every connection has finished (callers bound
/// that wait: a request in progress is let finish).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: HttpLimits,
    shutdown: impl Future<Output = ()>,
) {
    serve_with(listener, router, limits, None, shutdown).await
}

/// `serve` over TLS: every connection's handshake first (HTTPS).
pub async fn serve_tls(
    listener: TcpListener,
    router: Router,
    limits: HttpLimits,
    tls: Arc<TlsAcceptor>,
    shutdown: impl Future<Output = ()>,
) {
    serve_with(listener, router, limits, Some(tls), shutdown).await
}

async fn serve_with(
    listener: TcpListener,
    router: Router,
    limits: HttpLimits,
    tls: Option<Arc<TlsAcceptor>>,
    shutdown: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let Ok(slot) = slots.clone().try_acquire_owned() else {
                        tracing::debug!(%peer, max = limits.max_connections, "HTTP connection refused: cap reached");
                        continue;
                    };
                    let _ = stream.set_nodelay(true);
                    let router = router.clone();
                    let stop = stop_rx.clone();
                    let tls = tls.clone();
                    connections.spawn(async move {
                        let _slot = slot;
                        match tls {
                            None => serve_connection(stream, router, limits, stop, peer).await,
                            Some(tls) => match handshake(&tls, stream, stop.clone()).await {
                                Some(Ok(stream)) => serve_connection(stream, router, limits, stop, peer).await,
                                Some(Err(e)) => tracing::debug!(%peer, error = format!("{e:#}"), "HTTPS connection refused"),
                                None => {}
                            },
                        }
                    });
                }
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(error = %e, "HTTP accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    while connections.join_next().await.is_some() {}
}

/// The TLS handshake, or None when shutdown comes first.
async fn handshake(
    tls: &TlsAcceptor,
    stream: TcpStream,
    mut stop: watch::Receiver<bool>,
) -> Option<anyhow::Result<chronik_tls::TlsStream<TcpStream>>> {
    tokio::select! {
        accepted = tls.accept(stream) => Some(accepted),
        _ = stop.wait_for(|stopping| *stopping) => None,
    }
}

/// Serves one connection's requests until it ends or shutdown begins
/// (then the request in progress finishes and the connection closes).
async fn serve_connection<S>(
    stream: S,
    router: Router,
    limits: HttpLimits,
    mut stop: watch::Receiver<bool>,
    peer: std::net::SocketAddr,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let router = router.clone();
        let request =
            request.map(|body| Body::new(DeadlineBody::new(body, limits.body_read_timeout)));
        async move { Ok::<_, Infallible>(router.oneshot(request).await.unwrap_or_else(|e| match e {})) }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .serve_connection(
            TokioIo::new(WriteStall::new(stream, limits.write_timeout)),
            service,
        );
    tokio::pin!(connection);
    tokio::select! {
        result = connection.as_mut() => {
            if let Err(e) = result {
                tracing::debug!(%peer, error = %e, "HTTP connection ended");
            }
        }
        _ = async { let _ = stop.wait_for(|stopping| *stopping).await; } => {
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use axum::routing::{get, post};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use super::*;

    async fn start(
        limits: HttpLimits,
    ) -> (
        std::net::SocketAddr,
        watch::Sender<bool>,
        tokio::task::JoinHandle<()>,
    ) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (tx, mut rx) = watch::channel(false);
        let router = Router::new()
            .route("/health", get(|| async { "ok" }))
            .route("/echo", post(|body: axum::body::Bytes| async move { body }))
            .route("/big", get(|| async { vec![b'x'; 32 << 20] }));
        let task = tokio::spawn(serve(listener, router, limits, async move {
            let _ = rx.wait_for(|s| *s).await;
        }));
        (addr, tx, task)
    }

    async fn get_health(addr: std::net::SocketAddr) -> String {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .expect("write");
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
        String::from_utf8_lossy(&out).to_string()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn slowloris_is_cut_off_while_others_are_served() {
        let limits = HttpLimits {
            header_read_timeout: Duration::from_millis(500),
            ..HttpLimits::default()
        };
        let (addr, stop, task) = start(limits).await;
        let mut slow = TcpStream::connect(addr).await.expect("connect");
        slow.write_all(b"GET /health HTTP/1.1\r\n")
            .await
            .expect("write");
        let started = Instant::now();
        assert!(
            get_health(addr).await.contains("200 OK"),
            "another client was not served"
        );
        let mut rest = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), slow.read_to_end(&mut rest)).await;
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "the slow client held on for {:?}",
            started.elapsed()
        );
        let _ = stop.send(true);
        task.await.expect("server");
    }

    /// One keep-alive request on an open connection; the response's text.
    async fn get_on(stream: &mut TcpStream) -> String {
        stream
            .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .expect("write");
        let mut buf = vec![0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
            .await
            .map_or(0, |r| r.unwrap_or(0));
        String::from_utf8_lossy(&buf[..n]).to_string()
    }

    /// Attack: more connections than the cap. The one past it is closed
    /// unanswered; the connections already open keep being served, and a
    /// freed place is taken by the next client.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn connections_over_the_cap_are_closed_while_open_ones_keep_working() {
        let limits = HttpLimits {
            max_connections: 2,
            ..HttpLimits::default()
        };
        let (addr, stop, task) = start(limits).await;
        let mut first = TcpStream::connect(addr).await.expect("connect");
        let mut second = TcpStream::connect(addr).await.expect("connect");
        assert!(get_on(&mut first).await.contains("200 OK"));
        let third = get_health(addr).await;
        assert!(third.is_empty(), "a third connection was served: {third}");
        assert!(
            get_on(&mut second).await.contains("200 OK"),
            "an open connection stopped being served"
        );
        assert!(
            get_on(&mut first).await.contains("200 OK"),
            "an open connection stopped being served"
        );
        drop(first);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            get_health(addr).await.contains("200 OK"),
            "the freed place was not reused"
        );
        let _ = stop.send(true);
        task.await.expect("server");
    }

    /// Attack: a connection left open after its request (keep-alive
    /// hoarding). Closed once idle for the header read timeout.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_idle_keep_alive_connection_is_closed() {
        let limits = HttpLimits {
            header_read_timeout: Duration::from_millis(500),
            ..HttpLimits::default()
        };
        let (addr, stop, task) = start(limits).await;
        let mut idle = TcpStream::connect(addr).await.expect("connect");
        assert!(get_on(&mut idle).await.contains("200 OK"));
        let started = Instant::now();
        let mut rest = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), idle.read_to_end(&mut rest)).await;
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "an idle keep-alive connection was held {:?}",
            started.elapsed()
        );
        let _ = stop.send(true);
        task.await.expect("server");
    }

    /// Attack: a body dripped one byte every 100 ms — each byte well within
    /// any per-read timeout, the whole body never. Cut off at the body
    /// deadline while another client is served.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dripped_body_is_cut_off_at_the_body_deadline() {
        let limits = HttpLimits {
            body_read_timeout: Duration::from_millis(700),
            ..HttpLimits::default()
        };
        let (addr, stop, task) = start(limits).await;
        let stream = TcpStream::connect(addr).await.expect("connect");
        let (mut reader, mut writer) = stream.into_split();
        writer
            .write_all(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
            .await
            .expect("write");
        let started = Instant::now();
        let drip = tokio::spawn(async move {
            for _ in 0..100 {
                if writer.write_all(b"x").await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        assert!(
            get_health(addr).await.contains("200 OK"),
            "another client was not served"
        );
        let mut answer = Vec::new();
        let _ =
            tokio::time::timeout(Duration::from_secs(15), reader.read_to_end(&mut answer)).await;
        let held = started.elapsed();
        drip.abort();
        assert!(
            held < Duration::from_secs(3),
            "a dripped body held its request {held:?}"
        );
        assert!(
            !String::from_utf8_lossy(&answer).contains("200 OK"),
            "a body past its deadline was accepted"
        );
        let _ = stop.send(true);
        task.await.expect("server");
    }

    /// Attack: ask for a large response and never read it. The server's
    /// writes stall; the connection is closed after the write timeout and
    /// its place goes to the next client.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_that_never_reads_its_response_is_cut_off() {
        let limits = HttpLimits {
            max_connections: 1,
            write_timeout: Duration::from_millis(700),
            ..HttpLimits::default()
        };
        let (addr, stop, task) = start(limits).await;
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.set_recv_buffer_size(4096).expect("rcvbuf");
        let mut stalled = socket.connect(addr).await.expect("connect");
        stalled
            .write_all(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .expect("write");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            get_health(addr).await.is_empty(),
            "the cap of one let a second client in"
        );
        let started = Instant::now();
        let mut served = false;
        while !served && started.elapsed() < Duration::from_secs(5) {
            served = get_health(addr).await.contains("200 OK");
        }
        assert!(
            served,
            "a client that never reads held the only place for {:?}",
            started.elapsed()
        );
        drop(stalled);
        let _ = stop.send(true);
        task.await.expect("server");
    }
}
