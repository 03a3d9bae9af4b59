//! Feature levels (KIP-584 / KIP-778 as KRaft keeps them): what this
//! build supports, what a new cluster finalizes, and the controller's
//! check of an UpdateFeatures change, with Kafka 4.3's names, levels,
//! errors and messages.
//!
//! Owns: the supported ranges, the bootstrap levels, `finalized` (what an
//! image's levels mean, old images included) and `check_update`. Must not:
//! change an image (`command::apply` records a checked update) or know the
//! wire format (the server's handlers map `FeatureError` to Kafka's codes).
//!
//! An image written before Chronik had features holds none. It is read as
//! Kafka reads a cluster upgraded from a release without a feature: the
//! feature is at level 0 (`eligible.leader.replicas.version` 0, so ELR
//! stays off until an operator upgrades it), while `metadata.version` and
//! `kraft.version` are what this build speaks (Chronik's image has no
//! per-version record formats to gate).

use std::collections::BTreeMap;

/// Kafka's `metadata.version` feature.
pub const METADATA_VERSION: &str = "metadata.version";
/// Kafka's `kraft.version` feature (KIP-853).
pub const KRAFT_VERSION: &str = "kraft.version";
/// Kafka's `eligible.leader.replicas.version` feature (KIP-966).
pub const ELR_VERSION: &str = "eligible.leader.replicas.version";
/// Kafka's `share.version` feature (KIP-932): share groups at level 1.
pub const SHARE_VERSION: &str = "share.version";

/// `metadata.version` 4.3-IV0, Kafka 4.3's latest production level.
pub const METADATA_VERSION_LATEST: i16 = 30;
/// `metadata.version` 3.3-IV3, the lowest level Kafka 4.x accepts.
pub const METADATA_VERSION_MIN: i16 = 7;
/// `metadata.version` 4.0-IV1, which `eligible.leader.replicas.version` 1
/// depends on (Kafka's EligibleLeaderReplicasVersion.ELRV_1).
pub const METADATA_VERSION_FOR_ELR: i16 = 23;

/// (name, min, max) of every feature this build supports, by name.
pub const SUPPORTED: &[(&str, i16, i16)] = &[
    (ELR_VERSION, 0, 1),
    (KRAFT_VERSION, 0, 1),
    (
        METADATA_VERSION,
        METADATA_VERSION_MIN,
        METADATA_VERSION_LATEST,
    ),
    (SHARE_VERSION, 0, 1),
];

/// What a new cluster finalizes (Kafka 4.1+ bootstraps ELR on, 4.2+ share
/// groups: ShareVersion.SV_1's bootstrap metadata version is 4.2-IV0).
pub fn bootstrap_levels() -> BTreeMap<String, i16> {
    [
        (ELR_VERSION, 1),
        (KRAFT_VERSION, 1),
        (METADATA_VERSION, METADATA_VERSION_LATEST),
        (SHARE_VERSION, 1),
    ]
    .into_iter()
    .map(|(n, l)| (n.to_string(), l))
    .collect()
}

/// The finalized level of every feature at a level above 0, from an
/// image's `features` (empty for a cluster older than features: see the
/// module header).
pub fn finalized(features: &BTreeMap<String, i16>) -> BTreeMap<String, i16> {
    let mut levels: BTreeMap<String, i16> = BTreeMap::new();
    levels.insert(METADATA_VERSION.to_string(), METADATA_VERSION_LATEST);
    levels.insert(KRAFT_VERSION.to_string(), 1);
    for (name, level) in features {
        levels.insert(name.clone(), *level);
    }
    levels.retain(|_, level| *level > 0);
    levels
}

/// The finalized level of `name` (0 when not finalized).
pub fn level(features: &BTreeMap<String, i16>, name: &str) -> i16 {
    finalized(features).get(name).copied().unwrap_or(0)
}

/// Whether share groups (KIP-932) are on: `share.version` 1, as Kafka
/// gates them (an older cluster turns them on with kafka-features).
pub fn share_groups_enabled(features: &BTreeMap<String, i16>) -> bool {
    level(features, SHARE_VERSION) >= 1
}

/// Whether KIP-966's eligible leader replicas are on.
pub fn elr_enabled(features: &BTreeMap<String, i16>) -> bool {
    level(features, ELR_VERSION) >= 1
}

/// Kafka's FeatureUpdate.UpgradeType.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum UpgradeType {
    Upgrade,
    SafeDowngrade,
    UnsafeDowngrade,
}

impl UpgradeType {
    /// The wire value (UpdateFeatures v1+ `upgrade_type`; v0's
    /// `allow_downgrade` true is a safe downgrade).
    pub fn from_wire(value: i8) -> Option<UpgradeType> {
        match value {
            1 => Some(UpgradeType::Upgrade),
            2 => Some(UpgradeType::SafeDowngrade),
            3 => Some(UpgradeType::UnsafeDowngrade),
            _ => None,
        }
    }
}

/// A refused update, as Kafka's controller words it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum FeatureError {
    /// INVALID_UPDATE_VERSION.
    #[error("Invalid update version {level} for feature {name}. {reason}")]
    InvalidUpdateVersion {
        name: String,
        level: i16,
        reason: String,
    },
    /// INVALID_UPDATE_VERSION for `metadata.version` downgrades, as Kafka's
    /// `updateMetadataVersion` words them.
    #[error("Invalid metadata.version {level}. {reason}")]
    MetadataDowngrade { level: i16, reason: String },
}

