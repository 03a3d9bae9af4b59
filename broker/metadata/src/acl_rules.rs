//! Access decisions from the quorum's ACLs, with the rules of Kafka's
//! StandardAuthorizer.
//!
//! Owns: `AuthorizerConfig` (`super.users`, `allow.everyone.if.no.acl.found`)
//! and `authorize`: a super user may do everything; otherwise a matching
//! DENY wins over any ALLOW; an ALLOW matches its own operation, ALL, and
//! the operations it implies (DESCRIBE from READ, WRITE, DELETE and ALTER;
//! DESCRIBE_CONFIGS from ALTER_CONFIGS); a resource no ACL covers at all is
//! allowed only with `allow.everyone.if.no.acl.found`. Principals match
//! exactly or through `User:*`; hosts exactly or through `*`. Must not: hold
//! the ACLs (the metadata image does) or know the wire format.

use std::collections::BTreeSet;

use crate::acl::{operation, permission, AclBinding, WILDCARD};

/// The wildcard principal.
pub const ANY_USER: &str = "User:*";

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthorizerConfig {
    /// Kafka's `super.users`: principals every check allows.
    pub super_users: BTreeSet<String>,
    /// Kafka's `allow.everyone.if.no.acl.found` (default false).
    pub allow_everyone_if_no_acl_found: bool,
}

impl AuthorizerConfig {
    /// Parses Kafka's `super.users` form: principals separated by `;`.
    pub fn parse_super_users(list: &str) -> Result<BTreeSet<String>, String> {
        list.split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|p| {
                crate::acl::validate_principal(p)
                    .map(|()| p.to_string())
                    .map_err(|e| format!("super.users: {e}"))
            })
            .collect()
    }
}

/// Whether an ALLOW of `granted` permits `wanted`.
fn allow_grants(granted: i8, wanted: i8) -> bool {
    granted == operation::ALL
        || granted == wanted
        || (wanted == operation::DESCRIBE
            && matches!(
                granted,
                operation::READ | operation::WRITE | operation::DELETE | operation::ALTER
            ))
        || (wanted == operation::DESCRIBE_CONFIGS && granted == operation::ALTER_CONFIGS)
}

