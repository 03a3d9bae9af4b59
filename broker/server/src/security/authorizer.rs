//! Whether the broker authorizes requests, and the one question handlers
//! ask it: may this session do that to this resource?
//!
//! Owns: the flags `--authorizer-class-name` (Kafka's
//! `authorizer.class.name`: unset = no authorization, every request
//! allowed, as Kafka; or Kafka's StandardAuthorizer class name, which turns
//! on ACL checks against the metadata quorum's ACLs), `--super-users` and
//! `--allow-everyone-if-no-acl-found`, and `Authorizer::allows`. Must not:
//! decide which API needs which ACL (`handlers::authorize` does) or hold
//! ACLs (the metadata image does; every node enforces the same set).

use std::sync::Arc;

use chronik_metadata::acl_rules::{authorize, AuthorizerConfig};
use chronik_metadata::{Cluster, MetadataImage};
use clap::Args as ClapArgs;

use crate::security::request_context::RequestContext;

/// The class name Kafka's KRaft brokers use for ACL authorization.
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

#[derive(Debug, Clone, ClapArgs)]
pub struct AuthorizerArgs {
    /// Kafka's `authorizer.class.name`: empty (the default) authorizes
    /// nothing; `org.apache.kafka.metadata.authorizer.StandardAuthorizer`
    /// checks every request against the ACLs (CreateAcls / kafka-acls.sh).
    #[arg(long, env = "CHRONIK_AUTHORIZER_CLASS_NAME", default_value = "")]
    pub authorizer_class_name: String,
    /// Kafka's `super.users`: principals allowed everything, separated by
    /// `;` (e.g. `User:admin;User:broker`).
    #[arg(long, env = "CHRONIK_SUPER_USERS", default_value = "")]
    pub super_users: String,
    /// Kafka's `allow.everyone.if.no.acl.found`: a resource that no ACL
    /// covers is open to everyone (default: closed).
    #[arg(
        long,
        env = "CHRONIK_ALLOW_EVERYONE_IF_NO_ACL_FOUND",
        default_value_t = false
    )]
    pub allow_everyone_if_no_acl_found: bool,
}

impl AuthorizerArgs {
    /// The authorizer's settings, or `None` when no authorizer is configured.
    pub fn config(&self) -> anyhow::Result<Option<AuthorizerConfig>> {
        match self.authorizer_class_name.trim() {
            "" => Ok(None),
            STANDARD_AUTHORIZER => Ok(Some(AuthorizerConfig {
                super_users: AuthorizerConfig::parse_super_users(&self.super_users)
                    .map_err(anyhow::Error::msg)?,
                allow_everyone_if_no_acl_found: self.allow_everyone_if_no_acl_found,
            })),
            other => anyhow::bail!(
                "--authorizer-class-name {other:?} is not supported: leave it empty or use {STANDARD_AUTHORIZER}"
            ),
        }
    }
}

/// The broker's authorizer: off, or Kafka's StandardAuthorizer rules over
/// the cluster's ACLs.
#[derive(Clone)]
pub struct Authorizer {
    config: Option<AuthorizerConfig>,
    cluster: Arc<Cluster>,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer")
            .field("config", &self.config)
            .finish()
    }
}

impl Authorizer {
    pub fn new(config: Option<AuthorizerConfig>, cluster: Arc<Cluster>) -> Authorizer {
        Authorizer { config, cluster }
    }

    /// Whether requests are checked at all (CreateAcls and friends answer
    /// SECURITY_DISABLED when not).
    pub fn enabled(&self) -> bool {
        self.config.is_some()
    }

    /// The ACLs to check a request against: one snapshot of the metadata
    /// image per request (every check of the request sees the same set).
    pub fn snapshot(&self) -> Arc<MetadataImage> {
        self.cluster.image()
    }

    /// May the sender of a request (`context`: its principal and address)
    /// perform `operation` on the resource `name` of `resource_type`
    /// (codes of `chronik_metadata::acl`), by the ACLs of `image`? Always
    /// yes without an authorizer.
    pub fn allows(
        &self,
        image: &MetadataImage,
        context: &RequestContext,
        operation: i8,
        resource_type: i8,
        name: &str,
    ) -> bool {
        let Some(config) = &self.config else {
            return true;
        };
        authorize(
            config,
            &image.acls,
            &context.acl_principal,
            &context.acl_host,
            operation,
            resource_type,
            name,
        )
    }
}
