//! Kafka clients of a run: librdkafka configuration, the topic's lifecycle
//! and what the broker says about itself.
//!
//! Owns: the producer and consumer `ClientConfig`s derived from `Config`,
//! topic creation/deletion and waiting for leaders, partition watermarks,
//! the cluster id, and a raw ApiVersions (v0) exchange — rdkafka does not
//! expose the versions it negotiated. Must not: produce or consume records.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use chronik_harness::results::{ApiVersionRange, BrokerInfo};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::ClientContext;

use crate::config::Config;

/// Consumer context that does not report reaching a partition's end as an
/// error: with `enable.partition.eof` on, that is a routine event.
#[derive(Debug, Clone, Copy, Default)]
pub struct QuietEofContext;

impl ClientContext for QuietEofContext {
    fn error(&self, error: KafkaError, reason: &str) {
        if !matches!(error, KafkaError::PartitionEOF(_)) {
            tracing::error!(error = %error, reason, "librdkafka");
        }
    }
}

impl ConsumerContext for QuietEofContext {}

/// The consumer type every bench consumer uses.
pub type BenchConsumer = BaseConsumer<QuietEofContext>;

const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);
const METADATA_TIMEOUT: Duration = Duration::from_secs(10);

fn base(c: &Config) -> ClientConfig {
    let mut cc = ClientConfig::new();
    cc.set("bootstrap.servers", &c.bootstrap_servers)
        .set("client.id", "chronik-bench");
    // a broker that restarted or moved is found again in seconds;
    // --client-property overrides
    for (k, v) in chronik_harness::reconnect::LIBRDKAFKA_RECONNECT {
        cc.set(k, v);
    }
    cc
}

fn with_user_properties(mut cc: ClientConfig, c: &Config) -> ClientConfig {
    for (k, v) in c.client_properties.iter() {
        cc.set(k, v);
    }
    cc
}

/// Producer settings: the flags, then `--client-property` overrides.
pub fn producer_config(c: &Config) -> ClientConfig {
    let mut cc = base(c);
    cc.set("acks", c.acks.as_kafka())
        .set("compression.type", c.compression.as_kafka())
        .set("batch.size", c.batch_size.to_string())
        .set("linger.ms", c.linger_ms.to_string())
        .set("queue.buffering.max.messages", c.max_in_flight.to_string())
        // librdkafka's default byte bound (1 GiB) would let large messages
        // pile up far beyond --max-in-flight's intent; 1 GiB stays the cap.
        .set("queue.buffering.max.kbytes", "1048576")
        .set("enable.idempotence", c.enable_idempotence.to_string());
    with_user_properties(cc, c)
}

/// Consumer settings: manual assignment, no commits, EOF events on.
pub fn consumer_config(c: &Config, group_id: &str) -> ClientConfig {
    let mut cc = base(c);
    cc.set("group.id", group_id)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "true")
        .set("auto.offset.reset", "earliest")
        .set("fetch.wait.max.ms", c.fetch_max_wait_ms.to_string());
    with_user_properties(cc, c)
}

/// A client for metadata look-ups (a consumer that never subscribes).
pub fn metadata_client(c: &Config) -> Result<BenchConsumer> {
    let mut cc = consumer_config(c, "chronik-bench-metadata");
    // Brokers that auto-create topics (chronik does) create the topic here.
    cc.set("allow.auto.create.topics", "true");
    cc.create_with_context(QuietEofContext)
        .context("creating a metadata client")
}

