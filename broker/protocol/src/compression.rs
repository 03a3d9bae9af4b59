//! Inflating a compressed RecordBatch's records section with a hard bound
//! on the output: Kafka's four codecs (gzip, snappy in raw or xerial
//! framing, LZ4 frame, zstd), each decoded as a stream that stops one byte
//! past the limit, so a small batch claiming gigabytes ("decompression
//! bomb") costs at most the limit in memory and in work.
//!
//! Owns: codec dispatch and the output bound. Must not: interpret records
//! (`record_walk` does) or run on an async worker thread for large inputs
//! (callers decide where it runs).

use std::io::Read;

use crate::error::CompressionError;

/// Kafka's codec ids (RecordBatch attributes bits 0-2).
pub const CODEC_NONE: i16 = 0;
pub const CODEC_GZIP: i16 = 1;
pub const CODEC_SNAPPY: i16 = 2;
pub const CODEC_LZ4: i16 = 3;
pub const CODEC_ZSTD: i16 = 4;

/// zstd frames may ask for a window up to 2 GiB; legitimate producer
/// batches need far less. 2^24 = 16 MiB.
const ZSTD_WINDOW_LOG_MAX: u32 = 24;

/// The header xerial's snappy-java stream format starts with.
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER_LEN: usize = 16;

/// Inflates `input` compressed with `codec` into at most `limit` bytes.
pub fn decompress_bounded(
    codec: i16,
    input: &[u8],
    limit: usize,
) -> Result<Vec<u8>, CompressionError> {
    match codec {
        CODEC_NONE => bounded_copy(input, limit),
        CODEC_GZIP => read_bounded(flate2::read::MultiGzDecoder::new(input), limit, "gzip"),
        CODEC_SNAPPY => snappy(input, limit),
        CODEC_LZ4 => {
            let decoder = lz4::Decoder::new(input).map_err(|e| CompressionError::Invalid {
                codec: "lz4",
                reason: e.to_string(),
            })?;
            read_bounded(decoder, limit, "lz4")
        }
        CODEC_ZSTD => {
            let mut decoder =
                zstd::stream::read::Decoder::new(input).map_err(|e| CompressionError::Invalid {
                    codec: "zstd",
                    reason: e.to_string(),
                })?;
            decoder
                .window_log_max(ZSTD_WINDOW_LOG_MAX)
                .map_err(|e| CompressionError::Invalid {
                    codec: "zstd",
                    reason: e.to_string(),
                })?;
            read_bounded(decoder, limit, "zstd")
        }
        other => Err(CompressionError::UnknownCodec(other)),
    }
}

fn bounded_copy(input: &[u8], limit: usize) -> Result<Vec<u8>, CompressionError> {
    if input.len() > limit {
        return Err(CompressionError::TooLarge { limit });
    }
    Ok(input.to_vec())
}

/// Reads `reader` to its end, failing as soon as more than `limit` bytes
/// come out.
fn read_bounded(
    reader: impl Read,
    limit: usize,
    codec: &'static str,
) -> Result<Vec<u8>, CompressionError> {
    let mut out = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    reader
        .take(cap)
        .read_to_end(&mut out)
        .map_err(|e| CompressionError::Invalid {
            codec,
            reason: e.to_string(),
        })?;
    if out.len() > limit {
        return Err(CompressionError::TooLarge { limit });
    }
    Ok(out)
}

/// Snappy as Kafka clients send it: xerial's block framing (the Java client,
/// librdkafka) or one raw snappy block. Each block's declared length is
/// checked against what is left of the limit before it is inflated.
fn snappy(input: &[u8], limit: usize) -> Result<Vec<u8>, CompressionError> {
    let invalid = |reason: String| CompressionError::Invalid {
        codec: "snappy",
        reason,
    };
    let mut out = Vec::new();
    let append_block = |block: &[u8], out: &mut Vec<u8>| -> Result<(), CompressionError> {
        let len = snap::raw::decompress_len(block).map_err(|e| invalid(e.to_string()))?;
        if len > limit.saturating_sub(out.len()) {
            return Err(CompressionError::TooLarge { limit });
        }
        let start = out.len();
        out.resize(start + len, 0);
        snap::raw::Decoder::new()
            .decompress(block, &mut out[start..])
            .map_err(|e| invalid(e.to_string()))?;
        Ok(())
    };
    if input.len() >= XERIAL_HEADER_LEN && input[..8] == XERIAL_MAGIC {
        let mut rest = &input[XERIAL_HEADER_LEN..];
        while !rest.is_empty() {
            if rest.len() < 4 {
                return Err(invalid("truncated xerial block length".into()));
            }
            let len = usize::try_from(u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]))
                .unwrap_or(usize::MAX);
            let block = rest
                .get(4..4usize.saturating_add(len))
                .ok_or_else(|| invalid("truncated xerial block".into()))?;
            append_block(block, &mut out)?;
            rest = &rest[4 + len..];
        }
        Ok(out)
    } else {
        append_block(input, &mut out)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn zstd_of(data: &[u8]) -> Vec<u8> {
        zstd::stream::encode_all(data, 3).expect("zstd")
    }

    #[test]
    fn every_codec_round_trips_within_the_limit() {
        let data: Vec<u8> = (0..50_000u32).flat_map(|i| i.to_le_bytes()).collect();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&data).expect("gzip");
        let gz = gz.finish().expect("gzip");
        let raw_snappy = snap::raw::Encoder::new()
            .compress_vec(&data)
            .expect("snappy");
        let mut xerial = XERIAL_MAGIC.to_vec();
        xerial.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
        for chunk in data.chunks(32 * 1024) {
            let block = snap::raw::Encoder::new()
                .compress_vec(chunk)
                .expect("snappy");
            xerial.extend_from_slice(&(block.len() as u32).to_be_bytes());
            xerial.extend_from_slice(&block);
        }
        let mut lz = lz4::EncoderBuilder::new().build(Vec::new()).expect("lz4");
        lz.write_all(&data).expect("lz4");
        let (lz, result) = lz.finish();
        result.expect("lz4");
        for (codec, input) in [
            (CODEC_GZIP, gz),
            (CODEC_SNAPPY, raw_snappy),
            (CODEC_SNAPPY, xerial),
            (CODEC_LZ4, lz),
            (CODEC_ZSTD, zstd_of(&data)),
        ] {
            assert_eq!(
                decompress_bounded(codec, &input, data.len()).expect("within the limit"),
                data,
                "codec {codec}"
            );
            assert!(
                matches!(
                    decompress_bounded(codec, &input, data.len() - 1),
                    Err(CompressionError::TooLarge { .. })
                ),
                "codec {codec} one byte over the limit"
            );
        }
    }

    #[test]
    fn a_bomb_stops_at_the_limit() {
        // 256 MiB of zeros compress to a few KiB.
        let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 1).expect("zstd");
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..256 {
            encoder.write_all(&zeros).expect("zstd");
        }
        let bomb = encoder.finish().expect("zstd");
        assert!(bomb.len() < 64 * 1024, "bomb is {} bytes", bomb.len());
        let result = decompress_bounded(CODEC_ZSTD, &bomb, 1 << 20);
        assert!(matches!(result, Err(CompressionError::TooLarge { limit }) if limit == 1 << 20));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for codec in 0..6 {
            for input in [
                &b""[..],
                b"\x00",
                b"\xff\xff\xff\xff\xff",
                &XERIAL_MAGIC,
                b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\xff\xff\xff\xff",
            ] {
                let _ = decompress_bounded(codec, input, 1024);
            }
        }
    }
}
