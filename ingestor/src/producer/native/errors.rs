//! What the native producer does with each Kafka error code a Produce answer
//! carries, and the code's name in the per-message answers.
//!
//! Owns: the classification (delivered, retry as is, retry after a metadata
//! refresh, retry under a new producer identity, fail) and the translation
//! into the error vocabulary the HTTP answers already speak (librdkafka's
//! codes: a broker error keeps its Kafka number there).

use rdkafka::error::RDKafkaErrorCode;
use rdkafka::types::RDKafkaRespErr;

/// What to do with a batch given its partition's error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Delivered,
    /// Send the same bytes again; `refresh`: the leader may have moved.
    Retry {
        refresh: bool,
    },
    /// The broker does not have this producer's sequence state: retry the
    /// batch under a new producer id, starting its sequence again.
    NewIdentity,
    Fail,
}

pub fn classify(code: i16) -> Action {
    match code {
        0 | 46 => Action::Delivered, // NONE, DUPLICATE_SEQUENCE_NUMBER
        // UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER,
        // NETWORK_EXCEPTION, KAFKA_STORAGE_ERROR, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH
        3 | 5 | 6 | 13 | 56 | 74 | 75 => Action::Retry { refresh: true },
        // CORRUPT_MESSAGE, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
        // CONCURRENT_TRANSACTIONS
        2 | 7 | 19 | 20 | 51 => Action::Retry { refresh: false },
        // OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, UNKNOWN_PRODUCER_ID, PRODUCER_FENCED
        45 | 47 | 59 | 90 => Action::NewIdentity,
        _ => Action::Fail,
    }
}

/// The code in the answers' vocabulary.
pub fn code(kafka: i16) -> RDKafkaErrorCode {
    RDKafkaRespErr::try_from(i32::from(kafka))
        .map(RDKafkaErrorCode::from)
        .unwrap_or(RDKafkaErrorCode::Fail)
}

/// A readable name for logs and errors.
pub fn name(kafka: i16) -> String {
    format!("{:?} ({kafka}): {}", code(kafka), code(kafka))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_codes_keep_their_numbers() {
        assert_eq!(code(6), RDKafkaErrorCode::NotLeaderForPartition);
        assert_eq!(code(45), RDKafkaErrorCode::OutOfOrderSequenceNumber);
        assert_eq!(code(29), RDKafkaErrorCode::TopicAuthorizationFailed);
        assert_eq!(code(-32768), RDKafkaErrorCode::Fail);
        assert_eq!(classify(46), Action::Delivered);
        assert_eq!(classify(6), Action::Retry { refresh: true });
        assert_eq!(classify(59), Action::NewIdentity);
        assert_eq!(classify(10), Action::Fail);
    }
}
