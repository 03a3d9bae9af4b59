//! `chronik-bench` entry point: parse args, set up tracing and Ctrl-C, run.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::Context;
use chronik_bench::config::{Args, Config};
use clap::Parser;

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    chronik_process::init_tracing("CHRONIK_BENCH_LOG", "warn,chronik_bench=info");
    let config: Config = chronik_process::effective_config(args)?;

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
