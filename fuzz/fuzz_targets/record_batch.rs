//! Record batches: header parsing and CRC, the produce-time validation
//! (record framing, offset range, bounded decompression), the timestamp
//! lookup ListOffsets makes and the broker's own record reader. The CRC is
//! recomputed so mutations reach past it.
#![no_main]

use chronik_protocol::record_batch::parse_batches;
use chronik_protocol::record_walk::{validate_produced, walk, ProduceRules};
use chronik_protocol::records::{find_record_by_timestamp, read_records};
use libfuzzer_sys::fuzz_target;

const LIMIT: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let mut batch = data.to_vec();
    if batch.len() >= 61 {
        let crc = crc32c_of(&batch[21..]);
        batch[17..21].copy_from_slice(&crc.to_be_bytes());
    }
    if let Ok(headers) = parse_batches(&batch) {
        for h in &headers {
            let one = &batch[h.position..h.position + h.size];
            for require_keys in [false, true] {
                let rules = ProduceRules {
                    max_decompressed: LIMIT,
                    require_keys,
                };
                let _ = validate_produced(one, h, rules);
            }
            let _ = walk(one, h, LIMIT, |_| {});
            let _ = find_record_by_timestamp(one, Some(0), LIMIT);
            let _ = find_record_by_timestamp(one, None, LIMIT);
        }
        let _ = read_records(&batch);
    }
});

fn crc32c_of(bytes: &[u8]) -> u32 {
    // Bitwise CRC-32C: the fuzz crate keeps its dependencies to the code under test.
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0x82F6_3B78 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}
