//! Cluster-scoped APIs: configs (ALTER_CONFIGS / DESCRIBE_CONFIGS on a
//! topic, or on the cluster for broker resources; refused resources answer
//! TOPIC_ or CLUSTER_AUTHORIZATION_FAILED next to the others), DESCRIBE on
//! the cluster for DescribeLogDirs, DescribeAcls and
//! DescribeUserScramCredentials (DescribeCluster is answered to everyone,
//! as Kafka does; the cluster operations it reports are 0 without DESCRIBE),
//! DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster for DescribeClientQuotas
//! / AlterClientQuotas, ALTER on the cluster for CreateAcls,
//! DeleteAcls and AlterUserScramCredentials, AlterPartitionReassignments,
//! ElectLeaders, UnregisterBroker, UpdateFeatures, AddRaftVoter and
//! RemoveRaftVoter, CLUSTER_ACTION for UpdateRaftVoter, DESCRIBE on it for
//! ListPartitionReassignments and DescribeQuorum (Kafka's rules; refused
//! whole with CLUSTER_AUTHORIZATION_FAILED in the top-level error code).

use chronik_metadata::acl::operation;
use chronik_protocol::{Request, Response};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_client_quotas_response::{
    EntityData as AlterClientQuotasEntity, EntryData as AlterClientQuotasEntry,
};
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{
    AddRaftVoterResponse, AlterClientQuotasResponse, AlterPartitionReassignmentsResponse,
    AlterUserScramCredentialsResponse, CreateAclsResponse, DeleteAclsResponse,
    DescribeAclsResponse, DescribeClientQuotasResponse, DescribeLogDirsResponse,
    DescribeQuorumResponse, DescribeUserScramCredentialsResponse, ElectLeadersResponse,
    ListPartitionReassignmentsResponse, RemoveRaftVoterResponse, UnregisterBrokerResponse,
    UpdateFeaturesResponse, UpdateRaftVoterResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::{Admission, After, Gate, Routed};

/// DescribeConfigs / AlterConfigs resource type of a topic (others are the
/// broker's: BROKER 4, BROKER_LOGGER 8, governed by the cluster resource).
const CONFIG_TOPIC: i8 = 2;
/// A group config resource (KIP-848, KIP-932): its ACLs are the group's.
const CONFIG_GROUP: i8 = 32;

/// The operations a CLUSTER resource has (Kafka's bitfield bits).
const CLUSTER_OPERATIONS: [i8; 7] = [
    operation::CREATE,
    operation::ALTER,
    operation::DESCRIBE,
    operation::CLUSTER_ACTION,
    operation::DESCRIBE_CONFIGS,
    operation::ALTER_CONFIGS,
    operation::IDEMPOTENT_WRITE,
];

/// Refused config resources: (resource type, name, error code).
pub enum Denied {
    /// DescribeCluster: the cluster operations this session may perform,
    /// when the client asked for them.
    ClusterOperations,
    Alter(Vec<(i8, StrBytes, i16)>),
    IncrementalAlter(Vec<(i8, StrBytes, i16)>),
    Describe(Vec<(i8, StrBytes, i16)>),
}

/// Whether `op` on config resource (`resource_type`, `name`) is allowed; the error if not.
fn config_check(gate: &Gate<'_>, op: i8, resource_type: i8, name: &str) -> Option<i16> {
    if resource_type == CONFIG_TOPIC {
        (!gate.topic(op, name)).then_some(ResponseError::TopicAuthorizationFailed.code())
    } else if resource_type == CONFIG_GROUP {
        (!gate.group(op, name)).then_some(ResponseError::GroupAuthorizationFailed.code())
    } else {
        (!gate.cluster(op)).then_some(ResponseError::ClusterAuthorizationFailed.code())
    }
}

/// Splits config resources into those `op` is allowed on and the refused
/// ones as (resource type, name, error code).
fn split_configs<T>(
    gate: &Gate<'_>,
    op: i8,
    resources: Vec<T>,
    key: impl Fn(&T) -> (i8, &StrBytes),
) -> (Vec<T>, Vec<(i8, StrBytes, i16)>) {
    let mut ok = Vec::new();
    let mut denied = Vec::new();
    for resource in resources {
        let (resource_type, name) = key(&resource);
        match config_check(gate, op, resource_type, name) {
            None => ok.push(resource),
            Some(code) => denied.push((resource_type, name.clone(), code)),
        }
    }
    (ok, denied)
}

fn admitted(request: Request, denied: Denied) -> Routed {
    Routed::Governed(Admission::Admitted(request, After::Cluster(denied)))
}

fn refused(response: Response) -> Routed {
    Routed::Governed(Admission::Refused(response))
}

pub fn admit(gate: &Gate<'_>, version: i16, request: Request) -> Routed {
    let cluster_denied = ResponseError::ClusterAuthorizationFailed.code();
    match request {
        Request::AlterConfigs(mut r) => {
            let (ok, denied) = split_configs(
                gate,
                operation::ALTER_CONFIGS,
                std::mem::take(&mut r.resources),
                |c| (c.resource_type, &c.resource_name),
            );
            r.resources = ok;
            admitted(Request::AlterConfigs(r), Denied::Alter(denied))
        }
        Request::IncrementalAlterConfigs(mut r) => {
            let (ok, denied) = split_configs(
                gate,
                operation::ALTER_CONFIGS,
                std::mem::take(&mut r.resources),
                |c| (c.resource_type, &c.resource_name),
            );
            r.resources = ok;
            admitted(
                Request::IncrementalAlterConfigs(r),
                Denied::IncrementalAlter(denied),
            )
        }
        Request::DescribeConfigs(mut r) => {
            let (ok, denied) = split_configs(
                gate,
                operation::DESCRIBE_CONFIGS,
                std::mem::take(&mut r.resources),
                |c| (c.resource_type, &c.resource_name),
            );
            r.resources = ok;
            admitted(Request::DescribeConfigs(r), Denied::Describe(denied))
        }
        Request::DescribeCluster(r) => {
            admitted(Request::DescribeCluster(r), Denied::ClusterOperations)
        }
        Request::DescribeClientQuotas(_) if !gate.cluster(operation::DESCRIBE_CONFIGS) => {
            refused(Response::DescribeClientQuotas(
                DescribeClientQuotasResponse::default()
                    .with_error_code(cluster_denied)
                    .with_entries(None),
            ))
        }
        Request::AlterClientQuotas(r) if !gate.cluster(operation::ALTER_CONFIGS) => {
            refused(Response::AlterClientQuotas(
                AlterClientQuotasResponse::default().with_entries(
                    r.entries
                        .iter()
                        .map(|e| {
                            AlterClientQuotasEntry::default()
                                .with_error_code(cluster_denied)
                                .with_entity(
                                    e.entity
                                        .iter()
                                        .map(|c| {
                                            AlterClientQuotasEntity::default()
                                                .with_entity_type(c.entity_type.clone())
                                                .with_entity_name(c.entity_name.clone())
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                ),
            ))
        }
        Request::DescribeUserScramCredentials(_) if !gate.cluster(operation::DESCRIBE) => {
            refused(Response::DescribeUserScramCredentials(
                DescribeUserScramCredentialsResponse::default().with_error_code(cluster_denied),
            ))
        }
        Request::AlterUserScramCredentials(r) if !gate.cluster(operation::ALTER) => {
            let users = r
                .upsertions
                .iter()
                .map(|u| u.name.clone())
                .chain(r.deletions.iter().map(|d| d.name.clone()));
            refused(Response::AlterUserScramCredentials(
                AlterUserScramCredentialsResponse::default().with_results(
                    users
                        .map(|user| {
                            AlterUserScramCredentialsResult::default()
                                .with_user(user)
                                .with_error_code(cluster_denied)
                        })
                        .collect(),
                ),
            ))
        }
        Request::DescribeLogDirs(_) if !gate.cluster(operation::DESCRIBE) => {
            refused(Response::DescribeLogDirs(
                DescribeLogDirsResponse::default().with_error_code(cluster_denied),
            ))
        }
        Request::DescribeAcls(_) if !gate.cluster(operation::DESCRIBE) => refused(
            Response::DescribeAcls(DescribeAclsResponse::default().with_error_code(cluster_denied)),
        ),
        Request::CreateAcls(r) if !gate.cluster(operation::ALTER) => refused(Response::CreateAcls(
            CreateAclsResponse::default().with_results(
                r.creations
                    .iter()
                    .map(|_| AclCreationResult::default().with_error_code(cluster_denied))
                    .collect(),
            ),
        )),
        Request::DeleteAcls(r) if !gate.cluster(operation::ALTER) => refused(Response::DeleteAcls(
            DeleteAclsResponse::default().with_filter_results(
                r.filters
                    .iter()
                    .map(|_| DeleteAclsFilterResult::default().with_error_code(cluster_denied))
                    .collect(),
            ),
        )),
        Request::AlterPartitionReassignments(_) if !gate.cluster(operation::ALTER) => {
            refused(Response::AlterPartitionReassignments(
                AlterPartitionReassignmentsResponse::default().with_error_code(cluster_denied),
            ))
        }
        Request::DescribeQuorum(_) if !gate.cluster(operation::DESCRIBE) => {
            refused(Response::DescribeQuorum(
                DescribeQuorumResponse::default().with_error_code(cluster_denied),
            ))
        }
        Request::AddRaftVoter(_) if !gate.cluster(operation::ALTER) => refused(
            Response::AddRaftVoter(AddRaftVoterResponse::default().with_error_code(cluster_denied)),
        ),
        Request::RemoveRaftVoter(_) if !gate.cluster(operation::ALTER) => {
            refused(Response::RemoveRaftVoter(
                RemoveRaftVoterResponse::default().with_error_code(cluster_denied),
            ))
        }
        Request::UpdateRaftVoter(_) if !gate.cluster(operation::CLUSTER_ACTION) => {
            refused(Response::UpdateRaftVoter(
                UpdateRaftVoterResponse::default().with_error_code(cluster_denied),
            ))
        }
        Request::UpdateFeatures(_) if !gate.cluster(operation::ALTER) => {
            refused(Response::UpdateFeatures(
                UpdateFeaturesResponse::default()
                    .with_error_code(cluster_denied)
                    .with_error_message(Some(StrBytes::from_static_str(
                        "The client is not authorized to update features.",
                    ))),
            ))
        }
        Request::UnregisterBroker(_) if !gate.cluster(operation::ALTER) => {
            refused(Response::UnregisterBroker(
                UnregisterBrokerResponse::default().with_error_code(cluster_denied),
            ))
        }
        Request::ListPartitionReassignments(_) if !gate.cluster(operation::DESCRIBE) => {
            refused(Response::ListPartitionReassignments(
                ListPartitionReassignmentsResponse::default().with_error_code(cluster_denied),
            ))
        }
        Request::ElectLeaders(r) if !gate.cluster(operation::ALTER) => {
            // v0 has no top-level error: every named partition carries it.
            let results = r
                .topic_partitions
                .unwrap_or_default()
                .into_iter()
                .map(|t| {
                    ReplicaElectionResult::default()
                        .with_topic(t.topic)
                        .with_partition_result(
                            t.partitions
                                .into_iter()
                                .map(|p| {
                                    PartitionResult::default()
                                        .with_partition_id(p)
                                        .with_error_code(cluster_denied)
                                })
                                .collect(),
                        )
                })
                .collect();
            // (v0 has no top-level field: setting it would fail the encoding)
            let top_level = if version >= 1 { cluster_denied } else { 0 };
            refused(Response::ElectLeaders(
                ElectLeadersResponse::default()
                    .with_error_code(top_level)
                    .with_replica_election_results(results),
            ))
        }
        other => Routed::NotMine(other),
    }
}

fn alter_results<T: Default>(
    denied: Vec<(i8, StrBytes, i16)>,
    make: impl Fn(T, i8, StrBytes, i16) -> T,
) -> Vec<T> {
    denied
        .into_iter()
        .map(|(resource_type, name, code)| make(T::default(), resource_type, name, code))
        .collect()
}

impl Denied {
    pub fn apply(self, gate: &Gate<'_>, response: &mut Response) -> bool {
        match (self, response) {
            (Denied::ClusterOperations, Response::DescribeCluster(resp)) => {
                // asked for (not the schema's i32::MIN): the operations
                // allowed, or none at all without DESCRIBE (Kafka's answer)
                if resp.cluster_authorized_operations != i32::MIN {
                    resp.cluster_authorized_operations = if gate.cluster(operation::DESCRIBE) {
                        CLUSTER_OPERATIONS
                            .iter()
                            .filter(|&&op| gate.cluster(op))
                            .fold(0, |bits, &op| bits | (1 << op))
                    } else {
                        0
                    };
                }
                false
            }
            (Denied::Alter(denied), Response::AlterConfigs(resp)) => {
                let any = !denied.is_empty();
                resp.responses.extend(alter_results(denied, |r: kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse, t, n, c| {
                    r.with_resource_type(t).with_resource_name(n).with_error_code(c)
                }));
                any
            }
            (Denied::IncrementalAlter(denied), Response::IncrementalAlterConfigs(resp)) => {
                let any = !denied.is_empty();
                resp.responses.extend(alter_results(denied, |r: kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse, t, n, c| {
                    r.with_resource_type(t).with_resource_name(n).with_error_code(c)
                }));
                any
            }
            (Denied::Describe(denied), Response::DescribeConfigs(resp)) => {
                let any = !denied.is_empty();
                resp.results.extend(alter_results(
                    denied,
                    |r: DescribeConfigsResult, t, n, c| {
                        r.with_resource_type(t)
                            .with_resource_name(n)
                            .with_error_code(c)
                    },
                ));
                any
            }
            _ => false,
        }
    }
}
