//! The transactions check (compat/README.md): KIP-98 transactions and
//! exactly-once consume-transform-produce the way librdkafka users do it: a
//! transactional producer plus `send_offsets_to_transaction` with the
//! consumer's group metadata. Owns only the rdkafka calls; the checks on what
//! came back live in `verify`.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Message, OwnedMessage};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

use crate::verify::{self, Position, Record, Reporter};
use crate::{consumer, create_topic, poll_until, send_all, Args};

const TXN_PARTITIONS: i32 = 3;
/// Records per consume-transform-produce transaction.
const TXN_BATCH: usize = 100;
/// The transform: each input value, prefixed.
const OUT_PREFIX: &str = "out-";
const ABORTED_TAG: &str = "-aborted";
/// Read on this long after the count is reached, so extras show up.
const SETTLE: Duration = Duration::from_secs(1);

/// Passes when: n keyed messages committed in one transaction and n/2 more
/// aborted in a second; a read_committed group consumer plus a transactional
/// producer copy the input to the output prefixed "out-", sending the
/// consumer's offsets to each transaction; then a read_committed read of the
/// output has exactly the n transformed committed values once each, the
/// input has n committed values read_committed and also the n/2 aborted ones
/// read_uncommitted, and the group's committed offsets (OffsetFetch) lie past
/// the last committed input record and at most at the last stable offset.
pub async fn check(rep: &mut Reporter, args: &Args) -> anyhow::Result<()> {
    let (input, output, group) = (
        verify::unique("compat-txn-in"),
        verify::unique("compat-txn-out"),
        verify::unique("compat-txn"),
    );
    create_topic(args, &input, TXN_PARTITIONS).await?;
    create_topic(args, &output, TXN_PARTITIONS).await?;
    let n = args.messages;
    let aborted = n / 2;
    let (acks, problems) = produce_input_txns(args, &input, n, aborted).await?;
    if !problems.is_empty() {
        rep.verdict("transactions", &problems, "");
        return Ok(());
    }
    let copied = transform_exactly_once(args, &group, &input, &output, n)?;
    if copied < n {
        rep.emit(
            "transactions",
            "fail",
            &format!(
                "consume-transform-produce committed {copied} of {n} input records, \
                 then nothing for {:?}",
                args.stage()
            ),
        );
        return Ok(());
    }

    let out_records = read_isolated(args, &output, true, n)?;
    let out_tag = format!("{OUT_PREFIX}{input}");
    let mut problems = prefixed(
        "output read_committed",
        verify::verify_read_back(&out_tag, n, &out_records, None),
    );
    let committed_in = read_isolated(args, &input, true, n)?;
    problems.extend(prefixed(
        "input read_committed",
        verify::verify_read_back(&input, n, &committed_in, Some(&acks)),
    ));
    let all_in = read_isolated(args, &input, false, n + aborted)?;
    let aborted_tag = format!("{input}{ABORTED_TAG}");
    problems.extend(prefixed(
        "input read_uncommitted, aborted records",
        verify::verify_read_back(
            &aborted_tag,
            aborted,
            &verify::with_tag(&aborted_tag, &all_in),
            None,
        ),
    ));
    let (committed, lso) = group_offsets(args, &group, &input)?;
    problems.extend(prefixed(
        "group offsets",
        verify::verify_txn_offsets(
            &committed,
            &verify::end_of(&verify::with_tag(&input, &committed_in)),
            &lso,
            TXN_PARTITIONS,
        ),
    ));
    rep.verdict(
        "transactions",
        &problems,
        &format!(
            "{n} committed + {aborted} aborted in: read_committed {}, read_uncommitted {}; \
             read_committed group consumer + transactional producer with \
             send_offsets_to_transaction copied {copied} in transactions of <={TXN_BATCH}, \
             output read_committed {} once each; group offsets {committed:?}, \
             last stable offsets {lso:?}",
            committed_in.len(),
            all_in.len(),
            out_records.len()
        ),
    );
    Ok(())
}

