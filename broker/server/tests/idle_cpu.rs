//! An idle broker stays idle.
//!
//! After 100 rdkafka producers connect, produce one message each and go away,
//! plus 40 raw clients that vanish abruptly (mid-frame, or right after
//! sending a Produce without reading the answer), the open-connections gauge
//! must return to 0 and the broker must use under 5% of one core over 3 s.
//! A freshly started broker must be just as quiet.

mod common;

use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use rdkafka::producer::FutureRecord;

use common::broker::clock_ticks_per_second;
use common::clients::{self, CLIENT_TIMEOUT};
use common::wire::{self, Reply};
use common::{prom, Broker};

const TOPIC: &str = "churn";
const PRODUCERS: usize = 100;
const WAVE: usize = 10;
const MAX_IDLE_CORE_FRACTION: f64 = 0.05;
const OPEN_GAUGE: &str = "chronik_connections_open";

fn gauge(broker: &Broker, name: &str) -> Result<f64> {
    let samples = prom::parse(&broker.metrics_text()?);
    prom::sum(&samples, name, &[]).with_context(|| {
        format!(
            "no {name} in /metrics; names present: {:?}",
            prom::names(&samples)
        )
    })
}

/// Fraction of one core the broker used over a `window` of wall time.
fn cpu_fraction(broker: &Broker, window: Duration) -> Result<f64> {
    let start_ticks = broker.cpu_ticks()?;
    let start = Instant::now();
    // A measurement window, not a wait for readiness.
    std::thread::sleep(window);
    let ticks = broker.cpu_ticks()? - start_ticks;
    let seconds = ticks as f64 / clock_ticks_per_second() as f64;
    let fraction = seconds / start.elapsed().as_secs_f64();
    println!(
        "broker used {ticks} ticks = {:.2}% of a core over {window:?}",
        fraction * 100.0
    );
    Ok(fraction)
}

/// One producer's whole life: connect, produce one message, disconnect.
async fn short_lived_producer(bootstrap: String, i: usize) -> Result<()> {
    let producer = clients::producer_at(&bootstrap, &[("acks", "1"), ("linger.ms", "0")])?;
    let value = format!("producer-{i}");
    producer
        .send(
            FutureRecord::<(), _>::to(TOPIC)
                .partition((i % 3) as i32)
                .payload(&value),
            CLIENT_TIMEOUT,
        )
        .await
        .map_err(|(e, _)| e)
        .with_context(|| format!("producer {i}"))?;
    // rd_kafka_destroy joins librdkafka's threads: keep it off the runtime.
    tokio::task::spawn_blocking(move || drop(producer)).await?;
    Ok(())
}

/// Raw clients that leave abruptly in three different ways.
fn abrupt_raw_clients(broker: &Broker) -> Result<()> {
    let batch = wire::record_batch(&[b"raw-abrupt"], 1_700_000_000_000);
    let produce = wire::produce_v3(7, 1, TOPIC, 0, &batch);
    let metadata = wire::metadata_v1(8, &[TOPIC]);
    for i in 0..40 {
        let mut s = wire::connect(broker.kafka_addr())?;
        match i % 4 {
            // A full request/response first, then half a frame, then gone.
            0 => {
                wire::send(&mut s, &wire::api_versions_v0(1))?;
                match wire::read_reply(&mut s, CLIENT_TIMEOUT)? {
                    Reply::Frame(_) => {}
                    other => bail!("raw client {i}: ApiVersions v0 got {other:?}"),
                }
                wire::send(&mut s, &metadata[..metadata.len() / 2])?;
            }
            // Half a Produce frame.
            1 => {
                wire::send(&mut s, &produce[..produce.len() / 2])?;
            }
            // A whole Produce, closed before the response is read.
            2 => {
                wire::send(&mut s, &produce)?;
            }
            // Three bytes of a size prefix.
            _ => {
                wire::send(&mut s, &produce[..3])?;
            }
        }
        drop(s);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_is_idle_after_client_churn() -> Result<()> {
    let broker = Broker::start(&[])?;
    let admin = clients::admin(&broker)?;
    clients::create_topic(&admin, TOPIC, 3).await?;
    tokio::task::spawn_blocking(move || drop(admin)).await?;

    // The gauge must be able to move: one client held open while we look.
    let holder = clients::producer(&broker, &[("acks", "1")])?;
    holder
        .send(
            FutureRecord::<(), _>::to(TOPIC)
                .partition(0)
                .payload("holder"),
            CLIENT_TIMEOUT,
        )
        .await
        .map_err(|(e, _)| e)?;
    let open_while_held = gauge(&broker, OPEN_GAUGE)?;
    ensure!(
        open_while_held >= 1.0,
        "{OPEN_GAUGE} = {open_while_held} while a producer is connected"
    );
    let accepted_before = gauge(&broker, "chronik_connections_total").unwrap_or(0.0);

    for wave in 0..PRODUCERS / WAVE {
        let lives: Vec<_> = (0..WAVE)
            .map(|j| tokio::spawn(short_lived_producer(broker.bootstrap(), wave * WAVE + j)))
            .collect();
        for life in lives {
            life.await??;
        }
    }
    abrupt_raw_clients(&broker)?;
    tokio::task::spawn_blocking(move || drop(holder)).await?;

    let accepted =
        gauge(&broker, "chronik_connections_total").unwrap_or(f64::NAN) - accepted_before;
    println!("{accepted} connections accepted during the churn");
    ensure!(
        accepted >= (PRODUCERS + 40) as f64,
        "chronik_connections_total moved by {accepted} for {PRODUCERS} producers and 40 raw clients"
    );

    // Every client is gone: the gauge must drain to 0.
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut open = gauge(&broker, OPEN_GAUGE)?;
    while open != 0.0 {
        if Instant::now() > deadline {
            bail!("{OPEN_GAUGE} still {open} 15 s after every client disconnected");
        }
        std::thread::sleep(Duration::from_millis(100));
        open = gauge(&broker, OPEN_GAUGE)?;
    }

    let fraction = cpu_fraction(&broker, Duration::from_secs(3))?;
    ensure!(
        fraction < MAX_IDLE_CORE_FRACTION,
        "idle broker used {:.1}% of a core over 3 s after client churn",
        fraction * 100.0
    );
    Ok(())
}

#[test]
fn fresh_broker_is_idle() -> Result<()> {
    let broker = Broker::start(&[])?;
    let fraction = cpu_fraction(&broker, Duration::from_secs(3))?;
    ensure!(
        fraction < MAX_IDLE_CORE_FRACTION,
        "freshly started idle broker used {:.1}% of a core over 3 s",
        fraction * 100.0
    );
    Ok(())
}
