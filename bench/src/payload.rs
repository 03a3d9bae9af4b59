//! Pre-generated record values and keys, so the send path never builds one.
//!
//! Owns: the pool of values (several variants, so compression and
//! deduplication cannot cheat) with their CRC-32C computed once, and the key
//! material. Must not: allocate per message.

use crate::config::{KeyPattern, PayloadPattern};

/// At most this many value variants…
const MAX_VARIANTS: usize = 1024;
/// …and at most this many bytes for all of them.
const MAX_POOL_BYTES: usize = 64 * 1024 * 1024;
const RANDOM_KEYS: usize = 1024;
const TEXT: &[u8] =
    b"Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor \
incididunt ut labore et dolore magna aliqua. chronik-bench level=INFO request_id=7f3a status=200 \
path=/produce/batch latency_ms=3 bytes=1024\n";

/// SplitMix64: a tiny deterministic generator, enough for payload bytes and keys.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let bytes = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }
}

/// Values of one size, each with its checksum.
#[derive(Debug)]
pub struct Payloads {
    size: usize,
    pool: Vec<u8>,
    crcs: Vec<u32>,
}

impl Payloads {
    pub fn generate(size: usize, pattern: PayloadPattern, seed: u64) -> Payloads {
        let variants = match pattern {
            PayloadPattern::Zeros => 1,
            PayloadPattern::Random | PayloadPattern::Text => {
                (MAX_POOL_BYTES / size.max(1)).clamp(1, MAX_VARIANTS)
            }
        };
        let mut pool = vec![0u8; size * variants];
        let mut rng = SplitMix64::new(seed);
        for (i, value) in pool.chunks_mut(size.max(1)).enumerate() {
            match pattern {
                PayloadPattern::Zeros => {}
                PayloadPattern::Random => rng.fill(value),
                PayloadPattern::Text => {
                    for (j, b) in value.iter_mut().enumerate() {
                        *b = TEXT[(i * 7 + j) % TEXT.len()];
                    }
                }
            }
        }
        let crcs = pool.chunks(size.max(1)).map(crc32c::crc32c).collect();
        Payloads { size, pool, crcs }
    }

    pub fn variants(&self) -> usize {
        self.crcs.len()
    }

    /// The value (and its CRC-32C) used for sequence number `seq`.
    #[inline]
    pub fn for_sequence(&self, seq: u64) -> (&[u8], u32) {
        let i = (seq % self.crcs.len() as u64) as usize;
        (&self.pool[i * self.size..(i + 1) * self.size], self.crcs[i])
    }
}

/// Key material for one key pattern.
#[derive(Debug)]
pub struct Keys {
    pattern: KeyPattern,
    random: Vec<[u8; 16]>,
}

impl Keys {
    pub fn generate(pattern: KeyPattern, seed: u64) -> Keys {
        let random = if pattern == KeyPattern::Random {
            let mut rng = SplitMix64::new(seed ^ 0x6b65_7973);
            (0..RANDOM_KEYS)
                .map(|_| {
                    let mut k = [0u8; 16];
                    rng.fill(&mut k);
                    k
                })
                .collect()
        } else {
            Vec::new()
        };
        Keys { pattern, random }
    }

    /// The key of message `seq` of `producer_id`, written into `scratch` when
    /// it has to be computed.
    #[inline]
    pub fn key<'a>(
        &'a self,
        producer_id: u64,
        seq: u64,
        scratch: &'a mut [u8; 16],
    ) -> Option<&'a [u8]> {
        match self.pattern {
            KeyPattern::None => None,
            KeyPattern::Fixed => Some(b"chronik-bench"),
            KeyPattern::Sequential => {
                scratch[..8].copy_from_slice(&producer_id.to_be_bytes());
                scratch[8..].copy_from_slice(&seq.to_be_bytes());
                Some(&scratch[..])
            }
            KeyPattern::Random => {
                Some(&self.random[(seq.wrapping_mul(0x9E37_79B9) % RANDOM_KEYS as u64) as usize])
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_have_the_size_and_checksum_promised() {
        for pattern in [
            PayloadPattern::Random,
            PayloadPattern::Zeros,
            PayloadPattern::Text,
        ] {
            let p = Payloads::generate(100, pattern, 7);
            for seq in [0, 1, 2, 1023, 1024, 99_999] {
                let (v, crc) = p.for_sequence(seq);
                assert_eq!(v.len(), 100);
                assert_eq!(crc32c::crc32c(v), crc);
            }
        }
    }

    #[test]
    fn random_values_differ_and_pools_stay_bounded() {
        let p = Payloads::generate(256, PayloadPattern::Random, 1);
        assert_eq!(p.variants(), MAX_VARIANTS);
        assert_ne!(p.for_sequence(0).0, p.for_sequence(1).0);
        let big = Payloads::generate(8 * 1024 * 1024, PayloadPattern::Random, 1);
        assert_eq!(big.variants(), 8);
        assert_eq!(
            Payloads::generate(1, PayloadPattern::Zeros, 1).variants(),
            1
        );
    }

    #[test]
    fn keys_follow_their_pattern() {
        let mut scratch = [0u8; 16];
        assert!(Keys::generate(KeyPattern::None, 1)
            .key(1, 2, &mut scratch)
            .is_none());
        let seq_keys = Keys::generate(KeyPattern::Sequential, 1);
        let a = seq_keys.key(1, 2, &mut scratch).expect("key").to_vec();
        let b = seq_keys.key(1, 3, &mut scratch).expect("key").to_vec();
        assert_ne!(a, b);
        let random = Keys::generate(KeyPattern::Random, 1);
        let mut distinct = std::collections::HashSet::new();
        for seq in 0..100 {
            distinct.insert(random.key(1, seq, &mut scratch).expect("key").to_vec());
        }
        assert!(distinct.len() > 90);
        let fixed = Keys::generate(KeyPattern::Fixed, 1);
        assert_eq!(
            fixed.key(1, 1, &mut scratch),
            fixed.key(2, 9, &mut [0u8; 16])
        );
    }
}
