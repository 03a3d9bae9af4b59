//! Errors of the result-file helpers (`histogram`, `results`). The envelope
//! keeps its own `EnvelopeError`: decoding it is a per-message outcome, not a
//! file failure.

use std::path::PathBuf;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum HarnessError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: interval log: {reason}")]
    Hlog { path: PathBuf, reason: String },
    #[error("{path}: JSON: {reason}")]
    Json { path: PathBuf, reason: String },
}
