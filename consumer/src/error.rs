//! Errors of the consumer library. The binary wraps them in `anyhow`.

use std::path::PathBuf;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    #[error("ledger {origin}: {reason}")]
    Ledger { origin: String, reason: String },
    #[error("report {path}: {reason}")]
    Report { path: PathBuf, reason: String },
    #[error("kafka: {context}: {source}")]
    Kafka {
        context: &'static str,
        source: rdkafka::error::KafkaError,
    },
    #[error(transparent)]
    Harness(#[from] chronik_harness::HarnessError),
    #[error("configuration: {0}")]
    Config(String),
    #[error("share group: {0}")]
    Share(String),
}
