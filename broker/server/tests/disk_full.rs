//! A full disk (issue 30, item 3), on real brokers whose data directory is
//! a small tmpfs the test mounts (skipped, with a message, without root).
//!
//! One node: an idempotent acks=all producer (the raw client: producer id,
//! epoch and sequences of its own, a failed batch retried with the same
//! sequence as a Kafka producer does) writes 1 KB records until appends
//! fail. Each failed Produce must be answered at once with
//! KAFKA_STORAGE_ERROR (56), never left to run into the request's timeout;
//! what was acknowledged stays readable while the disk is full; once a
//! filler file on the same tmpfs is deleted, the retried batch and new ones
//! are acknowledged without a restart; after a restart every acknowledged
//! record is there exactly once, in order, at the offset its answer gave.
//!
//! Three nodes, one follower's data directory a small tmpfs: when it fills,
//! the leader keeps acknowledging acks=all writes (the full follower leaves
//! the ISR at once (its directory offline, as below) and two members remain,
//! min.insync.replicas 2); once space returns the follower catches up and
//! rejoins the ISR, and no acknowledged record is lost. Topics created
//! while it is full reach its copy of the metadata log only once space
//! returns: that write waits for space (`chronik_metadata`'s
//! `retry_while_disk_full`) — before, openraft stopped the node's raft for
//! good on the error and it served a frozen metadata image until restarted.
//! (Kafka shuts a broker down when its metadata log directory fails,
//! KIP-858; waiting keeps the "resumes without a restart".)
//!
//! Three nodes, the leader's data directory a small tmpfs (issue 43): the
//! failed write takes the directory offline, the broker reports it in its
//! heartbeat, and the controller moves its leaderships and ISR places, as
//! Kafka does for an offline log directory; the producer follows the new
//! leader and keeps getting acknowledgements while the disk is still full.
//! Beyond Kafka (which needs a restart), once space returns the broker
//! reopens the directory (each log cut back to its durable offset), catches
//! up as a follower and rejoins every ISR; nothing acknowledged is lost or
//! written twice.
//!
//! Every failed Produce is answered at once with KAFKA_STORAGE_ERROR (56), as
//! Kafka answers an append's IOException ("Disk error when trying to access
//! log file on the disk", retriable), or NOT_LEADER_OR_FOLLOWER once the
//! partition has moved. The directory's state is `chronik_log::LogDirHealth`;
//! the watch that reports and reopens it is the server's `replica::log_dir`.

mod common;

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use bytes::Bytes;
use chronik_protocol::record_batch::parse_batches;
use kafka_protocol::records::{Compression, Record, RecordBatchDecoder};

use common::cluster::{Cluster, PartitionView, FAST_FAILOVER};
use common::kafka_client::{plain_record, Client};
use common::Broker;

const KAFKA_STORAGE_ERROR: i16 = 56;
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const LEADER_NOT_AVAILABLE: i16 = 5;
const REQUEST_TIMED_OUT: i16 = 7;
const NOT_ENOUGH_REPLICAS: i16 = 19;
/// Records per Produce, each `VALUE_BYTES` long.
const BATCH: i32 = 8;
const VALUE_BYTES: usize = 1000;
/// The Produce's timeout_ms: a storage error must come long before it.
const REQUEST_TIMEOUT_MS: i32 = 10_000;
/// Segments roll at 16 KiB, every other batch: the roll's own writes
/// (index files, a new segment) meet the full disk too.
const TOPIC_CONFIGS: &[(&str, &str)] = &[("segment.bytes", "16384")];
/// Topics created while a follower's disk is full (about 20 KB of metadata
/// log, more than the page its log file may still have room in).
const WHILE_FULL_TOPICS: usize = 40;

