//! Kafka ACLs as the metadata quorum stores them: the binding model
//! (resource pattern + access control entry), its validation, the filters
//! DescribeAcls and DeleteAcls match with, and the deterministic change a
//! CreateAcls / DeleteAcls command makes to the image.
//!
//! Owns: the wire codes of resource types, pattern types, operations and
//! permission types (Kafka's values), `AclBinding`, `AclBindingFilter` and
//! their matching rules, the bounds on what one request may add. Must not:
//! decide access (`acl_rules` does) or know the wire messages (the server's
//! handlers translate).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::error::ClusterError;

/// The only name a CLUSTER resource may have (Kafka's).
pub const CLUSTER_RESOURCE_NAME: &str = "kafka-cluster";
/// The wildcard resource name, principal and host.
pub const WILDCARD: &str = "*";
/// Longest resource name, principal or host an ACL may carry.
pub const MAX_FIELD_BYTES: usize = 1024;
/// Most bindings one CreateAcls may add, or filters one DeleteAcls may carry.
pub const MAX_PER_REQUEST: usize = 1_000;
/// Most bindings the cluster keeps (Kafka has no limit; Chronik bounds the image).
pub const MAX_ACLS: usize = 100_000;

/// Kafka's ResourceType codes.
pub mod resource {
    pub const ANY: i8 = 1;
    pub const TOPIC: i8 = 2;
    pub const GROUP: i8 = 3;
    pub const CLUSTER: i8 = 4;
    pub const TRANSACTIONAL_ID: i8 = 5;
    pub const DELEGATION_TOKEN: i8 = 6;
    pub const USER: i8 = 7;
}

/// Kafka's PatternType codes.
pub mod pattern {
    pub const ANY: i8 = 1;
    pub const MATCH: i8 = 2;
    pub const LITERAL: i8 = 3;
    pub const PREFIXED: i8 = 4;
}

/// Kafka's AclOperation codes.
pub mod operation {
    pub const ANY: i8 = 1;
    pub const ALL: i8 = 2;
    pub const READ: i8 = 3;
    pub const WRITE: i8 = 4;
    pub const CREATE: i8 = 5;
    pub const DELETE: i8 = 6;
    pub const ALTER: i8 = 7;
    pub const DESCRIBE: i8 = 8;
    pub const CLUSTER_ACTION: i8 = 9;
    pub const DESCRIBE_CONFIGS: i8 = 10;
    pub const ALTER_CONFIGS: i8 = 11;
    pub const IDEMPOTENT_WRITE: i8 = 12;
    pub const CREATE_TOKENS: i8 = 13;
    pub const DESCRIBE_TOKENS: i8 = 14;
}

/// Kafka's AclPermissionType codes.
pub mod permission {
    pub const ANY: i8 = 1;
    pub const DENY: i8 = 2;
    pub const ALLOW: i8 = 3;
}

/// One ACL: who (principal, host) may or may not (permission) do what
/// (operation) to which resources (type, name, pattern type).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AclBinding {
    pub resource_type: i8,
    pub resource_name: String,
    pub pattern_type: i8,
    /// `User:alice`, or `User:*` for every user.
    pub principal: String,
    /// An IP address, or `*`.
    pub host: String,
    pub operation: i8,
    pub permission: i8,
}

/// What DescribeAcls / DeleteAcls match with: `None` fields and the ANY
/// codes match everything; pattern type MATCH matches every pattern that
/// applies to the named resource (literal, the wildcard, prefixes of it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclBindingFilter {
    pub resource_type: i8,
    pub resource_name: Option<String>,
    pub pattern_type: i8,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: i8,
    pub permission: i8,
}

fn invalid(why: impl Into<String>) -> ClusterError {
    ClusterError::InvalidRequest(why.into())
}

fn bounded(what: &str, s: &str) -> Result<(), ClusterError> {
    if s.len() > MAX_FIELD_BYTES {
        return Err(invalid(format!(
            "{what} is longer than {MAX_FIELD_BYTES} bytes"
        )));
    }
    Ok(())
}

/// `type:name` with a non-empty type and name (Kafka's KafkaPrincipal form).
pub fn validate_principal(principal: &str) -> Result<(), ClusterError> {
    bounded("principal", principal)?;
    match principal.split_once(':') {
        Some((kind, name)) if !kind.is_empty() && !name.is_empty() => Ok(()),
        _ => Err(invalid(format!(
            "could not parse principal {principal:?}: expected TYPE:NAME, e.g. User:alice"
        ))),
    }
}

fn known_resource_type(code: i8) -> bool {
    (resource::TOPIC..=resource::USER).contains(&code)
}

fn known_operation(code: i8) -> bool {
    (operation::ALL..=operation::DESCRIBE_TOKENS).contains(&code)
}

