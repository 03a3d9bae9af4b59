//! A 3-node cluster (127.0.0.1–3) whose nodes name two listeners each,
//! PLAINTEXT and SASL_PLAINTEXT (inter-broker, brokers log in with PLAIN
//! as the JAAS file's username): every node registers both with the
//! metadata quorum, so a client of either listener on any node is given
//! every broker at that listener's endpoint; replica fetches work over the
//! SASL_PLAINTEXT listener (an acks=all produce to a topic of replication
//! factor 3 is acknowledged and the ISR holds all three).
//!
//! Two 3-node clusters whose only listener is secured — SASL_SSL with
//! SCRAM-SHA-512, and SSL with `--ssl-client-auth required` — with the
//! StandardAuthorizer and the brokers' principal as the only super user:
//! brokers replicate to each other over that listener (acks=all, the ISR
//! holds all three, the record is read from the new leader after the old
//! one is killed), and a client of another principal sending a Fetch with
//! replica_id >= 0 or WriteTxnMarkers gets CLUSTER_AUTHORIZATION_FAILED.
//! A transaction over partitions led by each broker commits there (the
//! coordinator's markers cross the secured listener).

mod common;
mod security_support;

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use common::clients::{producer_at, CLIENT_TIMEOUT};
use common::cluster::free_port;
use common::kafka_client::new_producer_request;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, CreateTopicsRequest, EndTxnRequest, FindCoordinatorRequest,
    MetadataRequest, MetadataResponse, ProducerId, TopicName, WriteTxnMarkersRequest,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::producer::FutureRecord;
use security_support::requests::{fetch_request, partition_state, produce_request, txn_id};
use security_support::{Certs, Conn, SecureBroker};

/// (host, port) of every broker a Metadata answer lists, by node id.
fn endpoints(metadata: &MetadataResponse) -> Vec<(i32, String, i32)> {
    let mut found: Vec<_> = metadata
        .brokers
        .iter()
        .map(|b| (b.node_id.0, b.host.to_string(), b.port))
        .collect();
    found.sort();
    found
}

/// Creates `topic` with `partitions` and replication factor 3.
fn create_replicated(admin: &mut Conn, topic: &'static str, partitions: i32) -> Result<()> {
    let created = admin.send(
        &CreateTopicsRequest::default()
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_static_str(topic)))
                .with_num_partitions(partitions)
                .with_replication_factor(3)])
            .with_timeout_ms(15_000),
        5,
    )?;
    ensure!(created.topics[0].error_code == 0, "{created:?}");
    Ok(())
}

