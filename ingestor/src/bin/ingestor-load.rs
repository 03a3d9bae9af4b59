//! `ingestor-load`: a small closed-loop load generator for the ingestor's
//! batch routes, and a direct-to-Kafka baseline with the same producer
//! settings (the "no HTTP" figure the HTTP path is compared with).
//!
//! HTTP mode: `--connections` keep-alive HTTP/1.1 connections each POST the
//! same pre-built JSON batch (`--batch` messages of `--value-bytes` random
//! alphanumeric bytes) back to back for `--duration`, after an uncounted
//! `--warmup`. Direct mode (`--direct`): one rdkafka producer sends the same
//! values (with an envelope header) as fast as its queue allows.
//! Prints one machine-readable `RESULT key=value ...` line on stdout with
//! msg/s, request latency percentiles and, for each `--cpu-pid`, that
//! process's CPU µs per message over the measured window (utime+stime from
//! /proc/PID/stat).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use chronik_harness::envelope::{now_us, Envelope, ENVELOPE_HEADER};
use chronik_harness::procfs::{self, Task};
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientConfig, ClientContext};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "ingestor-load",
    about = "Closed-loop load for chronik-ingestor's batch routes, or a direct Kafka baseline"
)]
struct Args {
    /// Ingestor address (host:port).
    #[arg(long, env = "INGESTOR_LOAD_TARGET", default_value = "127.0.0.1:8080")]
    target: String,
    /// Route to POST to: /produce/batch or /produce/fire/batch.
    #[arg(long, env = "INGESTOR_LOAD_ROUTE", default_value = "/produce/batch")]
    route: String,
    /// Concurrent keep-alive connections (each has one request outstanding).
    #[arg(long, env = "INGESTOR_LOAD_CONNECTIONS", default_value_t = 32)]
    connections: usize,
    /// Messages per request.
    #[arg(long, env = "INGESTOR_LOAD_BATCH", default_value_t = 100)]
    batch: usize,
    /// Bytes per message value.
    #[arg(long, env = "INGESTOR_LOAD_VALUE_BYTES", default_value_t = 256)]
    value_bytes: usize,
    /// Measured seconds.
    #[arg(long, env = "INGESTOR_LOAD_DURATION_SECS", default_value_t = 15.0)]
    duration_secs: f64,
    /// Uncounted seconds before measuring.
    #[arg(long, env = "INGESTOR_LOAD_WARMUP_SECS", default_value_t = 3.0)]
    warmup_secs: f64,
    /// Process ids whose CPU time per message to report (repeatable).
    #[arg(long, env = "INGESTOR_LOAD_CPU_PID", value_delimiter = ',')]
    cpu_pid: Vec<u32>,
    /// Label printed in the RESULT line.
    #[arg(long, env = "INGESTOR_LOAD_LABEL", default_value = "run")]
    label: String,
    /// Direct mode: produce straight to these bootstrap servers instead of HTTP.
    #[arg(long, env = "INGESTOR_LOAD_DIRECT")]
    direct: Option<String>,
    /// Direct mode: topic.
    #[arg(long, env = "INGESTOR_LOAD_TOPIC", default_value = "chronik-ingest")]
    topic: String,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.batch == 0 || args.connections == 0 {
        bail!("--batch and --connections must be positive");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let warmup = Duration::from_secs_f64(args.warmup_secs);
    let duration = Duration::from_secs_f64(args.duration_secs);
    let counters = Arc::new(Counters::default());
    let values = make_values(args.batch, args.value_bytes);

    let stop = Arc::new(AtomicBool::new(false));
    let direct = args.direct.clone();
    let worker = {
        let (counters, stop, values, args_route, target, topic) = (
            counters.clone(),
            stop.clone(),
            values.clone(),
            args.route.clone(),
            args.target.clone(),
            args.topic.clone(),
        );
        let connections = args.connections;
        std::thread::spawn(move || -> anyhow::Result<Vec<u32>> {
            match direct {
                Some(bootstrap) => {
                    direct_load(&bootstrap, &topic, &values, &counters, &stop)?;
                    Ok(Vec::new())
                }
                None => runtime.block_on(http_load(
                    target,
                    args_route,
                    connections,
                    body_of(&values),
                    counters,
                    stop,
                )),
            }
        })
    };

    std::thread::sleep(warmup);
    let self_before = cpu_ticks(std::process::id())?;
    let cpu_before: Vec<u64> = args
        .cpu_pid
        .iter()
        .map(|&p| cpu_ticks(p))
        .collect::<anyhow::Result<_>>()?;
    let snap_before = counters.snapshot();
    counters.measuring.store(true, Ordering::Release);
    let started = Instant::now();
    std::thread::sleep(duration);
    let snap_after = counters.snapshot();
    let cpu_after: Vec<u64> = args
        .cpu_pid
        .iter()
        .map(|&p| cpu_ticks(p))
        .collect::<anyhow::Result<_>>()?;
    let self_after = cpu_ticks(std::process::id())?;
    let elapsed = started.elapsed().as_secs_f64();
    counters.measuring.store(false, Ordering::Release);
    stop.store(true, Ordering::Release);
    let mut latencies = worker
        .join()
        .map_err(|_| anyhow::anyhow!("load thread panicked"))??;

    let messages = snap_after.messages - snap_before.messages;
    let mut line = format!(
        "RESULT label={} mode={} route={} connections={} batch={} value_bytes={} seconds={:.1} requests={} non2xx={} errors={} messages={} msg_per_s={:.0}",
        args.label,
        if args.direct.is_some() { "direct" } else { "http" },
        if args.direct.is_some() { "-" } else { &args.route },
        args.connections,
        args.batch,
        args.value_bytes,
        elapsed,
        snap_after.requests - snap_before.requests,
        snap_after.non2xx - snap_before.non2xx,
        snap_after.errors - snap_before.errors,
        messages,
        messages as f64 / elapsed,
    );
    if !latencies.is_empty() {
        latencies.sort_unstable();
        let pct = |p: f64| latencies[((latencies.len() - 1) as f64 * p) as usize] as f64 / 1000.0;
        line += &format!(
            " p50_ms={:.2} p99_ms={:.2} max_ms={:.2}",
            pct(0.5),
            pct(0.99),
            pct(1.0)
        );
    }
    // This load generator's own CPU: it shares the machine with what it measures.
    line += &format!(
        " load_cpu_cores={:.2}",
        (self_after - self_before) as f64 / procfs::clock_ticks_per_sec() as f64 / elapsed
    );
    for (i, pid) in args.cpu_pid.iter().enumerate() {
        let cpu_us =
            (cpu_after[i] - cpu_before[i]) as f64 * 1e6 / procfs::clock_ticks_per_sec() as f64;
        let per_msg = if messages > 0 {
            cpu_us / messages as f64
        } else {
            f64::NAN
        };
        line += &format!(
            " cpu_pid{}={pid} cpu_cores_pid{}={:.2} cpu_us_per_msg_pid{}={:.2}",
            i,
            i,
            cpu_us / 1e6 / elapsed,
            i,
            per_msg
        );
    }
    println!("{line}");
    Ok(())
}

#[derive(Debug, Default)]
struct Counters {
    measuring: AtomicBool,
    requests: AtomicU64,
    non2xx: AtomicU64,
    errors: AtomicU64,
    messages: AtomicU64,
}

#[derive(Debug, Clone, Copy)]
struct Snapshot {
    requests: u64,
    non2xx: u64,
    errors: u64,
    messages: u64,
}

impl Counters {
    fn snapshot(&self) -> Snapshot {
        Snapshot {
            requests: self.requests.load(Ordering::Acquire),
            non2xx: self.non2xx.load(Ordering::Acquire),
            errors: self.errors.load(Ordering::Acquire),
            messages: self.messages.load(Ordering::Acquire),
        }
    }
}

/// `batch` distinct pseudo-random alphanumeric values (xorshift; no rand crate needed).
fn make_values(batch: usize, value_bytes: usize) -> Arc<Vec<String>> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ u64::from(std::process::id());
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    Arc::new(
        (0..batch)
            .map(|_| {
                (0..value_bytes)
                    .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize] as char)
                    .collect()
            })
            .collect(),
    )
}