/// May `principal`, connected from `host`, perform `op` on the resource
/// `name` of `resource_type`?
pub fn authorize(
    config: &AuthorizerConfig,
    acls: &BTreeSet<AclBinding>,
    principal: &str,
    host: &str,
    op: i8,
    resource_type: i8,
    name: &str,
) -> bool {
    if config.super_users.contains(principal) {
        return true;
    }
    let mut covered = false;
    let mut allowed = false;
    for acl in acls.iter().filter(|a| a.covers(resource_type, name)) {
        covered = true;
        let applies = (acl.principal == principal || acl.principal == ANY_USER)
            && (acl.host == host || acl.host == WILDCARD);
        if !applies {
            continue;
        }
        match acl.permission {
            permission::DENY if acl.operation == op || acl.operation == operation::ALL => {
                return false
            }
            permission::ALLOW if allow_grants(acl.operation, op) => allowed = true,
            _ => {}
        }
    }
    allowed || (!covered && config.allow_everyone_if_no_acl_found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::{pattern, resource};

    fn acl(principal: &str, op: i8, perm: i8, pattern_type: i8, name: &str) -> AclBinding {
        AclBinding {
            resource_type: resource::TOPIC,
            resource_name: name.into(),
            pattern_type,
            principal: principal.into(),
            host: "*".into(),
            operation: op,
            permission: perm,
        }
    }

    fn check(
        config: &AuthorizerConfig,
        acls: &[AclBinding],
        who: &str,
        op: i8,
        topic: &str,
    ) -> bool {
        let acls: BTreeSet<_> = acls.iter().cloned().collect();
        authorize(config, &acls, who, "127.0.0.1", op, resource::TOPIC, topic)
    }

    #[test]
    fn no_acls_follow_allow_everyone() {
        let closed = AuthorizerConfig::default();
        let open = AuthorizerConfig {
            allow_everyone_if_no_acl_found: true,
            ..AuthorizerConfig::default()
        };
        assert!(!check(&closed, &[], "User:alice", operation::READ, "t"));
        assert!(check(&open, &[], "User:alice", operation::READ, "t"));
        // an ACL for someone else covers the resource: no longer "no ACL found"
        let bob = [acl(
            "User:bob",
            operation::READ,
            permission::ALLOW,
            pattern::LITERAL,
            "t",
        )];
        assert!(!check(&open, &bob, "User:alice", operation::READ, "t"));
        assert!(check(&open, &bob, "User:alice", operation::READ, "other"));
    }

    #[test]
    fn allow_implies_describe_and_deny_wins() {
        let c = AuthorizerConfig::default();
        let read = acl(
            "User:alice",
            operation::READ,
            permission::ALLOW,
            pattern::PREFIXED,
            "orders",
        );
        assert!(check(
            &c,
            std::slice::from_ref(&read),
            "User:alice",
            operation::READ,
            "orders-eu"
        ));
        assert!(check(
            &c,
            std::slice::from_ref(&read),
            "User:alice",
            operation::DESCRIBE,
            "orders-eu"
        ));
        assert!(!check(
            &c,
            std::slice::from_ref(&read),
            "User:alice",
            operation::WRITE,
            "orders-eu"
        ));
        assert!(!check(
            &c,
            std::slice::from_ref(&read),
            "User:bob",
            operation::READ,
            "orders-eu"
        ));
        let deny = acl(
            "User:*",
            operation::ALL,
            permission::DENY,
            pattern::LITERAL,
            "orders-eu",
        );
        assert!(!check(
            &c,
            &[read.clone(), deny],
            "User:alice",
            operation::READ,
            "orders-eu"
        ));
        let all = acl(
            "User:*",
            operation::ALL,
            permission::ALLOW,
            pattern::LITERAL,
            "*",
        );
        assert!(check(&c, &[all], "User:carol", operation::DELETE, "x"));
        let alter_configs = acl(
            "User:alice",
            operation::ALTER_CONFIGS,
            permission::ALLOW,
            pattern::LITERAL,
            "t",
        );
        assert!(check(
            &c,
            std::slice::from_ref(&alter_configs),
            "User:alice",
            operation::DESCRIBE_CONFIGS,
            "t"
        ));
        // a DENY of READ does not deny DESCRIBE
        let deny_read = acl(
            "User:alice",
            operation::READ,
            permission::DENY,
            pattern::LITERAL,
            "t",
        );
        let describe = acl(
            "User:alice",
            operation::DESCRIBE,
            permission::ALLOW,
            pattern::LITERAL,
            "t",
        );
        assert!(check(
            &c,
            &[deny_read.clone(), describe],
            "User:alice",
            operation::DESCRIBE,
            "t"
        ));
        assert!(!check(&c, &[deny_read], "User:alice", operation::READ, "t"));
    }

    #[test]
    fn super_users_bypass_denies_and_hosts_match() {
        let c = AuthorizerConfig {
            super_users: AuthorizerConfig::parse_super_users("User:admin; User:broker")
                .expect("valid"),
            ..AuthorizerConfig::default()
        };
        let deny = acl(
            "User:*",
            operation::ALL,
            permission::DENY,
            pattern::LITERAL,
            "*",
        );
        assert!(check(
            &c,
            std::slice::from_ref(&deny),
            "User:admin",
            operation::WRITE,
            "t"
        ));
        assert!(!check(&c, &[deny], "User:alice", operation::WRITE, "t"));
        let mut from_host = acl(
            "User:alice",
            operation::WRITE,
            permission::ALLOW,
            pattern::LITERAL,
            "t",
        );
        from_host.host = "10.0.0.1".into();
        assert!(!check(
            &c,
            &[from_host],
            "User:alice",
            operation::WRITE,
            "t"
        ));
        assert!(AuthorizerConfig::parse_super_users("admin").is_err());
    }
}
