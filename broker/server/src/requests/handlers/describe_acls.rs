//! DescribeAcls (kafka-acls.sh --list, Admin.describeAcls; v1–3): the
//! quorum's ACLs that match the filter, grouped by resource pattern.
//! Without an authorizer: SECURITY_DISABLED, as in Kafka. Who may call it
//! (DESCRIBE on the cluster) is `authorize`'s check.

use chronik_protocol::Response;
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{DescribeAclsRequest, DescribeAclsResponse};

use super::Handled;
use crate::requests::acl_wire::{by_resource, filter, refusal, security_disabled, str_bytes};
use crate::security::authorizer::Authorizer;
use chronik_metadata::Cluster;

pub fn handle(
    cluster: &Cluster,
    authorizer: &Authorizer,
    request: DescribeAclsRequest,
) -> Option<Handled> {
    let refused = |(code, message)| {
        Handled::new(
            Response::DescribeAcls(
                DescribeAclsResponse::default()
                    .with_error_code(code)
                    .with_error_message(message),
            ),
            true,
        )
    };
    if !authorizer.enabled() {
        return refused(security_disabled());
    }
    let filter = filter(
        request.resource_type_filter,
        &request.resource_name_filter,
        request.pattern_type_filter,
        &request.principal_filter,
        &request.host_filter,
        request.operation,
        request.permission_type,
    );
    if let Err(e) = filter.validate() {
        return refused(refusal(&e));
    }
    let image = cluster.image();
    let matching = image
        .acls
        .iter()
        .filter(|a| filter.matches(a))
        .cloned()
        .collect();
    let resources = by_resource(matching)
        .into_iter()
        .map(|((resource_type, name, pattern_type), acls)| {
            DescribeAclsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(str_bytes(&name))
                .with_pattern_type(pattern_type)
                .with_acls(
                    acls.iter()
                        .map(|a| {
                            AclDescription::default()
                                .with_principal(str_bytes(&a.principal))
                                .with_host(str_bytes(&a.host))
                                .with_operation(a.operation)
                                .with_permission_type(a.permission)
                        })
                        .collect(),
                )
        })
        .collect();
    Handled::new(
        Response::DescribeAcls(DescribeAclsResponse::default().with_resources(resources)),
        false,
    )
}
