//! What the refused parts of a request are answered with, where a handler
//! and the ACL gate (`requests::authorize`) must answer alike: a Fetch topic
//! refused whole, AddPartitionsToTxn's per-partition results and the topics
//! it never adds to a transaction. Must not: decide what is refused.

use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::fetch_request::FetchTopic;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::BrokerId;

use crate::requests::topics::lookup::is_internal_topic;

/// A topic of a Fetch answered with `code` in every partition (no data,
/// offsets unknown); also the ACL gate's answer for a refused topic.
pub fn refused_topic(t: &FetchTopic, code: i16) -> FetchableTopicResponse {
    FetchableTopicResponse::default()
        .with_topic(t.topic.clone())
        .with_topic_id(t.topic_id)
        .with_partitions(
            t.partitions
                .iter()
                .map(|p| {
                    PartitionData::default()
                        .with_partition_index(p.partition)
                        .with_error_code(code)
                        .with_high_watermark(-1)
                        .with_last_stable_offset(-1)
                        .with_log_start_offset(-1)
                        .with_preferred_read_replica(BrokerId(-1))
                        .with_records(Some(Bytes::new()))
                })
                .collect(),
        )
}

/// A topic no client may add to a transaction, super users included: an
/// internal one (`__consumer_offsets`, `__transaction_state`), whose
/// readers would take a transaction marker for one of their own records.
/// Also the ACL gate's rule, so that its refusal names every topic the
/// handler would refuse.
pub fn refused_to_clients(topic: &str) -> bool {
    is_internal_topic(topic)
}

/// The per-partition results of `topics`, each partition's error code
/// from `code` in request order; also the ACL gate's answer for a refused
/// transactional id.
pub fn topic_results(
    topics: &[AddPartitionsToTxnTopic],
    mut code: impl FnMut() -> i16,
) -> Vec<AddPartitionsToTxnTopicResult> {
    topics
        .iter()
        .map(|t| {
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.name.clone())
                .with_results_by_partition(
                    t.partitions
                        .iter()
                        .map(|p| {
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(*p)
                                .with_partition_error_code(code())
                        })
                        .collect(),
                )
        })
        .collect()
}
