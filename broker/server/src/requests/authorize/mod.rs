//! Authorization in front of the handlers: which ACL each API needs, asked
//! of `Authorizer::allows` before a request runs, with Kafka's errors.
//!
//! Owns, per API: refusing a whole request (GROUP_, CLUSTER_,
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED), taking the topics, groups or
//! resources the session may not touch out of a request and answering them
//! with TOPIC_AUTHORIZATION_FAILED (or the group / cluster error) next to
//! the handler's answers for the rest, and filtering listings (Metadata for
//! all topics, ListGroups, ListTransactions) down to what the session may
//! describe. Handlers never see what was refused, so they stay unaware of
//! ACLs. Must not: decide access (the authorizer does) or run any API.
//!
//! Without an authorizer (`--authorizer-class-name` unset) every request
//! passes untouched. Inter-broker requests (replica Fetch, WriteTxnMarkers,
//! AddPartitionsToTxn v4+) need CLUSTER_ACTION on the cluster here, and the
//! handlers also check them against the registered brokers' addresses.
//!
//! - `topics`  — Produce, Fetch, ListOffsets, Metadata, CreateTopics, DeleteTopics,
//!   CreatePartitions, DeleteRecords, OffsetForLeaderEpoch.
//! - `groups`  — the group APIs (classic and KIP-848), offsets, FindCoordinator.
//! - `txn`     — InitProducerId, the transaction APIs and WriteTxnMarkers.
//! - `share`   — the share-group APIs (KIP-932) and the share-group state RPCs.
//! - `cluster` — configs, cluster and log-dir descriptions, the ACL APIs.

mod cluster;
mod groups;
mod share;
mod topics;
mod txn;

use chronik_metadata::Cluster;
use std::sync::Arc;

use chronik_log::LogManager;
use chronik_metadata::acl::{operation, resource, CLUSTER_RESOURCE_NAME};
use chronik_metadata::MetadataImage;
use chronik_protocol::{Request, Response};

use crate::security::authorizer::Authorizer;
use crate::security::request_context::RequestContext;

/// What happens to a request before its handler runs.
pub enum Admission {
    /// Answer this at once; the handler does not run.
    Refused(Response),
    /// Run the handler on this request, then `After::apply` its response.
    Admitted(Request, After),
}

/// A sub-module's verdict: it governs the request, or passes it on.
pub enum Routed {
    Governed(Admission),
    NotMine(Request),
}

/// What to do with the handler's response.
pub enum After {
    Nothing,
    Topics(topics::Denied),
    Groups(groups::Denied),
    Txn(txn::Denied),
    Cluster(cluster::Denied),
}

/// What the gate consults, lent by the dispatcher: the authorizer, and
/// the metadata image and the log for the topics a request names.
#[derive(Clone, Copy)]
pub struct GateDeps<'a> {
    pub authorizer: &'a Authorizer,
    pub cluster: &'a Cluster,
    pub log: &'a LogManager,
}

/// One request's view of the authorizer: the session and one snapshot of
/// the ACLs.
pub struct Gate<'a> {
    authorizer: &'a Authorizer,
    cluster: &'a Cluster,
    log: &'a LogManager,
    context: &'a RequestContext,
    image: Arc<MetadataImage>,
}

impl<'a> Gate<'a> {
    fn new(deps: GateDeps<'a>, context: &'a RequestContext) -> Gate<'a> {
        Gate {
            authorizer: deps.authorizer,
            cluster: deps.cluster,
            log: deps.log,
            context,
            image: deps.authorizer.snapshot(),
        }
    }

    fn allows(&self, op: i8, resource_type: i8, name: &str) -> bool {
        self.authorizer
            .allows(&self.image, self.context, op, resource_type, name)
    }

    fn topic(&self, op: i8, name: &str) -> bool {
        self.allows(op, resource::TOPIC, name)
    }

    fn group(&self, op: i8, name: &str) -> bool {
        self.allows(op, resource::GROUP, name)
    }

    fn transactional_id(&self, op: i8, name: &str) -> bool {
        self.allows(op, resource::TRANSACTIONAL_ID, name)
    }

    fn cluster(&self, op: i8) -> bool {
        self.allows(op, resource::CLUSTER, CLUSTER_RESOURCE_NAME)
    }

    /// CREATE on the cluster, or on the topic itself (Kafka's rule for
    /// CreateTopics and auto-creation).
    fn may_create_topic(&self, name: &str) -> bool {
        self.cluster(operation::CREATE) || self.topic(operation::CREATE, name)
    }
}

/// Splits `items` into those `allowed` accepts and the rest.
fn split<T>(items: Vec<T>, mut allowed: impl FnMut(&T) -> bool) -> (Vec<T>, Vec<T>) {
    items.into_iter().partition(|item| allowed(item))
}

/// Checks `request` against the ACLs (a no-op without an authorizer).
pub fn admit(
    deps: GateDeps<'_>,
    context: &RequestContext,
    version: i16,
    request: Request,
) -> Admission {
    if !deps.authorizer.enabled() {
        return Admission::Admitted(request, After::Nothing);
    }
    let gate = Gate::new(deps, context);
    let governors: [fn(&Gate<'_>, i16, Request) -> Routed; 5] = [
        topics::admit,
        groups::admit,
        share::admit,
        txn::admit,
        cluster::admit,
    ];
    let mut request = request;
    for admit in governors {
        match admit(&gate, version, request) {
            Routed::Governed(admission) => return admission,
            Routed::NotMine(passed) => request = passed,
        }
    }
    // ApiVersions and anything no ACL governs
    Admission::Admitted(request, After::Nothing)
}

impl After {
    /// Adds the refused parts to (or filters) the handler's `response`;
    /// returns whether anything was refused.
    pub fn apply(
        self,
        deps: GateDeps<'_>,
        context: &RequestContext,
        version: i16,
        response: &mut Response,
    ) -> bool {
        if matches!(self, After::Nothing) {
            return false;
        }
        let gate = Gate::new(deps, context);
        match self {
            After::Nothing => false,
            After::Topics(denied) => denied.apply(&gate, response),
            After::Groups(denied) => denied.apply(&gate, version, response),
            After::Txn(denied) => denied.apply(&gate, response),
            After::Cluster(denied) => denied.apply(&gate, response),
        }
    }
}
