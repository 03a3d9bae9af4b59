//! The topic-scoped APIs: refused topics leave the request and come back
//! as TOPIC_AUTHORIZATION_FAILED entries (Kafka's per-topic answers).
//!
//! Produce: WRITE on each topic (a transactional one also WRITE on its
//! transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every
//! partition); consumer Fetch: READ; a follower's Fetch (replica_id >= 0):
//! CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED for the
//! whole request; ListOffsets: DESCRIBE; Metadata:
//! DESCRIBE (listing all topics - a null list, or v0's empty one - shows
//! only those; a v0 request naming only refused topics gets just their
//! refusals, not v0's every-topic answer to the empty list left; a topic
//! named by id only is refused without its name, as Kafka does),
//! auto-creation needs CREATE on the cluster or the topic;
//! CreateTopics: CREATE on the cluster or the topic; DeleteTopics and
//! DeleteRecords: DELETE; CreatePartitions: ALTER; OffsetForLeaderEpoch:
//! CLUSTER_ACTION on the cluster (a follower) passes every topic, else
//! DESCRIBE on each; DescribeTopicPartitions: DESCRIBE, as Metadata (all
//! topics - an empty list - becomes the list of those the session may
//! describe, so pages and cursors never name another; a named topic
//! refused is TOPIC_AUTHORIZATION_FAILED, placed in name order within the
//! page).

use chronik_metadata::acl::operation;
use chronik_protocol::{Request, Response};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_records_request::DeleteRecordsTopic;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest;
use kafka_protocol::messages::describe_topic_partitions_response::DescribeTopicPartitionsResponseTopic;
use kafka_protocol::messages::fetch_request::FetchTopic;
use kafka_protocol::messages::list_offsets_request::ListOffsetsTopic;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::offset_for_leader_epoch_request::OffsetForLeaderTopic;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::produce_request::TopicProduceData;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{FetchResponse, TopicName};
use uuid::Uuid;

use super::{split, Admission, After, Gate, Routed};
use crate::requests::refusals::refused_topic;
use crate::requests::topics::lookup::topic_name;

const TOPIC_DENIED: ResponseError = ResponseError::TopicAuthorizationFailed;

/// What was taken out of a request, to answer next to the handler's response.
pub enum Denied {
    Produce(Vec<TopicProduceData>, i16),
    Fetch(Vec<FetchTopic>),
    ListOffsets(Vec<ListOffsetsTopic>),
    /// Topics refused (by name, or by id with no name: Kafka never names a
    /// topic asked for by id to a session that may not describe it), and
    /// what the handler's topics are.
    Metadata {
        refused: Vec<(Option<TopicName>, Uuid)>,
        asked: Asked,
    },
    OffsetForLeaderEpoch(Vec<OffsetForLeaderTopic>),
    /// DescribeTopicPartitions: the named topics refused, the request's
    /// cursor topic, and whether nothing was left for the handler (whose
    /// empty list would mean every topic).
    TopicPartitions {
        refused: Vec<TopicName>,
        cursor: Option<String>,
        none_admitted: bool,
    },
    Names(Vec<TopicName>, Api),
    DeleteRecords(Vec<DeleteRecordsTopic>),
}

/// What a Metadata request asked for, as the handler answered it.
#[derive(Clone, Copy, PartialEq)]
pub enum Asked {
    /// Every topic: the handler's list is filtered to the describable ones.
    Every,
    /// Named topics: the handler answered only the admitted ones.
    Named,
    /// v0 naming only refused topics: the list left for the handler is
    /// empty, which v0 reads as "every topic", so its answer is dropped.
    NoneAdmitted,
}

/// The APIs whose refusals are just topic names.
pub enum Api {
    CreateTopics,
    DeleteTopics,
    CreatePartitions,
}

/// The name of a topic given by id (Fetch v13+, DeleteTopics v6+), if known.
fn name_of(gate: &Gate<'_>, name: &TopicName, id: Uuid) -> Option<String> {
    if id.is_nil() {
        return Some(name.0.to_string());
    }
    gate.log.topic_by_id(*id.as_bytes()).map(|t| t.name.clone())
}

fn admitted(request: Request, denied: Denied) -> Routed {
    Routed::Governed(Admission::Admitted(request, After::Topics(denied)))
}

