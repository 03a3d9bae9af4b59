//! Client quotas as the metadata quorum keeps them (Kafka's
//! ClientQuotaRecord): per quota entity — a user, a client id, a user and
//! client id, or an IP address, each name possibly `<default>` — a value
//! per quota key. Every broker enforces what the image holds, and it
//! survives restarts with the rest of the log.
//!
//! Owns: the entity and value types, Kafka's rules for what may be stored
//! (`check_alteration`: entity types `user`, `client-id`, `ip`; `ip` alone;
//! the keys each entity takes and their types; Kafka's INVALID_REQUEST
//! messages) and applying an alteration to the image (`apply`). Must not:
//! resolve which quota applies to a client or measure rates (the server's
//! `quotas` module does).

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::error::ClusterError;

/// Kafka's entity types (ClientQuotaEntity.USER, CLIENT_ID, IP).
pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";
pub const IP: &str = "ip";

/// Kafka's quota keys (QuotaConfig).
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";
pub const CONNECTION_CREATION_RATE: &str = "connection_creation_rate";

/// Quota entities the image holds at most: each is a map entry every
/// broker keeps, so an administrator's script gone wrong cannot grow it
/// without end.
pub const MAX_QUOTA_ENTITIES: usize = 10_000;
/// Longest entity name accepted (a principal or client id).
pub const MAX_ENTITY_NAME: usize = 1024;

/// A quota entity: its components `(type, name)` sorted by type, a `None`
/// name being the type's default (`<default>` in Kafka's tools).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct QuotaEntity(pub Vec<(String, Option<String>)>);

impl QuotaEntity {
    /// The entity of these components, sorted by type.
    pub fn new(mut components: Vec<(String, Option<String>)>) -> QuotaEntity {
        components.sort();
        QuotaEntity(components)
    }

    /// The name this entity gives `entity_type`: None when it has no such
    /// component, Some(None) for the default.
    pub fn component(&self, entity_type: &str) -> Option<Option<&str>> {
        self.0
            .iter()
            .find(|(t, _)| t == entity_type)
            .map(|(_, name)| name.as_deref())
    }
}

impl std::fmt::Display for QuotaEntity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(t, n)| format!("{t}={}", n.as_deref().unwrap_or("<default>")))
            .collect();
        write!(f, "{}", parts.join(","))
    }
}

/// A quota value (Kafka stores doubles). Equality is bitwise, so images
/// compare exactly.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct QuotaValue(pub f64);

impl PartialEq for QuotaValue {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}
impl Eq for QuotaValue {}

/// One entity's change: keys set to a value, keys removed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaAlteration {
    pub entity: QuotaEntity,
    pub set: Vec<(String, QuotaValue)>,
    pub remove: Vec<String>,
}

/// The image's client quotas.
pub type ClientQuotas = BTreeMap<QuotaEntity, BTreeMap<String, QuotaValue>>;

/// How a key's value must look (Kafka's ConfigDef type of the key).
#[derive(Clone, Copy)]
enum KeyType {
    Long,
    Int,
    Double,
}

fn key_type(entity: &QuotaEntity, key: &str) -> Option<KeyType> {
    if entity.component(IP).is_some() {
        return (key == CONNECTION_CREATION_RATE).then_some(KeyType::Int);
    }
    match key {
        PRODUCER_BYTE_RATE | CONSUMER_BYTE_RATE => Some(KeyType::Long),
        REQUEST_PERCENTAGE | CONTROLLER_MUTATION_RATE => Some(KeyType::Double),
        _ => None,
    }
}

fn invalid(message: String) -> ClusterError {
    ClusterError::InvalidRequest(message)
}