fn prefixed(what: &str, problems: Vec<String>) -> Vec<String> {
    problems
        .into_iter()
        .map(|p| format!("{what}: {p}"))
        .collect()
}

/// A producer with `transactional.id` (acks=all), init_transactions done.
/// Its requests time out within a stage timeout (socket.timeout.ms, at most
/// the default 60 s transaction.timeout.ms, which librdkafka requires).
fn txn_producer(args: &Args, prefix: &str) -> anyhow::Result<FutureProducer> {
    let request_ms = args.stage().as_millis().clamp(10, 60_000);
    let producer: FutureProducer = args
        .config()
        .set("transactional.id", verify::unique(prefix))
        .set("acks", "all")
        .set("linger.ms", "5")
        .set("socket.timeout.ms", request_ms.to_string())
        .create()?;
    producer
        .init_transactions(args.stage())
        .context("init_transactions")?;
    Ok(producer)
}

/// One transactional producer commits n messages of tag `topic`, then aborts
/// `aborted` messages of tag topic+"-aborted". Returns the committed ones'
/// positions, and problems with either transaction.
async fn produce_input_txns(
    args: &Args,
    topic: &str,
    n: usize,
    aborted: usize,
) -> anyhow::Result<(HashMap<usize, Position>, Vec<String>)> {
    let producer = txn_producer(args, "compat-txn-producer")?;
    producer.begin_transaction().context("begin_transaction")?;
    let (acks, errors) = send_all(args, &producer, topic, topic, n).await?;
    let mut problems = prefixed(
        "committed transaction",
        verify::verify_acks(n, &acks, &errors),
    );
    if let Err(e) = producer.commit_transaction(args.stage()) {
        problems.push(format!("commit_transaction: {e}"));
        return Ok((acks, problems));
    }
    producer.begin_transaction().context("begin_transaction")?;
    let tag = format!("{topic}{ABORTED_TAG}");
    let (abort_acks, errors) = send_all(args, &producer, topic, &tag, aborted).await?;
    problems.extend(prefixed(
        "aborted transaction",
        verify::verify_acks(aborted, &abort_acks, &errors),
    ));
    if let Err(e) = producer.abort_transaction(args.stage()) {
        problems.push(format!("abort_transaction: {e}"));
    }
    Ok((acks, problems))
}

/// A read_committed group consumer on `input` and a transactional producer:
/// per batch of up to TXN_BATCH records, begin, produce each value prefixed
/// "out-" with its key, send_offsets_to_transaction (after each partition's
/// last record, with the consumer's group metadata), commit. Stops once n
/// input records were committed, or after a stage timeout without progress.
/// Returns how many were committed.
fn transform_exactly_once(
    args: &Args,
    group: &str,
    input: &str,
    output: &str,
    n: usize,
) -> anyhow::Result<usize> {
    let c = consumer(args, group, &[("isolation.level", "read_committed")])?;
    c.subscribe(&[input])?;
    let producer = txn_producer(args, "compat-txn-eos")?;
    let mut done: HashSet<Position> = HashSet::new();
    let mut progress = Instant::now();
    while done.len() < n && progress.elapsed() < args.stage() {
        let batch = poll_batch(&c)?;
        if batch.is_empty() {
            continue;
        }
        transform_batch(args, &c, &producer, output, &batch)?;
        done.extend(batch.iter().map(|m| (m.partition(), m.offset())));
        progress = Instant::now();
    }
    verify::log(&format!(
        "consume-transform-produce: {} input records committed",
        done.len()
    ));
    Ok(done.len())
}

/// Up to TXN_BATCH records: waits up to 500 ms for the first, then takes
/// what comes within 100 ms of the previous one.
fn poll_batch(c: &BaseConsumer) -> anyhow::Result<Vec<OwnedMessage>> {
    let mut batch = Vec::new();
    while batch.len() < TXN_BATCH {
        let wait = if batch.is_empty() { 500 } else { 100 };
        match c.poll(Duration::from_millis(wait)) {
            None => break,
            Some(Err(e)) => bail!("consume {e}"),
            Some(Ok(m)) => batch.push(m.detach()),
        }
    }
    Ok(batch)
}