/// `Ok`: this module governs the request. `Err`: not a topic API.
pub fn admit(gate: &Gate<'_>, version: i16, request: Request) -> Routed {
    match request {
        Request::Produce(mut r) => {
            let txn_ok = r
                .transactional_id
                .as_ref()
                .is_none_or(|id| gate.transactional_id(operation::WRITE, &id.0));
            let code = if txn_ok {
                TOPIC_DENIED.code()
            } else {
                ResponseError::TransactionalIdAuthorizationFailed.code()
            };
            let (ok, refused) = split(std::mem::take(&mut r.topic_data), |t| {
                txn_ok && gate.topic(operation::WRITE, &t.name.0)
            });
            r.topic_data = ok;
            admitted(Request::Produce(r), Denied::Produce(refused, code))
        }
        Request::Fetch(mut r) => {
            let replica_id = if version >= 15 {
                r.replica_state.replica_id.0
            } else {
                r.replica_id.0
            };
            if replica_id >= 0 {
                // A follower's fetch: CLUSTER_ACTION (the handler also
                // checks the sender's registered address).
                if gate.cluster(operation::CLUSTER_ACTION) {
                    return Routed::Governed(Admission::Admitted(
                        Request::Fetch(r),
                        After::Nothing,
                    ));
                }
                let code = ResponseError::ClusterAuthorizationFailed.code();
                return Routed::Governed(Admission::Refused(Response::Fetch(
                    FetchResponse::default()
                        .with_error_code(code)
                        .with_responses(
                            r.topics
                                .into_iter()
                                .map(|t| refused_topic(&t, code))
                                .collect(),
                        ),
                )));
            }
            let (ok, refused) = split(std::mem::take(&mut r.topics), |t| {
                name_of(gate, &t.topic, t.topic_id).is_none_or(|n| gate.topic(operation::READ, &n))
            });
            r.topics = ok;
            admitted(Request::Fetch(r), Denied::Fetch(refused))
        }
        Request::ListOffsets(mut r) => {
            let (ok, refused) = split(std::mem::take(&mut r.topics), |t| {
                gate.topic(operation::DESCRIBE, &t.name.0)
            });
            r.topics = ok;
            admitted(Request::ListOffsets(r), Denied::ListOffsets(refused))
        }
        Request::Metadata(mut r) => {
            // every topic: a null list, or an empty one in v0 (the handler's rule)
            let listing = r
                .topics
                .as_ref()
                .is_none_or(|t| t.is_empty() && version == 0);
            if listing {
                return admitted(
                    Request::Metadata(r),
                    Denied::Metadata {
                        refused: Vec::new(),
                        asked: Asked::Every,
                    },
                );
            }
            let topics = r.topics.take().unwrap_or_default();
            let image = gate.cluster.image();
            let auto_create = r.allow_auto_topic_creation;
            let (ok, refused) = split(topics, |t| {
                if !t.topic_id.is_nil() {
                    // by id: the name it has here; an unknown id is the
                    // handler's UNKNOWN_TOPIC_ID (ids are not secret)
                    return image
                        .topic_by_id(*t.topic_id.as_bytes())
                        .is_none_or(|topic| gate.topic(operation::DESCRIBE, &topic.name));
                }
                let Some(name) = &t.name else { return true };
                gate.topic(operation::DESCRIBE, &name.0)
                    && (!auto_create
                        || image.topics.contains_key(name.0.as_str())
                        || gate.may_create_topic(&name.0))
            });
            let asked = if version == 0 && ok.is_empty() {
                Asked::NoneAdmitted
            } else {
                Asked::Named
            };
            r.topics = Some(ok);
            let refused = refused
                .into_iter()
                .map(|t| {
                    if t.topic_id.is_nil() {
                        (t.name, Uuid::nil())
                    } else {
                        (None, t.topic_id)
                    }
                })
                .collect();
            admitted(Request::Metadata(r), Denied::Metadata { refused, asked })
        }
        Request::DescribeTopicPartitions(mut r) => {
            let cursor = r.cursor.as_ref().map(|c| c.topic_name.0.to_string());
            let (ok, refused) = if r.topics.is_empty() {
                let image = gate.cluster.image();
                let every = image
                    .topics
                    .keys()
                    .filter(|n| gate.topic(operation::DESCRIBE, n))
                    .map(|n| TopicRequest::default().with_name(topic_name(n)))
                    .collect();
                (every, Vec::new())
            } else {
                split(std::mem::take(&mut r.topics), |t| {
                    gate.topic(operation::DESCRIBE, &t.name.0)
                })
            };
            let none_admitted = ok.is_empty();
            r.topics = ok;
            let refused = refused.into_iter().map(|t| t.name).collect();
            admitted(
                Request::DescribeTopicPartitions(r),
                Denied::TopicPartitions {
                    refused,
                    cursor,
                    none_admitted,
                },
            )
        }
        Request::CreateTopics(mut r) => {
            let (ok, refused) = split(std::mem::take(&mut r.topics), |t| {
                gate.may_create_topic(&t.name.0)
            });
            r.topics = ok;
            let names = refused.into_iter().map(|t| t.name).collect();
            admitted(
                Request::CreateTopics(r),
                Denied::Names(names, Api::CreateTopics),
            )
        }
        Request::DeleteTopics(mut r) => {
            let (ok, refused) = split(std::mem::take(&mut r.topic_names), |n| {
                gate.topic(operation::DELETE, &n.0)
            });
            r.topic_names = ok;
            let mut names = refused;
            let (ok, refused) = split(std::mem::take(&mut r.topics), |t| {
                let name = t.name.clone().unwrap_or_default();
                name_of(gate, &name, t.topic_id).is_none_or(|n| gate.topic(operation::DELETE, &n))
            });
            r.topics = ok;
            names.extend(refused.into_iter().map(|t| {
                let name = t.name.clone().unwrap_or_default();
                name_of(gate, &name, t.topic_id)
                    .map(|n| topic_name(&n))
                    .unwrap_or(name)
            }));
            admitted(
                Request::DeleteTopics(r),
                Denied::Names(names, Api::DeleteTopics),
            )
        }
        Request::CreatePartitions(mut r) => {
            let (ok, refused) = split(std::mem::take(&mut r.topics), |t| {
                gate.topic(operation::ALTER, &t.name.0)
            });
            r.topics = ok;
            let names = refused.into_iter().map(|t| t.name).collect();
            admitted(
                Request::CreatePartitions(r),
                Denied::Names(names, Api::CreatePartitions),
            )
        }
        Request::OffsetForLeaderEpoch(mut r) => {
            if gate.cluster(operation::CLUSTER_ACTION) {
                return Routed::Governed(Admission::Admitted(
                    Request::OffsetForLeaderEpoch(r),
                    After::Nothing,
                ));
            }
            let (ok, refused) = split(std::mem::take(&mut r.topics), |t| {
                gate.topic(operation::DESCRIBE, &t.topic.0)
            });
            r.topics = ok;
            admitted(
                Request::OffsetForLeaderEpoch(r),
                Denied::OffsetForLeaderEpoch(refused),
            )
        }
        Request::DeleteRecords(mut r) => {
            let (ok, refused) = split(std::mem::take(&mut r.topics), |t| {
                gate.topic(operation::DELETE, &t.name.0)
            });
            r.topics = ok;
            admitted(Request::DeleteRecords(r), Denied::DeleteRecords(refused))
        }
        other => Routed::NotMine(other),
    }
}