/// Creates the topic; an existing topic is kept (and said so).
pub fn create_topic(c: &Config) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = with_user_properties(base(c), c)
        .create()
        .context("creating an admin client")?;
    let topic = NewTopic::new(
        &c.topic,
        c.partitions,
        TopicReplication::Fixed(c.replication_factor),
    );
    let opts = AdminOptions::new()
        .operation_timeout(Some(ADMIN_TIMEOUT))
        .request_timeout(Some(ADMIN_TIMEOUT));
    let results = futures::executor::block_on(admin.create_topics([&topic], &opts))
        .context("CreateTopics")?;
    for r in results {
        match r {
            Ok(name) => {
                tracing::info!(topic = %name, partitions = c.partitions, rf = c.replication_factor, "created topic")
            }
            Err((name, RDKafkaErrorCode::TopicAlreadyExists)) => {
                tracing::info!(topic = %name, "topic exists; using it as it is")
            }
            Err((name, code)) => bail!("creating topic {name}: {code}"),
        }
    }
    Ok(())
}

pub fn delete_topic(c: &Config) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = with_user_properties(base(c), c)
        .create()
        .context("creating an admin client")?;
    let opts = AdminOptions::new()
        .operation_timeout(Some(ADMIN_TIMEOUT))
        .request_timeout(Some(ADMIN_TIMEOUT));
    let results = futures::executor::block_on(admin.delete_topics(&[c.topic.as_str()], &opts))
        .context("DeleteTopics")?;
    for r in results {
        match r {
            Ok(name) => tracing::info!(topic = %name, "deleted topic"),
            Err((name, code)) => bail!("deleting topic {name}: {code}"),
        }
    }
    Ok(())
}

/// Partition ids of `topic` once every partition has a leader.
pub fn wait_for_partitions(
    client: &BenchConsumer,
    topic: &str,
    timeout: Duration,
) -> Result<Vec<i32>> {
    let deadline = Instant::now() + timeout;
    loop {
        let last_problem: String;
        match client.fetch_metadata(Some(topic), METADATA_TIMEOUT) {
            Ok(md) => match md.topics().iter().find(|t| t.name() == topic) {
                Some(t) if t.error().is_none() && !t.partitions().is_empty() => {
                    if t.partitions()
                        .iter()
                        .all(|p| p.leader() >= 0 && p.error().is_none())
                    {
                        let mut ids: Vec<i32> = t.partitions().iter().map(|p| p.id()).collect();
                        ids.sort_unstable();
                        return Ok(ids);
                    }
                    last_problem = "a partition has no leader yet".into();
                }
                Some(t) => last_problem = format!("topic error {:?}", t.error()),
                None => last_problem = "topic not in metadata".into(),
            },
            Err(e) => last_problem = e.to_string(),
        }
        if Instant::now() >= deadline {
            bail!("topic {topic} is not usable after {timeout:?}: {last_problem} (does it exist? see --create-topic)");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// High watermark of each partition, in the order given.
pub fn high_watermarks(
    client: &BenchConsumer,
    topic: &str,
    partitions: &[i32],
) -> Result<Vec<i64>> {
    partitions
        .iter()
        .map(|&p| {
            client
                .fetch_watermarks(topic, p, METADATA_TIMEOUT)
                .map(|(_, high)| high)
                .with_context(|| format!("watermarks of {topic}-{p}"))
        })
        .collect()
}

/// Cluster id and ApiVersions of the broker behind the bootstrap servers.
/// Failures leave the fields empty: they describe the run, they do not stop it.
pub fn broker_info(c: &Config, client: &BenchConsumer) -> BrokerInfo {
    let cluster_id = client.client().fetch_cluster_id(METADATA_TIMEOUT);
    let api_versions = match fetch_api_versions(&c.bootstrap_servers) {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(error = %e, "ApiVersions request failed; the result's meta will not list them");
            Vec::new()
        }
    };
    BrokerInfo {
        bootstrap_servers: c.bootstrap_servers.clone(),
        cluster_id,
        api_versions,
        pids: c.broker_pids.clone(),
    }
}

/// ApiVersions v0 against the first bootstrap server that answers.
pub fn fetch_api_versions(bootstrap: &str) -> Result<Vec<ApiVersionRange>> {
    let mut last = anyhow!("no bootstrap server given");
    for server in bootstrap
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let server = server.rsplit_once("://").map_or(server, |(_, s)| s);
        match api_versions_from(server) {
            Ok(v) => return Ok(v),
            Err(e) => last = e.context(format!("asking {server}")),
        }
    }
    Err(last)
}

fn api_versions_from(server: &str) -> Result<Vec<ApiVersionRange>> {
    let addr = server
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| anyhow!("{server} resolves to nothing"))?;
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(&encode_api_versions_request(1))?;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size)?;
    let size = i32::from_be_bytes(size);
    if !(0..=1 << 20).contains(&size) {
        bail!("ApiVersions response of {size} bytes");
    }
    let mut body = vec![0u8; size as usize];
    stream.read_exact(&mut body)?;
    decode_api_versions_response(&body, 1)
}

