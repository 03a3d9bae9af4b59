//! Bounded decompression of every codec: the first byte picks the codec,
//! the rest is the compressed records section. Output never exceeds the
//! limit, whatever the input claims.
#![no_main]

use chronik_protocol::compression::decompress_bounded;
use libfuzzer_sys::fuzz_target;

const LIMIT: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let Some((&codec, rest)) = data.split_first() else {
        return;
    };
    if let Ok(out) = decompress_bounded(i16::from(codec % 5), rest, LIMIT) {
        assert!(out.len() <= LIMIT, "inflated past the limit");
    }
});
