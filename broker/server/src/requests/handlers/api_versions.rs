//! ApiVersions: advertises the dispatch table's APIs and version ranges,
//! and from v3 the feature levels this broker supports and the cluster has
//! finalized (`chronik_metadata::features`), as Kafka's KRaft brokers do:
//! the finalized features' epoch is the applied metadata offset. (An
//! unsupported ApiVersions version is answered in `connection`, since it
//! cannot be decoded.)

use chronik_metadata::features;
use chronik_protocol::api::api_versions_response;
use chronik_protocol::Response;
use kafka_protocol::messages::api_versions_response::{FinalizedFeatureKey, SupportedFeatureKey};
use kafka_protocol::messages::ApiVersionsRequest;
use kafka_protocol::protocol::StrBytes;

use super::Handled;
use chronik_metadata::Cluster;

pub fn handle(cluster: &Cluster, _version: i16, _request: ApiVersionsRequest) -> Option<Handled> {
    let image = cluster.image();
    let supported = features::SUPPORTED
        .iter()
        .map(|(name, min, max)| {
            SupportedFeatureKey::default()
                .with_name(StrBytes::from_static_str(name))
                .with_min_version(*min)
                .with_max_version(*max)
        })
        .collect();
    let finalized = features::finalized(&image.features)
        .into_iter()
        .map(|(name, level)| {
            FinalizedFeatureKey::default()
                .with_name(StrBytes::from_string(name))
                .with_min_version_level(level)
                .with_max_version_level(level)
        })
        .collect();
    let epoch = i64::try_from(image.applied_index).unwrap_or(i64::MAX);
    let response = api_versions_response(0)
        .with_supported_features(supported)
        .with_finalized_features(finalized)
        .with_finalized_features_epoch(epoch);
    Handled::new(Response::ApiVersions(response), false)
}