/// Size-prefixed ApiVersions v0 request (header v1: key, version, correlation id, client id).
pub fn encode_api_versions_request(correlation_id: i32) -> Vec<u8> {
    const CLIENT_ID: &[u8] = b"chronik-bench";
    let mut msg = Vec::with_capacity(32);
    msg.extend_from_slice(&18i16.to_be_bytes());
    msg.extend_from_slice(&0i16.to_be_bytes());
    msg.extend_from_slice(&correlation_id.to_be_bytes());
    msg.extend_from_slice(&(CLIENT_ID.len() as i16).to_be_bytes());
    msg.extend_from_slice(CLIENT_ID);
    let mut framed = (msg.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&msg);
    framed
}

/// Decodes an ApiVersions v0 response body (after the size prefix). A
/// broker that rejects v0 still lists its versions, with error 35.
pub fn decode_api_versions_response(
    body: &[u8],
    correlation_id: i32,
) -> Result<Vec<ApiVersionRange>> {
    let mut at = 0usize;
    let mut take = |n: usize| -> Result<&[u8]> {
        let s = body
            .get(at..at + n)
            .ok_or_else(|| anyhow!("ApiVersions response truncated at byte {at}"))?;
        at += n;
        Ok(s)
    };
    let i16_at = |b: &[u8]| i16::from_be_bytes([b[0], b[1]]);
    let corr = i32::from_be_bytes(take(4)?.try_into()?);
    if corr != correlation_id {
        bail!("correlation id {corr}, expected {correlation_id}");
    }
    let error = i16_at(take(2)?);
    if error != 0 && error != 35 {
        bail!("ApiVersions error code {error}");
    }
    let n = i32::from_be_bytes(take(4)?.try_into()?);
    if !(0..=1024).contains(&n) {
        bail!("ApiVersions lists {n} APIs");
    }
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let b = take(6)?;
        let (api_key, min_version, max_version) =
            (i16_at(&b[0..2]), i16_at(&b[2..4]), i16_at(&b[4..6]));
        out.push(ApiVersionRange {
            api_key,
            name: api_name(api_key).to_string(),
            min_version,
            max_version,
        });
    }
    Ok(out)
}

