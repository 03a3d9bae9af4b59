//! Kafka's length-prefixed framing: a 4-byte big-endian size, then that many
//! bytes of request (header + body).
//!
//! Owns: deciding whether a whole frame is buffered, and rejecting sizes that
//! are negative, too small to hold a request header, or above the configured
//! cap — before any body byte is allocated or parsed. Must not: do I/O or
//! interpret the frame's contents.

use bytes::{Buf, Bytes, BytesMut};

use crate::error::FrameError;

/// The size prefix preceding every frame.
pub const SIZE_PREFIX_LEN: usize = 4;
/// api_key (2) + api_version (2) + correlation_id (4) + client_id length (2).
pub const MIN_REQUEST_LEN: usize = 10;
/// Kafka's default `socket.request.max.bytes`.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 100 * 1024 * 1024;

/// Reads the size prefix at the front of `buf`, if present, and checks it.
/// Returns the body length the frame announces.
pub fn peek_frame_len(buf: &[u8], max_frame_bytes: usize) -> Result<Option<usize>, FrameError> {
    if buf.len() < SIZE_PREFIX_LEN {
        return Ok(None);
    }
    let size = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if size < 0 {
        return Err(FrameError::NegativeSize(size));
    }
    let size = size as usize;
    if size < MIN_REQUEST_LEN {
        return Err(FrameError::TooSmall {
            size,
            min: MIN_REQUEST_LEN,
        });
    }
    if size > max_frame_bytes {
        return Err(FrameError::TooLarge {
            size,
            max: max_frame_bytes,
        });
    }
    Ok(Some(size))
}

/// Splits one whole frame's body off the front of `buf` when it is fully
/// buffered; leaves `buf` untouched otherwise.
pub fn split_frame(
    buf: &mut BytesMut,
    max_frame_bytes: usize,
) -> Result<Option<Bytes>, FrameError> {
    let Some(size) = peek_frame_len(buf, max_frame_bytes)? else {
        return Ok(None);
    };
    if buf.len() < SIZE_PREFIX_LEN + size {
        return Ok(None);
    }
    buf.advance(SIZE_PREFIX_LEN);
    Ok(Some(buf.split_to(size).freeze()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(body: &[u8]) -> BytesMut {
        let mut b = BytesMut::new();
        b.extend_from_slice(&(body.len() as i32).to_be_bytes());
        b.extend_from_slice(body);
        b
    }

    #[test]
    fn waits_for_a_whole_frame() {
        let whole = framed(&[7u8; 20]);
        let mut partial = BytesMut::from(&whole[..15]);
        assert_eq!(split_frame(&mut partial, 1024).expect("ok"), None);
        assert_eq!(partial.len(), 15, "a partial frame is left in place");
        let mut full = whole.clone();
        full.extend_from_slice(&[1, 2]);
        let body = split_frame(&mut full, 1024).expect("ok").expect("frame");
        assert_eq!(body.len(), 20);
        assert_eq!(&full[..], &[1, 2], "bytes after the frame stay buffered");
    }

    #[test]
    fn rejects_oversized_negative_and_tiny_frames() {
        let huge = BytesMut::from(&0x7fff_ffffi32.to_be_bytes()[..]);
        assert!(matches!(
            peek_frame_len(&huge, DEFAULT_MAX_FRAME_BYTES),
            Err(FrameError::TooLarge { .. })
        ));
        let negative = (-5i32).to_be_bytes();
        assert!(matches!(
            peek_frame_len(&negative, 1024),
            Err(FrameError::NegativeSize(-5))
        ));
        let tiny = 3i32.to_be_bytes();
        assert!(matches!(
            peek_frame_len(&tiny, 1024),
            Err(FrameError::TooSmall { size: 3, .. })
        ));
    }
}