/// A tmpfs mounted for one test, unmounted when dropped (on panics too).
struct Tmpfs {
    path: PathBuf,
    filler: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (mount's syntax, e.g. "16m") at `path`.
    fn mount(path: &Path, size: &str) -> Result<Tmpfs> {
        std::fs::create_dir_all(path)?;
        run(
            "mount",
            &["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"],
            path,
        )?;
        Ok(Tmpfs {
            path: path.to_path_buf(),
            filler: path.join("filler"),
        })
    }

    /// Fills the filesystem with a filler file, then gives `headroom` bytes
    /// of it back: what is written next fails after about that much.
    fn fill_leaving(&self, headroom: u64) -> Result<()> {
        let mut file = File::create(&self.filler)?;
        let chunk = vec![0u8; 1 << 20];
        let mut written = 0u64;
        loop {
            match file.write(&chunk) {
                Ok(0) => break,
                Ok(n) => written += n as u64,
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(e) => return Err(e).context("writing the filler"),
            }
            ensure!(written < 1 << 30, "the tmpfs never filled");
        }
        OpenOptions::new()
            .write(true)
            .open(&self.filler)?
            .set_len(written.saturating_sub(headroom))?;
        Ok(())
    }

    /// Deletes the filler: the space returns.
    fn free(&self) -> Result<()> {
        match std::fs::remove_file(&self.filler) {
            Err(e) if e.kind() != ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }
}

/// Whether this process may mount a tmpfs (root); tests skip otherwise.
fn tmpfs_usable() -> bool {
    let Ok(dir) = tempfile::tempdir() else {
        return false;
    };
    let usable = Tmpfs::mount(dir.path(), "1m").is_ok();
    if !usable {
        eprintln!("skipped: mounting a tmpfs needs root");
    }
    usable
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // A broker still running keeps files open: detach it lazily then.
        if run("umount", &[], &self.path).is_err() {
            let _ = run("umount", &["-l"], &self.path);
        }
    }
}

fn run(program: &str, args: &[&str], path: &Path) -> Result<()> {
    let status = Command::new(program).args(args).arg(path).status()?;
    ensure!(
        status.success(),
        "{program} {args:?} {}: {status}",
        path.display()
    );
    Ok(())
}

/// A value that names its sequence number, `VALUE_BYTES` long.
fn value(seq: i32) -> Bytes {
    let mut v = format!("{seq:010}-").into_bytes();
    v.resize(VALUE_BYTES, b'x');
    Bytes::from(v)
}

/// An idempotent acks=all producer on one connection to a partition's
/// leader: the batch at `next_sequence` is sent until acknowledged.
struct Producer {
    client: Client,
    topic: String,
    partition: i32,
    producer_id: i64,
    epoch: i16,
    next_sequence: i32,
}

impl Producer {
    fn new(leader: &Broker, topic: &str, partition: i32) -> Result<Producer> {
        let mut client = Client::connect(leader)?;
        let (producer_id, epoch) = client.init_producer_id()?;
        Ok(Producer {
            client,
            topic: topic.to_string(),
            partition,
            producer_id,
            epoch,
            next_sequence: 0,
        })
    }

    /// Sends the next batch (again, if the last try failed): (error code,
    /// base offset, time to the answer). Sequences advance on success only.
    fn send_next(&mut self) -> Result<(i16, i64, Duration)> {
        let records: Vec<Record> = (0..BATCH)
            .map(|i| Record {
                producer_id: self.producer_id,
                producer_epoch: self.epoch,
                sequence: self.next_sequence + i,
                ..plain_record(i64::from(i), value(self.next_sequence + i))
            })
            .collect();
        let sent = Instant::now();
        let (error_code, base_offset) = self.client.produce_records_to(
            &self.topic,
            self.partition,
            &records,
            (-1, REQUEST_TIMEOUT_MS),
            Compression::None,
        )?;
        let elapsed = sent.elapsed();
        if error_code == 0 {
            ensure!(
                base_offset == i64::from(self.next_sequence),
                "sequence {} acknowledged at offset {base_offset}",
                self.next_sequence
            );
            self.next_sequence += BATCH;
        }
        Ok((error_code, base_offset, elapsed))
    }

    /// Talks to `broker` from now on (the partition's new leader), with the
    /// same producer id, epoch and sequence: a retried batch the old leader
    /// had replicated is answered as a duplicate, at its first offsets.
    fn reconnect(&mut self, broker: &Broker) -> Result<()> {
        self.client = Client::connect(broker)?;
        Ok(())
    }

