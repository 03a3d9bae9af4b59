//! The tracing subscriber every Chronik binary installs first thing in
//! `main`: human-readable lines on stderr (stdout is kept for
//! machine-read output such as chronik-server's `LISTENING` line), ANSI
//! colours only when stderr is a terminal (logs redirected to a file stay
//! plain), the filter from an environment variable in `EnvFilter` syntax;
//! and the "effective configuration" line each binary logs at start.
//! Must not: be called twice in a process (`init` panics if a global
//! subscriber is already set), or from a library.

use std::fmt::Debug;

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber. `env_var` (e.g. `CHRONIK_LOG`) holds the
/// filter; when it is unset or does not parse, `default_filter` (e.g.
/// `"info"`) applies.
pub fn init_tracing(env_var: &str, default_filter: &str) {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env(env_var).unwrap_or_else(|_| EnvFilter::new(default_filter)),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

/// The binary's `Config` made from its parsed `args`, logged at info as its
/// effective configuration (what the flags, the environment and the
/// defaults added up to), so every log starts with it.
pub fn effective_config<A, C>(args: A) -> Result<C, C::Error>
where
    C: TryFrom<A> + Debug,
{
    let config = C::try_from(args)?;
    tracing::info!(?config, "effective configuration");
    Ok(config)
}
