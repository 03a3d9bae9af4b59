//! `chronik-ingestor` entry point: parse args, set up tracing, log the
//! effective config, serve until SIGINT or SIGTERM.

use chronik_ingestor::config::{Args, Config};
use clap::Parser;
use tracing_subscriber::EnvFilter;

/// mimalloc, built with `override`, so it also serves malloc() for the
/// statically linked librdkafka: glibc malloc was ~17% of the ingestor's CPU
/// under load (several allocations per message across threads).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("CHRONIK_LOG").unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let config = Config::try_from(args)?;
    tracing::info!(?config, "effective configuration");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(chronik_ingestor::server::run(config, shutdown_signal()))?;
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut terminate = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot listen for SIGTERM; only Ctrl-C will stop the ingestor");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}
