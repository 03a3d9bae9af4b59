//! DeleteGroups: removes groups without members, and their committed offsets;
//! a share group (KIP-932) without members, and its share-partitions' state.

use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};
use tracing::warn;

use super::Handled;
use crate::coordinators::groups::{GroupManager, OffsetStore};
use crate::coordinators::share::ShareCoordinator;
use crate::requests::errors::group::response_error;

pub async fn handle(
    (groups, share): (&GroupManager, &ShareCoordinator),
    offsets: &OffsetStore,
    _version: i16,
    request: DeleteGroupsRequest,
) -> Option<Handled> {
    let mut results = Vec::new();
    for group_id in request.groups_names {
        if share.groups.exists(&group_id.0) {
            let error = super::share_group_offsets::delete_share_group(share, &group_id.0)
                .await
                .err();
            results.push(
                DeletableGroupResult::default()
                    .with_group_id(group_id)
                    .with_error_code(error.map(|e| e.code()).unwrap_or(0)),
            );
            continue;
        }
        let known = groups.exists(&group_id.0) || !offsets.fetch_all(&group_id.0).is_empty();
        let error = if !known {
            Some(ResponseError::GroupIdNotFound)
        } else if let Err(e) = groups.delete(&group_id.0) {
            Some(response_error(e))
        } else if let Err(e) = offsets.delete_group(&group_id.0).await {
            warn!(group = %group_id.0, error = %e, "deleting committed offsets failed");
            Some(ResponseError::KafkaStorageError)
        } else {
            None
        };
        results.push(
            DeletableGroupResult::default()
                .with_group_id(group_id)
                .with_error_code(error.map(|e| e.code()).unwrap_or(0)),
        );
    }
    let has_error = results.iter().any(|r| r.error_code != 0);
    Handled::new(
        Response::DeleteGroups(DeleteGroupsResponse::default().with_results(results)),
        has_error,
    )
}
