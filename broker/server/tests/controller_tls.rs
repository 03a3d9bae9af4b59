//! The raft (controller) port of a cluster with TLS listeners speaks mutual
//! TLS (`--controller-listener-security-protocol`, default SSL when the
//! nodes have a key store and a trust store), and that is observable on
//! the wire:
//! 1. Three nodes (127.0.0.1–3) whose only Kafka listener is SSL form a
//!    quorum and serve an acks=all produce and a consume to a real client
//!    (librdkafka over SSL). `tcpdump` on loopback records the raft port
//!    from before the first node starts, through a SCRAM user's creation
//!    (AlterUserScramCredentials) and an ACL's (CreateAcls), until every
//!    node has applied both: none of the user's name, its salt, its stored
//!    key (as the metadata log's JSON carries them) or the ACL's principal
//!    is in the captured bytes, and TLS records are. The same cluster with
//!    `--controller-listener-security-protocol PLAINTEXT` is the control:
//!    its capture holds every one of them, so the check can fail.
//! 2. A broker configured for a cleartext raft port, joining the TLS
//!    cluster as an observer, is refused; it logs that the peers' raft port
//!    requires TLS, and a voter logs that it connected in cleartext.
//! 3. Split roles over TLS: a controller-only node serves three broker-only
//!    observers (127.0.0.2–4, one through --controller-quorum-bootstrap-servers)
//!    over the TLS raft port; a record produced acks=all to an RF-3 topic
//!    reads back.
//!
//! The clusters take turns (one lock): each is several processes.
//!
//! The capture needs tcpdump (scripts/install-system-deps.sh installs it)
//! and the privilege to capture; without the privilege the capture test
//! says SKIPPED loudly and passes, without tcpdump it fails.

mod common;
mod security_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use bytes::Bytes;
use chronik_testkit::process::Proc;
use common::clients::{assign_from_beginning, consumer_at, drain, producer_at, CLIENT_TIMEOUT};
use common::cluster::{free_port, Cluster};
use hmac::{Hmac, Mac};
use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, CreateAclsRequest, CreateTopicsRequest, DescribeAclsRequest,
    DescribeUserScramCredentialsRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::producer::FutureRecord;
use security_support::{Certs, Conn, SecureBroker};
use sha2::{Digest, Sha512};

const SCRAM_USER: &str = "carol-raft-capture-user";
const ACL_PRINCIPAL: &str = "User:dave-raft-capture-principal";
const TOPIC: &str = "raft-capture";
/// What a TLS raft port sends first (chronik-metadata's `transport`).
const TLS_BANNER: &[u8] = b"chronik-raft: TLS follows";

/// The salt and salted password the SCRAM user is created with.
fn salt() -> Vec<u8> {
    (0..32u8).map(|i| 200 - i * 3).collect()
}

fn salted_password() -> Vec<u8> {
    (0..64u8)
        .map(|i| i.wrapping_mul(7).wrapping_add(11))
        .collect()
}

/// SCRAM's StoredKey = H(HMAC(SaltedPassword, "Client Key")), SHA-512.
fn stored_key() -> Vec<u8> {
    let mut mac =
        <Hmac<Sha512> as Mac>::new_from_slice(&salted_password()).expect("any key length");
    mac.update(b"Client Key");
    Sha512::digest(mac.finalize().into_bytes()).to_vec()
}

/// Bytes as serde_json writes a `Vec<u8>` (the metadata log's encoding).
fn json_bytes(bytes: &[u8]) -> Vec<u8> {
    let items: Vec<String> = bytes.iter().map(u8::to_string).collect();
    format!("[{}]", items.join(",")).into_bytes()
}

/// (what, bytes) a passive observer of the raft port must not read.
fn credential_material() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("the SCRAM user name", SCRAM_USER.as_bytes().to_vec()),
        ("the SCRAM salt", json_bytes(&salt())),
        ("the SCRAM stored key", json_bytes(&stored_key())),
        ("the ACL principal", ACL_PRINCIPAL.as_bytes().to_vec()),
    ]
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// tcpdump recording loopback traffic to or from one port.
struct Capture {
    proc: Proc,
    file: PathBuf,
}

