//! `chronik-consumer` entry point: parse args, set up tracing, log the
//! effective config, then run a replica (until SIGTERM/SIGINT or idle) or
//! merge reports. Exit status: 0 clean, 1 verification failed, 2 error,
//! 3 (merge) clean but inconclusive.

use std::process::ExitCode;

use chronik_consumer::config::{Args, Command, Config};
use chronik_consumer::EXIT_ERROR;
use clap::Parser;

fn main() -> ExitCode {
    let args = Args::parse();
    chronik_process::init_tracing("CHRONIK_LOG", "info");
    match run(args) {
        Ok(status) => ExitCode::from(status),
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("chronik-consumer: {e:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

fn run(args: Args) -> anyhow::Result<u8> {
    // One worker thread serves HTTP; the poll loop has its own thread.
    let runtime = chronik_process::runtime(Some(1))?;
    match args.command {
        Some(Command::Merge(merge)) => runtime.block_on(chronik_consumer::run::merge(merge)),
        None => {
            let config: Config = chronik_process::effective_config(args.run)?;
            runtime.block_on(chronik_consumer::run::run(
                config,
                chronik_process::shutdown_signal("consumer"),
            ))
        }
    }
}
