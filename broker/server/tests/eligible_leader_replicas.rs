//! Eligible leader replicas (KIP-966) on real brokers: a partition loses
//! its followers one after another, then its leader, and a replica that
//! lacks acknowledged records comes back first.
//!
//! Three controllers and three brokers (Kafka's split roles, so the
//! metadata quorum outlives every replica of the partition: with three
//! combined nodes, the last one's death would take the quorum too). Topic
//! `elr`: one partition on brokers 4, 5 and 6, min.insync.replicas 2. An
//! idempotent acks=all producer writes a batch, then follower F2 is killed
//! (SIGKILL); another batch (the ISR, two, is at min.insync.replicas: no
//! ELR), then follower F1 is killed: the ISR is the leader L alone and F1,
//! which holds every acknowledged record, is in the ELR (F2 is not: it left
//! while the ISR was at the minimum). Then L is killed: the ISR is empty,
//! the ELR is {F1, L}, the last known ELR is L. F2 comes back and must not
//! lead (it lacks the second batch); F1 comes back and leads. Finally L
//! returns and every acknowledged record is read back exactly once, in
//! order. DescribeTopicPartitions shows the fields at each step.
//!
//! The same run with `eligible.leader.replicas.version` downgraded to 0
//! (today's rules): the last ISR member L stays in the ISR, neither F2 nor
//! F1 may lead, and the partition comes back with L.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest;
use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::{
    ApiVersionsRequest, DescribeTopicPartitionsRequest, TopicName, UpdateFeaturesRequest,
};
use kafka_protocol::protocol::StrBytes;

use common::clients::{assign_from_beginning, consumer_at, drain, producer_at, send_all};
use common::cluster::{Cluster, FAST_FAILOVER};
use common::kafka_client::Client;

const TOPIC: &str = "elr";
const ELR_FEATURE: &str = "eligible.leader.replicas.version";
/// Records per batch.
const BATCH: usize = 200;

/// (leader, isr, elr, last known elr) as DescribeTopicPartitions answers.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Elr {
    leader: i32,
    isr: BTreeSet<i32>,
    elr: BTreeSet<i32>,
    last_known: BTreeSet<i32>,
}

#[test]
fn an_elr_member_leads_and_a_stale_replica_never_does() -> Result<()> {
    scenario(true)
}

#[test]
fn with_elr_off_only_the_last_isr_member_leads_again() -> Result<()> {
    scenario(false)
}

fn scenario(elr_on: bool) -> Result<()> {
    let mut cluster = Cluster::start_split(3, 3, FAST_FAILOVER)?;
    ensure!(
        finalized_level(&mut cluster, 4)? == 1,
        "a new cluster finalizes {ELR_FEATURE} 1"
    );
    if !elr_on {
        downgrade_elr(&mut cluster)?;
        ensure!(finalized_level(&mut cluster, 5)? == 0, "downgraded");
    }
    Client::connect(cluster.node(4))?.create_topic_replicated(
        TOPIC,
        1,
        3,
        &[("min.insync.replicas", "2")],
    )?;
    let full = wait_elr(&mut cluster, &[4, 5, 6], "a full ISR", |s| {
        s.leader > 0 && s.isr.len() == 3
    })?;
    let leader = full.leader;
    let mut followers = [4, 5, 6].into_iter().filter(|&b| b != leader);
    let (f1, f2) = (
        followers.next().context("F1")?,
        followers.next().context("F2")?,
    );
    let bootstrap = cluster.bootstrap();
    let mut acked = produce(&bootstrap, "a", BATCH)?;

    cluster.node(f2).kill_hard()?;
    let at_min = wait_elr(&mut cluster, &[leader], "F2 out of the ISR", |s| {
        !s.isr.contains(&f2)
    })?;
    ensure!(
        at_min.elr.is_empty(),
        "ISR at min.insync.replicas: {at_min:?}"
    );
    acked.extend(produce(&bootstrap, "b", BATCH)?);

    cluster.node(f1).kill_hard()?;
    let below = wait_elr(&mut cluster, &[leader], "F1 out of the ISR", |s| {
        s.isr == set(&[leader])
    })?;
    let want_elr = if elr_on { set(&[f1]) } else { set(&[]) };
    ensure!(
        below.elr == want_elr,
        "F1 eligible when ELR is on: {below:?}"
    );

    cluster.node(leader).kill_hard()?;
    cluster.restart_node(f2)?;
    // F2 serves once registered; L is fenced within the session timeout.
    let offline = wait_elr(&mut cluster, &[f2], "L fenced", |s| {
        s.leader == -1 && !s.isr.contains(&f2) && (elr_on == s.isr.is_empty())
    })?;
    if elr_on {
        ensure!(
            offline.elr == set(&[f1, leader]) && offline.last_known == set(&[leader]),
            "F1 and L eligible, L the last known leader: {offline:?}"
        );
    } else {
        ensure!(
            offline.isr == set(&[leader]),
            "L stays the last ISR member: {offline:?}"
        );
    }

    cluster.restart_node(f1)?;
    let after_f1 = wait_elr(&mut cluster, &[f1], "F1 registered", |_| true)?;
    if elr_on {
        let led = wait_elr(&mut cluster, &[f1], "F1 elected", |s| s.leader == f1)?;
        ensure!(led.isr.contains(&f1), "F1 leads from the ISR: {led:?}");
    } else {
        ensure!(
            after_f1.leader == -1,
            "without ELR F1 may not lead: {after_f1:?}"
        );
    }
    ensure!(
        after_f1.leader != f2,
        "the stale replica F2 never leads: {after_f1:?}"
    );

    cluster.restart_node(leader)?;
    wait_elr(&mut cluster, &[4, 5, 6], "the ISR whole again", |s| {
        s.leader > 0 && s.isr.len() == 3 && s.elr.is_empty() && s.last_known.is_empty()
    })?;
    read_back_exactly(&bootstrap, &acked)
}

