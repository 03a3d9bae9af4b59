//! DeleteAcls (kafka-acls.sh --remove, Admin.deleteAcls; v1–3): every ACL
//! each filter matches is removed through the metadata quorum, and each
//! filter's result lists what it removed. Invalid filters answer
//! INVALID_REQUEST on their own. Without an authorizer every result is
//! SECURITY_DISABLED, as in Kafka. Who may call it (ALTER on the cluster)
//! is `authorize`'s check.

use chronik_metadata::acl::AclBindingFilter;
use chronik_metadata::Cluster;
use chronik_protocol::Response;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::{DeleteAclsRequest, DeleteAclsResponse};

use super::Handled;
use crate::requests::acl_wire::{filter, refusal, security_disabled, str_bytes};
use crate::security::authorizer::Authorizer;

pub async fn handle(
    cluster: &Cluster,
    authorizer: &Authorizer,
    request: DeleteAclsRequest,
) -> Option<Handled> {
    let results = if !authorizer.enabled() {
        let (code, message) = security_disabled();
        request
            .filters
            .iter()
            .map(|_| {
                DeleteAclsFilterResult::default()
                    .with_error_code(code)
                    .with_error_message(message.clone())
            })
            .collect()
    } else {
        delete(cluster, request).await
    };
    let has_error = results
        .iter()
        .any(|r: &DeleteAclsFilterResult| r.error_code != 0);
    Handled::new(
        Response::DeleteAcls(DeleteAclsResponse::default().with_filter_results(results)),
        has_error,
    )
}

async fn delete(cluster: &Cluster, request: DeleteAclsRequest) -> Vec<DeleteAclsFilterResult> {
    let checked: Vec<Result<AclBindingFilter, _>> = request
        .filters
        .iter()
        .map(|f| {
            let filter = filter(
                f.resource_type_filter,
                &f.resource_name_filter,
                f.pattern_type_filter,
                &f.principal_filter,
                &f.host_filter,
                f.operation,
                f.permission_type,
            );
            filter.validate().map(|()| filter)
        })
        .collect();
    let valid: Vec<AclBindingFilter> = checked
        .iter()
        .filter_map(|c| c.as_ref().ok())
        .cloned()
        .collect();
    let removed = match valid.is_empty() {
        true => Ok(Vec::new()),
        false => cluster.delete_acls(valid).await,
    };
    let mut removed_per_valid = match &removed {
        Ok(lists) => lists.clone().into_iter(),
        Err(_) => Vec::new().into_iter(),
    };
    checked
        .iter()
        .map(|c| match (c, &removed) {
            (Err(e), _) | (Ok(_), Err(e)) => {
                let (code, message) = refusal(e);
                DeleteAclsFilterResult::default()
                    .with_error_code(code)
                    .with_error_message(message)
            }
            (Ok(_), Ok(_)) => DeleteAclsFilterResult::default().with_matching_acls(
                removed_per_valid
                    .next()
                    .unwrap_or_default()
                    .iter()
                    .map(|a| {
                        DeleteAclsMatchingAcl::default()
                            .with_resource_type(a.resource_type)
                            .with_resource_name(str_bytes(&a.resource_name))
                            .with_pattern_type(a.pattern_type)
                            .with_principal(str_bytes(&a.principal))
                            .with_host(str_bytes(&a.host))
                            .with_operation(a.operation)
                            .with_permission_type(a.permission)
                    })
                    .collect(),
            ),
        })
        .collect()
}
