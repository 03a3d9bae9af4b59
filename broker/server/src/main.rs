//! `chronik-server` entry point: parse args, set up tracing, run the server
//! until SIGINT or SIGTERM.

use chronik_server::config::{Args, Config};
use chronik_server::infra::alloc_guard::ReservingAllocator;
use clap::Parser;
use tracing_subscriber::EnvFilter;

#[global_allocator]
static GLOBAL: ReservingAllocator = ReservingAllocator;

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
    let result = match config.roles.broker {
        true => runtime.block_on(chronik_server::startup::server::run(
            config,
            shutdown_signal(),
        )),
        false => runtime.block_on(chronik_server::startup::controller_node::run(
            config,
            shutdown_signal(),
        )),
    };
    // Never wait on a blocking task a shutdown phase gave up on.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    result
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut terminate = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot listen for SIGTERM; only Ctrl-C will stop the broker");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}
