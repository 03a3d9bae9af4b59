//! One registered group member: its subscriptions, timeouts and the time it
//! was last heard from.

use bytes::Bytes;

use crate::types::Millis;

#[derive(Debug, Clone)]
pub struct Member {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: u64,
    pub rebalance_timeout_ms: u64,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// The assignment the leader gave this member in the current generation.
    pub assignment: Bytes,
    pub last_heard_ms: Millis,
}

impl Member {
    pub fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    pub fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|(name, _)| name == protocol)
    }

    pub fn session_expired(&self, now: Millis) -> bool {
        now.saturating_sub(self.last_heard_ms) > self.session_timeout_ms
    }
}