impl Denied {
    pub fn apply(self, gate: &Gate<'_>, response: &mut Response) -> bool {
        let code = TOPIC_DENIED.code();
        match (self, response) {
            (Denied::Produce(refused, code), Response::Produce(resp)) => {
                let any = !refused.is_empty();
                resp.responses.extend(refused.into_iter().map(|t| {
                    TopicProduceResponse::default()
                        .with_name(t.name)
                        .with_topic_id(t.topic_id)
                        .with_partition_responses(
                            t.partition_data
                                .iter()
                                .map(|p| {
                                    PartitionProduceResponse::default()
                                        .with_index(p.index)
                                        .with_error_code(code)
                                        .with_base_offset(-1)
                                        .with_log_append_time_ms(-1)
                                        .with_log_start_offset(-1)
                                })
                                .collect(),
                        )
                }));
                any
            }
            (Denied::Fetch(refused), Response::Fetch(resp)) => {
                let any = !refused.is_empty();
                resp.responses
                    .extend(refused.into_iter().map(|t| refused_topic(&t, code)));
                any
            }
            (Denied::ListOffsets(refused), Response::ListOffsets(resp)) => {
                let any = !refused.is_empty();
                resp.topics.extend(refused.into_iter().map(|t| {
                    ListOffsetsTopicResponse::default()
                        .with_name(t.name)
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    ListOffsetsPartitionResponse::default()
                                        .with_partition_index(p.partition_index)
                                        .with_error_code(code)
                                        .with_timestamp(-1)
                                        .with_offset(-1)
                                })
                                .collect(),
                        )
                }));
                any
            }
            (Denied::Metadata { refused, asked }, Response::Metadata(resp)) => {
                let before = resp.topics.len();
                match asked {
                    Asked::Every => resp.topics.retain(|t| {
                        t.name
                            .as_ref()
                            .is_none_or(|n| gate.topic(operation::DESCRIBE, &n.0))
                    }),
                    Asked::NoneAdmitted => resp.topics.clear(),
                    Asked::Named => {}
                }
                let any = !refused.is_empty() || resp.topics.len() != before;
                resp.topics.extend(refused.into_iter().map(|(name, id)| {
                    MetadataResponseTopic::default()
                        .with_name(name)
                        .with_topic_id(id)
                        .with_error_code(code)
                }));
                any
            }
            (
                Denied::TopicPartitions {
                    refused,
                    cursor,
                    none_admitted,
                },
                Response::DescribeTopicPartitions(resp),
            ) => {
                if none_admitted {
                    resp.topics.clear();
                    resp.next_cursor = None;
                }
                let next = resp.next_cursor.as_ref().map(|c| c.topic_name.0.clone());
                let any = !refused.is_empty();
                resp.topics.extend(
                    refused
                        .into_iter()
                        .filter(|n| cursor.as_deref().is_none_or(|c| n.0.as_str() >= c))
                        .filter(|n| next.as_ref().is_none_or(|c| n.0 < *c))
                        .map(|n| {
                            DescribeTopicPartitionsResponseTopic::default()
                                .with_name(Some(n))
                                .with_error_code(code)
                        }),
                );
                resp.topics.sort_by(|a, b| a.name.cmp(&b.name));
                any
            }
            (Denied::OffsetForLeaderEpoch(refused), Response::OffsetForLeaderEpoch(resp)) => {
                let any = !refused.is_empty();
                resp.topics.extend(refused.into_iter().map(|t| {
                    OffsetForLeaderTopicResult::default()
                        .with_topic(t.topic)
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    EpochEndOffset::default()
                                        .with_partition(p.partition)
                                        .with_error_code(code)
                                        .with_leader_epoch(-1)
                                        .with_end_offset(-1)
                                })
                                .collect(),
                        )
                }));
                any
            }
            (Denied::Names(names, api), response) => {
                let any = !names.is_empty();
                match (api, response) {
                    (Api::CreateTopics, Response::CreateTopics(resp)) => {
                        resp.topics.extend(names.into_iter().map(|n| {
                            CreatableTopicResult::default()
                                .with_name(n)
                                .with_error_code(code)
                                .with_num_partitions(-1)
                                .with_replication_factor(-1)
                        }))
                    }
                    (Api::DeleteTopics, Response::DeleteTopics(resp)) => {
                        resp.responses.extend(names.into_iter().map(|n| {
                            DeletableTopicResult::default()
                                .with_name(Some(n))
                                .with_error_code(code)
                        }))
                    }
                    (Api::CreatePartitions, Response::CreatePartitions(resp)) => {
                        resp.results.extend(names.into_iter().map(|n| {
                            CreatePartitionsTopicResult::default()
                                .with_name(n)
                                .with_error_code(code)
                        }))
                    }
                    _ => {}
                }
                any
            }
            (Denied::DeleteRecords(refused), Response::DeleteRecords(resp)) => {
                let any = !refused.is_empty();
                resp.topics.extend(refused.into_iter().map(|t| {
                    DeleteRecordsTopicResult::default()
                        .with_name(t.name)
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    DeleteRecordsPartitionResult::default()
                                        .with_partition_index(p.partition_index)
                                        .with_low_watermark(-1)
                                        .with_error_code(code)
                                })
                                .collect(),
                        )
                }));
                any
            }
            _ => false,
        }
    }
}
