//! `chronik-http`: serving an axum `Router` with the bounds a port open to
//! clients one does not control needs. The broker's metrics endpoint, the
//! ingestor and the verifying consumer all serve through `serve`.
//!
//! Owns: the accept loop and per-connection HTTP/1.1 serving (hyper): at
//! most `max_connections` at once (more are closed at accept), a request's
//! headers within `header_read_timeout` (this also closes a keep-alive
//! connection idle for that long: slowloris and idle hoarding both end),
//! its body within `body_read_timeout`, and graceful shutdown (stop
//! accepting, let requests in progress finish, close idle connections).
//! Must not: know any route.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tower::ServiceExt;
use tower_http::timeout::RequestBodyTimeoutLayer;

/// The bounds `serve` enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    pub max_connections: usize,
    pub header_read_timeout: Duration,
    pub body_read_timeout: Duration,
}

impl Default for HttpLimits {
    /// 1024 connections, headers within 10 s, bodies within 30 s.
    fn default() -> Self {
        HttpLimits {
            max_connections: 1024,
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
        }
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then stops
/// accepting and returns once every connection has finished (callers bound
/// that wait: a request in progress is let finish).
pub async fn serve(listener: TcpListener, router: Router, limits: HttpLimits, shutdown: impl Future<Output = ()>) {
    let router = router.layer(RequestBodyTimeoutLayer::new(limits.body_read_timeout));
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
                    let service = hyper::service::service_fn({
                        let router = router.clone();
                        move |request: Request<Incoming>| {
                            let router = router.clone();
                            async move { Ok::<_, Infallible>(router.oneshot(request.map(Body::new)).await.unwrap_or_else(|e| match e {})) }
                        }
                    });
                    let mut stop = stop_rx.clone();
                    connections.spawn(async move {
                        let _slot = slot;
                        let connection = hyper::server::conn::http1::Builder::new()
                            .timer(TokioTimer::new())
                            .header_read_timeout(limits.header_read_timeout)
                            .serve_connection(TokioIo::new(stream), service);
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

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use super::*;

    async fn start(limits: HttpLimits) -> (std::net::SocketAddr, watch::Sender<bool>, tokio::task::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (tx, mut rx) = watch::channel(false);
        let router = Router::new().route("/health", get(|| async { "ok" }));
        let task = tokio::spawn(serve(listener, router, limits, async move {
            let _ = rx.wait_for(|s| *s).await;
        }));
        (addr, tx, task)
    }

    async fn get_health(addr: std::net::SocketAddr) -> String {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.expect("write");
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
        String::from_utf8_lossy(&out).to_string()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn slowloris_is_cut_off_while_others_are_served() {
        let limits = HttpLimits { header_read_timeout: Duration::from_millis(500), ..HttpLimits::default() };
        let (addr, stop, task) = start(limits).await;
        let mut slow = TcpStream::connect(addr).await.expect("connect");
        slow.write_all(b"GET /health HTTP/1.1\r\n").await.expect("write");
        let started = Instant::now();
        assert!(get_health(addr).await.contains("200 OK"), "another client was not served");
        let mut rest = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), slow.read_to_end(&mut rest)).await;
        assert!(started.elapsed() < Duration::from_secs(3), "the slow client held on for {:?}", started.elapsed());
        let _ = stop.send(true);
        task.await.expect("server");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn connections_over_the_cap_are_closed_and_a_freed_place_is_reused() {
        let limits = HttpLimits { max_connections: 2, ..HttpLimits::default() };
        let (addr, stop, task) = start(limits).await;
        let first = TcpStream::connect(addr).await.expect("connect");
        let _second = TcpStream::connect(addr).await.expect("connect");
        tokio::time::sleep(Duration::from_millis(100)).await;
        let third = get_health(addr).await;
        assert!(third.is_empty(), "a third connection was served: {third}");
        drop(first);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(get_health(addr).await.contains("200 OK"), "the freed place was not reused");
        let _ = stop.send(true);
        task.await.expect("server");
    }
}
