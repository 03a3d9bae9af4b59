//! Share groups (KIP-932) against the real broker, speaking the share APIs
//! directly (`common::share`): acquisition and its locks, delivery counts
//! and the delivery limit, Kafka's error codes for malformed ShareFetch and
//! ShareAcknowledge requests (overlapping batches, ranges past the end,
//! unknown members and sessions, hostile bytes), `share.version` gating,
//! and acknowledged state kept across a crash and restart and across a
//! partition-leader and a share-coordinator failover on 3 nodes.
//! Kafka's own share-consumer tools are run against the broker by the
//! compat matrix's `share` checks.

mod common;

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use common::broker::Broker;
use common::cluster::{Cluster, FAST_FAILOVER};
use common::error_codes::{
    INVALID_RECORD_STATE, INVALID_REQUEST, INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_NOT_FOUND,
    UNKNOWN_MEMBER_ID, UNSUPPORTED_VERSION,
};
use common::kafka_client::Client;
use common::share::{ShareMember, ACCEPT, REJECT, RELEASE};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::{
    DescribeShareGroupOffsetsRequest, IncrementalAlterConfigsRequest, UpdateFeaturesRequest,
};
use kafka_protocol::protocol::StrBytes;

const TOPIC: &str = "queue";

/// Sets share-group configs (IncrementalAlterConfigs on the GROUP resource).
fn set_group_configs(client: &mut Client, group: &str, configs: &[(&str, &str)]) -> Result<()> {
    let resource = AlterConfigsResource::default()
        .with_resource_type(32)
        .with_resource_name(StrBytes::from_string(group.to_string()))
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    AlterableConfig::default()
                        .with_name(StrBytes::from_string(k.to_string()))
                        .with_config_operation(0)
                        .with_value(Some(StrBytes::from_string(v.to_string())))
                })
                .collect(),
        );
    let response = client.send(
        &IncrementalAlterConfigsRequest::default().with_resources(vec![resource]),
        1,
    )?;
    let code = response.responses.first().map_or(-1, |r| r.error_code);
    ensure!(
        code == 0,
        "IncrementalAlterConfigs on group {group}: error {code} {:?}",
        response.responses.first().map(|r| &r.error_message)
    );
    Ok(())
}

/// A topic of one partition with `records` records, and a member of
/// `group` (reading from the earliest offset) that has joined.
fn setup(
    client: &mut Client,
    group: &str,
    records: i32,
    extra: &[(&str, &str)],
) -> Result<ShareMember> {
    if client.topic_id(TOPIC)?.is_nil() {
        client.create_topic(TOPIC)?;
    }
    if records > 0 {
        let (code, _) = client.produce(TOPIC, -1, -1, -1, records)?;
        ensure!(code == 0, "produce: error {code}");
    }
    let mut configs = vec![("share.auto.offset.reset", "earliest")];
    configs.extend_from_slice(extra);
    set_group_configs(client, group, &configs)?;
    let topic_id = client.topic_id(TOPIC)?;
    let mut member = ShareMember::new(group, TOPIC, topic_id);
    let joined = member.heartbeat(client)?;
    ensure!(joined.error_code == 0, "join: error {}", joined.error_code);
    Ok(member)
}

