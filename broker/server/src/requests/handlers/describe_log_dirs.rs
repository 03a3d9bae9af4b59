//! DescribeLogDirs (kafka-log-dirs.sh, v1–4): this broker's one log
//! directory (`--data-dir`), the size of each partition replica it holds
//! (the partitions whose replica list names it), and the volume's total
//! and usable bytes (v4). No replica is ever moving between directories
//! here, so `offset_lag` is 0 and there are no future replicas.

use std::sync::Arc;

use chronik_metadata::Cluster;
use std::path::Path;

use chronik_log::LogManager;
use chronik_protocol::Response;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::Handled;
use crate::replica::ReplicaManager;

pub fn handle(
    (replicas, cluster): (&Arc<ReplicaManager>, &Cluster),
    log: &LogManager,
    _version: i16,
    request: DescribeLogDirsRequest,
) -> Option<Handled> {
    let wanted = request.topics.map(|topics| {
        topics
            .into_iter()
            .map(|t| (t.topic.0.to_string(), t.partitions))
            .collect::<Vec<_>>()
    });
    let image = cluster.image();
    let node_id = replicas.node_id();
    let mut topics = Vec::new();
    for topic in log.topics() {
        let asked: Option<&Vec<i32>> = match &wanted {
            None => None,
            Some(list) => match list.iter().find(|(name, _)| *name == topic.name) {
                Some((_, partitions)) => Some(partitions),
                None => continue,
            },
        };
        let partitions: Vec<DescribeLogDirsPartition> = topic
            .partitions()
            .iter()
            .filter(|p| asked.is_none_or(|a| a.contains(&p.partition())))
            .filter(|p| {
                image
                    .partition(&topic.name, p.partition())
                    .is_none_or(|r| r.replicas.contains(&node_id))
            })
            .map(|p| {
                DescribeLogDirsPartition::default()
                    .with_partition_index(p.partition())
                    .with_partition_size(i64::try_from(p.size_bytes()).unwrap_or(i64::MAX))
            })
            .collect();
        if !partitions.is_empty() {
            topics.push(
                DescribeLogDirsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.name.clone())))
                    .with_partitions(partitions),
            );
        }
    }
    let data_dir = log.data_dir();
    let (total, usable) = volume_bytes(data_dir).unwrap_or((-1, -1));
    // Kafka answers an offline log directory with KAFKA_STORAGE_ERROR.
    let error = if log.dir_health().is_offline() {
        kafka_protocol::error::ResponseError::KafkaStorageError.code()
    } else {
        0
    };
    let result = DescribeLogDirsResult::default()
        .with_error_code(error)
        .with_log_dir(StrBytes::from_string(data_dir.display().to_string()))
        .with_topics(topics)
        .with_total_bytes(total)
        .with_usable_bytes(usable);
    Handled::new(
        Response::DescribeLogDirs(DescribeLogDirsResponse::default().with_results(vec![result])),
        false,
    )
}

/// (total, available to this process) bytes of the volume holding `dir`.
#[allow(unsafe_code)]
fn volume_bytes(dir: &Path) -> Option<(i64, i64)> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `path` is a valid NUL-terminated string and `stat` points to
    // writable memory of the right type; statvfs fills it on success.
    let rc = unsafe { libc::statvfs(path.as_ptr(), stat.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so it initialised `stat`.
    let stat = unsafe { stat.assume_init() };
    let fragment = stat.f_frsize.max(1);
    let total = stat.f_blocks.saturating_mul(fragment);
    let usable = stat.f_bavail.saturating_mul(fragment);
    Some((
        i64::try_from(total).unwrap_or(i64::MAX),
        i64::try_from(usable).unwrap_or(i64::MAX),
    ))
}