impl AclBinding {
    /// What Kafka's CreateAcls refuses with INVALID_REQUEST: ANY / MATCH /
    /// UNKNOWN codes, a malformed principal, an empty name, a CLUSTER
    /// resource not named `kafka-cluster`, a prefixed wildcard.
    pub fn validate(&self) -> Result<(), ClusterError> {
        if !known_resource_type(self.resource_type) {
            return Err(invalid(format!(
                "invalid resource type {}",
                self.resource_type
            )));
        }
        if !matches!(self.pattern_type, pattern::LITERAL | pattern::PREFIXED) {
            return Err(invalid(format!(
                "invalid pattern type {}",
                self.pattern_type
            )));
        }
        if !known_operation(self.operation) {
            return Err(invalid(format!("invalid operation {}", self.operation)));
        }
        if !matches!(self.permission, permission::ALLOW | permission::DENY) {
            return Err(invalid(format!(
                "invalid permission type {}",
                self.permission
            )));
        }
        bounded("resource name", &self.resource_name)?;
        bounded("host", &self.host)?;
        if self.resource_name.is_empty() {
            return Err(invalid("resource name must not be empty"));
        }
        if self.resource_type == resource::CLUSTER && self.resource_name != CLUSTER_RESOURCE_NAME {
            return Err(invalid(format!(
                "the only valid name for the CLUSTER resource is {CLUSTER_RESOURCE_NAME}"
            )));
        }
        if self.pattern_type == pattern::PREFIXED && self.resource_name == WILDCARD {
            return Err(invalid("a PREFIXED pattern may not be the wildcard '*'"));
        }
        if self.host.is_empty() {
            return Err(invalid("host must not be empty (use '*' for every host)"));
        }
        validate_principal(&self.principal)
    }

    /// Whether this binding's resource pattern covers the resource `name`
    /// of `resource_type`.
    pub fn covers(&self, resource_type: i8, name: &str) -> bool {
        self.resource_type == resource_type
            && match self.pattern_type {
                pattern::LITERAL => self.resource_name == name || self.resource_name == WILDCARD,
                pattern::PREFIXED => name.starts_with(&self.resource_name),
                _ => false,
            }
    }
}

impl AclBindingFilter {
    /// What Kafka refuses in a filter: UNKNOWN codes and over-long fields.
    pub fn validate(&self) -> Result<(), ClusterError> {
        if self.resource_type != resource::ANY && !known_resource_type(self.resource_type) {
            return Err(invalid(format!(
                "invalid resource type {}",
                self.resource_type
            )));
        }
        if !(pattern::ANY..=pattern::PREFIXED).contains(&self.pattern_type) {
            return Err(invalid(format!(
                "invalid pattern type {}",
                self.pattern_type
            )));
        }
        if self.operation != operation::ANY && !known_operation(self.operation) {
            return Err(invalid(format!("invalid operation {}", self.operation)));
        }
        if !(permission::ANY..=permission::ALLOW).contains(&self.permission) {
            return Err(invalid(format!(
                "invalid permission type {}",
                self.permission
            )));
        }
        for (what, field) in [
            ("resource name", &self.resource_name),
            ("principal", &self.principal),
            ("host", &self.host),
        ] {
            if let Some(s) = field {
                bounded(what, s)?;
            }
        }
        Ok(())
    }

    pub fn matches(&self, acl: &AclBinding) -> bool {
        let resource_type =
            self.resource_type == resource::ANY || self.resource_type == acl.resource_type;
        let pattern = match (self.pattern_type, &self.resource_name) {
            (pattern::ANY, None) | (pattern::MATCH, None) => true,
            (pattern::ANY, Some(name)) => &acl.resource_name == name,
            (pattern::MATCH, Some(name)) => acl.covers(acl.resource_type, name),
            (kind, None) => acl.pattern_type == kind,
            (kind, Some(name)) => acl.pattern_type == kind && &acl.resource_name == name,
        };
        let principal = self.principal.as_ref().is_none_or(|p| p == &acl.principal);
        let host = self.host.as_ref().is_none_or(|h| h == &acl.host);
        let operation = self.operation == operation::ANY || self.operation == acl.operation;
        let permission = self.permission == permission::ANY || self.permission == acl.permission;
        resource_type && pattern && principal && host && operation && permission
    }
}

/// Adds `bindings` (already validated) to `acls`; adding one that exists is
/// a no-op, as in Kafka. Refused as a whole when the cluster would hold
/// more than `MAX_ACLS`.
pub fn create(
    acls: &mut BTreeSet<AclBinding>,
    bindings: &[AclBinding],
) -> Result<(), ClusterError> {
    let new = bindings.iter().filter(|b| !acls.contains(b)).count();
    if acls.len() + new > MAX_ACLS {
        return Err(ClusterError::InvalidRequest(format!(
            "the cluster holds at most {MAX_ACLS} ACLs"
        )));
    }
    acls.extend(bindings.iter().cloned());
    Ok(())
}

