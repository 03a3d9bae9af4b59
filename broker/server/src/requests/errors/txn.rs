//! What transaction requests share: Kafka's error code for a version (old
//! clients do not know PRODUCER_FENCED) and whether a partition exists in
//! the cluster (the coordinator may host no replica of it).

use kafka_protocol::error::ResponseError;

use chronik_metadata::Cluster;

/// PRODUCER_FENCED for requests from `producer_fenced_since` on,
/// INVALID_PRODUCER_EPOCH before (as Kafka answers older clients).
pub fn for_version(
    error: ResponseError,
    version: i16,
    producer_fenced_since: i16,
) -> ResponseError {
    if error == ResponseError::ProducerFenced && version < producer_fenced_since {
        ResponseError::InvalidProducerEpoch
    } else {
        error
    }
}

pub fn code(result: &Result<(), ResponseError>) -> i16 {
    result.as_ref().err().map_or(0, |e| e.code())
}

/// Whether the metadata image has `topic`-`partition`.
pub fn partition_exists(cluster: &Cluster, topic: &str, partition: i32) -> bool {
    cluster.image().partition(topic, partition).is_some()
}
