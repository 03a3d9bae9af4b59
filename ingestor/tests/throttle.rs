//! Client-side throttling (KIP-219) as the native producer must do it: a
//! real chronik-server advertises the address of a proxy in front of it, and
//! the proxy stamps `throttle_time_ms` on every Produce answer it passes on
//! (as a broker over a client quota does). The ingestor must count the
//! throttle time on its /metrics, send that broker no Produce until the
//! throttle time since the last throttled answer has passed, and still
//! deliver every message.
//!
//! Both instants the check compares are taken by the proxy: just before it
//! writes a throttled answer to the ingestor, and once it has read the
//! ingestor's next Produce request, so a gap shorter than the throttle
//! time can only be the client's.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ProduceResponse, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};
use serde_json::{json, Value};

use common::http::{get, post_json};
use common::procs::{self, Ingestor};
use common::{metric, poll_json};

const THROTTLE_MS: i32 = 300;
const PRODUCE: i16 = 0;

#[derive(Debug, Clone, Copy)]
enum Event {
    /// A Produce request read from the ingestor.
    Produce(Instant),
    /// A throttled Produce answer about to be written to the ingestor.
    Throttled(Instant),
}

type Log = Arc<Mutex<Vec<Event>>>;

/// A panicking proxy thread fails the test by its missing events, not here.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn read_frame(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body)?;
    Ok(body)
}

fn write_frame(s: &mut TcpStream, body: &[u8]) -> std::io::Result<()> {
    s.write_all(&(body.len() as u32).to_be_bytes())?;
    s.write_all(body)
}

/// A Produce answer (after its 4-byte length) with `throttle_time_ms` set.
fn throttled(body: Vec<u8>, version: i16) -> Result<Vec<u8>> {
    let header_version = ProduceResponse::header_version(version);
    let mut buf = Bytes::from(body);
    let header = ResponseHeader::decode(&mut buf, header_version)?;
    let answer = ProduceResponse::decode(&mut buf, version)?.with_throttle_time_ms(THROTTLE_MS);
    let mut out = BytesMut::new();
    header.encode(&mut out, header_version)?;
    answer.encode(&mut out, version)?;
    Ok(out.to_vec())
}

/// One client connection: requests passed to the broker, answers back,
/// Produce answers throttled. Requests on a connection are answered in order.
fn pipe(mut client: TcpStream, broker: SocketAddr, log: Log) -> Result<()> {
    let mut upstream = TcpStream::connect(broker)?;
    let (mut client_r, mut upstream_w) = (client.try_clone()?, upstream.try_clone()?);
    let pending: Arc<Mutex<Vec<(i32, i16, i16)>>> = Arc::default();
    let requests = pending.clone();
    let request_log = log.clone();
    thread::spawn(move || -> std::io::Result<()> {
        loop {
            let body = read_frame(&mut client_r)?;
            let key = i16::from_be_bytes([body[0], body[1]]);
            let version = i16::from_be_bytes([body[2], body[3]]);
            let correlation = i32::from_be_bytes([body[4], body[5], body[6], body[7]]);
            if key == PRODUCE {
                lock(&request_log).push(Event::Produce(Instant::now()));
            }
            lock(&requests).push((correlation, key, version));
            write_frame(&mut upstream_w, &body)?;
        }
    });
    loop {
        let body = read_frame(&mut upstream)?;
        let correlation = i32::from_be_bytes([body[0], body[1], body[2], body[3]]);
        let (key, version) = {
            let mut p = lock(&pending);
            let at = p
                .iter()
                .position(|(c, _, _)| *c == correlation)
                .context("an answer to no request")?;
            let (_, key, version) = p.remove(at);
            (key, version)
        };
        let body = if key == PRODUCE && version >= 1 {
            let body = throttled(body, version)?;
            lock(&log).push(Event::Throttled(Instant::now()));
            body
        } else {
            body
        };
        write_frame(&mut client, &body)?;
    }
}

fn proxy(listener: TcpListener, broker: SocketAddr, log: Log) {
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let log = log.clone();
            thread::spawn(move || pipe(conn, broker, log));
        }
    });
}

#[test]
fn throttled_answers_hold_the_next_produce_and_are_counted() -> Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let front = listener.local_addr()?;
    let broker = procs::broker(&["--advertise", &front.to_string()])?;
    let log: Log = Arc::default();
    proxy(listener, broker.kafka_addr(), log.clone());

    let ingestor = Ingestor::start(&front.to_string(), &["--topic", "throttled"])?;
    poll_json(ingestor.http, "/ready", Duration::from_secs(30), |v| {
        v["status"] == "ready"
    })?;
    let batches = 5;
    for b in 0..batches {
        let msgs: Vec<Value> = (0..20)
            .map(|i| json!({"value": format!("m-{b}-{i}")}))
            .collect();
        let resp = post_json(ingestor.http, "/produce/batch", &Value::Array(msgs))?;
        ensure!(resp.status == 200, "batch {b}: {}", resp.text());
        ensure!(
            resp.json()?["delivered"] == 20,
            "batch {b}: {}",
            resp.text()
        );
    }

    let events = lock(&log).clone();
    let produces = events
        .iter()
        .filter(|e| matches!(e, Event::Produce(_)))
        .count();
    let answers: Vec<Instant> = events
        .iter()
        .filter_map(|e| match e {
            Event::Throttled(at) => Some(*at),
            Event::Produce(_) => None,
        })
        .collect();
    ensure!(
        answers.len() >= batches,
        "{} throttled answers for {batches} blocking batches",
        answers.len()
    );
    // After each throttled answer, the next Produce waited out the throttle time.
    let hold = Duration::from_millis(THROTTLE_MS as u64);
    let mut checked = 0;
    for (i, e) in events.iter().enumerate() {
        let Event::Throttled(answered) = e else {
            continue;
        };
        let next = events[i + 1..].iter().find_map(|e| match e {
            Event::Produce(at) => Some(*at),
            Event::Throttled(_) => None,
        });
        if let Some(sent) = next {
            let gap = sent.duration_since(*answered);
            ensure!(
                gap >= hold,
                "a Produce {gap:?} after a {THROTTLE_MS} ms throttled answer"
            );
            checked += 1;
        }
    }
    ensure!(
        checked >= batches - 1,
        "only {checked} answers were followed by a Produce"
    );

    let text = get(ingestor.http, "/metrics")?.text();
    let n = answers.len() as f64;
    assert_eq!(
        metric(&text, "ingestor_produce_throttled_responses_total"),
        Some(n),
        "{produces} Produce requests"
    );
    assert_eq!(
        metric(&text, "ingestor_produce_throttle_time_ms_total"),
        Some(n * f64::from(THROTTLE_MS))
    );
    assert_eq!(
        metric(&text, "ingestor_messages_delivered_total"),
        Some(100.0)
    );
    Ok(())
}