fn body_of(values: &[String]) -> Bytes {
    let msgs: Vec<_> = values
        .iter()
        .map(|v| serde_json::json!({ "value": v }))
        .collect();
    Bytes::from(serde_json::to_vec(&msgs).unwrap_or_default())
}

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> anyhow::Result<u64> {
    procfs::cpu_ticks(Task::Pid(pid)).with_context(|| format!("reading /proc/{pid}/stat"))
}

async fn http_load(
    target: String,
    route: String,
    connections: usize,
    body: Bytes,
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<Vec<u32>> {
    let mut tasks = Vec::with_capacity(connections);
    for _ in 0..connections {
        let (target, route, body, counters, stop) = (
            target.clone(),
            route.clone(),
            body.clone(),
            counters.clone(),
            stop.clone(),
        );
        tasks.push(tokio::spawn(async move {
            connection_loop(&target, &route, body, &counters, &stop).await
        }));
    }
    let mut latencies = Vec::new();
    for t in tasks {
        match t.await {
            Ok(Ok(mut l)) => latencies.append(&mut l),
            Ok(Err(e)) => eprintln!("connection failed: {e:#}"),
            Err(e) => eprintln!("connection task failed: {e}"),
        }
    }
    Ok(latencies)
}

async fn connection_loop(
    target: &str,
    route: &str,
    body: Bytes,
    counters: &Counters,
    stop: &AtomicBool,
) -> anyhow::Result<Vec<u32>> {
    let mut latencies = Vec::new();
    let mut sender = None;
    while !stop.load(Ordering::Acquire) {
        if sender.is_none() {
            let stream = tokio::net::TcpStream::connect(target)
                .await
                .with_context(|| format!("connecting {target}"))?;
            stream.set_nodelay(true)?;
            let (s, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
            tokio::spawn(conn);
            sender = Some(s);
        }
        let Some(s) = sender.as_mut() else { continue };
        let request = Request::post(route)
            .header("host", target)
            .header("content-type", "application/json")
            .body(Full::new(body.clone()))?;
        let started = Instant::now();
        let outcome = async {
            s.ready().await?;
            let response = s.send_request(request).await?;
            let status = response.status();
            let bytes = response.into_body().collect().await?.to_bytes();
            anyhow::Ok((status, bytes))
        }
        .await;
        let measuring = counters.measuring.load(Ordering::Acquire);
        counters.requests.fetch_add(1, Ordering::AcqRel);
        match outcome {
            Ok((status, bytes)) => {
                let accepted = if status.is_success() {
                    // 200: {"delivered": n, ...}; 202: {"accepted": n}
                    count_field(
                        &bytes,
                        if status.as_u16() == 202 {
                            "accepted"
                        } else {
                            "delivered"
                        },
                    )
                } else {
                    counters.non2xx.fetch_add(1, Ordering::AcqRel);
                    if status.as_u16() == 503 {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    // Partial acceptance on 503 queue_full / partial delivery.
                    count_field(
                        &bytes,
                        if route.contains("fire") {
                            "accepted"
                        } else {
                            "delivered"
                        },
                    )
                };
                counters.messages.fetch_add(accepted, Ordering::AcqRel);
                if measuring {
                    latencies
                        .push(u32::try_from(started.elapsed().as_micros()).unwrap_or(u32::MAX));
                }
            }
            Err(e) => {
                counters.errors.fetch_add(1, Ordering::AcqRel);
                eprintln!("request failed: {e:#}");
                sender = None;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    Ok(latencies)
}

/// The integer value of top-level `"field": n` in a small JSON object, 0 if absent.
fn count_field(body: &[u8], field: &str) -> u64 {
    let needle = format!("\"{field}\":");
    let Some(at) = body
        .windows(needle.len())
        .position(|w| w == needle.as_bytes())
    else {
        return 0;
    };
    body[at + needle.len()..]
        .iter()
        .skip_while(|b| b.is_ascii_whitespace())
        .take_while(|b| b.is_ascii_digit())
        .fold(0, |n, b| n * 10 + u64::from(b - b'0'))
}

struct CountingContext {
    counters: Arc<Counters>,
}

impl ClientContext for CountingContext {}

impl ProducerContext for CountingContext {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(_) => self.counters.messages.fetch_add(1, Ordering::AcqRel),
            Err(_) => self.counters.errors.fetch_add(1, Ordering::AcqRel),
        };
    }
}

/// The same producer settings as the ingestor's defaults (seed Test 6).
fn direct_load(
    bootstrap: &str,
    topic: &str,
    values: &[String],
    counters: &Arc<Counters>,
    stop: &AtomicBool,
) -> anyhow::Result<()> {
    let producer: ThreadedProducer<CountingContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "1")
        .set("linger.ms", "5")
        .set("batch.num.messages", "10000")
        .set("compression.type", "snappy")
        .set("queue.buffering.max.messages", "100000")
        .create_with_context(CountingContext {
            counters: counters.clone(),
        })?;
    let producer_id = uuid::Uuid::new_v4().as_u64_pair().0;
    let mut sequence = 0u64;
    'outer: while !stop.load(Ordering::Acquire) {
        let send_time_us = now_us();
        for v in values {
            let envelope =
                Envelope::new(producer_id, sequence, send_time_us, v.as_bytes()).encode();
            let headers = OwnedHeaders::new_with_capacity(1).insert(Header {
                key: ENVELOPE_HEADER,
                value: Some(&envelope[..]),
            });
            let mut record = BaseRecord::to(topic).payload(v.as_bytes()).headers(headers);
            loop {
                match producer.send::<(), [u8]>(record) {
                    Ok(()) => break,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                        if stop.load(Ordering::Acquire) {
                            break 'outer;
                        }
                        std::thread::sleep(Duration::from_millis(1));
                        record = r;
                    }
                    Err((e, _)) => bail!("direct produce failed: {e}"),
                }
            }
            sequence += 1;
        }
        counters.requests.fetch_add(1, Ordering::AcqRel);
    }
    producer.flush(Duration::from_secs(30))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_fields() {
        assert_eq!(
            count_field(br#"{"delivered":100,"results":[]}"#, "delivered"),
            100
        );
        assert_eq!(
            count_field(br#"{"error":"queue_full","accepted": 37}"#, "accepted"),
            37
        );
        assert_eq!(count_field(br#"{"error":"x"}"#, "accepted"), 0);
    }
}
