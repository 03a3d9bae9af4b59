//! chronik-consumer-envelope-producer: writes N messages carrying the
//! `chronik-env` envelope as fast as the client allows, then writes the
//! producers' ledger (README "Ledger JSON") from the delivery reports.
//!
//! For consumer/bench.sh when chronik-bench is not built, and as a reference
//! emitter of the ledger format. Not a load generator: closed loop, no rate,
//! no latency accounting beyond the envelope's send time.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use chronik_harness::intervals::IntervalSet;
use chronik_harness::ledger::Ledger;
use chronik_harness::{now_us, Envelope, ENVELOPE_HEADER};
use clap::Parser;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::ClientContext;

#[derive(Debug, Parser)]
#[command(about = "Write messages with chronik-env envelopes and a ledger of their delivery")]
struct Args {
    #[arg(
        long,
        env = "KAFKA_BOOTSTRAP_SERVERS",
        default_value = "localhost:9092"
    )]
    bootstrap_servers: String,
    #[arg(long, env = "ENVELOPE_PRODUCER_TOPIC")]
    topic: String,
    /// Create the topic with this many partitions if it does not exist
    #[arg(long, env = "ENVELOPE_PRODUCER_PARTITIONS", default_value_t = 6)]
    partitions: i32,
    #[arg(long, env = "ENVELOPE_PRODUCER_MESSAGES", default_value_t = 1_000_000)]
    messages: u64,
    /// Value size in bytes
    #[arg(long, env = "ENVELOPE_PRODUCER_SIZE", default_value_t = 256)]
    size: usize,
    /// Number of producer ids; message i belongs to id (base + i % producers)
    #[arg(long, env = "ENVELOPE_PRODUCER_PRODUCERS", default_value_t = 4)]
    producers: u64,
    #[arg(
        long,
        env = "ENVELOPE_PRODUCER_ID_BASE",
        default_value_t = 0x00c0_ffee_0000_0000
    )]
    producer_id_base: u64,
    /// Write the ledgers (a JSON list) here
    #[arg(long, env = "ENVELOPE_PRODUCER_LEDGER")]
    ledger: Option<std::path::PathBuf>,
    /// Extra librdkafka producer property KEY=VALUE (repeatable)
    #[arg(short = 'X', long = "producer-property")]
    producer_properties: Vec<String>,
}

#[derive(Default)]
struct Outcomes {
    acknowledged: Vec<IntervalSet>,
    failed: Vec<IntervalSet>,
}

struct Delivery {
    outcomes: Mutex<Outcomes>,
}

impl ClientContext for Delivery {}

impl ProducerContext for Delivery {
    type DeliveryOpaque = Box<(usize, u64)>;

    fn delivery(&self, result: &DeliveryResult<'_>, opaque: Self::DeliveryOpaque) {
        let (producer, sequence) = *opaque;
        let mut o = self.outcomes.lock().unwrap_or_else(|p| p.into_inner());
        let set = if result.is_ok() {
            &mut o.acknowledged[producer]
        } else {
            &mut o.failed[producer]
        };
        set.insert(sequence);
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &args.bootstrap_servers)
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .set("batch.num.messages", "10000")
        .set("batch.size", "1000000")
        .set("queue.buffering.max.messages", "1000000");
    for p in &args.producer_properties {
        let (k, v) = p
            .split_once('=')
            .with_context(|| format!("{p:?} is not KEY=VALUE"))?;
        config.set(k, v);
    }
    create_topic(&config, &args.topic, args.partitions)?;

    let producers = args.producers.max(1) as usize;
    let outcomes = Outcomes {
        acknowledged: vec![IntervalSet::new(); producers],
        failed: vec![IntervalSet::new(); producers],
    };
    let producer: BaseProducer<Delivery> = config
        .create_with_context(Delivery {
            outcomes: Mutex::new(outcomes),
        })
        .context("creating the producer")?;
    let values: Vec<Vec<u8>> = (0..64)
        .map(|i| (0..args.size).map(|j| (i * 13 + j) as u8).collect())
        .collect();
    let crcs: Vec<u32> = values
        .iter()
        .map(|v| Envelope::new(0, 0, 0, v).value_crc32c)
        .collect();
    let mut next_seq = vec![0u64; producers];
    let started = Instant::now();
    for i in 0..args.messages {
        let p = (i % producers as u64) as usize;
        let sequence = next_seq[p];
        next_seq[p] += 1;
        let v = (i % values.len() as u64) as usize;
        let envelope = Envelope {
            producer_id: args.producer_id_base + p as u64,
            sequence,
            send_time_us: now_us(),
            value_crc32c: crcs[v],
        }
        .encode();
        let headers = OwnedHeaders::new_with_capacity(1).insert(Header {
            key: ENVELOPE_HEADER,
            value: Some(&envelope[..]),
        });
        let mut record = BaseRecord::<(), [u8], Box<(usize, u64)>>::with_opaque_to(
            &args.topic,
            Box::new((p, sequence)),
        )
        .payload(&values[v][..])
        .headers(headers);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    producer.poll(Duration::from_millis(5));
                }
                Err((e, _)) => anyhow::bail!("send failed: {e}"),
            }
        }
        if i % 10_000 == 0 {
            producer.poll(Duration::ZERO);
        }
    }
    producer
        .flush(Duration::from_secs(120))
        .context("flushing")?;
    let secs = started.elapsed().as_secs_f64();
    let o = producer
        .context()
        .outcomes
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let acked: u64 = o.acknowledged.iter().map(IntervalSet::len).sum();
    let failed: u64 = o.failed.iter().map(IntervalSet::len).sum();
    eprintln!(
        "produced {} messages in {secs:.2} s ({:.0} msg/s): {acked} acknowledged, {failed} failed",
        args.messages,
        args.messages as f64 / secs
    );
    if let Some(path) = &args.ledger {
        let ledgers: Vec<Ledger> = (0..producers)
            .map(|p| {
                Ledger::new(
                    None,
                    args.producer_id_base + p as u64,
                    next_seq[p],
                    o.acknowledged[p].clone(),
                    o.failed[p].clone(),
                )
            })
            .collect();
        std::fs::write(path, serde_json::to_string_pretty(&ledgers)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    println!(
        "PRODUCED messages={} acknowledged={acked} failed={failed} seconds={secs:.3}",
        args.messages
    );
    if failed > 0 || acked != args.messages {
        anyhow::bail!("{} messages not acknowledged", args.messages - acked);
    }
    Ok(())
}

fn create_topic(config: &ClientConfig, topic: &str, partitions: i32) -> anyhow::Result<()> {
    let admin: AdminClient<DefaultClientContext> =
        config.create().context("creating the admin client")?;
    let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let results = runtime.block_on(admin.create_topics(
        [&new],
        &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
    ))?;
    for r in results {
        match r {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((t, e)) => anyhow::bail!("creating topic {t}: {e}"),
        }
    }
    Ok(())
}
