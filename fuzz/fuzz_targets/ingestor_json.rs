//! The ingestor's JSON bodies: `/produce` (one message) and the batch
//! endpoints (an array), parsed as the routes parse them.
#![no_main]

use chronik_ingestor::message::{parse_batch, parse_one};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = parse_batch(data);
    let _ = parse_one(data);
});