/// Kafka's checks of an entity: known types, each once, `ip` alone, a
/// default or a valid address for `ip`.
pub fn check_entity(entity: &QuotaEntity) -> Result<(), ClusterError> {
    if entity.0.is_empty() {
        return Err(invalid("Invalid empty client quota entity".into()));
    }
    for (i, (entity_type, name)) in entity.0.iter().enumerate() {
        if ![USER, CLIENT_ID, IP].contains(&entity_type.as_str()) {
            return Err(invalid(format!(
                "Unhandled client quota entity type: {entity_type}"
            )));
        }
        if entity.0[..i].iter().any(|(t, _)| t == entity_type) {
            return Err(invalid(format!(
                "Duplicate {entity_type} entity in the client quota entity"
            )));
        }
        if name.as_ref().is_some_and(|n| n.len() > MAX_ENTITY_NAME) {
            return Err(invalid(format!(
                "{entity_type} entity name longer than {MAX_ENTITY_NAME} bytes"
            )));
        }
    }
    if let Some(ip) = entity.component(IP) {
        if entity.0.len() > 1 {
            return Err(invalid(
                "Invalid quota entity combination, IP entity should not be combined with User or ClientId"
                    .into(),
            ));
        }
        if let Some(address) = ip {
            if address.parse::<IpAddr>().is_err() {
                return Err(invalid(format!(
                    "{address} is not a valid IP or resolvable host."
                )));
            }
        }
    }
    Ok(())
}

/// Kafka's checks of one key's value for `entity`.
fn check_value(entity: &QuotaEntity, key: &str, value: f64) -> Result<(), ClusterError> {
    let Some(kind) = key_type(entity, key) else {
        return Err(invalid(format!("Invalid configuration key {key}")));
    };
    if !value.is_finite() || value <= 0.0 {
        return Err(invalid(format!(
            "Proposed value for {key} must be a positive number"
        )));
    }
    let (max, name) = match kind {
        KeyType::Double => return Ok(()),
        KeyType::Int => (f64::from(i32::MAX), "an INT"),
        KeyType::Long => (i64::MAX as f64, "a LONG"),
    };
    if value > max {
        return Err(invalid(format!(
            "Proposed value for {key} is too large for {name}."
        )));
    }
    if value.fract() > 1e-16 {
        return Err(invalid(format!(
            "Proposed value for {key} is not an integer."
        )));
    }
    Ok(())
}

/// Kafka's checks of one entry of AlterClientQuotas: the entity, each key
/// named once, every value set valid for its key, every key removed known.
pub fn check_alteration(alteration: &QuotaAlteration) -> Result<(), ClusterError> {
    check_entity(&alteration.entity)?;
    let mut named = std::collections::BTreeSet::new();
    for key in alteration
        .set
        .iter()
        .map(|(k, _)| k)
        .chain(alteration.remove.iter())
    {
        if !named.insert(key.as_str()) {
            return Err(invalid(format!("Duplicate quota key {key}")));
        }
    }
    for (key, value) in &alteration.set {
        check_value(&alteration.entity, key, value.0)?;
    }
    for key in &alteration.remove {
        if key_type(&alteration.entity, key).is_none() {
            return Err(invalid(format!("Invalid configuration key {key}")));
        }
    }
    Ok(())
}