/// Checks `updates` (name, level, type) against the current `features`, as
/// Kafka's FeatureControlManager does, in request order: the first failure
/// fails the whole request. Returns the levels to record.
pub fn check_update(
    features: &BTreeMap<String, i16>,
    node_id: i32,
    updates: &[(String, i16, UpgradeType)],
) -> Result<BTreeMap<String, i16>, FeatureError> {
    let current = finalized(features);
    let mut proposed = current.clone();
    for (name, level, kind) in updates {
        let invalid = |reason: String| FeatureError::InvalidUpdateVersion {
            name: name.clone(),
            level: *level,
            reason,
        };
        let now = current.get(name).copied().unwrap_or(0);
        if *level < 0 {
            return Err(invalid("A feature version cannot be less than 0.".into()));
        }
        let Some((_, min, max)) = SUPPORTED.iter().find(|(n, _, _)| n == name) else {
            return Err(invalid(format!(
                "Local controller {node_id} does not support this feature."
            )));
        };
        // Level 0 turns a feature off: always within range.
        if *level != 0 && (*level < *min || *level > *max) {
            return Err(invalid(format!(
                "Local controller {node_id} only supports versions {min}-{max}"
            )));
        }
        if *level < now && *kind == UpgradeType::Upgrade {
            return Err(invalid(
                "Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.".into(),
            ));
        }
        if *level > now && *kind != UpgradeType::Upgrade {
            return Err(invalid("Can't downgrade to a newer version.".into()));
        }
        if name == KRAFT_VERSION && *level < now {
            return Err(invalid(
                "Can't downgrade the version of this feature.".into(),
            ));
        }
        if name == METADATA_VERSION && *level < now {
            return Err(FeatureError::MetadataDowngrade {
                level: *level,
                reason: if *kind == UpgradeType::UnsafeDowngrade {
                    "Unsafe metadata downgrade is not supported in this version.".into()
                } else {
                    "Refusing to perform the requested downgrade because it might delete metadata information.".into()
                },
            });
        }
        proposed.insert(name.clone(), *level);
    }
    // Dependencies, on the levels the whole request leaves.
    let elr = proposed.get(ELR_VERSION).copied().unwrap_or(0);
    let mv = proposed.get(METADATA_VERSION).copied().unwrap_or(0);
    if elr >= 1 && mv < METADATA_VERSION_FOR_ELR {
        return Err(FeatureError::InvalidUpdateVersion {
            name: ELR_VERSION.to_string(),
            level: elr,
            reason: format!(
                "{ELR_VERSION} could not be set to {elr} because it depends on {METADATA_VERSION} level {METADATA_VERSION_FOR_ELR}"
            ),
        });
    }
    Ok(updates
        .iter()
        .map(|(name, level, _)| (name.clone(), *level))
        .collect())
}

#[cfg(test)]
#[rustfmt::skip]
mod tests {
    use super::*;

    const UP: UpgradeType = UpgradeType::Upgrade;
    const SAFE: UpgradeType = UpgradeType::SafeDowngrade;
    const UNSAFE: UpgradeType = UpgradeType::UnsafeDowngrade;

    fn reason(result: Result<BTreeMap<String, i16>, FeatureError>) -> String {
        match result {
            Ok(levels) => format!("ok {levels:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn an_old_image_has_elr_off_and_a_new_cluster_has_it_on() {
        let old = BTreeMap::new();
        assert!(!elr_enabled(&old));
        assert_eq!(level(&old, METADATA_VERSION), 30);
        assert!(elr_enabled(&bootstrap_levels()));
    }

    #[test]
    fn updates_are_checked_as_kafka_checks_them() {
        let old = BTreeMap::new();
        let new = bootstrap_levels();
        type Row<'a> = (&'a BTreeMap<String, i16>, &'a str, i16, UpgradeType, &'a str);
        let table: [Row<'_>; 9] = [
            (&old, ELR_VERSION, 1, UP, "ok {\"eligible.leader.replicas.version\": 1}"),
            (&new, ELR_VERSION, 0, SAFE, "ok {\"eligible.leader.replicas.version\": 0}"),
            (&new, ELR_VERSION, 0, UP, "Invalid update version 0 for feature eligible.leader.replicas.version. Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade."),
            (&old, ELR_VERSION, 2, UP, "Invalid update version 2 for feature eligible.leader.replicas.version. Local controller 1 only supports versions 0-1"),
            (&old, "streams.version", 1, UP, "Invalid update version 1 for feature streams.version. Local controller 1 does not support this feature."),
            (&old, ELR_VERSION, 1, SAFE, "Invalid update version 1 for feature eligible.leader.replicas.version. Can't downgrade to a newer version."),
            (&new, METADATA_VERSION, 25, SAFE, "Invalid metadata.version 25. Refusing to perform the requested downgrade because it might delete metadata information."),
            (&new, METADATA_VERSION, 25, UNSAFE, "Invalid metadata.version 25. Unsafe metadata downgrade is not supported in this version."),
            (&new, KRAFT_VERSION, 0, SAFE, "Invalid update version 0 for feature kraft.version. Can't downgrade the version of this feature."),
        ];
        for (features, name, level, kind, want) in table {
            assert_eq!(reason(check_update(features, 1, &[(name.to_string(), level, kind)])), want, "{name}={level}");
        }
    }
}
