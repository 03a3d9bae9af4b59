//! UpdateFeatures (API 57, v0–2; `kafka-features.sh upgrade / downgrade`,
//! Admin.updateFeatures): finalizes feature levels through the controller,
//! which checks them as Kafka's does (`chronik_metadata::features`). The
//! whole request succeeds or none of it does: a refusal is the top-level
//! error (INVALID_UPDATE_VERSION with Kafka's message); v0–1 answer a
//! result per feature on success, v2 none. ALTER on the cluster is checked
//! before (`authorize::cluster`).
//!
//! Owns: the request's shape (v0's `allow_downgrade`, v1's upgrade type)
//! and the answer. Must not: change a level other than through the
//! controller (`Command::UpdateFeatures`).

use chronik_metadata::Cluster;
use std::sync::Arc;

use chronik_metadata::features::UpgradeType;
use chronik_metadata::ClusterError;
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handled;
use crate::replica::ReplicaManager;
use crate::requests::errors::cluster::cluster_error_code;

/// A request names at most this many features (Kafka has a handful).
const MAX_FEATURE_UPDATES: usize = 64;

pub async fn handle(
    (replicas, cluster): (&Arc<ReplicaManager>, &Cluster),
    version: i16,
    request: UpdateFeaturesRequest,
) -> Option<Handled> {
    let names: Vec<StrBytes> = request
        .feature_updates
        .iter()
        .map(|u| u.feature.clone())
        .collect();
    match update((replicas, cluster), version, request).await {
        Ok(()) => {
            let results = if version <= 1 {
                names
                    .into_iter()
                    .map(|feature| UpdatableFeatureResult::default().with_feature(feature))
                    .collect()
            } else {
                Vec::new()
            };
            let response = UpdateFeaturesResponse::default().with_results(results);
            Handled::new(Response::UpdateFeatures(response), false)
        }
        Err((code, message)) => {
            tracing::debug!(%message, "UpdateFeatures refused");
            let response = UpdateFeaturesResponse::default()
                .with_error_code(code.code())
                .with_error_message(Some(StrBytes::from_string(message)));
            Handled::new(Response::UpdateFeatures(response), true)
        }
    }
}

async fn update(
    (replicas, cluster): (&Arc<ReplicaManager>, &Cluster),
    version: i16,
    request: UpdateFeaturesRequest,
) -> Result<(), (ResponseError, String)> {
    if request.feature_updates.len() > MAX_FEATURE_UPDATES {
        return Err((
            ResponseError::InvalidRequest,
            format!(
                "{} feature updates in one request (at most {MAX_FEATURE_UPDATES})",
                request.feature_updates.len()
            ),
        ));
    }
    let mut updates = Vec::with_capacity(request.feature_updates.len());
    for u in &request.feature_updates {
        let kind = if version == 0 {
            Some(if u.allow_downgrade {
                UpgradeType::SafeDowngrade
            } else {
                UpgradeType::Upgrade
            })
        } else {
            UpgradeType::from_wire(u.upgrade_type)
        };
        let Some(kind) = kind else {
            return Err(failed(format!(
                "Invalid update version {} for feature {}. The controller does not support the given upgrade type.",
                u.max_version_level, u.feature
            )));
        };
        updates.push((u.feature.to_string(), u.max_version_level, kind));
    }
    match cluster
        .update_features(updates, request.validate_only)
        .await
    {
        Ok(()) => {
            replicas.apply_latest().await;
            Ok(())
        }
        Err(ClusterError::FeatureUpdateFailed(message)) => Err(failed(message)),
        Err(e) => Err((cluster_error_code(&e), e.to_string())),
    }
}

/// Kafka's controller's words for a refused update.
fn failed(message: String) -> (ResponseError, String) {
    (
        ResponseError::InvalidUpdateVersion,
        format!("The update failed for all features since the following feature had an error: {message}"),
    )
}