/// Applies checked alterations, all or none: refused when one is invalid
/// or the image would hold more than `MAX_QUOTA_ENTITIES` entities.
pub fn apply(
    quotas: &mut ClientQuotas,
    alterations: &[QuotaAlteration],
) -> Result<(), ClusterError> {
    alterations.iter().try_for_each(check_alteration)?;
    let mut next = quotas.clone();
    for alteration in alterations {
        let values = next.entry(alteration.entity.clone()).or_default();
        for key in &alteration.remove {
            values.remove(key);
        }
        for (key, value) in &alteration.set {
            values.insert(key.clone(), *value);
        }
        if values.is_empty() {
            next.remove(&alteration.entity);
        }
    }
    if next.len() > MAX_QUOTA_ENTITIES && next.len() > quotas.len() {
        return Err(invalid(format!(
            "at most {MAX_QUOTA_ENTITIES} client quota entities"
        )));
    }
    *quotas = next;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(parts: &[(&str, Option<&str>)]) -> QuotaEntity {
        QuotaEntity::new(
            parts
                .iter()
                .map(|(t, n)| (t.to_string(), n.map(str::to_string)))
                .collect(),
        )
    }

    fn set(e: QuotaEntity, key: &str, value: f64) -> QuotaAlteration {
        QuotaAlteration {
            entity: e,
            set: vec![(key.into(), QuotaValue(value))],
            remove: vec![],
        }
    }

    fn refusal(a: &QuotaAlteration) -> String {
        match check_alteration(a) {
            Err(ClusterError::InvalidRequest(m)) => m,
            other => panic!("expected INVALID_REQUEST, got {other:?}"),
        }
    }

    #[test]
    fn kafkas_entity_rules() {
        let ok = set(
            entity(&[(USER, Some("alice")), (CLIENT_ID, None)]),
            PRODUCER_BYTE_RATE,
            1024.0,
        );
        assert!(check_alteration(&ok).is_ok());
        assert!(refusal(&set(entity(&[]), PRODUCER_BYTE_RATE, 1.0)).contains("empty"));
        assert!(refusal(&set(
            entity(&[("group", Some("g"))]),
            PRODUCER_BYTE_RATE,
            1.0
        ))
        .contains("Unhandled client quota entity type: group"));
        assert!(refusal(&set(
            entity(&[(USER, Some("a")), (USER, Some("b"))]),
            PRODUCER_BYTE_RATE,
            1.0
        ))
        .contains("Duplicate"));
        assert!(refusal(&set(
            entity(&[(IP, Some("1.2.3.4")), (USER, None)]),
            CONNECTION_CREATION_RATE,
            1.0
        ))
        .contains("IP entity should not be combined"));
        assert!(refusal(&set(
            entity(&[(IP, Some("not-an-ip"))]),
            CONNECTION_CREATION_RATE,
            1.0
        ))
        .contains("not a valid IP"));
        assert!(
            check_alteration(&set(entity(&[(IP, None)]), CONNECTION_CREATION_RATE, 10.0)).is_ok()
        );
        assert!(check_alteration(&set(
            entity(&[(IP, Some("::1"))]),
            CONNECTION_CREATION_RATE,
            10.0
        ))
        .is_ok());
    }

    #[test]
    fn kafkas_key_rules() {
        let client = || entity(&[(CLIENT_ID, Some("c"))]);
        assert_eq!(
            refusal(&set(client(), "producer_byte_ratex", 1.0)),
            "Invalid configuration key producer_byte_ratex"
        );
        assert_eq!(
            refusal(&set(entity(&[(IP, None)]), PRODUCER_BYTE_RATE, 1.0)),
            "Invalid configuration key producer_byte_rate"
        );
        assert!(refusal(&set(client(), PRODUCER_BYTE_RATE, 10.5)).contains("is not an integer"));
        assert!(
            refusal(&set(entity(&[(IP, None)]), CONNECTION_CREATION_RATE, 3e9))
                .contains("too large for an INT")
        );
        assert!(refusal(&set(client(), CONSUMER_BYTE_RATE, f64::NAN)).contains("positive"));
        assert!(refusal(&set(client(), CONSUMER_BYTE_RATE, -1.0)).contains("positive"));
        assert!(check_alteration(&set(client(), REQUEST_PERCENTAGE, 12.5)).is_ok());
        assert!(check_alteration(&set(client(), CONTROLLER_MUTATION_RATE, 0.5)).is_ok());
    }

    #[test]
    fn apply_sets_removes_and_drops_empty_entities() {
        let mut quotas = ClientQuotas::new();
        let e = entity(&[(CLIENT_ID, Some("noisy"))]);
        apply(&mut quotas, &[set(e.clone(), PRODUCER_BYTE_RATE, 1000.0)])
            .expect("a valid alteration");
        assert_eq!(quotas[&e][PRODUCER_BYTE_RATE], QuotaValue(1000.0));
        let remove = QuotaAlteration {
            entity: e.clone(),
            set: vec![],
            remove: vec![PRODUCER_BYTE_RATE.into()],
        };
        apply(&mut quotas, &[remove]).expect("a valid removal");
        assert!(quotas.is_empty());
        // One invalid alteration: none applied.
        let bad = set(entity(&[(CLIENT_ID, Some("x"))]), "nope", 1.0);
        assert!(apply(&mut quotas, &[set(e.clone(), PRODUCER_BYTE_RATE, 5.0), bad]).is_err());
        assert!(quotas.is_empty());
    }
}
