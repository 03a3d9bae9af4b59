//! CreateAcls (kafka-acls.sh --add, Admin.createAcls; v1–3): each creation
//! is validated on its own (INVALID_REQUEST with the reason), the valid ones
//! go to the metadata quorum in one command so every node enforces them.
//! Without an authorizer every result is SECURITY_DISABLED, as in Kafka.
//! Who may call it (ALTER on the cluster) is `authorize`'s check.

use chronik_metadata::acl::AclBinding;
use chronik_metadata::Cluster;
use chronik_protocol::Response;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::{CreateAclsRequest, CreateAclsResponse};

use super::Handled;
use crate::requests::acl_wire::{refusal, security_disabled, text};
use crate::security::authorizer::Authorizer;

pub async fn handle(
    cluster: &Cluster,
    authorizer: &Authorizer,
    request: CreateAclsRequest,
) -> Option<Handled> {
    let results = if !authorizer.enabled() {
        let (code, message) = security_disabled();
        request
            .creations
            .iter()
            .map(|_| result(code, message.clone()))
            .collect()
    } else {
        create(cluster, request).await
    };
    let has_error = results
        .iter()
        .any(|r: &AclCreationResult| r.error_code != 0);
    Handled::new(
        Response::CreateAcls(CreateAclsResponse::default().with_results(results)),
        has_error,
    )
}

fn result(code: i16, message: Option<kafka_protocol::protocol::StrBytes>) -> AclCreationResult {
    AclCreationResult::default()
        .with_error_code(code)
        .with_error_message(message)
}

async fn create(cluster: &Cluster, request: CreateAclsRequest) -> Vec<AclCreationResult> {
    let checked: Vec<Result<AclBinding, _>> = request
        .creations
        .iter()
        .map(|c| {
            let binding = AclBinding {
                resource_type: c.resource_type,
                resource_name: text(&c.resource_name),
                pattern_type: c.resource_pattern_type,
                principal: text(&c.principal),
                host: text(&c.host),
                operation: c.operation,
                permission: c.permission_type,
            };
            binding.validate().map(|()| binding)
        })
        .collect();
    let valid: Vec<AclBinding> = checked
        .iter()
        .filter_map(|c| c.as_ref().ok())
        .cloned()
        .collect();
    let committed = match valid.is_empty() {
        true => Ok(()),
        false => cluster.create_acls(valid).await,
    };
    checked
        .iter()
        .map(|c| match (c, &committed) {
            (Err(e), _) | (Ok(_), Err(e)) => {
                let (code, message) = refusal(e);
                result(code, message)
            }
            (Ok(_), Ok(())) => result(0, None),
        })
        .collect()
}