fn set(ids: &[i32]) -> BTreeSet<i32> {
    ids.iter().copied().collect()
}

/// `count` records `prefix-i`, idempotent, acks=all; all must be acknowledged.
fn produce(bootstrap: &str, prefix: &str, count: usize) -> Result<Vec<String>> {
    let producer = producer_at(
        bootstrap,
        &[
            ("acks", "all"),
            ("enable.idempotence", "true"),
            ("message.timeout.ms", "30000"),
        ],
    )?;
    let values: Vec<String> = (0..count).map(|i| format!("{prefix}-{i}")).collect();
    let payloads: Vec<&[u8]> = values.iter().map(|v| v.as_bytes()).collect();
    send_all(&producer, TOPIC, &payloads)?;
    Ok(values)
}

/// Every acknowledged value, once each, in order, and nothing else.
fn read_back_exactly(bootstrap: &str, acked: &[String]) -> Result<()> {
    let consumer = consumer_at(bootstrap, &[])?;
    assign_from_beginning(&consumer, TOPIC, &[0])?;
    let records = drain(&consumer, &[0], acked.len(), Duration::from_secs(30))?;
    let read: Vec<String> = records.iter().map(|r| r.value_str()).collect();
    ensure!(
        read == acked,
        "read {} records, acknowledged {}; first difference at {:?}",
        read.len(),
        acked.len(),
        read.iter().zip(acked).position(|(a, b)| a != b)
    );
    Ok(())
}

/// The ELR fields of `elr`-0 from the first of `nodes` that answers, once
/// `check` accepts them (30 s at most).
fn wait_elr(
    cluster: &mut Cluster,
    nodes: &[i32],
    what: &str,
    check: impl Fn(&Elr) -> bool,
) -> Result<Elr> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = None;
    loop {
        for &node in nodes {
            if !cluster.node(node).is_running() {
                continue;
            }
            if let Ok(state) = describe(cluster, node) {
                if check(&state) {
                    return Ok(state);
                }
                seen = Some(state);
            }
        }
        if Instant::now() > deadline {
            bail!(
                "timed out waiting for {what}; last seen {seen:?}\n{}",
                cluster.logs()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn describe(cluster: &mut Cluster, node: i32) -> Result<Elr> {
    let mut client = Client::connect(cluster.node(node))?;
    let request = DescribeTopicPartitionsRequest::default().with_topics(vec![
        TopicRequest::default().with_name(TopicName(StrBytes::from_static_str(TOPIC))),
    ]);
    let response = client.send(&request, 0)?;
    let topic = response.topics.first().context("no topic")?;
    ensure!(topic.error_code == 0, "topic error {}", topic.error_code);
    let p = topic.partitions.first().context("no partition")?;
    let ids = |v: &[kafka_protocol::messages::BrokerId]| v.iter().map(|b| b.0).collect();
    Ok(Elr {
        leader: p.leader_id.0,
        isr: ids(&p.isr_nodes),
        elr: ids(p.eligible_leader_replicas.as_deref().unwrap_or_default()),
        last_known: ids(p.last_known_elr.as_deref().unwrap_or_default()),
    })
}

/// The finalized level of the ELR feature in node `node`'s ApiVersions (0
/// when not listed).
fn finalized_level(cluster: &mut Cluster, node: i32) -> Result<i16> {
    let mut client = Client::connect(cluster.node(node))?;
    let response = client.send(&ApiVersionsRequest::default(), 3)?;
    ensure!(
        response
            .supported_features
            .iter()
            .any(|f| f.name.as_str() == ELR_FEATURE && f.max_version == 1),
        "{ELR_FEATURE} 0-1 supported: {:?}",
        response.supported_features
    );
    Ok(response
        .finalized_features
        .iter()
        .find(|f| f.name.as_str() == ELR_FEATURE)
        .map_or(0, |f| f.max_version_level))
}

/// `kafka-features.sh downgrade --feature eligible.leader.replicas.version=0`.
fn downgrade_elr(cluster: &mut Cluster) -> Result<()> {
    let mut client = Client::connect(cluster.node(4))?;
    let request = UpdateFeaturesRequest::default()
        .with_timeout_ms(30_000)
        .with_feature_updates(vec![FeatureUpdateKey::default()
            .with_feature(StrBytes::from_static_str(ELR_FEATURE))
            .with_max_version_level(0)
            .with_upgrade_type(2)]);
    let response = client.send(&request, 1)?;
    ensure!(response.error_code == 0, "UpdateFeatures: {response:?}");
    Ok(())
}
