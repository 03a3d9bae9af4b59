//! A "broker" that answers with hostile bytes: the native producer must
//! bound what a response can make it allocate or wait for, and the ingestor
//! must answer every request within the message timeout (503: no broker it
//! can use), stay up, and keep serving others.
//!
//! Each case is a raw TCP listener on 127.0.0.1 that reads whatever the
//! ingestor sends and replies with one kind of bad answer:
//! a 2 GiB frame length, garbage that is not a Kafka response, an answer
//! for another correlation id, a frame cut short, and silence.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::json;

use common::http::{get, post_json};
use common::procs::Ingestor;

const MESSAGE_TIMEOUT_MS: u64 = 2000;

/// Serves `reply` to every connection until dropped.
struct HostileBroker {
    addr: String,
    stop: Arc<AtomicBool>,
}

impl Drop for HostileBroker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = TcpStream::connect(&self.addr);
    }
}

/// What the hostile broker answers a connection's first request with.
type Reply = fn(&mut TcpStream);

fn hostile(reply: Reply) -> Result<HostileBroker> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?.to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let stopping = stop.clone();
    thread::spawn(move || {
        for conn in listener.incoming() {
            if stopping.load(Ordering::Acquire) {
                return;
            }
            let Ok(mut conn) = conn else { continue };
            thread::spawn(move || {
                let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                let mut request = [0u8; 4096];
                if conn.read(&mut request).unwrap_or(0) > 0 {
                    reply(&mut conn);
                }
                // Hold the connection open a while: a client must not wait on it forever.
                thread::sleep(Duration::from_secs(10));
            });
        }
    });
    Ok(HostileBroker { addr, stop })
}

fn huge_frame(c: &mut TcpStream) {
    let _ = c.write_all(&0x7fff_fff0_i32.to_be_bytes());
    let _ = c.write_all(&[0u8; 64]);
}

fn garbage(c: &mut TcpStream) {
    let mut frame = 40i32.to_be_bytes().to_vec();
    frame.extend_from_slice(&[0xff; 40]);
    let _ = c.write_all(&frame);
}

fn wrong_correlation(c: &mut TcpStream) {
    // A well-framed answer for correlation id 0x7eadbeef (the client's first is 1).
    let mut frame = 8i32.to_be_bytes().to_vec();
    frame.extend_from_slice(&0x7ead_beef_i32.to_be_bytes());
    frame.extend_from_slice(&[0, 0, 0, 0]);
    let _ = c.write_all(&frame);
}

fn cut_short(c: &mut TcpStream) {
    let _ = c.write_all(&1000i32.to_be_bytes());
    let _ = c.write_all(&[0u8; 10]);
}

fn silence(_: &mut TcpStream) {}

#[test]
fn hostile_answers_get_503s_within_the_message_timeout() -> Result<()> {
    let cases: [(&str, Reply); 5] = [
        ("a 2 GiB frame", huge_frame),
        ("garbage", garbage),
        ("another correlation id", wrong_correlation),
        ("a frame cut short", cut_short),
        ("silence", silence),
    ];
    let limit = Duration::from_millis(MESSAGE_TIMEOUT_MS) + Duration::from_secs(3);
    for (what, reply) in cases {
        let broker = hostile(reply)?;
        let mut ingestor = Ingestor::start_with_env(
            &broker.addr,
            &[
                "--acks",
                "all",
                "--message-timeout-ms",
                &MESSAGE_TIMEOUT_MS.to_string(),
            ],
            &[("CHRONIK_INGESTOR_PRODUCER", "native")],
        )?;
        let started = Instant::now();
        let answer = post_json(
            ingestor.http,
            "/produce/batch",
            &json!([{"value": "a", "key": "k"}, {"value": "b"}]),
        )?;
        let took = started.elapsed();
        assert_eq!(answer.status, 503, "{what}: {}", answer.text());
        assert!(
            took < limit,
            "{what}: answered after {took:?}, limit {limit:?}"
        );
        let body = answer.json()?;
        assert!(
            body["error"].is_string() && body["detail"].is_string(),
            "{what}: {body}"
        );

        let ready = get(ingestor.http, "/ready")?;
        assert_eq!(ready.status, 503, "{what}: {}", ready.text());
        assert_eq!(get(ingestor.http, "/health")?.status, 200, "{what}: alive");
        assert!(
            ingestor.is_running(),
            "{what}: the ingestor exited\n{}",
            ingestor.log_tail(40)
        );
        println!("{what}: 503 after {took:?}");
    }
    Ok(())
}
