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

/// A client quota's measure (Kafka's quota metric tags): the quota type
/// (`Produce`, `Fetch`, `Request`, `ControllerMutation`) and the user and
/// client id it counts (`""` where the quota names none).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QuotaLabels {
    pub quota_type: &'static str,
    pub user: String,
    pub client_id: String,
}
