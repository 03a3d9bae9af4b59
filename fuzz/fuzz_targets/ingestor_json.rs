//! The ingestor's JSON bodies: `/produce` (one message) and the batch
//! endpoints (an array), parsed and validated as the routes do it.
#![no_main]

use libfuzzer_sys::fuzz_target;

// Only the parsing and validation are exercised.
#[allow(dead_code)]
#[path = "../../ingestor/src/message.rs"]
mod message;
use message::{parse_batch, parse_one, prepare};

fuzz_target!(|data: &[u8]| {
    if let Ok(batch) = parse_batch(data) {
        for (index, m) in batch.into_iter().enumerate() {
            let _ = prepare(index, m, "default-topic");
        }
    }
    if let Ok(m) = parse_one(data) {
        let _ = prepare(0, m, "default-topic");
    }
});
