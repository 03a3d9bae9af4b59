//! ACLs between the wire messages and the metadata quorum's model: what
//! CreateAcls, DescribeAcls and DeleteAcls share.

use chronik_metadata::acl::{AclBinding, AclBindingFilter};
use kafka_protocol::error::ResponseError;
use kafka_protocol::protocol::StrBytes;

/// Kafka's message when no authorizer is configured.
pub const NO_AUTHORIZER: &str = "No Authorizer is configured on the broker";

pub fn text(s: &StrBytes) -> String {
    s.to_string()
}

pub fn opt_text(s: &Option<StrBytes>) -> Option<String> {
    s.as_ref().map(|s| s.to_string())
}

pub fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A filter from the fields DescribeAcls and DeleteAcls both carry.
#[allow(clippy::too_many_arguments)]
pub fn filter(
    resource_type: i8,
    resource_name: &Option<StrBytes>,
    pattern_type: i8,
    principal: &Option<StrBytes>,
    host: &Option<StrBytes>,
    operation: i8,
    permission: i8,
) -> AclBindingFilter {
    AclBindingFilter {
        resource_type,
        resource_name: opt_text(resource_name),
        pattern_type,
        principal: opt_text(principal),
        host: opt_text(host),
        operation,
        permission,
    }
}

/// The error code and message of a refused binding or filter.
pub fn refusal(e: &chronik_metadata::ClusterError) -> (i16, Option<StrBytes>) {
    let code = crate::requests::errors::cluster::cluster_error_code(e);
    (code.code(), Some(StrBytes::from_string(e.to_string())))
}

/// SECURITY_DISABLED with Kafka's message.
pub fn security_disabled() -> (i16, Option<StrBytes>) {
    (
        ResponseError::SecurityDisabled.code(),
        Some(str_bytes(NO_AUTHORIZER)),
    )
}

/// Sorts bindings into DescribeAcls' resource groups.
pub fn by_resource(acls: Vec<AclBinding>) -> Vec<((i8, String, i8), Vec<AclBinding>)> {
    let mut groups: std::collections::BTreeMap<(i8, String, i8), Vec<AclBinding>> =
        std::collections::BTreeMap::new();
    for acl in acls {
        groups
            .entry((
                acl.resource_type,
                acl.resource_name.clone(),
                acl.pattern_type,
            ))
            .or_default()
            .push(acl);
    }
    groups.into_iter().collect()
}
