//! The share-group state RPCs (KIP-932): InitializeShareGroupState,
//! ReadShareGroupState, WriteShareGroupState and DeleteShareGroupState,
//! answered by the share coordinator (`serve_*`), and asked by partition
//! leaders through `SharePersister` — in-process when this broker is the
//! share coordinator, else over a broker-to-broker connection to it, with
//! the same request and response either way (one code path).
//!
//! Owns: the mapping between those messages and `ShareStateStore`, and the
//! one cached connection to the current coordinator. Must not: decide
//! record states (the share-partition manager) or store anything itself.

use std::sync::Arc;
use std::time::Duration;

use chronik_coordinator_state::share_partition::{RecordState, ShareSnapshot, StateBatch};
use chronik_metadata::Cluster;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    delete_share_group_state_request, delete_share_group_state_response,
    initialize_share_group_state_request, initialize_share_group_state_response,
    read_share_group_state_request, read_share_group_state_response,
    write_share_group_state_request, write_share_group_state_response,
    DeleteShareGroupStateRequest, DeleteShareGroupStateResponse, InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse, ReadShareGroupStateRequest, ReadShareGroupStateResponse,
    WriteShareGroupStateRequest, WriteShareGroupStateResponse,
};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::Mutex;
use tracing::debug;

use super::records::{ShareKey, StoredShareState};
use super::state_store::{ShareStateStore, SHARE_STATE_TOPIC};
use crate::replica::leader_client::LeaderClient;
use crate::replica::ReplicaManager;

/// How long the coordinator's acks=all write may take.
const WRITE_TIMEOUT: Duration = Duration::from_secs(15);
/// A round trip to a remote coordinator, connecting included.
const RPC_TIMEOUT: Duration = Duration::from_secs(20);
/// Most partitions one state RPC may name (each costs a write).
const MAX_RPC_PARTITIONS: usize = 10_000;

fn key(group: &StrBytes, topic_id: &uuid::Uuid, partition: i32) -> ShareKey {
    (group.to_string(), *topic_id.as_bytes(), partition)
}

fn too_many(count: usize) -> bool {
    count > MAX_RPC_PARTITIONS
}

fn message(e: ResponseError) -> Option<StrBytes> {
    Some(StrBytes::from_string(e.to_string()))
}

/// ReadShareGroupState: each partition's snapshot; start offset -1 (state
/// epoch 0, no batches) when nothing is stored.
pub fn serve_read(
    store: &ShareStateStore,
    request: &ReadShareGroupStateRequest,
) -> ReadShareGroupStateResponse {
    let count: usize = request.topics.iter().map(|t| t.partitions.len()).sum();
    let results = request
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let answer = if too_many(count) {
                        Err(ResponseError::InvalidRequest)
                    } else {
                        store.read(&key(&request.group_id, &t.topic_id, p.partition))
                    };
                    let mut out = read_share_group_state_response::PartitionResult::default()
                        .with_partition(p.partition)
                        .with_start_offset(-1);
                    match answer {
                        Ok(Some(state)) => {
                            out.state_epoch = state.snapshot.state_epoch;
                            out.start_offset = state.snapshot.start_offset;
                            out.state_batches = state
                                .snapshot
                                .batches
                                .iter()
                                .map(|b| {
                                    read_share_group_state_response::StateBatch::default()
                                        .with_first_offset(b.first_offset)
                                        .with_last_offset(b.last_offset)
                                        .with_delivery_state(b.state.id())
                                        .with_delivery_count(
                                            i16::try_from(b.delivery_count).unwrap_or(i16::MAX),
                                        )
                                })
                                .collect();
                        }
                        Ok(None) => {}
                        Err(e) => {
                            out.error_code = e.code();
                            out.error_message = message(e);
                        }
                    }
                    out
                })
                .collect();
            read_share_group_state_response::ReadStateResult::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions)
        })
        .collect();
    ReadShareGroupStateResponse::default().with_results(results)
}

