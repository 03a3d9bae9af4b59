//! Start-up and ordered shutdown of the ingestor process.
//!
//! Binds the listener (and the `--metrics-listen` one, serving only
//! /metrics, /health and /ready), prints `LISTENING http=ADDR` (plus
//! ` metrics=ADDR` with a second listener; machine-read), serves
//! until the shutdown future resolves; then stops accepting (produce routes
//! answer 503 `shutting_down`, the listener closes, open requests finish),
//! flushes every in-flight message, logs the final counts and prints
//! `STOPPED accepted=.. delivered=.. failed=.. in_flight=..`.
//! Must not: parse arguments or install signal handlers (that is `main`).

use std::future::Future;
use std::io::Write as _;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::app::{app, status_app, AppState};
use crate::config::Config;

/// Message counts at exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FinalCounts {
    pub accepted: u64,
    pub delivered: u64,
    pub failed: u64,
    pub in_flight: u64,
}

/// How long open HTTP requests may take to finish after shutdown began,
/// beyond the message timeout they are already bounded by.
const DRAIN_SLACK: Duration = Duration::from_secs(10);

pub async fn run(
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<FinalCounts> {
    let state = AppState::new(config.clone())?;
    let listener = TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    let addr = listener.local_addr()?;
    let tls = match &config.tls {
        Some(settings) => {
            let acceptor = chronik_tls::TlsAcceptor::load(settings.clone())?;
            acceptor.spawn_reloader();
            Some(acceptor)
        }
        None => None,
    };
    // the LISTENING line names the scheme: http=ADDR or https=ADDR
    let scheme = if tls.is_some() { "https" } else { "http" };
    tracing::info!(
        %addr,
        %scheme,
        ingestor_id = %config.ingestor_id,
        producer_id = %format!("{:016x}", state.producer.producer_id()),
        "listening"
    );
    let (stopping_tx, mut stopping_rx) = watch::channel(false);
    let status_task = match config.metrics_listen {
        Some(metrics_addr) => {
            let status_listener = TcpListener::bind(metrics_addr)
                .await
                .with_context(|| format!("binding --metrics-listen {metrics_addr}"))?;
            let bound = status_listener.local_addr()?;
            println!("LISTENING {scheme}={addr} metrics={bound}");
            let mut stopped = stopping_rx.clone();
            let stop = async move {
                let _ = stopped.wait_for(|stopping| *stopping).await;
            };
            Some(tokio::spawn(chronik_http::serve(
                status_listener,
                status_app(state.clone()),
                config.http,
                stop,
            )))
        }
        None => {
            println!("LISTENING {scheme}={addr}");
            None
        }
    };
    let _ = std::io::stdout().flush();

    let signal_state = state.clone();
    let state_for_serve = state.clone();
    let signal = async move {
        shutdown.await;
        tracing::info!("shutdown requested: no longer accepting; finishing open requests");
        signal_state.begin_shutdown();
        let _ = stopping_tx.send(true);
    };
    let http = config.http;
    let serve = async move {
        match tls {
            Some(tls) => {
                chronik_http::serve_tls(listener, app(state_for_serve), http, tls, signal).await
            }
            None => chronik_http::serve(listener, app(state_for_serve), http, signal).await,
        }
    };
    let drain_limit = config.message_timeout + DRAIN_SLACK;
    let drain_deadline = async move {
        // Only counts from the moment shutdown began.
        let _ = stopping_rx.wait_for(|stopping| *stopping).await;
        tokio::time::sleep(drain_limit).await;
    };
    tokio::select! {
        () = serve => {}
        () = drain_deadline => tracing::warn!(?drain_limit, "open requests did not finish in time; flushing anyway"),
    }
    if let Some(task) = status_task {
        task.abort();
    }

    let flush_timeout = config.message_timeout + Duration::from_secs(1);
    if let Err(e) = state.producer.flush(flush_timeout).await {
        tracing::warn!(error = %e, "flush did not complete: some messages have no delivery report");
    }
    let (accepted, delivered, failed) = state.producer.counts();
    let counts = FinalCounts {
        accepted,
        delivered,
        failed,
        in_flight: accepted.saturating_sub(delivered + failed),
    };
    let ledger = state.producer.ledger_snapshot(&config.ingestor_id);
    tracing::info!(
        accepted,
        delivered,
        failed,
        in_flight = counts.in_flight,
        acknowledged_ranges = ledger.acknowledged.len(),
        failed_ranges = ledger.failed.len(),
        "final counts"
    );
    println!(
        "STOPPED accepted={accepted} delivered={delivered} failed={failed} in_flight={}",
        counts.in_flight
    );
    let _ = std::io::stdout().flush();
    Ok(counts)
}
