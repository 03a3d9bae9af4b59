//! A real 3-node cluster on 127.0.0.1-3 (same ports per node), real Kafka
//! clients, SIGKILL as the failure: acknowledged acks=all messages survive
//! repeated leader deaths exactly once and in order; min.insync.replicas
//! refuses acks=all with two nodes down while acks=1 still works; a killed
//! follower catches up and rejoins the ISR; a leader cut off from the
//! cluster (frozen with SIGSTOP while the others elect a new leader, then
//! resumed with a produce already waiting on its socket) acknowledges no
//! acks=all write — no split-brain.
//!
//! The tests share the machine's two cores, so they run one at a time.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use bytes::Bytes;
use common::clients::{assign_from_beginning, consumer_at, drain, producer_at};
use common::cluster::{Cluster, FAST_FAILOVER};
use common::kafka_client::Client;
use rdkafka::producer::FutureRecord;

static SERIAL: Mutex<()> = Mutex::new(());

const NOT_ENOUGH_REPLICAS: i16 = 19;
/// `FAST_FAILOVER`, and groups rebalance at once.
fn flags() -> Vec<&'static str> {
    let mut flags = FAST_FAILOVER.to_vec();
    flags.extend_from_slice(&["--group-initial-rebalance-delay-ms", "0"]);
    flags
}

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn create(cluster: &mut Cluster, topic: &str, partitions: i32) -> Result<()> {
    let mut client = Client::connect(cluster.node(1))?;
    client.create_topic_replicated(topic, partitions, 3, &[("min.insync.replicas", "2")])?;
    cluster.wait_for_full_isr(topic, Duration::from_secs(20))?;
    Ok(())
}

