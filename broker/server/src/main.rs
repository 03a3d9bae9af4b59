//! `chronik-server` entry point: parse args, set up tracing, run the server
//! until SIGINT or SIGTERM.

use chronik_server::config::{Args, Config};
use chronik_server::infra::alloc_guard::ReservingAllocator;
use clap::Parser;

#[global_allocator]
static GLOBAL: ReservingAllocator = ReservingAllocator;

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    chronik_process::init_tracing("CHRONIK_LOG", "info");
    let config: Config = chronik_process::effective_config(args)?;
    let runtime = chronik_process::runtime(None)?;
    let result = match config.roles.broker {
        true => runtime.block_on(chronik_server::startup::server::run(
            config,
            chronik_process::shutdown_signal("broker"),
        )),
        false => runtime.block_on(chronik_server::startup::controller_node::run(
            config,
            chronik_process::shutdown_signal("broker"),
        )),
    };
    // Never wait on a blocking task a shutdown phase gave up on.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    result
}
