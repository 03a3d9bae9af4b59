//! AlterClientQuotas (v0-1; `kafka-configs.sh --alter --add-config
//! producer_byte_rate=1048576 --entity-type clients --entity-name app`):
//! each entry's entity and operations are checked as Kafka's controller
//! checks them (`chronik_metadata::quotas::check_alteration`: entity types
//! `user`, `client-id`, `ip`, each once, `ip` alone; the keys each entity
//! takes and their types), a refused entry answers INVALID_REQUEST with
//! Kafka's message, and the accepted ones are committed together through
//! the metadata quorum (unless `validate_only`), so every broker enforces
//! them and they survive restarts. The authorizer has required
//! ALTER_CONFIGS on the cluster.

use chronik_metadata::quotas::{QuotaAlteration, QuotaEntity, QuotaValue};
use chronik_metadata::ClusterError;
use chronik_protocol::Response;
use kafka_protocol::messages::alter_client_quotas_request::EntryData;
use kafka_protocol::messages::alter_client_quotas_response::{
    EntityData as AnsweredEntity, EntryData as AnsweredEntry,
};
use kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handled;
use crate::requests::errors::cluster::cluster_error_code;
use chronik_metadata::Cluster;

/// An entry as the request names it, read into the quorum's form.
fn alteration(entry: &EntryData) -> QuotaAlteration {
    let entity = QuotaEntity::new(
        entry
            .entity
            .iter()
            .map(|c| {
                (
                    c.entity_type.to_string(),
                    c.entity_name.as_ref().map(|n| n.to_string()),
                )
            })
            .collect(),
    );
    let mut set = Vec::new();
    let mut remove = Vec::new();
    for op in &entry.ops {
        if op.remove {
            remove.push(op.key.to_string());
        } else {
            set.push((op.key.to_string(), QuotaValue(op.value)));
        }
    }
    QuotaAlteration {
        entity,
        set,
        remove,
    }
}

/// The message Kafka gives with the error (without our variant's prefix).
pub fn message(e: &ClusterError) -> String {
    match e {
        ClusterError::InvalidRequest(m) => m.clone(),
        other => other.to_string(),
    }
}

pub async fn handle(
    cluster: &Cluster,
    quotas: &crate::quotas::ClientQuotaManager,
    _version: i16,
    request: AlterClientQuotasRequest,
) -> Option<Handled> {
    let checked: Vec<(QuotaAlteration, Result<(), ClusterError>)> = request
        .entries
        .iter()
        .map(|entry| {
            let a = alteration(entry);
            let verdict = chronik_metadata::quotas::check_alteration(&a);
            (a, verdict)
        })
        .collect();
    let accepted: Vec<QuotaAlteration> = checked
        .iter()
        .filter(|(_, verdict)| verdict.is_ok())
        .map(|(a, _)| a.clone())
        .collect();
    let committed = if request.validate_only || accepted.is_empty() {
        Ok(())
    } else {
        let result = cluster.alter_client_quotas(accepted).await;
        if result.is_ok() {
            // This node enforces the change at once.
            quotas.replace(&cluster.image().client_quotas);
        }
        result
    };
    let entries: Vec<AnsweredEntry> = request
        .entries
        .iter()
        .zip(&checked)
        .map(|(entry, (_, verdict))| {
            let entity = entry
                .entity
                .iter()
                .map(|c| {
                    AnsweredEntity::default()
                        .with_entity_type(c.entity_type.clone())
                        .with_entity_name(c.entity_name.clone())
                })
                .collect();
            let answered = AnsweredEntry::default().with_entity(entity);
            match verdict.as_ref().err().or(committed.as_ref().err()) {
                None => answered,
                Some(e) => answered
                    .with_error_code(cluster_error_code(e).code())
                    .with_error_message(Some(StrBytes::from_string(message(e)))),
            }
        })
        .collect();
    let has_error = entries.iter().any(|e| e.error_code != 0);
    Handled::new(
        Response::AlterClientQuotas(AlterClientQuotasResponse::default().with_entries(entries)),
        has_error,
    )
}