/// Produces until the partition accepts (retriable errors right after
/// creation or a leader change), failing after `timeout`.
fn produce_until_ok(
    client: &mut Client,
    topic: &str,
    values: &[Bytes],
    acks: i16,
    timeout: Duration,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let (code, _) = client.produce_values_acks(topic, values, acks)?;
        if code == 0 {
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "produce (acks={acks}) kept failing with error {code}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn leader_failover_loses_no_acknowledged_message() -> Result<()> {
    let _serial = serial();
    let mut cluster = Cluster::start(3, &flags())?;
    let topic = "failover";
    let partitions = 3;
    create(&mut cluster, topic, partitions)?;
    let bootstrap = cluster.bootstrap();

    // Producer thread: acks=all, idempotent, a bounded number of messages
    // at a bounded rate; each value is "partition:sequence".
    let per_partition = 2_500;
    let producer_thread = std::thread::spawn(move || -> Result<Vec<(i32, u64, i64)>> {
        let producer = producer_at(
            &bootstrap,
            &[
                ("acks", "all"),
                ("enable.idempotence", "true"),
                ("message.timeout.ms", "90000"),
                ("linger.ms", "2"),
            ],
        )?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async move {
            let mut pending = Vec::new();
            let start = Instant::now();
            for seq in 0..per_partition as u64 {
                for p in 0..partitions {
                    let value = format!("{p}:{seq}");
                    let future = producer
                        .send_result(
                            FutureRecord::<(), _>::to("failover")
                                .partition(p)
                                .payload(&value),
                        )
                        .map_err(|(e, _)| anyhow::anyhow!("enqueue failed: {e}"))?;
                    pending.push((p, seq, future));
                }
                // ~500 messages/s per partition: the run spans the kills.
                let due = Duration::from_millis(seq * 2);
                if let Some(wait) = due.checked_sub(start.elapsed()) {
                    tokio::time::sleep(wait).await;
                }
            }
            let mut acked = Vec::new();
            for (p, seq, future) in pending {
                if let Ok(Ok(delivery)) = future.await {
                    acked.push((p, seq, delivery.offset));
                }
            }
            Ok(acked)
        })
    });

    // Kill the leader of partition 0, 1, 2 in turn while the producer runs.
    let mut kills = 0;
    for round in 0..3 {
        std::thread::sleep(Duration::from_millis(800));
        let views = cluster.partitions(topic)?;
        let victim = views[round % views.len()].leader;
        ensure!(victim > 0, "partition {round} has no leader: {views:?}");
        cluster.node(victim).kill_hard()?;
        kills += 1;
        cluster
            .wait_for(
                topic,
                Duration::from_secs(20),
                "a new leader after SIGKILL",
                |ps| ps.iter().all(|p| p.leader > 0 && p.leader != victim),
            )
            .with_context(|| cluster.logs())?;
        cluster.node(victim).respawn()?;
        cluster
            .node(victim)
            .finish_start()
            .with_context(|| cluster.logs())?;
        cluster
            .wait_for(topic, Duration::from_secs(40), "the ISR back to 3", |ps| {
                ps.iter().all(|p| p.isr.len() == 3)
            })
            .with_context(|| cluster.logs())?;
    }

    let acked = producer_thread
        .join()
        .map_err(|_| anyhow::anyhow!("producer thread panicked"))??;
    ensure!(kills == 3);
    ensure!(
        acked.len() > (per_partition * 3) / 2,
        "too few acknowledged: {} (logs:\n{})",
        acked.len(),
        cluster.logs()
    );

    // Read everything back from whoever leads now.
    let consumer = consumer_at(&cluster.bootstrap(), &[])?;
    let ids: Vec<i32> = (0..partitions).collect();
    assign_from_beginning(&consumer, topic, &ids)?;
    let records = drain(&consumer, &ids, acked.len(), Duration::from_secs(60))?;
    let mut seen: HashMap<(i32, u64), usize> = HashMap::new();
    let mut last: BTreeMap<i32, u64> = BTreeMap::new();
    for r in &records {
        let value = r.value_str();
        let (p, seq) = value.split_once(':').context("value without ':'")?;
        let (p, seq): (i32, u64) = (p.parse()?, seq.parse()?);
        ensure!(
            p == r.partition,
            "record {value} in partition {}",
            r.partition
        );
        if let Some(prev) = last.insert(p, seq) {
            ensure!(
                seq > prev,
                "partition {p}: {seq} after {prev} (reordered or duplicated)"
            );
        }
        *seen.entry((p, seq)).or_default() += 1;
    }
    let mut missing = Vec::new();
    for (p, seq, _) in &acked {
        match seen.get(&(*p, *seq)) {
            Some(1) => {}
            Some(n) => bail!("acknowledged {p}:{seq} present {n} times"),
            None => missing.push(format!("{p}:{seq}")),
        }
    }
    ensure!(
        missing.is_empty(),
        "{} acknowledged messages lost, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    Ok(())
}

#[test]
fn min_insync_replicas_refuses_acks_all_with_two_nodes_down() -> Result<()> {
    let _serial = serial();
    let mut cluster = Cluster::start(3, &flags())?;
    let topic = "min-isr";
    create(&mut cluster, topic, 1)?;
    let view = cluster.partitions(topic)?.remove(0);
    let leader = view.leader;
    let followers = view.followers();
    let value = [Bytes::from_static(b"x")];

    let mut client = Client::connect(cluster.node(leader))?;
    // The leader may apply the new topic a moment after the node that
    // created it (UNKNOWN_TOPIC_OR_PARTITION is retriable for clients).
    produce_until_ok(&mut client, topic, &value, -1, Duration::from_secs(10))?;

    // First follower down: the controller fences it and the ISR shrinks to 2.
    cluster.node(followers[0]).kill_hard()?;
    cluster.wait_for(
        topic,
        Duration::from_secs(20),
        "the ISR to drop the dead follower",
        |ps| ps[0].isr.len() == 2,
    )?;
    let (code, _) = client.produce_values_acks(topic, &value, -1)?;
    ensure!(code == 0, "acks=all with 2 in-sync nodes: error {code}");

    // Second follower down: quorum lost, one replica left fetching.
    cluster.node(followers[1]).kill_hard()?;
    cluster.poll_until(
        Duration::from_secs(20),
        Duration::from_millis(300),
        |_| Ok(client.produce_values_acks(topic, &value, -1)?.0),
        |&code| code == NOT_ENOUGH_REPLICAS,
        |code| {
            format!("acks=all with one live replica never failed NOT_ENOUGH_REPLICAS (last {code})")
        },
    )?;
    let (code, _) = client.produce_values_acks(topic, &value, 1)?;
    ensure!(code == 0, "acks=1 with one live replica: error {code}");

    // A node returns: acks=all recovers.
    cluster.node(followers[1]).respawn()?;
    cluster
        .node(followers[1])
        .finish_start()
        .with_context(|| cluster.logs())?;
    cluster.poll_until(
        Duration::from_secs(40),
        Duration::from_millis(300),
        |_| Ok(client.produce_values_acks(topic, &value, -1)?.0),
        |&code| code == 0,
        |code| format!("acks=all did not recover after a node returned (last {code})"),
    )?;
    Ok(())
}

#[test]
fn killed_follower_catches_up_and_rejoins_the_isr() -> Result<()> {
    let _serial = serial();
    let mut cluster = Cluster::start(3, &flags())?;
    let topic = "catch-up";
    create(&mut cluster, topic, 1)?;
    let (leader, follower) = cluster.kill_a_follower(topic)?;

    let mut client = Client::connect(cluster.node(leader))?;
    produce_until_ok(
        &mut client,
        topic,
        &[Bytes::from_static(b"first")],
        -1,
        Duration::from_secs(10),
    )?;
    let values: Vec<Bytes> = (0..100).map(|i| Bytes::from(format!("v{i:04}"))).collect();
    for _ in 0..20 {
        let (code, _) = client.produce_values_acks(topic, &values, -1)?;
        ensure!(code == 0, "acks=all with 2 of 3: error {code}");
    }
    cluster.restart_follower(topic, follower)?;
    let leo = |node: &common::Broker| -> Result<i64> {
        let text = node.metrics_text()?;
        common::prom::parse(&text)
            .into_iter()
            .find(|s| s.name == "chronik_log_end_offset" && s.label("topic") == Some(topic))
            .map(|s| s.value as i64)
            .context("no chronik_log_end_offset sample")
    };
    let leader_leo = leo(cluster.node(leader))?;
    ensure!(leader_leo == 2001, "leader log end {leader_leo}");
    let follower_leo = leo(cluster.node(follower))?;
    ensure!(
        follower_leo == leader_leo,
        "follower at {follower_leo}, leader at {leader_leo}\n{}",
        cluster.logs()
    );
    Ok(())
}

#[test]
fn isolated_old_leader_acknowledges_no_acks_all_write() -> Result<()> {
    let _serial = serial();
    let mut cluster = Cluster::start(3, &flags())?;
    let topic = "split-brain";
    create(&mut cluster, topic, 1)?;
    let old = cluster.partitions(topic)?.remove(0).leader;
    let mut stale_client = Client::connect(cluster.node(old))?;
    produce_until_ok(
        &mut stale_client,
        topic,
        &[Bytes::from_static(b"before")],
        -1,
        Duration::from_secs(10),
    )?;

    // Cut the leader off; the others fence it and elect a new leader.
    cluster.node(old).pause()?;
    let result = (|| -> Result<()> {
        let new_leader =
            cluster.new_leader_of(topic, old, "a new leader while the old one is cut off")?;
        let mut new_client = Client::connect(cluster.node(new_leader))?;
        produce_until_ok(
            &mut new_client,
            topic,
            &[Bytes::from_static(b"after")],
            -1,
            Duration::from_secs(10),
        )?;
        Ok(())
    })();
    // A write sent to the old leader while it is still cut off: it reads it
    // first thing when it resumes, before it can learn that it was deposed.
    let stale = std::thread::spawn(move || {
        stale_client.produce_values_acks(topic, &[Bytes::from_static(b"stale")], -1)
    });
    std::thread::sleep(Duration::from_millis(300));
    cluster.node(old).resume()?;
    result?;
    let (code, _) = stale
        .join()
        .map_err(|_| anyhow::anyhow!("stale producer panicked"))??;
    ensure!(
        code != 0,
        "the deposed leader acknowledged an acks=all write"
    );

    // The cluster's log holds the acknowledged writes and not the stale one.
    cluster.wait_for(
        topic,
        Duration::from_secs(40),
        "the old leader back in the ISR",
        |ps| ps[0].isr.len() == 3,
    )?;
    let consumer = consumer_at(&cluster.bootstrap(), &[])?;
    assign_from_beginning(&consumer, topic, &[0])?;
    let values: Vec<String> = drain(&consumer, &[0], 2, Duration::from_secs(30))?
        .iter()
        .map(|r| r.value_str())
        .collect();
    ensure!(
        values == ["before", "after"],
        "log after healing: {values:?}"
    );
    Ok(())
}

/// Attack: a client sends Fetch with a follower's replica id at the
/// leader's log end, claiming that follower has replicated what it has not
/// (the real follower is frozen). The leader used to count it and
/// acknowledge acks=all without replication. A replica fetch is honoured
/// only from that broker's registered host: the spoof gets
/// TOPIC_AUTHORIZATION_FAILED and the write is not acknowledged.
#[test]
fn a_spoofed_replica_fetch_cannot_acknowledge_acks_all() -> Result<()> {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
    let _serial = serial();
    let mut cluster = Cluster::start(3, &flags())?;
    let topic = "spoof";
    create(&mut cluster, topic, 1)?;
    let view = cluster.partitions(topic)?.remove(0);
    let leader = view.leader;
    // Test clients connect from 127.0.0.1, node 1's host: impersonate another.
    let victim = *view
        .replicas
        .iter()
        .find(|&&r| r != leader && r != 1)
        .context("no follower other than node 1")?;
    let other = *view
        .replicas
        .iter()
        .find(|&&r| r != leader && r != victim)
        .context("no third replica")?;
    let mut client = Client::connect(cluster.node(leader))?;
    produce_until_ok(
        &mut client,
        topic,
        &[Bytes::from_static(b"replicated")],
        -1,
        Duration::from_secs(10),
    )?;

    cluster.node(other).kill_hard()?;
    cluster.wait_for(
        topic,
        Duration::from_secs(20),
        "the ISR to drop the killed follower",
        |ps| ps[0].isr.len() == 2,
    )?;
    cluster.node(victim).pause()?;
    let leader_node = cluster.node(leader).kafka_addr();
    let writer = {
        let mut client = Client::connect(cluster.node(leader))?;
        std::thread::spawn(move || {
            client.produce_values_acks(topic, &[Bytes::from_static(b"never replicated")], -1)
        })
    };
    let mut spoofer = Client::connect(cluster.node(leader))?;
    let mut answers = Vec::new();
    for _ in 0..20 {
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(victim))
            .with_max_wait_ms(0)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_static_str("spoof")))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(2)
                    .with_partition_max_bytes(1 << 20)])]);
        let response = spoofer.send(&request, 12)?;
        answers.push(response.responses[0].partitions[0].error_code);
        std::thread::sleep(Duration::from_millis(100));
    }
    let (code, _) = writer
        .join()
        .map_err(|_| anyhow::anyhow!("writer panicked"))??;
    cluster.node(victim).resume()?;
    ensure!(
        answers.iter().all(|&c| c == TOPIC_AUTHORIZATION_FAILED),
        "spoofed replica fetches answered {answers:?} (leader {leader_node})"
    );
    ensure!(
        code != 0,
        "acks=all acknowledged while the only other ISR member was frozen"
    );
    Ok(())
}