/// Removes what each filter matches; returns, per filter, the bindings it
/// removed (a binding two filters match is reported by the first).
pub fn delete(
    acls: &mut BTreeSet<AclBinding>,
    filters: &[AclBindingFilter],
) -> Vec<Vec<AclBinding>> {
    filters
        .iter()
        .map(|filter| {
            let gone: Vec<AclBinding> =
                acls.iter().filter(|a| filter.matches(a)).cloned().collect();
            for acl in &gone {
                acls.remove(acl);
            }
            gone
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(pattern_type: i8, name: &str) -> AclBinding {
        AclBinding {
            resource_type: resource::TOPIC,
            resource_name: name.into(),
            pattern_type,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: operation::READ,
            permission: permission::ALLOW,
        }
    }

    fn filter(pattern_type: i8, name: Option<&str>) -> AclBindingFilter {
        AclBindingFilter {
            resource_type: resource::ANY,
            resource_name: name.map(str::to_string),
            pattern_type,
            principal: None,
            host: None,
            operation: operation::ANY,
            permission: permission::ANY,
        }
    }

    #[test]
    fn validation_refuses_what_kafka_refuses() {
        assert!(binding(pattern::LITERAL, "t").validate().is_ok());
        assert!(binding(pattern::ANY, "t").validate().is_err());
        assert!(binding(pattern::MATCH, "t").validate().is_err());
        assert!(binding(pattern::PREFIXED, "*").validate().is_err());
        assert!(binding(pattern::LITERAL, "").validate().is_err());
        let mut cluster = binding(pattern::LITERAL, "other");
        cluster.resource_type = resource::CLUSTER;
        assert!(cluster.validate().is_err());
        cluster.resource_name = CLUSTER_RESOURCE_NAME.into();
        assert!(cluster.validate().is_ok());
        for principal in ["alice", "User:", ":alice", ""] {
            let mut b = binding(pattern::LITERAL, "t");
            b.principal = principal.into();
            assert!(b.validate().is_err(), "{principal}");
        }
        let mut any_op = binding(pattern::LITERAL, "t");
        any_op.operation = operation::ANY;
        assert!(any_op.validate().is_err());
        let mut long = binding(pattern::LITERAL, "t");
        long.resource_name = "x".repeat(MAX_FIELD_BYTES + 1);
        assert!(long.validate().is_err());
    }

    #[test]
    fn patterns_cover_names() {
        assert!(binding(pattern::LITERAL, "orders").covers(resource::TOPIC, "orders"));
        assert!(!binding(pattern::LITERAL, "orders").covers(resource::TOPIC, "orders-eu"));
        assert!(binding(pattern::LITERAL, "*").covers(resource::TOPIC, "anything"));
        assert!(binding(pattern::PREFIXED, "orders").covers(resource::TOPIC, "orders-eu"));
        assert!(!binding(pattern::PREFIXED, "orders").covers(resource::TOPIC, "order"));
        assert!(!binding(pattern::LITERAL, "orders").covers(resource::GROUP, "orders"));
    }

    #[test]
    fn filters_match_as_kafka_documents() {
        let literal = binding(pattern::LITERAL, "orders");
        let wildcard = binding(pattern::LITERAL, "*");
        let prefixed = binding(pattern::PREFIXED, "ord");
        // MATCH with a name: every pattern that applies to that resource
        let m = filter(pattern::MATCH, Some("orders"));
        assert!(m.matches(&literal) && m.matches(&wildcard) && m.matches(&prefixed));
        assert!(!m.matches(&binding(pattern::LITERAL, "other")));
        // ANY with a name: exactly that name, any pattern type
        let a = filter(pattern::ANY, Some("orders"));
        assert!(a.matches(&literal) && !a.matches(&wildcard) && !a.matches(&prefixed));
        // a concrete pattern type
        let p = filter(pattern::PREFIXED, None);
        assert!(p.matches(&prefixed) && !p.matches(&literal));
        // no name: everything of that pattern selector
        assert!(filter(pattern::ANY, None).matches(&prefixed));
        let mut by_principal = filter(pattern::ANY, None);
        by_principal.principal = Some("User:bob".into());
        assert!(!by_principal.matches(&literal));
    }

    #[test]
    fn create_is_idempotent_and_delete_reports_per_filter() {
        let mut acls = BTreeSet::new();
        let b = binding(pattern::LITERAL, "orders");
        create(&mut acls, &[b.clone(), b.clone()]).expect("create");
        create(&mut acls, std::slice::from_ref(&b)).expect("create");
        assert_eq!(acls.len(), 1);
        create(&mut acls, &[binding(pattern::PREFIXED, "ord")]).expect("create");
        let removed = delete(
            &mut acls,
            &[
                filter(pattern::LITERAL, Some("orders")),
                filter(pattern::ANY, None),
            ],
        );
        assert_eq!(removed[0], vec![b]);
        assert_eq!(removed[1].len(), 1);
        assert!(acls.is_empty());
    }
}