#[test]
fn every_node_answers_each_listener_with_that_listeners_endpoints() -> Result<()> {
    let certs = Certs::make()?; // only for its scratch directory
    let jaas = certs.path("jaas.conf");
    std::fs::write(
        &jaas,
        "KafkaServer { PlainLoginModule required username=\"broker\" password=\"broker-secret\"\n\
         user_broker=\"broker-secret\" user_alice=\"alice-secret\"; };",
    )?;
    let (plain, sasl, raft) = loop {
        let ports = (free_port()?, free_port()?, free_port()?);
        if ports.0 != ports.1 && ports.1 != ports.2 && ports.0 != ports.2 {
            break ports;
        }
    };
    let peers = "1@127.0.0.1,2@127.0.0.2,3@127.0.0.3";
    let secret = certs.arg("cluster.secret");
    let jaas = jaas.display().to_string();
    let mut nodes = Vec::new();
    for id in 1..=3 {
        let host = format!("127.0.0.{id}");
        let listeners = format!("PLAINTEXT://{host}:{plain},SASL_PLAINTEXT://{host}:{sasl}");
        let (node_id, raft_listen, metrics) = (
            id.to_string(),
            format!("{host}:{raft}"),
            format!("{host}:0"),
        );
        nodes.push(SecureBroker::spawn(
            &listeners,
            &[
                "--node-id",
                &node_id,
                "--peers",
                peers,
                "--raft-listen",
                &raft_listen,
                "--metrics-listen",
                &metrics,
                "--cluster-secret-file",
                &secret,
                "--sasl-enabled-mechanisms",
                "PLAIN",
                "--sasl-jaas-config-file",
                &jaas,
                "--inter-broker-listener-name",
                "SASL_PLAINTEXT",
            ],
        )?);
    }
    for node in &mut nodes {
        node.wait_listening()?;
    }
    let expected = |port: u16| -> Vec<(i32, String, i32)> {
        (1..=3)
            .map(|id| (id, format!("127.0.0.{id}"), i32::from(port)))
            .collect()
    };
    for node in &nodes {
        // Brokers register with heartbeats: wait (bounded) for all three.
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut client = Conn::plain(node.addr("PLAINTEXT")?)?;
        while endpoints(&client.metadata()?).len() < 3 {
            ensure!(
                Instant::now() < deadline,
                "fewer than 3 brokers registered:\n{}",
                node.log_tail()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        ensure!(
            endpoints(&client.metadata()?) == expected(plain),
            "PLAINTEXT on {:?}",
            node.listeners
        );
        let mut sasl_client = Conn::plain(node.addr("SASL_PLAINTEXT")?)?;
        ensure!(
            sasl_client.login_plain("alice", "alice-secret")?.error_code == 0,
            "login"
        );
        ensure!(
            endpoints(&sasl_client.metadata()?) == expected(sasl),
            "SASL_PLAINTEXT on {:?}",
            node.listeners
        );
    }

    // Replication over the inter-broker (SASL_PLAINTEXT) listener.
    let topic = "replicated";
    let mut admin = Conn::plain(nodes[0].addr("PLAINTEXT")?)?;
    create_replicated(&mut admin, topic, 1)?;
    let bootstrap = format!("127.0.0.1:{plain}");
    let producer = producer_at(&bootstrap, &[("acks", "all")])?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let delivered = runtime.block_on(producer.send(
        FutureRecord::<(), _>::to(topic).payload("v"),
        CLIENT_TIMEOUT,
    ));
    ensure!(delivered.is_ok(), "acks=all produce: {delivered:?}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let metadata = admin.send(&MetadataRequest::default().with_topics(None), 12)?;
        let isr = metadata
            .topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))
            .and_then(|t| t.partitions.first())
            .map_or(0, |p| p.isr_nodes.len());
        if isr == 3 {
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "ISR of {topic}-0 has {isr} nodes:\n{}",
            nodes[1].log_tail()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// CLUSTER_AUTHORIZATION_FAILED.
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const RECORD: &str = "replicated-over-a-secured-listener";

/// How the secured clusters' clients (and brokers) authenticate.
#[derive(Clone, Copy)]
enum Secured {
    /// SASL_SSL, SCRAM-SHA-512; brokers log in as `broker`.
    SaslSsl,
    /// SSL with required client certificates; brokers present theirs
    /// (`CN=broker`).
    MutualTls,
}

impl Secured {
    /// A connection authenticated as the brokers' principal (a super user).
    fn as_broker(self, certs: &Certs, addr: std::net::SocketAddr) -> Result<Conn> {
        match self {
            Secured::SaslSsl => {
                let mut conn = Conn::tls(addr, certs.client_tls(None)?)?;
                let login = conn.login_scram512("broker", "broker-secret")?;
                ensure!(login.error_code == 0, "broker login: {login:?}");
                Ok(conn)
            }
            Secured::MutualTls => Conn::tls(addr, certs.client_tls(Some("broker"))?),
        }
    }

    /// A connection authenticated as an ordinary user (no ACLs).
    fn as_user(self, certs: &Certs, addr: std::net::SocketAddr) -> Result<Conn> {
        match self {
            Secured::SaslSsl => {
                let mut conn = Conn::tls(addr, certs.client_tls(None)?)?;
                let login = conn.login_scram512("alice", "alice-secret")?;
                ensure!(login.error_code == 0, "alice login: {login:?}");
                Ok(conn)
            }
            Secured::MutualTls => Conn::tls(addr, certs.client_tls(Some("client"))?),
        }
    }
}

/// Starts 3 nodes (127.0.0.1–3) whose only listener is `secured`.
fn secured_cluster(secured: Secured, certs: &Certs) -> Result<(Vec<SecureBroker>, u16)> {
    let (port, raft) = loop {
        let ports = (free_port()?, free_port()?);
        if ports.0 != ports.1 {
            break ports;
        }
    };
    std::fs::write(
        certs.path("jaas.conf"),
        "KafkaServer { org.apache.kafka.common.security.scram.ScramLoginModule required\n\
         username=\"broker\" password=\"broker-secret\"; };\n",
    )?;
    std::fs::write(
        certs.path("scram.txt"),
        "SCRAM-SHA-512=[name=broker,password=broker-secret]\n\
         SCRAM-SHA-512=[name=alice,password=alice-secret]\n",
    )?;
    let mut common: Vec<String> = [
        "--peers",
        "1@127.0.0.1,2@127.0.0.2,3@127.0.0.3",
        "--cluster-secret-file",
        &certs.arg("cluster.secret"),
        "--ssl-keystore-location",
        &certs.arg("broker.keystore.pem"),
        "--ssl-truststore-location",
        &certs.arg("ca.pem"),
        "--authorizer-class-name",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let protocol = match secured {
        Secured::SaslSsl => {
            common.extend(
                [
                    "--super-users",
                    "User:broker",
                    "--sasl-enabled-mechanisms",
                    "SCRAM-SHA-512",
                    "--sasl-mechanism-inter-broker-protocol",
                    "SCRAM-SHA-512",
                    "--sasl-jaas-config-file",
                    &certs.arg("jaas.conf"),
                    "--sasl-scram-credentials-file",
                    &certs.arg("scram.txt"),
                ]
                .map(String::from),
            );
            "SASL_SSL"
        }
        Secured::MutualTls => {
            common.extend(
                [
                    "--super-users",
                    "User:CN=broker",
                    "--ssl-client-auth",
                    "required",
                ]
                .map(String::from),
            );
            "SSL"
        }
    };
    let mut nodes = Vec::new();
    for id in 1..=3 {
        let host = format!("127.0.0.{id}");
        let mut args = common.clone();
        args.extend([
            "--node-id".to_string(),
            id.to_string(),
            "--raft-listen".into(),
            format!("{host}:{raft}"),
            "--metrics-listen".into(),
            format!("{host}:0"),
        ]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        nodes.push(SecureBroker::spawn(
            &format!("{protocol}://{host}:{port}"),
            &args,
        )?);
    }
    for node in &mut nodes {
        node.wait_listening()?;
    }
    Ok((nodes, port))
}

/// Waits (bounded) until `check` holds for the metadata `conn` returns.
fn wait_metadata(
    conn: &mut Conn,
    what: &str,
    log: &dyn Fn() -> String,
    check: &dyn Fn(&MetadataResponse) -> bool,
) -> Result<MetadataResponse> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let metadata = conn.metadata()?;
        if check(&metadata) {
            return Ok(metadata);
        }
        ensure!(Instant::now() < deadline, "{what}:\n{}", log());
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Retries `send` (bounded) until its error code is 0.
fn until_ok<T: std::fmt::Debug>(
    what: &str,
    log: &dyn Fn() -> String,
    mut send: impl FnMut() -> Result<(i16, T)>,
) -> Result<T> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (code, answer) = send()?;
        if code == 0 {
            return Ok(answer);
        }
        ensure!(Instant::now() < deadline, "{what}: {answer:?}\n{}", log());
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Produces the record to `partition` (acks=all), retrying while the
/// leader named by Metadata has not yet taken the partition over.
fn produce(
    conn: &mut Conn,
    topic: &str,
    partition: i32,
    txn: Option<(&'static str, i64, i16)>,
    log: &dyn Fn() -> String,
) -> Result<()> {
    until_ok("acks=all produce", log, || {
        let produced = conn.send(&produce_request(topic, partition, RECORD, txn)?, 9)?;
        let p = &produced.responses[0].partition_responses[0];
        Ok((p.error_code, (partition, p.error_code)))
    })?;
    Ok(())
}

/// A transaction over partitions led by every broker commits: the
/// coordinator's WriteTxnMarkers (and the leaders' AddPartitionsToTxn
/// verification) cross the secured listener, so each partition's last
/// stable offset reaches its high watermark (record and marker).
fn transaction_commits_across_brokers(
    secured: Secured,
    certs: &Certs,
    addr: &dyn Fn(i32) -> Result<std::net::SocketAddr>,
    log: &dyn Fn() -> String,
) -> Result<()> {
    let (topic, id) = ("secured-txn", "secured-txn-id");
    let mut admin = secured.as_broker(certs, addr(1)?)?;
    create_replicated(&mut admin, topic, 3)?;
    let leaders_of = |m: &MetadataResponse| -> Vec<(i32, i32)> {
        m.topics
            .iter()
            .filter(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))
            .flat_map(|t| &t.partitions)
            .filter(|p| p.leader_id.0 > 0)
            .map(|p| (p.partition_index, p.leader_id.0))
            .collect()
    };
    let metadata = wait_metadata(&mut admin, "partitions without leaders", log, &|m| {
        leaders_of(m).len() == 3
    })?;
    let leaders = leaders_of(&metadata);
    let coordinator = until_ok("FindCoordinator", log, || {
        let r = admin.send(
            &FindCoordinatorRequest::default()
                .with_key(StrBytes::from_static_str(id))
                .with_key_type(1),
            3,
        )?;
        Ok((r.error_code, r))
    })?
    .node_id
    .0;
    ensure!(
        leaders.iter().any(|(_, leader)| *leader != coordinator),
        "every partition is led by the coordinator {coordinator}: {leaders:?}"
    );
    let mut coord = secured.as_broker(certs, addr(coordinator)?)?;
    let init = until_ok("InitProducerId", log, || {
        let r = coord.send(&new_producer_request(Some(txn_id(id))), 4)?;
        Ok((r.error_code, r))
    })?;
    let (pid, epoch) = (init.producer_id.0, init.producer_epoch);
    let added = coord.send(
        &AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(txn_id(id))
            .with_v3_and_below_producer_id(ProducerId(pid))
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(TopicName(StrBytes::from_static_str(topic)))
                .with_partitions(vec![0, 1, 2])]),
        3,
    )?;
    ensure!(
        added
            .results_by_topic_v3_and_below
            .iter()
            .flat_map(|t| &t.results_by_partition)
            .all(|p| p.partition_error_code == 0),
        "AddPartitionsToTxn: {added:?}"
    );
    for (partition, leader) in &leaders {
        let mut conn = secured.as_broker(certs, addr(*leader)?)?;
        produce(&mut conn, topic, *partition, Some((id, pid, epoch)), log)?;
    }
    let ended = coord.send(
        &EndTxnRequest::default()
            .with_transactional_id(txn_id(id))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_committed(true),
        3,
    )?;
    ensure!(ended.error_code == 0, "EndTxn: {ended:?}");
    for (partition, leader) in &leaders {
        let mut conn = secured.as_broker(certs, addr(*leader)?)?;
        until_ok("the commit marker", log, || {
            let fetched = conn.send(
                &fetch_request(topic, *partition, -1).with_isolation_level(1),
                12,
            )?;
            let p = fetched
                .responses
                .first()
                .and_then(|t| t.partitions.first())
                .context("no partition in the fetch")?;
            let committed = p.error_code == 0
                && p.high_watermark >= 2
                && p.last_stable_offset == p.high_watermark;
            Ok((
                i16::from(!committed),
                (
                    partition,
                    leader,
                    coordinator,
                    p.high_watermark,
                    p.last_stable_offset,
                ),
            ))
        })?;
    }
    Ok(())
}

fn secured_cluster_replicates(secured: Secured) -> Result<()> {
    let certs = Certs::make()?;
    let (mut nodes, port) = secured_cluster(secured, &certs)?;
    let addr =
        |id: i32| -> Result<std::net::SocketAddr> { Ok(format!("127.0.0.{id}:{port}").parse()?) };
    let mut admin = secured.as_broker(&certs, addr(1)?)?;
    wait_metadata(
        &mut admin,
        "fewer than 3 brokers registered",
        &|| nodes[0].log_tail(),
        &|m| m.brokers.len() == 3,
    )?;
    let topic = "secured-replication";
    create_replicated(&mut admin, topic, 1)?;
    let metadata = wait_metadata(&mut admin, "no leader", &|| nodes[0].log_tail(), &|m| {
        partition_state(m, topic).is_some_and(|(leader, _)| leader > 0)
    })?;
    let (leader, _) = partition_state(&metadata, topic).context("partition")?;
    let mut producer = secured.as_broker(&certs, addr(leader)?)?;
    produce(&mut producer, topic, 0, None, &|| {
        nodes[usize::try_from(leader - 1).unwrap_or(0)].log_tail()
    })?;
    let logs = |nodes: &[SecureBroker]| {
        nodes
            .iter()
            .map(SecureBroker::log_tail)
            .collect::<Vec<_>>()
            .join("\n---\n")
    };
    wait_metadata(&mut admin, "the ISR is not full", &|| logs(&nodes), &|m| {
        partition_state(m, topic).is_some_and(|(_, isr)| isr == 3)
    })?;

    transaction_commits_across_brokers(secured, &certs, &addr, &|| logs(&nodes))?;

    // A user that is not a broker may not fetch as a replica.
    let mut user = secured.as_user(&certs, addr(leader)?)?;
    let refused = user.send(&fetch_request(topic, 0, 2), 12)?;
    ensure!(
        refused.error_code == CLUSTER_AUTHORIZATION_FAILED,
        "replica fetch by a user: {refused:?}"
    );
    ensure!(
        refused
            .responses
            .iter()
            .flat_map(|t| &t.partitions)
            .all(|p| p.error_code == CLUSTER_AUTHORIZATION_FAILED
                && p.records.as_ref().is_none_or(|r| r.is_empty())),
        "replica fetch by a user returned data: {refused:?}"
    );

    let markers = user.send(
        &WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(ProducerId(1))
            .with_producer_epoch(0)
            .with_transaction_result(true)
            .with_topics(vec![WritableTxnMarkerTopic::default()
                .with_name(TopicName(StrBytes::from_static_str(topic)))
                .with_partition_indexes(vec![0])])]),
        1,
    )?;
    ensure!(
        markers
            .markers
            .iter()
            .flat_map(|m| &m.topics)
            .flat_map(|t| &t.partitions)
            .map(|p| p.error_code)
            .eq([CLUSTER_AUTHORIZATION_FAILED]),
        "WriteTxnMarkers by a user: {markers:?}"
    );

    // The leader dies; a follower takes over with the record.
    drop(admin);
    drop(producer);
    drop(user);
    nodes.remove(usize::try_from(leader - 1)?);
    let survivor = if leader == 1 { 2 } else { 1 };
    let mut admin = secured.as_broker(&certs, addr(survivor)?)?;
    let metadata = wait_metadata(&mut admin, "no new leader", &|| logs(&nodes), &|m| {
        partition_state(m, topic).is_some_and(|(l, _)| l > 0 && l != leader)
    })?;
    let (new_leader, _) = partition_state(&metadata, topic).context("partition")?;
    let mut reader = secured.as_broker(&certs, addr(new_leader)?)?;
    let fetched = reader.send(&fetch_request(topic, 0, -1), 12)?;
    let partition = fetched
        .responses
        .first()
        .and_then(|t| t.partitions.first())
        .context("no partition in the fetch")?;
    ensure!(
        partition.error_code == 0,
        "fetch from the new leader: {fetched:?}"
    );
    let records = partition.records.clone().unwrap_or_default();
    ensure!(
        records
            .windows(RECORD.len())
            .any(|w| w == RECORD.as_bytes()),
        "the record is not on the new leader {new_leader} (high watermark {})",
        partition.high_watermark
    );
    Ok(())
}

#[test]
fn sasl_ssl_scram_only_cluster_replicates_and_guards_replica_fetches() -> Result<()> {
    secured_cluster_replicates(Secured::SaslSsl)
}

#[test]
fn mutual_tls_only_cluster_replicates_and_guards_replica_fetches() -> Result<()> {
    secured_cluster_replicates(Secured::MutualTls)
}