impl Capture {
    /// Ok(None): capturing is not permitted here (reported loudly).
    fn start(dir: &Path, port: u16) -> Result<Option<Capture>> {
        let tcpdump = ["/usr/bin/tcpdump", "/usr/sbin/tcpdump", "/sbin/tcpdump"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .context("tcpdump is not installed: run scripts/install-system-deps.sh (Debian's tcpdump package)")?;
        let file = dir.join(format!("raft-{port}.pcap"));
        let log = dir.join(format!("tcpdump-{port}.log"));
        let mut command = Command::new(tcpdump);
        command
            .args(["-i", "lo", "--immediate-mode", "-U", "-n", "-s", "0", "-w"])
            .arg(&file)
            .args(["tcp", "port", &port.to_string()]);
        let mut proc = Proc::spawn("tcpdump", command, &log)?;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            if said.contains("listening on") {
                return Ok(Some(Capture { proc, file }));
            }
            if !proc.is_running() || Instant::now() > deadline {
                let denied = [
                    "not permitted",
                    "ermission denied",
                    "You don't have permission",
                ];
                if denied.iter().any(|d| said.contains(d)) {
                    eprintln!(
                        "\n!!!!! SKIPPED: tcpdump may not capture on lo here (run as root or with CAP_NET_RAW): {said}\n"
                    );
                    return Ok(None);
                }
                bail!("tcpdump did not start capturing: {said}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the capture and returns the TCP payload of each direction of
    /// each connection, in capture order.
    fn finish(mut self) -> Result<Vec<Vec<u8>>> {
        // --immediate-mode hands tcpdump each packet at once (otherwise the
        // kernel holds them in blocks for up to a second, and the last
        // changes' packets die with the process); -U writes each one.
        std::thread::sleep(Duration::from_millis(1000));
        self.proc.terminate(Duration::from_secs(10))?;
        tcp_payloads(&std::fs::read(&self.file)?)
    }
}

/// The TCP payloads of a pcap file (Ethernet or Linux cooked link layer,
/// IPv4), concatenated per (source, destination) in capture order.
fn tcp_payloads(pcap: &[u8]) -> Result<Vec<Vec<u8>>> {
    ensure!(pcap.len() >= 24, "pcap of {} bytes", pcap.len());
    let magic = u32::from_le_bytes(pcap[..4].try_into()?);
    ensure!(
        magic == 0xa1b2_c3d4 || magic == 0xa1b2_3c4d,
        "not a little-endian pcap file (magic {magic:#x})"
    );
    let link = u32::from_le_bytes(pcap[20..24].try_into()?);
    let link_header = match link {
        1 => 14,   // Ethernet (Linux's lo)
        113 => 16, // Linux cooked capture
        other => bail!("link type {other} not handled"),
    };
    let mut flows: std::collections::BTreeMap<([u8; 6], [u8; 6]), Vec<u8>> = Default::default();
    let mut at = 24;
    while at + 16 <= pcap.len() {
        let captured = u32::from_le_bytes(pcap[at + 8..at + 12].try_into()?) as usize;
        let packet = pcap
            .get(at + 16..at + 16 + captured)
            .context("truncated packet")?;
        at += 16 + captured;
        let Some(ip) = packet.get(link_header..) else {
            continue;
        };
        if ip.len() < 20 || ip[0] >> 4 != 4 || ip[9] != 6 {
            continue;
        }
        let ip_len = usize::from(u16::from_be_bytes([ip[2], ip[3]])).min(ip.len());
        let tcp = &ip[usize::from(ip[0] & 0x0f) * 4..ip_len];
        if tcp.len() < 20 {
            continue;
        }
        let payload = &tcp[usize::from(tcp[12] >> 4) * 4..];
        let endpoint = |addr: &[u8], port: &[u8]| -> [u8; 6] {
            [addr[0], addr[1], addr[2], addr[3], port[0], port[1]]
        };
        let key = (
            endpoint(&ip[12..16], &tcp[0..2]),
            endpoint(&ip[16..20], &tcp[2..4]),
        );
        flows.entry(key).or_default().extend_from_slice(payload);
    }
    Ok(flows.into_values().collect())
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Starts three nodes whose only listener is SSL; `extra` is added to each.
fn tls_cluster(certs: &Certs, kafka: u16, raft: u16, extra: &[&str]) -> Result<Vec<SecureBroker>> {
    let peers = "1@127.0.0.1,2@127.0.0.2,3@127.0.0.3";
    let secret = certs.arg("cluster.secret");
    let (keystore, truststore) = (certs.arg("broker.keystore.pem"), certs.arg("ca.pem"));
    let mut nodes = Vec::new();
    for id in 1..=3 {
        let host = format!("127.0.0.{id}");
        let (node_id, raft_listen, metrics) = (
            id.to_string(),
            format!("{host}:{raft}"),
            format!("{host}:0"),
        );
        let mut args = vec![
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
            "--ssl-keystore-location",
            &keystore,
            "--ssl-truststore-location",
            &truststore,
            "--authorizer-class-name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            // The SSL listener asks no client certificate: clients and
            // brokers are ANONYMOUS, allowed everything.
            "--super-users",
            "User:ANONYMOUS",
        ];
        args.extend_from_slice(extra);
        nodes.push(SecureBroker::spawn(
            &format!("SSL://{host}:{kafka}"),
            &args,
        )?);
    }
    for node in &mut nodes {
        node.wait_listening()?;
    }
    Ok(nodes)
}

fn logs(nodes: &[SecureBroker]) -> String {
    nodes
        .iter()
        .enumerate()
        .map(|(i, n)| format!("--- node {} ---\n{}", i + 1, n.log_tail()))
        .collect()
}

/// Polls `check` (bounded) until it holds.
fn eventually(
    what: &str,
    log: &dyn Fn() -> String,
    mut check: impl FnMut() -> Result<bool>,
) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !check()? {
        ensure!(Instant::now() < deadline, "{what}:\n{}", log());
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}

/// A real client (librdkafka, `client` settings) produces `value` to
/// partition 0 of `topic` acks=all and reads it back.
fn round_trip(bootstrap: &str, client: &[(&str, &str)], topic: &str, value: &str) -> Result<()> {
    let producer = producer_at(bootstrap, &[client, &[("acks", "all")]].concat())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let delivered = runtime.block_on(producer.send(
        FutureRecord::<(), _>::to(topic).payload(value),
        CLIENT_TIMEOUT,
    ));
    ensure!(delivered.is_ok(), "acks=all produce: {delivered:?}");
    let consumer = consumer_at(bootstrap, client)?;
    assign_from_beginning(&consumer, topic, &[0])?;
    let records = drain(&consumer, &[0], 1, Duration::from_secs(30))?;
    let values: Vec<String> = records.iter().map(|r| r.value_str()).collect();
    ensure!(values == [value], "consumed {values:?}");
    Ok(())
}

/// A real client's round trip over SSL, then the SCRAM user and the ACL,
/// waited for until every node has applied both.
fn exercise(certs: &Certs, nodes: &[SecureBroker], kafka: u16) -> Result<()> {
    let log = || logs(nodes);
    let tls = || certs.client_tls(None);
    let mut admin = Conn::tls(nodes[0].addr("SSL")?, tls()?)?;
    let created = admin.send(
        &CreateTopicsRequest::default()
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(s(TOPIC)))
                .with_num_partitions(1)
                .with_replication_factor(3)])
            .with_timeout_ms(15_000),
        5,
    )?;
    ensure!(created.topics[0].error_code == 0, "{created:?}");

    let bootstrap = format!("127.0.0.1:{kafka},127.0.0.2:{kafka}");
    let ca = certs.arg("ca.pem");
    let ssl = [
        ("security.protocol", "ssl"),
        ("ssl.ca.location", ca.as_str()),
    ];
    round_trip(&bootstrap, &ssl, TOPIC, "over-tls").with_context(log)?;

    let upsertion = ScramCredentialUpsertion::default()
        .with_name(s(SCRAM_USER))
        .with_mechanism(2) // SCRAM-SHA-512
        .with_iterations(8192)
        .with_salt(Bytes::from(salt()))
        .with_salted_password(Bytes::from(salted_password()));
    let altered = admin.send(
        &AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsertion]),
        0,
    )?;
    ensure!(
        altered.results.iter().all(|r| r.error_code == 0),
        "{altered:?}"
    );
    let acl = AclCreation::default()
        .with_resource_type(2) // TOPIC
        .with_resource_name(s(TOPIC))
        .with_resource_pattern_type(3) // LITERAL
        .with_principal(s(ACL_PRINCIPAL))
        .with_host(s("*"))
        .with_operation(3) // READ
        .with_permission_type(3); // ALLOW
    let created = admin.send(&CreateAclsRequest::default().with_creations(vec![acl]), 3)?;
    ensure!(
        created.results.iter().all(|r| r.error_code == 0),
        "{created:?}"
    );
    for node in nodes {
        let mut conn = Conn::tls(node.addr("SSL")?, tls()?)?;
        eventually(
            "the SCRAM user and the ACL applied on every node",
            &log,
            || {
                let users = conn.send(
                    &DescribeUserScramCredentialsRequest::default()
                        .with_users(Some(vec![UserName::default().with_name(s(SCRAM_USER))])),
                    0,
                )?;
                let acls = conn.send(
                    &DescribeAclsRequest::default()
                        .with_resource_name_filter(None)
                        .with_principal_filter(Some(s(ACL_PRINCIPAL)))
                        .with_host_filter(None)
                        .with_resource_type_filter(1) // ANY
                        .with_pattern_type_filter(1)
                        .with_operation(1)
                        .with_permission_type(1),
                    3,
                )?;
                let user_known = users
                    .results
                    .iter()
                    .any(|r| r.error_code == 0 && !r.credential_infos.is_empty());
                Ok(user_known && acls.resources.iter().any(|r| !r.acls.is_empty()))
            },
        )?;
    }
    Ok(())
}

