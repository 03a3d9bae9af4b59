//! Topics as the handlers see them: `lookup` (a request's topics by name or
//! id, with Kafka's errors), `configs` (validating and describing topic
//! configs) and `caps` (the bounds on creating topics and partitions).
//! Must not: create or change a topic (the metadata quorum does).

pub mod caps;
pub mod configs;
pub mod lookup;