/// Kafka's name for an API key.
pub fn api_name(key: i16) -> &'static str {
    const NAMES: [&str; 75] = [
        "Produce",
        "Fetch",
        "ListOffsets",
        "Metadata",
        "LeaderAndIsr",
        "StopReplica",
        "UpdateMetadata",
        "ControlledShutdown",
        "OffsetCommit",
        "OffsetFetch",
        "FindCoordinator",
        "JoinGroup",
        "Heartbeat",
        "LeaveGroup",
        "SyncGroup",
        "DescribeGroups",
        "ListGroups",
        "SaslHandshake",
        "ApiVersions",
        "CreateTopics",
        "DeleteTopics",
        "DeleteRecords",
        "InitProducerId",
        "OffsetForLeaderEpoch",
        "AddPartitionsToTxn",
        "AddOffsetsToTxn",
        "EndTxn",
        "WriteTxnMarkers",
        "TxnOffsetCommit",
        "DescribeAcls",
        "CreateAcls",
        "DeleteAcls",
        "DescribeConfigs",
        "AlterConfigs",
        "AlterReplicaLogDirs",
        "DescribeLogDirs",
        "SaslAuthenticate",
        "CreatePartitions",
        "CreateDelegationToken",
        "RenewDelegationToken",
        "ExpireDelegationToken",
        "DescribeDelegationToken",
        "DeleteGroups",
        "ElectLeaders",
        "IncrementalAlterConfigs",
        "AlterPartitionReassignments",
        "ListPartitionReassignments",
        "OffsetDelete",
        "DescribeClientQuotas",
        "AlterClientQuotas",
        "DescribeUserScramCredentials",
        "AlterUserScramCredentials",
        "Vote",
        "BeginQuorumEpoch",
        "EndQuorumEpoch",
        "DescribeQuorum",
        "AlterPartition",
        "UpdateFeatures",
        "Envelope",
        "FetchSnapshot",
        "DescribeCluster",
        "DescribeProducers",
        "BrokerRegistration",
        "BrokerHeartbeat",
        "UnregisterBroker",
        "DescribeTransactions",
        "ListTransactions",
        "AllocateProducerIds",
        "ConsumerGroupHeartbeat",
        "ConsumerGroupDescribe",
        "ControllerRegistration",
        "GetTelemetrySubscriptions",
        "PushTelemetry",
        "AssignReplicasToDirs",
        "ListClientMetricsResources",
    ];
    usize::try_from(key)
        .ok()
        .and_then(|k| NAMES.get(k))
        .copied()
        .unwrap_or(match key {
            75 => "DescribeTopicPartitions",
            76 => "ShareGroupHeartbeat",
            77 => "ShareGroupDescribe",
            78 => "ShareFetch",
            79 => "ShareAcknowledge",
            80 => "AddRaftVoter",
            81 => "RemoveRaftVoter",
            82 => "UpdateRaftVoter",
            83 => "InitializeShareGroupState",
            84 => "ReadShareGroupState",
            85 => "WriteShareGroupState",
            86 => "DeleteShareGroupState",
            87 => "ReadShareGroupStateSummary",
            _ => "Unknown",
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_bytes_are_kafkas() {
        let r = encode_api_versions_request(7);
        // size, api key 18, version 0, correlation 7, client id "chronik-bench"
        assert_eq!(&r[0..4], &(r.len() as i32 - 4).to_be_bytes());
        assert_eq!(&r[4..12], &[0, 18, 0, 0, 0, 0, 0, 7]);
        assert_eq!(&r[12..14], &13i16.to_be_bytes());
        assert_eq!(&r[14..], b"chronik-bench");
    }

    #[test]
    fn response_decodes_and_names_apis() {
        let mut body = Vec::new();
        body.extend_from_slice(&7i32.to_be_bytes());
        body.extend_from_slice(&0i16.to_be_bytes());
        body.extend_from_slice(&2i32.to_be_bytes());
        body.extend_from_slice(&[0, 0, 0, 3, 0, 11]); // Produce 3..11
        body.extend_from_slice(&[0, 18, 0, 0, 0, 4]); // ApiVersions 0..4
        let v = decode_api_versions_response(&body, 7).expect("decodes");
        assert_eq!(v.len(), 2);
        assert_eq!(
            v[0],
            ApiVersionRange {
                api_key: 0,
                name: "Produce".into(),
                min_version: 3,
                max_version: 11
            }
        );
        assert_eq!(v[1].name, "ApiVersions");
        assert!(
            decode_api_versions_response(&body, 8).is_err(),
            "wrong correlation id"
        );
        assert!(
            decode_api_versions_response(&body[..body.len() - 1], 7).is_err(),
            "truncated"
        );
    }

    #[test]
    fn api_names_cover_known_keys() {
        assert_eq!(api_name(0), "Produce");
        assert_eq!(api_name(18), "ApiVersions");
        assert_eq!(api_name(22), "InitProducerId");
        assert_eq!(api_name(74), "ListClientMetricsResources");
        assert_eq!(api_name(75), "DescribeTopicPartitions");
        assert_eq!(api_name(-1), "Unknown");
    }
}