/// WriteShareGroupState: each partition's new snapshot, durable before
/// the answer.
pub async fn serve_write(
    store: &ShareStateStore,
    request: &WriteShareGroupStateRequest,
) -> WriteShareGroupStateResponse {
    let count: usize = request.topics.iter().map(|t| t.partitions.len()).sum();
    let mut results = Vec::with_capacity(request.topics.len());
    for t in &request.topics {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            let answer = match (too_many(count), snapshot_of(p)) {
                (false, Some(snapshot)) => {
                    let state = StoredShareState {
                        leader_epoch: p.leader_epoch,
                        snapshot,
                    };
                    store
                        .write(
                            &key(&request.group_id, &t.topic_id, p.partition),
                            state,
                            false,
                            WRITE_TIMEOUT,
                        )
                        .await
                }
                _ => Err(ResponseError::InvalidRequest),
            };
            let mut out = write_share_group_state_response::PartitionResult::default()
                .with_partition(p.partition);
            if let Err(e) = answer {
                out.error_code = e.code();
                out.error_message = message(e);
            }
            partitions.push(out);
        }
        results.push(
            write_share_group_state_response::WriteStateResult::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions),
        );
    }
    WriteShareGroupStateResponse::default().with_results(results)
}

fn snapshot_of(p: &write_share_group_state_request::PartitionData) -> Option<ShareSnapshot> {
    if p.state_batches.len()
        > chronik_coordinator_state::share_partition::MAX_SNAPSHOT_OFFSETS as usize
    {
        return None;
    }
    let batches = p
        .state_batches
        .iter()
        .map(|b| {
            Some(StateBatch {
                first_offset: b.first_offset,
                last_offset: b.last_offset,
                state: RecordState::from_id(b.delivery_state)
                    .filter(|s| *s != RecordState::Acquired)?,
                delivery_count: u16::try_from(b.delivery_count).ok()?,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    let snapshot = ShareSnapshot {
        state_epoch: p.state_epoch,
        start_offset: p.start_offset,
        batches,
    };
    // Only what a share-partition could have written is stored.
    chronik_coordinator_state::share_partition::SharePartition::from_snapshot(
        &snapshot,
        Default::default(),
    )
    .map(|_| snapshot)
}

/// InitializeShareGroupState: a new state epoch starting at an offset,
/// with nothing in flight.
pub async fn serve_initialize(
    store: &ShareStateStore,
    request: &InitializeShareGroupStateRequest,
) -> InitializeShareGroupStateResponse {
    let count: usize = request.topics.iter().map(|t| t.partitions.len()).sum();
    let mut results = Vec::with_capacity(request.topics.len());
    for t in &request.topics {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            let answer = if too_many(count) || p.start_offset < 0 {
                Err(ResponseError::InvalidRequest)
            } else {
                let state = StoredShareState {
                    leader_epoch: -1,
                    snapshot: ShareSnapshot {
                        state_epoch: p.state_epoch,
                        start_offset: p.start_offset,
                        batches: Vec::new(),
                    },
                };
                store
                    .write(
                        &key(&request.group_id, &t.topic_id, p.partition),
                        state,
                        true,
                        WRITE_TIMEOUT,
                    )
                    .await
            };
            let mut out = initialize_share_group_state_response::PartitionResult::default()
                .with_partition(p.partition);
            if let Err(e) = answer {
                out.error_code = e.code();
                out.error_message = message(e);
            }
            partitions.push(out);
        }
        results.push(
            initialize_share_group_state_response::InitializeStateResult::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions),
        );
    }
    InitializeShareGroupStateResponse::default().with_results(results)
}

/// DeleteShareGroupState: forgets each partition's state.
pub async fn serve_delete(
    store: &ShareStateStore,
    request: &DeleteShareGroupStateRequest,
) -> DeleteShareGroupStateResponse {
    let count: usize = request.topics.iter().map(|t| t.partitions.len()).sum();
    let mut results = Vec::with_capacity(request.topics.len());
    for t in &request.topics {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            let answer = if too_many(count) {
                Err(ResponseError::InvalidRequest)
            } else {
                store
                    .delete(
                        &key(&request.group_id, &t.topic_id, p.partition),
                        WRITE_TIMEOUT,
                    )
                    .await
            };
            let mut out = delete_share_group_state_response::PartitionResult::default()
                .with_partition(p.partition);
            if let Err(e) = answer {
                out.error_code = e.code();
                out.error_message = message(e);
            }
            partitions.push(out);
        }
        results.push(
            delete_share_group_state_response::DeleteStateResult::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions),
        );
    }
    DeleteShareGroupStateResponse::default().with_results(results)
}

/// A partition leader's (or the group coordinator's) way to the share
/// coordinator.
pub struct SharePersister {
    store: Arc<ShareStateStore>,
    replicas: Arc<ReplicaManager>,
    cluster: Arc<Cluster>,
    client: Mutex<Option<(i32, LeaderClient)>>,
}

impl std::fmt::Debug for SharePersister {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharePersister").finish()
    }
}

