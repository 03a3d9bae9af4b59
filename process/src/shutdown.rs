//! The shutdown signal a long-running Chronik binary hands its server: a
//! future that completes on the first SIGINT (Ctrl-C) or SIGTERM (what
//! Kubernetes and scripts/lib.sh's `stop_pid` send). What a shutdown then
//! does (drain, flush, final report) is the server's business.
//! Must not: exit the process or wait on anything but the signals.

use tokio::signal::unix::{signal, SignalKind};

/// Completes on SIGINT or SIGTERM. Must be polled inside a tokio runtime
/// with signals enabled. `binary` names what stops in the one error line
/// logged when SIGTERM cannot be listened for (then only Ctrl-C stops it),
/// e.g. `"broker"`.
pub async fn shutdown_signal(binary: &str) {
    let mut terminate = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot listen for SIGTERM; only Ctrl-C will stop the {binary}");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}
