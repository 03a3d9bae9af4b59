//! What a Kafka request means: the handlers, the ACL checks in front of
//! them, and what the handlers share.
//!
//! Owns: `handlers/` (one file per Kafka API; `broker::dispatch` calls
//! them), `authorize/`
//! (which ACL each API needs, asked before a handler runs), `errors/` (how
//! a coordinator's or the quorum's failure reads as a Kafka error code),
//! `topics/` (looking topics up, their configs and the caps on creating
//! them), `quota_gate` (which client quota a request counts against, and
//! its throttled answer), `acl_wire` (ACL bindings and filters between the wire and the
//! quorum) and `fetch_sessions` (KIP-227). Must not: touch sockets or framing
//! (`network`) or write a log (`replica::write`).

pub mod acl_wire;
pub mod authorize;
pub mod errors;
pub mod fetch_sessions;
pub mod handlers;
pub mod quota_gate;
pub mod refusals;
pub mod share_requests;
pub mod topics;