/// What a share-partition's leader reads: None when nothing is stored.
pub type ReadState = Option<ShareSnapshot>;

fn first_error(codes: impl Iterator<Item = i16>) -> Result<(), ResponseError> {
    for code in codes {
        if code != 0 {
            return Err(
                ResponseError::try_from_code(code).unwrap_or(ResponseError::UnknownServerError)
            );
        }
    }
    Ok(())
}

impl SharePersister {
    pub fn new(
        store: Arc<ShareStateStore>,
        replicas: Arc<ReplicaManager>,
        cluster: Arc<Cluster>,
    ) -> SharePersister {
        SharePersister {
            store,
            replicas,
            cluster,
            client: Mutex::new(None),
        }
    }

    pub fn store(&self) -> &Arc<ShareStateStore> {
        &self.store
    }

    fn coordinator(&self) -> i32 {
        self.cluster
            .image()
            .partition(SHARE_STATE_TOPIC, 0)
            .map_or(-1, |p| p.leader)
    }

    /// Sends `request` to the remote coordinator `node` over the cached
    /// connection (re-made when the coordinator moved or it failed).
    async fn remote<R>(&self, node: i32, request: &R) -> Result<R::Response, ResponseError>
    where
        R: kafka_protocol::protocol::Request,
    {
        let mut cached = self.client.lock().await;
        if cached.as_ref().map(|(n, _)| *n) != Some(node) {
            let client_id = format!("chronik-share-persister-{}", self.replicas.node_id());
            let client =
                LeaderClient::connect_to_broker(&self.replicas, node, client_id, RPC_TIMEOUT)
                    .await
                    .map_err(|e| {
                        debug!(coordinator = node, error = %e, "share coordinator unreachable");
                        ResponseError::CoordinatorNotAvailable
                    })?;
            *cached = Some((node, client));
        }
        let Some((_, client)) = cached.as_mut() else {
            return Err(ResponseError::CoordinatorNotAvailable);
        };
        match client.send(request, 0, RPC_TIMEOUT).await {
            Ok(response) => Ok(response),
            Err(e) => {
                debug!(coordinator = node, error = %e, "share-state RPC failed");
                *cached = None;
                Err(ResponseError::CoordinatorNotAvailable)
            }
        }
    }

    /// The stored state of one share-partition.
    pub async fn read(
        &self,
        group: &str,
        topic_id: [u8; 16],
        partition: i32,
        leader_epoch: i32,
    ) -> Result<ReadState, ResponseError> {
        let request = ReadShareGroupStateRequest::default()
            .with_group_id(StrBytes::from_string(group.to_string()))
            .with_topics(vec![
                read_share_group_state_request::ReadStateData::default()
                    .with_topic_id(uuid::Uuid::from_bytes(topic_id))
                    .with_partitions(vec![
                        read_share_group_state_request::PartitionData::default()
                            .with_partition(partition)
                            .with_leader_epoch(leader_epoch),
                    ]),
            ]);
        let node = self.coordinator();
        let response = if node == self.replicas.node_id() {
            serve_read(&self.store, &request)
        } else if node < 0 {
            return Err(ResponseError::CoordinatorNotAvailable);
        } else {
            self.remote(node, &request).await?
        };
        let p = response
            .results
            .into_iter()
            .flat_map(|t| t.partitions)
            .next()
            .ok_or(ResponseError::UnknownServerError)?;
        first_error(std::iter::once(p.error_code))?;
        if p.start_offset < 0 {
            return Ok(None);
        }
        let batches = p
            .state_batches
            .iter()
            .filter_map(|b| {
                Some(StateBatch {
                    first_offset: b.first_offset,
                    last_offset: b.last_offset,
                    state: RecordState::from_id(b.delivery_state)?,
                    delivery_count: u16::try_from(b.delivery_count).ok()?,
                })
            })
            .collect();
        Ok(Some(ShareSnapshot {
            state_epoch: p.state_epoch,
            start_offset: p.start_offset,
            batches,
        }))
    }