/// A cluster's raft port under capture.
struct Captured {
    flows: Vec<Vec<u8>>,
    nodes: Vec<SecureBroker>,
    raft: u16,
}

/// Runs a cluster (`extra` on each node) under capture, or None when
/// capturing is not permitted.
fn captured_cluster(certs: &Certs, extra: &[&str]) -> Result<Option<Captured>> {
    let (kafka, raft) = loop {
        let ports = (free_port()?, free_port()?);
        if ports.0 != ports.1 {
            break ports;
        }
    };
    let Some(capture) = Capture::start(&certs.path(""), raft)? else {
        return Ok(None);
    };
    let nodes = tls_cluster(certs, kafka, raft, extra)?;
    exercise(certs, &nodes, kafka)?;
    let flows = capture.finish()?;
    Ok(Some(Captured { flows, nodes, raft }))
}

/// The clusters of this file take turns: each is several processes on a
/// machine of a few cores.
static ONE_CLUSTER_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn take_turn() -> std::sync::MutexGuard<'static, ()> {
    // A test that failed while holding it left nothing to repair.
    ONE_CLUSTER_AT_A_TIME
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

#[test]
fn the_raft_port_of_a_tls_cluster_carries_no_credential_in_the_clear() -> Result<()> {
    let _turn = take_turn();
    let certs = Certs::make()?;
    let Some(Captured { flows, nodes, raft }) = captured_cluster(&certs, &[])? else {
        return Ok(());
    };
    let total: usize = flows.iter().map(Vec::len).sum();
    println!(
        "TLS raft port: {total} bytes in {} one-way flows captured",
        flows.len()
    );
    ensure!(
        total > 20_000,
        "only {total} bytes captured on the raft port: the capture saw nothing"
    );
    ensure!(
        flows.iter().any(|f| f.starts_with(TLS_BANNER)),
        "no connection opened with the TLS banner"
    );
    ensure!(
        flows.iter().any(|f| contains(f, &[0x17, 0x03, 0x03])),
        "no TLS application data record in the capture"
    );
    for (what, bytes) in credential_material() {
        let seen = flows.iter().any(|f| contains(f, &bytes));
        ensure!(!seen, "{what} crossed the TLS raft port in the clear");
    }
    for node in &nodes {
        node.wait_for_log("raft port: SSL")?;
    }

    // 2. A broker whose raft port is cleartext is refused, both ends say why.
    let secret = certs.arg("cluster.secret");
    let raft_listen = format!("127.0.0.4:{raft}");
    let observer = SecureBroker::spawn(
        "PLAINTEXT://127.0.0.4:0",
        &[
            "--node-id",
            "4",
            "--process-roles",
            "broker",
            "--peers",
            "1@127.0.0.1,2@127.0.0.2,3@127.0.0.3",
            "--raft-listen",
            &raft_listen,
            "--metrics-listen",
            "127.0.0.4:0",
            "--cluster-secret-file",
            &secret,
        ],
    )?;
    observer.wait_for_log("the peer's raft port requires TLS")?;
    eventually(
        "a voter logging the cleartext connection",
        &|| logs(&nodes),
        || {
            Ok(nodes.iter().any(|n| {
                n.log().lines().any(|l| {
                    l.contains("raft handshake from 127.0.0.4")
                        && l.contains("connected in cleartext")
                })
            }))
        },
    )?;
    // Each end's line, for the record.
    let lines = std::iter::once(&observer)
        .chain(&nodes)
        .flat_map(|n| n.log().lines().map(str::to_string).collect::<Vec<_>>());
    for line in lines.filter(|l| l.contains("requires TLS")).take(2) {
        println!("{line}");
    }
    drop(observer);
    drop(nodes);

    // The control: the same cluster and the same changes over a cleartext
    // raft port show every piece of the material to the capture.
    let Some(control) = captured_cluster(
        &certs,
        &["--controller-listener-security-protocol", "PLAINTEXT"],
    )?
    else {
        return Ok(());
    };
    for (what, bytes) in credential_material() {
        ensure!(
            control.flows.iter().any(|f| contains(f, &bytes)),
            "{what} is not in the cleartext control capture: the capture (or its search) sees nothing, \
             so the TLS check above proves nothing"
        );
    }
    Ok(())
}

