//! librdkafka's log lines in tracing: the one bridge the harness's
//! librdkafka clients (chronik-consumer, the ingestor's `--producer
//! librdkafka`) call from their `ClientContext::log`, so that a client's
//! log lines carry the same target (`librdkafka`), facility field and
//! levels whichever tool prints them (`CHRONIK_LOG=librdkafka=debug`
//! selects them all).
//! Must not: decide what a client error means (`ClientContext::error`
//! stays each client's: the ingestor reports connection loss through
//! its requests' outcomes and logs it quieter).

use rdkafka::config::RDKafkaLogLevel;

/// Logs one librdkafka line at the tracing level of its syslog severity
/// (emergency to error as error, notice and info as info).
pub fn forward(level: RDKafkaLogLevel, fac: &str, message: &str) {
    match level {
        RDKafkaLogLevel::Emerg
        | RDKafkaLogLevel::Alert
        | RDKafkaLogLevel::Critical
        | RDKafkaLogLevel::Error => {
            tracing::error!(target: "librdkafka", fac, "{message}")
        }
        RDKafkaLogLevel::Warning => tracing::warn!(target: "librdkafka", fac, "{message}"),
        RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
            tracing::info!(target: "librdkafka", fac, "{message}")
        }
        RDKafkaLogLevel::Debug => tracing::debug!(target: "librdkafka", fac, "{message}"),
    }
}
