//! DescribeClientQuotas (v0-1; `kafka-configs.sh --describe --entity-type
//! clients`, `--entity-default`, `--entity-type users --entity-type
//! clients`): the quota entities of this broker's metadata image that the
//! filter matches, with their values. A filter component matches one
//! entity type by exact name (0), the default (1) or any named, non-default
//! entity (2); `strict` also requires the entity to have no other types.
//! A bad filter (an unknown type, a type twice, an exact match without a
//! name, `ip` beside `user` or `client-id`) answers INVALID_REQUEST with
//! Kafka's message. The authorizer has required DESCRIBE_CONFIGS on the
//! cluster.

use chronik_metadata::quotas::{QuotaEntity, CLIENT_ID, IP, USER};
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handled;
use chronik_metadata::Cluster;

const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_SPECIFIED: i8 = 2;

/// Kafka's checks of the filter.
fn check_filter(components: &[ComponentData]) -> Result<(), String> {
    for (i, c) in components.iter().enumerate() {
        let entity_type = c.entity_type.as_str();
        if ![USER, CLIENT_ID, IP].contains(&entity_type) {
            return Err(format!("Custom entity type '{entity_type}' not supported"));
        }
        if components[..i]
            .iter()
            .any(|p| p.entity_type == c.entity_type)
        {
            return Err(format!(
                "Duplicate {entity_type} filter component entity type"
            ));
        }
        match c.match_type {
            MATCH_EXACT if c._match.is_none() => {
                return Err(format!("Exact match of {entity_type} requires a name"));
            }
            MATCH_EXACT | MATCH_DEFAULT | MATCH_SPECIFIED => {}
            other => return Err(format!("Unknown match type {other}")),
        }
    }
    let has = |t: &str| components.iter().any(|c| c.entity_type.as_str() == t);
    if has(IP) && (has(USER) || has(CLIENT_ID)) {
        return Err("Invalid entity filter component combination, IP filter component should not be used with user or clientId filter component.".into());
    }
    Ok(())
}

/// Whether `entity` passes the filter.
fn matches(entity: &QuotaEntity, components: &[ComponentData], strict: bool) -> bool {
    let each =
        components.iter().all(
            |c| match (entity.component(c.entity_type.as_str()), c.match_type) {
                (None, _) => false,
                (Some(name), MATCH_EXACT) => name == c._match.as_deref(),
                (Some(name), MATCH_DEFAULT) => name.is_none(),
                (Some(name), _) => name.is_some(),
            },
        );
    let only = !strict || entity.0.len() == components.len();
    each && only
}

pub fn handle(
    cluster: &Cluster,
    _version: i16,
    request: DescribeClientQuotasRequest,
) -> Option<Handled> {
    if let Err(message) = check_filter(&request.components) {
        return Handled::new(
            Response::DescribeClientQuotas(
                DescribeClientQuotasResponse::default()
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(StrBytes::from_string(message)))
                    .with_entries(None),
            ),
            true,
        );
    }
    let image = cluster.image();
    let entries = image
        .client_quotas
        .iter()
        .filter(|(entity, _)| matches(entity, &request.components, request.strict))
        .map(|(entity, values)| {
            EntryData::default()
                .with_entity(
                    entity
                        .0
                        .iter()
                        .map(|(t, n)| {
                            EntityData::default()
                                .with_entity_type(StrBytes::from_string(t.clone()))
                                .with_entity_name(n.clone().map(StrBytes::from_string))
                        })
                        .collect(),
                )
                .with_values(
                    values
                        .iter()
                        .map(|(k, v)| {
                            ValueData::default()
                                .with_key(StrBytes::from_string(k.clone()))
                                .with_value(v.0)
                        })
                        .collect(),
                )
        })
        .collect();
    Handled::new(
        Response::DescribeClientQuotas(
            DescribeClientQuotasResponse::default().with_entries(Some(entries)),
        ),
        false,
    )
}
