//! Bytes in and out: the Kafka connections and the HTTP endpoint.
//!
//! Owns: `connection` (framing, pipelining, backpressure, read deadlines,
//! in-order responses), `connection_limits` (`max.connections` and the caps
//! on connections not yet logged in), `request_size` (the bounded frame
//! reader) and `http`
//! (`/metrics`, `/health`, `/ready`). Must not: know what a request means
//! (`requests` does).

pub mod connection;
pub mod connection_limits;
pub mod http;
pub mod request_size;