#[test]
fn members_acquire_disjoint_records_and_acknowledged_ones_are_not_delivered_again() -> Result<()> {
    let broker = Broker::start(&[])?;
    let mut client = Client::connect(&broker)?;
    let mut a = setup(&mut client, "g-basic", 10, &[])?;
    let mut b = ShareMember::new("g-basic", TOPIC, a.topic_id);
    ensure!(b.heartbeat(&mut client)?.error_code == 0);
    let got_a = a.fetch_some(&mut client, 10)?;
    ensure!(
        got_a.offsets() == (0..10).collect::<Vec<_>>(),
        "a acquired {:?}",
        got_a.runs
    );
    ensure!(
        got_a.runs.iter().all(|r| r.2 == 1),
        "first delivery: {:?}",
        got_a.runs
    );
    let got_b = b.fetch(&mut client, &[], 200)?;
    ensure!(
        got_b.runs.is_empty(),
        "b acquired what a holds: {:?}",
        got_b.runs
    );
    // a accepts 0-4 and releases 5-9 (ShareAcknowledge: a ShareFetch
    // would acquire them again at once): only 5-9 come to b, delivered twice.
    let (top, partition) =
        a.acknowledge(&mut client, &[(0, 4, vec![ACCEPT]), (5, 9, vec![RELEASE])])?;
    ensure!(top == 0 && partition == 0, "ack error {top}/{partition}");
    let again = b.fetch_some(&mut client, 10)?;
    ensure!(again.runs == vec![(5, 9, 2)], "b acquired {:?}", again.runs);
    let (top, partition) = b.acknowledge(&mut client, &[(5, 9, vec![ACCEPT])])?;
    ensure!(
        top == 0 && partition == 0,
        "ShareAcknowledge: {top}/{partition}"
    );
    let none = a.fetch(&mut client, &[], 200)?;
    ensure!(
        none.runs.is_empty(),
        "accepted records came back: {:?}",
        none.runs
    );
    Ok(())
}

#[test]
fn a_closed_session_redelivers_and_the_delivery_limit_archives() -> Result<()> {
    let broker = Broker::start(&[])?;
    let mut client = Client::connect(&broker)?;
    let mut a = setup(
        &mut client,
        "g-limit",
        4,
        &[("share.delivery.count.limit", "2")],
    )?;
    let got = a.fetch_some(&mut client, 10)?;
    ensure!(got.offsets() == vec![0, 1, 2, 3], "{:?}", got.runs);
    // Offset 0 is rejected: archived at once. The session closes holding
    // 1-3: they are released.
    let closed = a.close(&mut client, &[(0, 0, REJECT)])?;
    ensure!(
        closed.error == 0 && closed.ack_error == 0,
        "close: {closed:?}"
    );
    let second = a.fetch_some(&mut client, 10)?;
    ensure!(
        second.runs == vec![(1, 3, 2)],
        "second delivery: {:?}",
        second.runs
    );
    // Released at the limit (2 deliveries): archived, never delivered again.
    a.fetch(&mut client, &[(1, 3, RELEASE)], 0)?;
    let third = a.fetch(&mut client, &[], 300)?;
    ensure!(
        third.runs.is_empty(),
        "delivered past the limit: {:?}",
        third.runs
    );
    let (_, more) = client.produce(TOPIC, -1, -1, -1, 1)?;
    let next = a.fetch_some(&mut client, 10)?;
    ensure!(
        next.runs == vec![(4, 4, 1)],
        "after the archive, offset {more}: {:?}",
        next.runs
    );
    Ok(())
}

