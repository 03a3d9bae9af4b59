//! Waiting for the group-commit flusher: a produce with acks=1/all parks here
//! until every partition it appended to is durable past its batch.

use std::sync::Arc;
use std::time::Duration;

use chronik_log::PartitionLog;
use tokio::time::Instant;

use crate::broker::Broker;

/// Waits until each `(partition, end_offset)` has `durable_offset() >=
/// end_offset`. Returns false if `timeout` passed first, or as soon as one
/// of the partitions went offline (its data can never become durable); the
/// caller tells the two apart with `PartitionLog::is_offline`.
pub async fn wait_until_durable(
    broker: &Broker,
    pending: &[(Arc<PartitionLog>, i64)],
    timeout: Duration,
) -> bool {
    let deadline = Instant::now() + timeout;
    // Watch before checking, so a flush between the check and the wait
    // still wakes us.
    let watch = broker
        .purgatory
        .watch(pending.iter().map(|(log, _)| &**log));
    loop {
        if pending
            .iter()
            .all(|(log, end)| log.durable_offset() >= *end)
        {
            return true;
        }
        if pending
            .iter()
            .any(|(log, end)| log.is_offline() && log.durable_offset() < *end)
        {
            return false;
        }
        tokio::select! {
            () = watch.progressed() => {}
            _ = tokio::time::sleep_until(deadline) => return false,
        }
    }
}