/// 3. A controller-only node and three broker-only observers over TLS.
#[test]
fn split_roles_work_over_a_tls_raft_port() -> Result<()> {
    let _turn = take_turn();
    let certs = Certs::make()?;
    // Voters dial observers too (AppendEntries): their certificates must
    // name 127.0.0.4.
    let dir = certs.path("split");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/make-certs.sh");
    let made = Command::new("bash")
        .arg(&script)
        .arg(&dir)
        .args([
            "--server",
            "node=IP:127.0.0.1,IP:127.0.0.2,IP:127.0.0.3,IP:127.0.0.4,DNS:localhost",
        ])
        .output()?;
    ensure!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let (keystore, truststore) = (
        dir.join("node.keystore.pem").display().to_string(),
        dir.join("ca.pem").display().to_string(),
    );
    let mut cluster = Cluster::start_split(
        1,
        3,
        &[
            "--ssl-keystore-location",
            &keystore,
            "--ssl-truststore-location",
            &truststore,
        ],
    )?;
    let bootstrap = cluster.bootstrap();
    for id in 1..=4 {
        let log = cluster.node(id).log_tail(400);
        ensure!(log.contains("raft port: SSL"), "node {id}:\n{log}");
    }
    common::kafka_client::Client::connect(cluster.node(2))?.create_topic_replicated(
        "split-tls",
        1,
        3,
        &[],
    )?;
    round_trip(&bootstrap, &[], "split-tls", "split").with_context(|| cluster.logs())?;
    Ok(())
}