    /// Records acknowledged so far (sequence = offset = value).
    fn acknowledged(&self) -> i32 {
        self.next_sequence
    }
}

/// The sequence numbers the values of `partition` name, from offset 0 to
/// the high watermark, each checked to sit at its own offset.
fn read_all(client: &mut Client, topic: &str, partition: i32) -> Result<Vec<i32>> {
    let mut out = Vec::new();
    let mut next = 0i64;
    for _ in 0..10_000 {
        let (error, high_watermark, mut records) =
            client.fetch_partition_from(topic, partition, next)?;
        ensure!(error == 0, "fetch from {next}: error {error}");
        if next >= high_watermark {
            return Ok(out);
        }
        let last = parse_batches(&records)
            .context("whole batches")?
            .last()
            .map(|b| b.last_offset())
            .context("a fetch below the high watermark returns a batch")?;
        next = last + 1;
        for set in RecordBatchDecoder::decode_all(&mut records)? {
            for r in set.records {
                let v = r.value.context("a record without a value")?;
                let seq: i32 = std::str::from_utf8(&v[..10])?.parse()?;
                ensure!(
                    i64::from(seq) == r.offset,
                    "value {seq} at offset {}",
                    r.offset
                );
                out.push(seq);
            }
        }
    }
    bail!("the partition never ended")
}

/// Exactly 0..count, once each, in order.
fn check_exactly(seen: &[i32], count: i32, when: &str) -> Result<()> {
    let first_wrong = seen.iter().zip(0..).position(|(s, i)| *s != i);
    ensure!(
        seen.len() == usize::try_from(count)? && first_wrong.is_none(),
        "{when}: read {} records, not 0..{count} once each in order (first wrong at index {first_wrong:?})",
        seen.len()
    );
    Ok(())
}

#[test]
fn a_full_disk_is_answered_at_once_and_writes_resume_when_space_returns() -> Result<()> {
    if !tmpfs_usable() {
        return Ok(());
    }
    let scratch = tempfile::tempdir()?;
    let tmpfs = Tmpfs::mount(&scratch.path().join("disk"), "16m")?;
    // Declared after the tmpfs, so dropped (killed) before it is unmounted.
    let mut broker =
        Broker::start_with_data_dir(&tmpfs.path.join("data"), &["--wal-profile", "low"])?;
    let topic = "disk-full";
    Client::connect(&broker)?.create_topic_with(topic, TOPIC_CONFIGS)?;
    let mut producer = Producer::new(&broker, topic, 0)?;
    tmpfs.fill_leaving(4 << 20)?;

    // Write until appends fail; each failure retries the same batch.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut failures: Vec<Duration> = Vec::new();
    let mut first_failure = None;
    while failures.len() < 5 {
        ensure!(
            Instant::now() < deadline,
            "appends never failed: {} acknowledged",
            producer.acknowledged()
        );
        let (error, _, elapsed) = producer.send_next()?;
        match error {
            0 => ensure!(failures.is_empty(), "an append succeeded after one failed"),
            KAFKA_STORAGE_ERROR => {
                first_failure.get_or_insert(producer.acknowledged());
                failures.push(elapsed);
            }
            other => bail!(
                "a Produce on a full disk answered {other} after {elapsed:?}\n{}",
                broker.log_tail(40)
            ),
        }
    }
    let acknowledged = producer.acknowledged();
    let slowest = failures.iter().max().copied().unwrap_or_default();
    eprintln!(
        "disk full after {acknowledged} acknowledged records; {} Produces answered \
         KAFKA_STORAGE_ERROR, the slowest in {slowest:?}",
        failures.len()
    );
    ensure!(
        acknowledged > 1000,
        "only {acknowledged} records fitted in 4 MiB"
    );
    ensure!(
        slowest < Duration::from_millis(u64::try_from(REQUEST_TIMEOUT_MS)? / 4),
        "a storage error took {slowest:?}: the Produce waited instead of failing"
    );
    ensure!(
        broker.log_tail(200).contains("append failed"),
        "the broker did not log the failed append"
    );

    // Reads go on while the disk is full.
    let mut reader = Client::connect(&broker)?;
    check_exactly(
        &read_all(&mut reader, topic, 0)?,
        acknowledged,
        "while full",
    )?;

    // Space returns: the retried batch and new ones are acknowledged.
    tmpfs.free()?;
    let freed = Instant::now();
    let mut resumed = None;
    for _ in 0..200 {
        let (error, _, _) = producer.send_next()?;
        match (error, resumed) {
            (0, None) => resumed = Some(freed.elapsed()),
            (0, Some(_)) => {}
            // The directory went offline: once the metadata log (on the
            // same disk) takes the controller's record of it, the sole
            // replica leads nothing until the directory is reopened.
            (KAFKA_STORAGE_ERROR | NOT_LEADER_OR_FOLLOWER | LEADER_NOT_AVAILABLE, None)
                if freed.elapsed() < Duration::from_secs(10) =>
            {
                std::thread::sleep(Duration::from_millis(50));
            }
            (other, _) => bail!("after space returned a Produce answered {other}"),
        }
        if producer.acknowledged() >= acknowledged + 50 * BATCH {
            break;
        }
    }
    let resumed = resumed.context("writes never resumed")?;
    let total = producer.acknowledged();
    eprintln!("writes resumed {resumed:?} after space returned; {total} acknowledged in all");
    ensure!(
        total >= acknowledged + 50 * BATCH,
        "only {total} acknowledged after space returned"
    );

    // A restart keeps every acknowledged record, once each, in order.
    broker.restart()?;
    let mut reader = Client::connect(&broker)?;
    check_exactly(&read_all(&mut reader, topic, 0)?, total, "after a restart")?;
    drop(broker);
    drop(tmpfs);
    Ok(())
}

/// Reads `partition` back from `leader`: exactly 0..count, once each, in
/// order; and the node whose disk filled is still running.
fn read_back_exactly(
    cluster: &mut Cluster,
    (topic, partition): (&str, i32),
    leader: i32,
    count: i32,
    full_node: i32,
) -> Result<()> {
    let mut reader = Client::connect(cluster.node(leader))?;
    check_exactly(
        &read_all(&mut reader, topic, partition)?,
        count,
        "on the leader",
    )?;
    ensure!(
        cluster.node(full_node).is_running(),
        "node {full_node} exited"
    );
    Ok(())
}

/// Three nodes, `node`'s data directory on a tmpfs, and `topic` (3
/// partitions, 3 replicas) with every ISR whole: its partitions' views.
fn cluster_with_node_on_tmpfs(
    node: i32,
    topic: &str,
) -> Result<(Cluster, Tmpfs, Vec<PartitionView>)> {
    let mut cluster = Cluster::start(3, FAST_FAILOVER)?;
    let tmpfs = move_onto_tmpfs(&mut cluster, node)?;
    Client::connect(cluster.node(1))?.create_topic_replicated(topic, 3, 3, TOPIC_CONFIGS)?;
    let views = cluster.wait_for_full_isr(topic, Duration::from_secs(20))?;
    Ok((cluster, tmpfs, views))
}

/// Moves `node`'s data directory onto a 16 MiB tmpfs: stopped, copied,
/// restarted.
fn move_onto_tmpfs(cluster: &mut Cluster, node: i32) -> Result<Tmpfs> {
    let data_dir = cluster.node(node).data_dir().to_path_buf();
    cluster.node(node).stop()?;
    let original = data_dir.with_extension("orig");
    std::fs::rename(&data_dir, &original)?;
    let tmpfs = Tmpfs::mount(&data_dir, "16m")?;
    let status = Command::new("cp")
        .arg("-a")
        .arg(original.join("."))
        .arg(&data_dir)
        .status()?;
    ensure!(status.success(), "copying node {node}'s data: {status}");
    cluster.node(node).respawn()?;
    cluster
        .node(node)
        .finish_start()
        .with_context(|| cluster.logs())?;
    Ok(tmpfs)
}

#[test]
fn a_full_follower_leaves_the_isr_and_rejoins_when_space_returns() -> Result<()> {
    if !tmpfs_usable() {
        return Ok(());
    }
    let full_node = 3;
    let topic = "follower-full";
    let (mut cluster, tmpfs, views) = cluster_with_node_on_tmpfs(full_node, topic)?;
    // A partition node 3 follows.
    let (partition, view) = views
        .iter()
        .enumerate()
        .find(|(_, v)| v.leader != full_node)
        .context("node 3 leads every partition")?;
    let (partition, leader) = (i32::try_from(partition)?, view.leader);
    let mut producer = Producer::new(cluster.node(leader), topic, partition)?;
    tmpfs.fill_leaving(1 << 20)?;

    // Write until the full follower has left the ISR, then 50 batches more:
    // every one acknowledged (a batch the ISR wait timed out is retried).
    let deadline = Instant::now() + Duration::from_secs(30);
    let (mut shrunk_at, mut retried, mut slowest) = (None, 0, Duration::ZERO);
    let mut last_look = Instant::now();
    loop {
        ensure!(
            Instant::now() < deadline,
            "node {full_node} never left the ISR; {} acknowledged\n{}",
            producer.acknowledged(),
            cluster.logs()
        );
        let (error, _, elapsed) = producer.send_next()?;
        slowest = slowest.max(elapsed);
        if error != 0 {
            ensure!(
                error == 7, // REQUEST_TIMED_OUT: the ISR wait, retried
                "the leader answered {error} with the follower full\n{}",
                cluster.logs()
            );
            retried += 1;
        }
        if shrunk_at.is_none() && last_look.elapsed() > Duration::from_millis(200) {
            last_look = Instant::now();
            let isr = &cluster.partitions(topic)?[usize::try_from(partition)?].isr;
            if !isr.contains(&full_node) {
                shrunk_at = Some(producer.acknowledged());
            }
        }
        if shrunk_at.is_some_and(|at| producer.acknowledged() >= at + 50 * BATCH) {
            break;
        }
    }
    let acknowledged = producer.acknowledged();
    eprintln!(
        "node {full_node} left the ISR after {} acknowledged records; {acknowledged} \
         acknowledged in all, {retried} retried, slowest answer {slowest:?}",
        shrunk_at.unwrap_or_default()
    );
    ensure!(
        cluster
            .node(full_node)
            .log_tail(400)
            .contains("follower append failed"),
        "node {full_node} never failed an append: was its disk full?"
    );

    // Metadata changes while node 3's disk is full: its copy of the
    // metadata log (on the same disk) cannot take them either.
    tmpfs.fill_leaving(0)?;
    let mut admin = Client::connect(cluster.node(leader))?;
    for i in 0..WHILE_FULL_TOPICS {
        // Replication factor 2: node 3, its directory offline, may not be
        // given new replicas (it is not live), but its metadata log must
        // still learn of the topics.
        admin.create_topic_replicated(&format!("while-full-{i}"), 1, 2, &[])?;
    }
    let last_topic = format!("while-full-{}", WHILE_FULL_TOPICS - 1);
    ensure!(
        cluster.partitions_at(full_node, &last_topic).is_err(),
        "node {full_node} learnt of {last_topic} with its disk full: did the metadata log \
         meet the full disk?"
    );

    // Space returns: the follower catches up and rejoins the ISR, and its
    // own metadata (it follows the quorum's log on the same disk) says so.
    tmpfs.free()?;
    let freed = Instant::now();
    cluster
        .wait_for(
            topic,
            Duration::from_secs(20),
            "node 3 back in the ISR",
            |ps| {
                ps[usize::try_from(partition).unwrap_or(0)]
                    .isr
                    .contains(&full_node)
            },
        )
        .with_context(|| cluster.logs())?;
    let rejoined = freed.elapsed();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let view = cluster.partitions_at(full_node, topic)?;
        let caught_up = view[usize::try_from(partition)?].isr.contains(&full_node)
            && cluster.partitions_at(full_node, &last_topic).is_ok();
        if caught_up {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "node {full_node}'s own metadata stayed behind (ISR {view:?}, {last_topic} \
             unknown): its metadata quorum member never resumed\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("node {full_node} rejoined the ISR {rejoined:?} after space returned");

    // Nothing acknowledged is lost, nothing written twice.
    read_back_exactly(
        &mut cluster,
        (topic, partition),
        leader,
        acknowledged,
        full_node,
    )?;
    drop(cluster);
    drop(tmpfs);
    Ok(())
}

#[test]
fn a_full_leader_takes_its_directory_offline_and_its_partitions_move() -> Result<()> {
    if !tmpfs_usable() {
        return Ok(());
    }
    let full_node = 3;
    let topic = "leader-full";
    let (mut cluster, tmpfs, views) = cluster_with_node_on_tmpfs(full_node, topic)?;
    // A partition node 3 leads (round-robin: one of the three).
    let partition = views
        .iter()
        .position(|v| v.leader == full_node)
        .context("node 3 leads no partition")?;
    let index = partition;
    let partition = i32::try_from(partition)?;
    let mut producer = Producer::new(cluster.node(full_node), topic, partition)?;
    let mut connected_to = full_node;
    for _ in 0..20 {
        ensure!(
            producer.send_next()?.0 == 0,
            "a write before the disk filled failed"
        );
    }
    tmpfs.fill_leaving(1 << 20)?;

    // Write until the partition has moved and 50 batches more were
    // acknowledged by the new leader; every failure is retried (the same
    // sequence), at the leader Metadata names.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last_ack = Instant::now();
    let (mut longest_gap, mut first_failure, mut moved_at) = (Duration::ZERO, None, None);
    let mut errors: Vec<i16> = Vec::new();
    loop {
        ensure!(
            Instant::now() < deadline,
            "writes never resumed at a new leader: {} acknowledged, errors {errors:?}\n{}",
            producer.acknowledged(),
            cluster.logs()
        );
        let error = match producer.send_next() {
            Ok((0, _, _)) => {
                longest_gap = longest_gap.max(last_ack.elapsed());
                last_ack = Instant::now();
                if connected_to != full_node {
                    moved_at.get_or_insert(producer.acknowledged());
                }
                if moved_at.is_some_and(|at| producer.acknowledged() >= at + 50 * BATCH) {
                    break;
                }
                continue;
            }
            Ok((error, _, _)) => error,
            Err(_) => -1, // the connection: look for the leader again
        };
        first_failure.get_or_insert(producer.acknowledged());
        ensure!(
            [
                -1,
                KAFKA_STORAGE_ERROR,
                NOT_LEADER_OR_FOLLOWER,
                REQUEST_TIMED_OUT,
                NOT_ENOUGH_REPLICAS
            ]
            .contains(&error),
            "a Produce to the full leader answered {error}\n{}",
            cluster.logs()
        );
        if errors.last() != Some(&error) {
            errors.push(error);
        }
        std::thread::sleep(Duration::from_millis(50));
        let leader = cluster.partitions(topic)?[index].leader;
        if leader > 0 && leader != connected_to {
            producer.reconnect(cluster.node(leader))?;
            connected_to = leader;
        }
    }
    let acknowledged = producer.acknowledged();
    eprintln!(
        "node {full_node}'s disk full after {} acknowledged records; partition {partition} moved \
         to node {connected_to}; longest gap between acknowledgements {longest_gap:?}; errors \
         met {errors:?}; {acknowledged} acknowledged in all",
        first_failure.unwrap_or_default()
    );
    ensure!(
        first_failure.is_some(),
        "no write failed: was the disk full?"
    );
    let log = cluster.node(full_node).log_tail(400);
    ensure!(
        log.contains("log directory offline"),
        "node {full_node} did not log its directory going offline"
    );
    let metrics = cluster.node(full_node).metrics_text()?;
    ensure!(
        metrics.contains("chronik_cluster_offline_log_directory_count 1"),
        "the offline directory's metric is not 1 while the disk is full"
    );
    let views = cluster.partitions(topic)?;
    ensure!(
        views
            .iter()
            .all(|v| v.leader != full_node && !v.isr.contains(&full_node)),
        "node {full_node} still leads or is in an ISR with its directory offline: {views:?}"
    );

    // Space returns: the directory is reopened without a restart, and the
    // node catches up and rejoins every ISR.
    tmpfs.free()?;
    let freed = Instant::now();
    cluster
        .wait_for(
            topic,
            Duration::from_secs(30),
            "node 3 back in every ISR",
            |ps| ps.iter().all(|p| p.isr.contains(&full_node)),
        )
        .with_context(|| cluster.logs())?;
    eprintln!(
        "node {full_node} back in every ISR {:?} after space returned",
        freed.elapsed()
    );
    ensure!(
        cluster
            .node(full_node)
            .log_tail(400)
            .contains("log directory writable again"),
        "node {full_node} did not log reopening its directory"
    );
    ensure!(
        cluster
            .node(full_node)
            .metrics_text()?
            .contains("chronik_cluster_offline_log_directory_count 0"),
        "the offline directory's metric is not back to 0"
    );
    // More writes go through with it back in the ISR (acks=all, 3 copies).
    for _ in 0..20 {
        ensure!(
            producer.send_next()?.0 == 0,
            "a write after the rejoin failed"
        );
    }
    let total = producer.acknowledged();

    // Nothing acknowledged is lost, nothing written twice, on the leader.
    let leader = cluster.partitions(topic)?[index].leader;
    read_back_exactly(&mut cluster, (topic, partition), leader, total, full_node)?;
    drop(cluster);
    drop(tmpfs);
    Ok(())
}
