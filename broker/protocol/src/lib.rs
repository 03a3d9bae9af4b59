//! Chronik's Kafka protocol layer: framing, request headers, the API dispatch
//! table and the RecordBatch view. No I/O, no tokio: the server feeds bytes in
//! and writes the bytes this crate produces.
//!
//! Layout:
//! - `frame`        — size-prefixed framing with a frame-size cap, checked before allocating.
//! - `header`       — fixed header fields, full request decoding.
//! - `api`          — supported APIs/versions (the one table), typed Request/Response enums, response encoding.
//! - `share_wire`   — ShareFetch/ShareAcknowledge v1..=2, DescribeShareGroupOffsets v0..=1 (beyond kafka-protocol 0.18).
//! - `record_batch` — RecordBatch v2 header view, CRC-32C check, in-place base offset.
//! - `records`      — encode/decode uncompressed records (for data the broker writes itself).
//! - `compression`  — Kafka's codecs, inflated with a hard output bound.
//! - `record_walk`  — the records inside a batch: produce-time validation, timestamp lookup.
//! - `error`        — the crate's error types.

pub mod api;
pub mod compression;
pub mod error;
pub mod frame;
pub mod header;
pub mod record_batch;
pub mod record_walk;
pub mod records;
pub mod share_wire;
pub mod throttle;

#[cfg(test)]
mod share_wire_tests;

pub use api::{encode_response, Request, Response, SUPPORTED_APIS};
pub use error::{
    BatchError, CompressionError, EncodeError, FrameError, InvalidBatch, RequestError,
};
pub use header::{decode_request, DecodedRequest, RawHeader};
pub use kafka_protocol;
pub use record_batch::{BatchHeader, BatchScanner};
pub use share_wire::{
    DescribeShareGroupOffsetsRequestWire, DescribeShareGroupOffsetsResponseWire,
    ShareAcknowledgeRequestWire, ShareAcknowledgeResponseWire, ShareFetchRequestWire,
    ShareFetchResponseWire,
};
