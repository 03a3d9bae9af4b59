//! The share-group state RPCs between partition leaders and the share
//! coordinator (KIP-932): InitializeShareGroupState, ReadShareGroupState,
//! WriteShareGroupState, DeleteShareGroupState and
//! ReadShareGroupStateSummary. Answered by `coordinators::share::persister`
//! (the same functions a leader calls in-process when it is the
//! coordinator); NOT_COORDINATOR on a broker that does not lead
//! `__share_group_state`-0. Kafka authorizes them as CLUSTER_ACTION.

use chronik_protocol::Response;
use kafka_protocol::messages::read_share_group_state_summary_response::{
    PartitionResult, ReadStateSummaryResult,
};
use kafka_protocol::messages::{
    DeleteShareGroupStateRequest, InitializeShareGroupStateRequest, ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse,
    WriteShareGroupStateRequest,
};

use super::Handled;
use crate::coordinators::share::persister::{
    serve_delete, serve_initialize, serve_read, serve_write,
};
use crate::coordinators::share::ShareCoordinator;

pub fn read(share: &ShareCoordinator, request: ReadShareGroupStateRequest) -> Option<Handled> {
    let response = serve_read(share.persister.store(), &request);
    let has_error = response
        .results
        .iter()
        .flat_map(|t| &t.partitions)
        .any(|p| p.error_code != 0);
    Handled::new(Response::ReadShareGroupState(response), has_error)
}

pub async fn write(
    share: &ShareCoordinator,
    request: WriteShareGroupStateRequest,
) -> Option<Handled> {
    let response = serve_write(share.persister.store(), &request).await;
    let has_error = response
        .results
        .iter()
        .flat_map(|t| &t.partitions)
        .any(|p| p.error_code != 0);
    Handled::new(Response::WriteShareGroupState(response), has_error)
}

pub async fn initialize(
    share: &ShareCoordinator,
    request: InitializeShareGroupStateRequest,
) -> Option<Handled> {
    let response = serve_initialize(share.persister.store(), &request).await;
    let has_error = response
        .results
        .iter()
        .flat_map(|t| &t.partitions)
        .any(|p| p.error_code != 0);
    Handled::new(Response::InitializeShareGroupState(response), has_error)
}

pub async fn delete(
    share: &ShareCoordinator,
    request: DeleteShareGroupStateRequest,
) -> Option<Handled> {
    let response = serve_delete(share.persister.store(), &request).await;
    let has_error = response
        .results
        .iter()
        .flat_map(|t| &t.partitions)
        .any(|p| p.error_code != 0);
    Handled::new(Response::DeleteShareGroupState(response), has_error)
}

/// ReadShareGroupStateSummary: each partition's start offset and epochs.
pub fn summary(
    share: &ShareCoordinator,
    request: ReadShareGroupStateSummaryRequest,
) -> Option<Handled> {
    let store = share.persister.store();
    let results: Vec<ReadStateSummaryResult> = request
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let key = (
                        request.group_id.to_string(),
                        *t.topic_id.as_bytes(),
                        p.partition,
                    );
                    let out = PartitionResult::default()
                        .with_partition(p.partition)
                        .with_start_offset(-1);
                    match store.read(&key) {
                        Ok(Some(s)) => out
                            .with_state_epoch(s.snapshot.state_epoch)
                            .with_leader_epoch(s.leader_epoch)
                            .with_start_offset(s.snapshot.start_offset),
                        Ok(None) => out,
                        Err(e) => out.with_error_code(e.code()),
                    }
                })
                .collect();
            ReadStateSummaryResult::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions)
        })
        .collect();
    let has_error = results
        .iter()
        .flat_map(|t| &t.partitions)
        .any(|p| p.error_code != 0);
    Handled::new(
        Response::ReadShareGroupStateSummary(
            ReadShareGroupStateSummaryResponse::default().with_results(results),
        ),
        has_error,
    )
}