    /// Stores one share-partition's snapshot (durable when Ok).
    pub async fn write(
        &self,
        group: &str,
        topic_id: [u8; 16],
        partition: i32,
        leader_epoch: i32,
        snapshot: &ShareSnapshot,
    ) -> Result<(), ResponseError> {
        let batches = snapshot
            .batches
            .iter()
            .map(|b| {
                write_share_group_state_request::StateBatch::default()
                    .with_first_offset(b.first_offset)
                    .with_last_offset(b.last_offset)
                    .with_delivery_state(b.state.id())
                    .with_delivery_count(i16::try_from(b.delivery_count).unwrap_or(i16::MAX))
            })
            .collect();
        let request = WriteShareGroupStateRequest::default()
            .with_group_id(StrBytes::from_string(group.to_string()))
            .with_topics(vec![
                write_share_group_state_request::WriteStateData::default()
                    .with_topic_id(uuid::Uuid::from_bytes(topic_id))
                    .with_partitions(vec![
                        write_share_group_state_request::PartitionData::default()
                            .with_partition(partition)
                            .with_state_epoch(snapshot.state_epoch)
                            .with_leader_epoch(leader_epoch)
                            .with_start_offset(snapshot.start_offset)
                            .with_state_batches(batches),
                    ]),
            ]);
        let node = self.coordinator();
        let response = if node == self.replicas.node_id() {
            serve_write(&self.store, &request).await
        } else if node < 0 {
            return Err(ResponseError::CoordinatorNotAvailable);
        } else {
            self.remote(node, &request).await?
        };
        first_error(
            response
                .results
                .iter()
                .flat_map(|t| &t.partitions)
                .map(|p| p.error_code),
        )
    }

    /// Starts a new state epoch at `start_offset` for each partition
    /// (AlterShareGroupOffsets).
    pub async fn initialize(
        &self,
        group: &str,
        partitions: &[([u8; 16], i32, i32, i64)],
    ) -> Result<Vec<Result<(), ResponseError>>, ResponseError> {
        let mut by_topic: std::collections::BTreeMap<
            [u8; 16],
            Vec<initialize_share_group_state_request::PartitionData>,
        > = Default::default();
        for (topic, partition, state_epoch, start) in partitions {
            by_topic.entry(*topic).or_default().push(
                initialize_share_group_state_request::PartitionData::default()
                    .with_partition(*partition)
                    .with_state_epoch(*state_epoch)
                    .with_start_offset(*start),
            );
        }
        let request = InitializeShareGroupStateRequest::default()
            .with_group_id(StrBytes::from_string(group.to_string()))
            .with_topics(
                by_topic
                    .into_iter()
                    .map(|(t, ps)| {
                        initialize_share_group_state_request::InitializeStateData::default()
                            .with_topic_id(uuid::Uuid::from_bytes(t))
                            .with_partitions(ps)
                    })
                    .collect(),
            );
        let node = self.coordinator();
        let response = if node == self.replicas.node_id() {
            serve_initialize(&self.store, &request).await
        } else if node < 0 {
            return Err(ResponseError::CoordinatorNotAvailable);
        } else {
            self.remote(node, &request).await?
        };
        let codes: std::collections::HashMap<([u8; 16], i32), i16> = response
            .results
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |p| ((*t.topic_id.as_bytes(), p.partition), p.error_code))
            })
            .collect();
        Ok(partitions
            .iter()
            .map(|(t, p, _, _)| {
                first_error(std::iter::once(codes.get(&(*t, *p)).copied().unwrap_or(-1)))
            })
            .collect())
    }

    /// Forgets the state of each (topic id, partition) of `group`.
    pub async fn delete(
        &self,
        group: &str,
        partitions: &[([u8; 16], i32)],
    ) -> Result<(), ResponseError> {
        let mut by_topic: std::collections::BTreeMap<[u8; 16], Vec<i32>> = Default::default();
        for (t, p) in partitions {
            by_topic.entry(*t).or_default().push(*p);
        }
        let request = DeleteShareGroupStateRequest::default()
            .with_group_id(StrBytes::from_string(group.to_string()))
            .with_topics(
                by_topic
                    .into_iter()
                    .map(|(t, ps)| {
                        delete_share_group_state_request::DeleteStateData::default()
                            .with_topic_id(uuid::Uuid::from_bytes(t))
                            .with_partitions(
                                ps.into_iter()
                                    .map(|p| {
                                        delete_share_group_state_request::PartitionData::default()
                                            .with_partition(p)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let node = self.coordinator();
        let response = if node == self.replicas.node_id() {
            serve_delete(&self.store, &request).await
        } else if node < 0 {
            return Err(ResponseError::CoordinatorNotAvailable);
        } else {
            self.remote(node, &request).await?
        };
        first_error(
            response
                .results
                .iter()
                .flat_map(|t| &t.partitions)
                .map(|p| p.error_code),
        )
    }
}