/// One transaction: the batch transformed to `output` plus the consumer's
/// offsets after it; an error (with the transaction aborted) if any step fails.
fn transform_batch(
    args: &Args,
    c: &BaseConsumer,
    producer: &FutureProducer,
    output: &str,
    batch: &[OwnedMessage],
) -> anyhow::Result<()> {
    producer.begin_transaction().context("begin_transaction")?;
    let result = (|| {
        let mut next: BTreeMap<(String, i32), i64> = BTreeMap::new();
        for m in batch {
            let mut value = OUT_PREFIX.as_bytes().to_vec();
            value.extend_from_slice(m.payload().unwrap_or_default());
            let mut record = FutureRecord::<[u8], [u8]>::to(output).payload(&value);
            if let Some(k) = m.key() {
                record = record.key(k);
            }
            // the delivery is checked by commit_transaction (it fails if one failed)
            drop(
                producer
                    .send_result(record)
                    .map_err(|(e, _)| anyhow!("enqueue to the output: {e}"))?,
            );
            next.insert((m.topic().to_string(), m.partition()), m.offset() + 1);
        }
        let mut offsets = TopicPartitionList::new();
        for ((topic, p), o) in &next {
            offsets.add_partition_offset(topic, *p, Offset::Offset(*o))?;
        }
        let metadata = c
            .group_metadata()
            .context("consumer has no group metadata")?;
        producer
            .send_offsets_to_transaction(&offsets, &metadata, args.stage())
            .context("send_offsets_to_transaction")?;
        producer
            .commit_transaction(args.stage())
            .context("commit_transaction")
    })();
    if result.is_err() {
        if let Err(e) = producer.abort_transaction(args.stage()) {
            verify::log(&format!("abort_transaction after a failure: {e}"));
        }
    }
    result
}

/// Reads all TXN_PARTITIONS partitions of topic from the start by assign()
/// (no group membership), read_committed or read_uncommitted, until `want`
/// records and then SETTLE longer (so extra records show up as extras).
fn read_isolated(
    args: &Args,
    topic: &str,
    committed: bool,
    want: usize,
) -> anyhow::Result<Vec<Record>> {
    let level = if committed {
        "read_committed"
    } else {
        "read_uncommitted"
    };
    let c = consumer(
        args,
        &verify::unique("compat-reader"),
        &[("isolation.level", level)],
    )?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..TXN_PARTITIONS {
        tpl.add_partition_offset(topic, p, Offset::Beginning)?;
    }
    c.assign(&tpl)?;
    let reached: Cell<Option<Instant>> = Cell::new(None);
    poll_until(&c, args.stage(), 0, |rs| {
        if rs.len() < want {
            return false;
        }
        let at = reached.get().unwrap_or_else(Instant::now);
        reached.set(Some(at));
        at.elapsed() >= SETTLE
    })
}

/// The group's committed offsets on topic (OffsetFetch, committed_offsets)
/// and the topic's last stable offsets (ListOffsets from a read_committed
/// consumer: fetch_watermarks' high end).
type Offsets = BTreeMap<i32, i64>;

fn group_offsets(args: &Args, group: &str, topic: &str) -> anyhow::Result<(Offsets, Offsets)> {
    let c = consumer(args, group, &[("isolation.level", "read_committed")])?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..TXN_PARTITIONS {
        tpl.add_partition(topic, p);
    }
    let fetched = c
        .committed_offsets(tpl, args.stage())
        .context("OffsetFetch (committed_offsets)")?;
    let mut committed = BTreeMap::new();
    for e in fetched.elements() {
        if let Some(o) = e.offset().to_raw().filter(|o| *o >= 0) {
            committed.insert(e.partition(), o);
        }
    }
    let mut lso = BTreeMap::new();
    for p in 0..TXN_PARTITIONS {
        let (_, high) = c
            .fetch_watermarks(topic, p, args.stage())
            .with_context(|| format!("ListOffsets read_committed {topic}[{p}]"))?;
        lso.insert(p, high);
    }
    Ok((committed, lso))
}