#[test]
fn an_expired_lock_redelivers_to_another_member_with_a_higher_delivery_count() -> Result<()> {
    let broker = Broker::start(&[])?;
    let mut client = Client::connect(&broker)?;
    // Kafka's floor for share.record.lock.duration.ms is 15 s.
    let mut a = setup(
        &mut client,
        "g-lock",
        3,
        &[("share.record.lock.duration.ms", "15000")],
    )?;
    let mut b = ShareMember::new("g-lock", TOPIC, a.topic_id);
    ensure!(b.heartbeat(&mut client)?.error_code == 0);
    ensure!(a.fetch_some(&mut client, 10)?.offsets() == vec![0, 1, 2]);
    let start = Instant::now();
    // a goes silent holding 0-2; b gets them once the lock runs out.
    let mut got = Vec::new();
    while got.is_empty() && start.elapsed() < Duration::from_secs(30) {
        got = b.fetch(&mut client, &[], 1000)?.runs;
    }
    let waited = start.elapsed();
    ensure!(got == vec![(0, 2, 2)], "after {waited:?}: {got:?}");
    ensure!(
        waited >= Duration::from_secs(14),
        "redelivered after only {waited:?}"
    );
    // a's late acknowledgement is refused: it no longer holds them.
    let late = a.fetch(&mut client, &[(0, 2, ACCEPT)], 0)?;
    ensure!(late.ack_error == INVALID_RECORD_STATE, "late ack: {late:?}");
    // The broker's counters saw it: 3 released by the lock, 3 redelivered.
    let metrics = broker.metrics_text()?;
    let value = |name: &str| -> f64 {
        metrics
            .lines()
            .find(|l| l.starts_with(name) && !l.starts_with('#'))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    ensure!(
        value("chronik_share_lock_expired_records_total") >= 3.0,
        "lock-expired counter:\n{metrics}"
    );
    ensure!(
        value("chronik_share_redelivered_records_total") >= 3.0,
        "redelivered counter"
    );
    ensure!(value("chronik_share_sessions") >= 1.0, "sessions gauge");
    Ok(())
}

#[test]
fn malformed_share_requests_get_kafkas_error_codes() -> Result<()> {
    let broker = Broker::start(&[])?;
    let mut client = Client::connect(&broker)?;
    let mut a = setup(&mut client, "g-bad", 5, &[])?;
    ensure!(a.fetch_some(&mut client, 10)?.offsets().len() == 5);
    let overlap = a.fetch(&mut client, &[(0, 2, ACCEPT), (2, 3, ACCEPT)], 0)?;
    ensure!(
        overlap.ack_error == INVALID_REQUEST,
        "overlapping batches: {overlap:?}"
    );
    let past_end = a.fetch(&mut client, &[(3, 50, ACCEPT)], 0)?;
    ensure!(
        past_end.ack_error == INVALID_RECORD_STATE,
        "range past the end: {past_end:?}"
    );
    let backwards = a.fetch(&mut client, &[(3, 1, ACCEPT)], 0)?;
    ensure!(
        backwards.ack_error == INVALID_REQUEST,
        "first > last: {backwards:?}"
    );
    let bad_type = a.fetch(&mut client, &[(0, 0, 9)], 0)?;
    ensure!(
        bad_type.ack_error == INVALID_REQUEST,
        "unknown type: {bad_type:?}"
    );
    // Nothing above applied: all five are still a's to accept.
    let ok = a.fetch(&mut client, &[(0, 4, ACCEPT)], 0)?;
    ensure!(ok.ack_error == 0, "the valid ack: {ok:?}");

    let wrong_epoch = a.fetch_at_epoch(&mut client, a.session_epoch + 5, &[])?;
    ensure!(
        wrong_epoch.error == INVALID_SHARE_SESSION_EPOCH,
        "{wrong_epoch:?}"
    );
    let mut stranger = ShareMember::new("g-bad", TOPIC, a.topic_id);
    let no_session = stranger.fetch_at_epoch(&mut client, 3, &[])?;
    ensure!(
        no_session.error == SHARE_SESSION_NOT_FOUND,
        "{no_session:?}"
    );
    stranger.session_epoch = 1;
    let (code, _) = stranger.acknowledge(&mut client, &[(0, 0, vec![ACCEPT])])?;
    ensure!(
        code == SHARE_SESSION_NOT_FOUND,
        "ShareAcknowledge from an unknown member: {code}"
    );
    stranger.session_epoch = 0;
    let (code, _) = stranger.acknowledge(&mut client, &[(0, 0, vec![ACCEPT])])?;
    ensure!(
        code == INVALID_SHARE_SESSION_EPOCH,
        "ShareAcknowledge at epoch 0: {code}"
    );
    // A heartbeat of an unknown member, and of a consumer group's id.
    let mut ghost = ShareMember::new("g-bad", TOPIC, a.topic_id);
    ghost.epoch = 7;
    ensure!(ghost.heartbeat(&mut client)?.error_code == UNKNOWN_MEMBER_ID);
    let mut nameless = ShareMember::new("g-bad", TOPIC, a.topic_id);
    nameless.id.clear();
    ensure!(nameless.heartbeat(&mut client)?.error_code == INVALID_REQUEST);

    // Hostile bytes: a ShareFetch v2 cut inside its body, then a length
    // that lies. The broker answers or drops that connection only.
    for body in [
        vec![0u8; 3],
        vec![0x05, b'g', b'r', b'p', 0xff, 0xff, 0xff, 0xff, 0x0f],
    ] {
        let mut raw = common::wire::connect(broker.kafka_addr())?;
        let mut payload = common::wire::header_v2(78, 2, 1, "hostile");
        payload.extend_from_slice(&body);
        common::wire::send(&mut raw, &common::wire::frame(&payload))?;
        let _ = common::wire::read_reply(&mut raw, Duration::from_secs(5));
    }
    let still = a.fetch(&mut client, &[], 0)?;
    ensure!(
        still.error == 0,
        "the broker still serves others: {still:?}"
    );
    Ok(())
}

#[test]
fn share_groups_answer_unsupported_version_while_share_version_is_0() -> Result<()> {
    let broker = Broker::start(&[])?;
    let mut client = Client::connect(&broker)?;
    let mut a = setup(&mut client, "g-gate", 1, &[])?;
    let downgrade =
        UpdateFeaturesRequest::default().with_feature_updates(vec![FeatureUpdateKey::default()
            .with_feature(StrBytes::from_static_str("share.version"))
            .with_max_version_level(0)
            .with_upgrade_type(2)]);
    let response = client.send(&downgrade, 1)?;
    ensure!(response.error_code == 0, "downgrade: {response:?}");
    let start = Instant::now();
    loop {
        let code = a.heartbeat(&mut client)?.error_code;
        if code == UNSUPPORTED_VERSION {
            break;
        }
        ensure!(
            start.elapsed() < Duration::from_secs(10),
            "heartbeat still answered {code}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    ensure!(a.fetch(&mut client, &[], 0)?.error == UNSUPPORTED_VERSION);
    Ok(())
}

/// The share-partition start offset DescribeShareGroupOffsets reports.
fn start_offset(client: &mut Client, group: &str) -> Result<i64> {
    use kafka_protocol::messages::describe_share_group_offsets_request::{
        DescribeShareGroupOffsetsRequestGroup, DescribeShareGroupOffsetsRequestTopic,
    };
    let request = DescribeShareGroupOffsetsRequest::default().with_groups(vec![
        DescribeShareGroupOffsetsRequestGroup::default()
            .with_group_id(common::kip848::group_id(group))
            .with_topics(Some(vec![DescribeShareGroupOffsetsRequestTopic::default()
                .with_topic_name(kafka_protocol::messages::TopicName(
                    StrBytes::from_static_str(TOPIC),
                ))
                .with_partitions(vec![0])])),
    ]);
    let response = client.send(&request, 0)?;
    let p = response
        .groups
        .iter()
        .flat_map(|g| &g.topics)
        .flat_map(|t| &t.partitions)
        .next()
        .context("no partition in DescribeShareGroupOffsets")?;
    ensure!(
        p.error_code == 0,
        "DescribeShareGroupOffsets: error {}",
        p.error_code
    );
    Ok(p.start_offset)
}

#[test]
fn acknowledged_state_survives_a_crash_and_restart() -> Result<()> {
    let mut broker = Broker::start(&[])?;
    let mut client = Client::connect(&broker)?;
    let mut a = setup(&mut client, "g-crash", 10, &[])?;
    ensure!(a.fetch_some(&mut client, 10)?.offsets().len() == 10);
    // 0-5 accepted, 7 rejected: answered once durable.
    let (top, p) = a.acknowledge(&mut client, &[(0, 5, vec![ACCEPT]), (7, 7, vec![REJECT])])?;
    ensure!(top == 0 && p == 0, "ShareAcknowledge {top}/{p}");
    ensure!(start_offset(&mut client, "g-crash")? == 6);
    broker.kill_hard()?;
    broker.restart_same_ports()?;
    let mut client = Client::connect(&broker)?;
    ensure!(
        start_offset(&mut client, "g-crash")? == 6,
        "start offset after the restart"
    );
    let mut b = ShareMember::new("g-crash", TOPIC, a.topic_id);
    ensure!(b.heartbeat(&mut client)?.error_code == 0);
    let got = b.fetch_some(&mut client, 20)?;
    // 6, 8, 9 were acquired, never acknowledged: delivered again; 0-5 and 7 never.
    ensure!(
        got.offsets() == vec![6, 8, 9],
        "after the restart: {:?}",
        got.runs
    );
    Ok(())
}

#[test]
fn a_leader_and_a_share_coordinator_failover_keep_the_acknowledged_state() -> Result<()> {
    let mut cluster = Cluster::start(3, FAST_FAILOVER)?;
    cluster.create_replicated(TOPIC, 1)?;
    let coordinator = cluster.coordinator_of("__share_group_state")?;
    let group_coordinator = cluster.coordinator_of("__consumer_offsets")?;
    let leader = cluster.partitions(TOPIC)?[0].leader;
    let mut admin = Client::connect(cluster.node(group_coordinator))?;
    set_group_configs(
        &mut admin,
        "g-fail",
        &[("share.auto.offset.reset", "earliest")],
    )?;
    let mut to_leader = Client::connect(cluster.node(leader))?;
    let (code, _) = to_leader.produce(TOPIC, -1, -1, -1, 20)?;
    ensure!(code == 0, "produce: {code}");
    let topic_id = to_leader.topic_id(TOPIC)?;
    let mut a = ShareMember::new("g-fail", TOPIC, topic_id);
    ensure!(a.heartbeat(&mut admin)?.error_code == 0);
    ensure!(a.fetch_some(&mut to_leader, 10)?.offsets().len() == 20);
    let (top, p) = a.acknowledge(&mut to_leader, &[(0, 9, vec![ACCEPT])])?;
    ensure!(top == 0 && p == 0, "ack before the failovers {top}/{p}");
    println!("partition leader {leader}, share coordinator {coordinator}, group coordinator {group_coordinator}");

    // The partition leader dies: a new leader reloads the state.
    cluster.node(leader).kill_hard()?;
    let new_leader = cluster.new_leader_of(TOPIC, leader, "a new partition leader")?;
    let mut to_new = Client::connect(cluster.node(new_leader))?;
    let mut b = ShareMember::new("g-fail", TOPIC, topic_id);
    let got = b.fetch_some(&mut to_new, 40)?;
    ensure!(
        got.offsets() == (10..20).collect::<Vec<_>>(),
        "after the leader failover: {:?}",
        got.runs
    );
    let (top, p) = b.acknowledge(&mut to_new, &[(10, 14, vec![ACCEPT])])?;
    ensure!(
        top == 0 && p == 0,
        "ack after the leader failover {top}/{p}"
    );
    let closed = b.close(&mut to_new, &[])?;
    ensure!(closed.error == 0, "closing b's session: {closed:?}");
    cluster.restart_node(leader)?;

    // The share coordinator dies: its successor loads the acknowledged
    // state from __share_group_state.
    let coordinator = cluster.coordinator_of("__share_group_state")?;
    cluster.node(coordinator).kill_hard()?;
    let successor = cluster.new_coordinator_of("__share_group_state", coordinator)?;
    let leader_now = cluster.new_leader_of(TOPIC, coordinator, "a partition leader")?;
    println!("share coordinator {coordinator} killed, {successor} took over; partition leader {leader_now}");
    let mut to_leader = Client::connect(cluster.node(leader_now))?;
    let mut c = ShareMember::new("g-fail", TOPIC, topic_id);
    let got = c.fetch_some(&mut to_leader, 60)?;
    // 15-19 are all that is left: 0-14 were accepted before the failovers.
    ensure!(
        got.offsets() == (15..20).collect::<Vec<_>>(),
        "after the coordinator failover: {:?}",
        got.runs
    );
    Ok(())
}
