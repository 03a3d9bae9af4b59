//! `chronik-ingestor` entry point: parse args, set up tracing, log the
//! effective config, serve until SIGINT or SIGTERM.

use chronik_ingestor::config::{Args, Config};
use clap::Parser;

/// mimalloc, built with `override`, so it also serves malloc() for the
/// statically linked librdkafka: glibc malloc was ~17% of the ingestor's CPU
/// under load (several allocations per message across threads).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    chronik_process::init_tracing("CHRONIK_LOG", "info");
    let config: Config = chronik_process::effective_config(args)?;
    let runtime = chronik_process::runtime(None)?;
    runtime.block_on(chronik_ingestor::server::run(
        config,
        chronik_process::shutdown_signal("ingestor"),
    ))?;
    Ok(())
}
