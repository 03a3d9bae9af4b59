//! How many partitions (or topics, groups, resources) one request names:
//! the per-request cap (`--max-partitions-per-request`) the connection
//! checks after decoding and before any handler runs, so one request cannot
//! make the broker do unbounded work.
//!
//! Owns: counting per API. Must not: judge the request otherwise.

use chronik_protocol::Request;

/// The entries `request` asks the broker to act on.
pub fn entries_named(request: &Request) -> usize {
    fn sum<T>(items: &[T], each: impl Fn(&T) -> usize) -> usize {
        items.iter().map(each).fold(0usize, usize::saturating_add)
    }
    match request {
        Request::Produce(r) => sum(&r.topic_data, |t| t.partition_data.len().max(1)),
        Request::Fetch(r) => {
            sum(&r.topics, |t| t.partitions.len().max(1)) + r.forgotten_topics_data.len()
        }
        Request::ListOffsets(r) => sum(&r.topics, |t| t.partitions.len().max(1)),
        Request::OffsetCommit(r) => sum(&r.topics, |t| t.partitions.len().max(1)),
        Request::OffsetFetch(r) => {
            r.topics
                .as_deref()
                .map_or(0, |ts| sum(ts, |t| t.partition_indexes.len().max(1)))
                + sum(&r.groups, |g| {
                    1 + g
                        .topics
                        .as_deref()
                        .map_or(0, |ts| sum(ts, |t| t.partition_indexes.len()))
                })
        }
        Request::OffsetForLeaderEpoch(r) => sum(&r.topics, |t| t.partitions.len().max(1)),
        Request::Metadata(r) => r.topics.as_ref().map_or(0, Vec::len),
        Request::CreateTopics(r) => r.topics.len(),
        Request::DeleteTopics(r) => r.topics.len() + r.topic_names.len(),
        Request::DescribeConfigs(r) => r.resources.len(),
        Request::DescribeGroups(r) => r.groups.len(),
        Request::DeleteGroups(r) => r.groups_names.len(),
        Request::AddPartitionsToTxn(r) => {
            sum(&r.v3_and_below_topics, |t| t.partitions.len().max(1))
                + sum(&r.transactions, |x| {
                    1 + sum(&x.topics, |t| t.partitions.len().max(1))
                })
        }
        Request::TxnOffsetCommit(r) => sum(&r.topics, |t| t.partitions.len().max(1)),
        Request::WriteTxnMarkers(r) => sum(&r.markers, |m| {
            1 + sum(&m.topics, |t| t.partition_indexes.len().max(1))
        }),
        Request::DescribeTransactions(r) => r.transactional_ids.len(),
        Request::DescribeUserScramCredentials(r) => r.users.as_ref().map_or(0, Vec::len),
        Request::AlterUserScramCredentials(r) => r.deletions.len() + r.upsertions.len(),
        Request::AlterClientQuotas(r) => sum(&r.entries, |e| 1 + e.ops.len()),
        Request::DescribeClientQuotas(r) => r.components.len(),
        _ => 0,
    }
}
