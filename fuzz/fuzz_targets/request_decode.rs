//! Request decoding: a frame body (header + request) as the Kafka port
//! receives it, for every API and version the broker advertises. Whatever
//! the bytes, decoding returns a request or an error: no panic, no abort,
//! no allocation the frame's size cannot pay for. Decoded under the
//! broker's own global allocator (`alloc_guard`), as in the broker.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;

#[path = "../../broker/server/src/infra/alloc_guard.rs"]
mod alloc_guard;
use alloc_guard::ReservingAllocator;

#[global_allocator]
static GLOBAL: ReservingAllocator = ReservingAllocator;

fuzz_target!(|data: &[u8]| {
    let _ = chronik_protocol::decode_request(Bytes::copy_from_slice(data));
});
