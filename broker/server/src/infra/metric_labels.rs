//! The label sets the broker's metric families share: per partition
//! (`topic`, `partition`) and per reason. Must not: register or update a
//! metric (`metrics`, `metrics_cluster` do).

use prometheus_client::encoding::EncodeLabelSet;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PartitionLabels {
    pub topic: String,
    pub partition: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: &'static str,
}

/// Which replica served a consumer's Fetch: the partition's `leader`, or a
/// `follower` (KIP-392 follower fetching).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ServedByLabels {
    pub replica: &'static str,
}
