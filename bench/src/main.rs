//! `chronik-bench` entry point: parse args, set up tracing and Ctrl-C, run.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::Context;
use chronik_bench::config::{Args, Config};
use clap::Parser;
use tracing_subscriber::EnvFilter;

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("CHRONIK_BENCH_LOG")
                .unwrap_or_else(|_| EnvFilter::new("warn,chronik_bench=info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let config = Config::try_from(args)?;
    tracing::info!(?config, "effective configuration");

    // First Ctrl-C: end the run early, still report. Second: exit at once.
    let interrupted = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register_conditional_shutdown(
        signal_hook::consts::SIGINT,
        130,
        interrupted.clone(),
    )
    .context("installing the SIGINT handler")?;
    signal_hook::flag::register(signal_hook::consts::SIGINT, interrupted.clone())
        .context("installing the SIGINT handler")?;

    let code = chronik_bench::app::run(config, interrupted)?;
    std::process::exit(code);
}
