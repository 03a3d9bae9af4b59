//! Real librdkafka group members for the coordinator-failover tests
//! (`consumer_group_failover`, `classic_group_failover`): a consumer that
//! counts its rebalance callbacks, numbers produced round-robin over a
//! topic's partitions, and a read loop that counts every record seen (so a
//! record read twice shows) and commits what it read.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Result};
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::message::Message;
use rdkafka::producer::FutureRecord;

use super::clients::{base_config_at, producer_at, transient};

/// Counts the rebalance callbacks (assignments and revocations) one
/// consumer goes through.
pub struct Rebalances(pub Arc<AtomicUsize>);

impl ClientContext for Rebalances {}

impl ConsumerContext for Rebalances {
    fn post_rebalance(&self, _: &BaseConsumer<Self>, _: &Rebalance<'_>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

pub type RealMember = (BaseConsumer<Rebalances>, Arc<AtomicUsize>);

/// A member of `group` reading `topic` from the earliest offset, committing
/// by hand; `protocol` is librdkafka's `group.protocol` (classic, consumer).
pub fn real_member(
    bootstrap: &str,
    group: &str,
    protocol: &str,
    topic: &str,
    name: &str,
) -> Result<RealMember> {
    let rebalances = Arc::new(AtomicUsize::new(0));
    let mut config = base_config_at(bootstrap);
    config
        .set("group.id", group)
        .set("group.protocol", protocol)
        .set("client.id", name)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("fetch.wait.max.ms", "100");
    let consumer: BaseConsumer<Rebalances> =
        config.create_with_context(Rebalances(rebalances.clone()))?;
    consumer.subscribe(&[topic])?;
    Ok((consumer, rebalances))
}

/// Produces the numbers `from..to` (acks=all) round-robin over the
/// `partitions` partitions of `topic`.
pub fn produce_numbers(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    from: u64,
    to: u64,
) -> Result<()> {
    let producer = producer_at(
        bootstrap,
        &[("acks", "all"), ("message.timeout.ms", "60000")],
    )?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut pending = Vec::new();
        for n in from..to {
            let value = n.to_string();
            let partition = i32::try_from(n % u64::try_from(partitions)?)?;
            let record = FutureRecord::<(), _>::to(topic)
                .partition(partition)
                .payload(&value);
            let future = producer
                .send_result(record)
                .map_err(|(e, _)| anyhow::anyhow!("enqueue failed: {e}"))?;
            pending.push(future);
        }
        for future in pending {
            if let Err((e, _)) = future.await? {
                bail!("a produce failed: {e}");
            }
        }
        Ok(())
    })
}

/// Polls the members until `seen` holds every number below `total` (each
/// member committing what it read), or fails after 60 s. `others` is
/// called once a round to add what members outside this process read.
/// Returns when each member (by index) first read a record in this call.
pub fn consume_until(
    members: &[RealMember],
    seen: &mut BTreeMap<u64, usize>,
    total: u64,
    others: &mut dyn FnMut(&mut BTreeMap<u64, usize>) -> Result<()>,
) -> Result<Vec<Option<Instant>>> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut first_read = vec![None; members.len()];
    while (seen.len() as u64) < total {
        ensure!(
            Instant::now() < deadline,
            "read {} of {total} records in 60 s",
            seen.len()
        );
        others(seen)?;
        for (i, (consumer, _)) in members.iter().enumerate() {
            let mut read = false;
            while let Some(message) = consumer.poll(Duration::from_millis(20)) {
                let message = match message {
                    Ok(message) => message,
                    // the killed node's connections failing
                    Err(e) if transient(&e) => continue,
                    Err(e) => return Err(e.into()),
                };
                let n: u64 = std::str::from_utf8(message.payload().unwrap_or_default())?.parse()?;
                *seen.entry(n).or_default() += 1;
                read = true;
            }
            if read {
                first_read[i].get_or_insert_with(Instant::now);
                consumer.commit_consumer_state(CommitMode::Sync)?;
            }
        }
    }
    Ok(first_read)
}

/// The partitions a member holds.
pub fn assignment(consumer: &BaseConsumer<Rebalances>) -> Result<BTreeSet<i32>> {
    Ok(consumer
        .assignment()?
        .elements()
        .iter()
        .map(|e| e.partition())
        .collect())
}

/// Each member's rebalance callbacks so far.
pub fn callbacks(members: &[RealMember]) -> Vec<usize> {
    members
        .iter()
        .map(|(_, r)| r.load(Ordering::SeqCst))
        .collect()
}

/// The numbers read more than once.
pub fn read_twice(seen: &BTreeMap<u64, usize>) -> Vec<u64> {
    seen.iter()
        .filter(|(_, c)| **c > 1)
        .map(|(n, _)| *n)
        .collect()
}
